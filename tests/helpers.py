"""Small helpers shared by the tests that start daemons and monitors."""

from __future__ import annotations

import os
import socket
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    """A TCP port on loopback that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout: float, every: float = 0.1):
    """Poll ``pred`` until it returns something truthy (returned) or fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")
