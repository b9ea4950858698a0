"""Expand onto other nodes of the namespace cluster, then shrink back; print where every rank ran.

argv[1]: comma-separated hosts for the new ranks; argv[2] (default 1): how
many times to expand and shrink back. Rank 0 prints one
``PLACEMENT <phase> <json>`` line per phase (list of [rank, hostname, ip, pid])
and checks the data after each resize and that the retired ranks exited (with
``RESHAPE_REUSE=1``: that they are still there, parked), and one ``REPORT
<json>`` line per resize point with the hosts the report says ranks are parked
on; any failure exits non-zero.
"""

import json
import socket
import sys
import time

import numpy as np
import psutil

import reshape.runtime as runtime
from reshape.joblink.protocol import Advice


class ExpandThenShrink:
    def __init__(self, hosts, rounds):
        self.hosts = tuple(hosts)
        self.points = 0
        self.rounds = rounds

    def advise(self, report):
        self.points += 1
        print(f"REPORT {json.dumps(report.parked or [])}", flush=True)  # None: no rank is parked
        if self.points > 2 * self.rounds:
            return Advice("continue", report.nprocs)
        if self.points % 2:
            return Advice("expand", report.nprocs + len(self.hosts), self.hosts)
        return Advice("shrink", report.nprocs - len(self.hosts))

    def resized(self, old, new, seconds, error=None):
        print(f"resized {old}->{new} error={error}", flush=True)
        if error:
            sys.exit(f"resize {old}->{new} failed: {error}")

    def finished(self, status="done", error=None):
        pass


def where():
    ips = [a.address for name, addrs in psutil.net_if_addrs().items() if name != "lo"
           for a in addrs if a.family == socket.AF_INET]
    return [rt.rank, socket.gethostname(), ips[0] if ips else "", psutil.Process().pid]


def check(phase):
    places = rt.comm.gather(where(), root=0)
    whole = X.gather()
    if rt.rank == 0:
        print(f"PLACEMENT {phase} {json.dumps(places)}", flush=True)
        if not np.array_equal(whole, np.arange(48.0).reshape(12, 4)):
            sys.exit(f"data wrong after {phase}")
    return places


ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 1
rt = runtime.init(ExpandThenShrink(sys.argv[1].split(","), ROUNDS))
X = rt.register_array("X", (12, 4), init=lambda i, j: i * 4 + j)
places = None
for it in rt.iterations(2 * ROUNDS + 1):
    now = check(f"it{it}-size{rt.size}")
    if rt.rank == 0 and places is not None and len(now) < len(places):
        # the ranks a shrink retired: those gone since the last phase (not necessarily the last ones: placement)
        retired = [p[3] for p in places if p[3] not in {q[3] for q in now}]
        end = time.monotonic() + 10
        while not rt.reuse and any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                                   for p in retired):
            if time.monotonic() > end:
                sys.exit(f"retired ranks {retired} still running 10 s after the shrink")
            time.sleep(0.05)
        if rt.reuse and not all(psutil.pid_exists(p) for p in retired):
            sys.exit(f"ranks {retired} were to be parked, but some exited")
        print(f"RETIRED {json.dumps(retired)}", flush=True)
    places = now
    rt.resize()
check(f"end-size{rt.size}")
rt.finish()
