"""Heterogeneous nodes and their emulation inside real MPI processes (Nakazawa 2005 §6.1).

A :class:`Node` has a relative CPU speed, the memory available to the job's
arrays, disk read/write bandwidths and a per-call seek overhead. A
:class:`Cluster` is one node per MPI rank plus the reference CPU's time per
element of work.

Emulation on one machine (:class:`Emulator`), applied by every rank to itself:

* **Slower CPU**: each compute step really runs, then the rank sleeps until
  the step has taken ``elements * element_time / cpu`` seconds (a calibrated
  pace). Sleeping, not busy work, because the emulated nodes share two cores
  with each other and with other users: busy padding would make one node's
  speed depend on what the others do, which nodes of a distributed-memory
  cluster do not. ``element_time`` is chosen well above the real per-element
  cost so the pace, not the host load, sets the time (steps that overrun are
  counted in ``Emulator.overruns``).
* **Smaller memory**: a cap on the bytes the rank's arrays may keep in core;
  :func:`reshape.mheta.structure.plan_memory` turns it into in-core arrays
  and ICLA sizes, and the out-of-core arrays stream through memory in pieces.
* **Slower disk**: every HDF5 read or write really happens, then the rank
  sleeps until it has taken ``seek + bytes / bandwidth``.

The thesis emulated a slow disk by reading extra bytes; a throttle gives the
same cost without MBs of extra files.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["Cluster", "ClusterError", "Emulator", "Node", "load_cluster"]


class ClusterError(ValueError):
    """A bad cluster description."""


@dataclass(frozen=True)
class Node:
    cpu: float = 1.0  # relative speed, 1 = reference
    memory: int = 1 << 30  # bytes for the job's arrays
    read_bw: float = 200e6  # bytes/s
    write_bw: float = 200e6
    seek: float = 1e-3  # seconds per read or write call

    def __post_init__(self) -> None:
        if not self.cpu > 0:
            raise ClusterError(f"relative CPU speed must be > 0, got {self.cpu}")
        if self.memory <= 0:
            raise ClusterError(f"a node has no memory ({self.memory} bytes)")
        if not (self.read_bw > 0 and self.write_bw > 0):
            raise ClusterError(f"disk bandwidths must be > 0, got {self.read_bw}, {self.write_bw}")
        if self.seek < 0:
            raise ClusterError(f"seek overhead must be >= 0, got {self.seek}")


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[Node, ...]
    element_time: float = 2e-7  # seconds per element of work on the reference CPU
    name: str = "cluster"

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ClusterError("a cluster needs at least one node")
        if not self.element_time > 0:
            raise ClusterError(f"element_time must be > 0, got {self.element_time}")

    def __len__(self) -> int:
        return len(self.nodes)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "element_time": self.element_time,
                "nodes": [asdict(n) for n in self.nodes]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cluster:
        try:
            nodes = tuple(Node(**n) for n in d["nodes"])
        except KeyError:
            raise ClusterError("cluster description needs a 'nodes' list") from None
        except TypeError as e:
            raise ClusterError(f"bad node entry: {e}") from None
        return cls(nodes, float(d.get("element_time", 2e-7)), str(d.get("name", "cluster")))

    @classmethod
    def uniform(cls, p: int, **node: Any) -> Cluster:
        return cls(tuple(Node(**node) for _ in range(p)))


def load_cluster(spec: str) -> Cluster:
    """A cluster from a JSON file path or inline JSON text."""
    text = spec if spec.lstrip().startswith("{") else Path(spec).read_text()
    try:
        return Cluster.from_dict(json.loads(text))
    except json.JSONDecodeError as e:
        raise ClusterError(f"cluster description is not valid JSON: {e}") from None


class Emulator:
    """Applies one node's emulated CPU and disk speeds to the calling rank."""

    def __init__(self, node: Node, element_time: float):
        self.node = node
        self.element_time = element_time
        self.overruns = 0

    @staticmethod
    def _pad(t0: float, target: float) -> bool:
        left = target - (time.perf_counter() - t0)
        if left > 0:
            time.sleep(left)
            return True
        return False

    def compute(self, elements: int, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` as ``elements`` elements of work on this node's CPU."""
        t0 = time.perf_counter()
        out = fn()
        if not self._pad(t0, elements * self.element_time / self.node.cpu) and elements:
            self.overruns += 1
        return out

    def read(self, nbytes: int, fn: Callable[[], Any]) -> Any:
        """Run the real read ``fn`` of ``nbytes`` bytes at this node's disk speed."""
        t0 = time.perf_counter()
        out = fn()
        self._pad(t0, self.node.seek + nbytes / self.node.read_bw)
        return out

    def write(self, nbytes: int, fn: Callable[[], Any]) -> Any:
        """Run the real write ``fn`` of ``nbytes`` bytes at this node's disk speed."""
        t0 = time.perf_counter()
        out = fn()
        self._pad(t0, self.node.seek + nbytes / self.node.write_bw)
        return out
