"""Noticing a lost Hydra proxy: its ranks still run, its ``mpiexec`` never exits.

A job the daemon launched runs as ``sh`` (the exit-status wrapper) ->
``mpiexec`` -> one ``hydra_pmi_proxy`` per host -> the ranks. When a proxy is
killed (``kill -9``, the OOM killer), Hydra does not notice: ``mpiexec`` waits
on, the orphaned ranks keep running, and the job's slots stay held until the
ranks end or the walltime kills them. :class:`ProxyWatch` scans the process
table once a second (in its own thread: a scan reads ``/proc/*/stat``, a few
milliseconds per thousand processes) and remembers, for every job, each
local proxy with the ranks under it. A proxy that is gone while ``mpiexec``
still runs and one of its ranks is still alive, at two scans in a row, was lost: a proxy that ends
normally ends after its ranks (the job's end, or a shrink retiring a spawned
group). The System Monitor then fails the job (``lost``, naming the proxy) and
kills what is left of it (``scheduler.service.supervisor``). Proxies on other
hosts are ``ssh`` processes here, with no local ranks: not watched (their
node's monitor sees the ranks end, docs/cluster.md).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading

__all__ = ["ProxyWatch", "process_table"]

Proc = tuple[int, int]  # (pid, start time in clock ticks): a process, not a reused pid


def process_table() -> dict[int, tuple[int, str, int]]:
    """Every process: pid -> (parent pid, command name, start time)."""
    out: dict[int, tuple[int, str, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        head, _, rest = data.rpartition(b")")
        fields = rest.split()
        with contextlib.suppress(IndexError, ValueError):
            out[int(name)] = (int(fields[1]), head.partition(b"(")[2].decode(errors="replace"), int(fields[19]))
    return out


class ProxyWatch:
    """Watches the proxies of the jobs in :attr:`roots` (job id -> pid of its launch wrapper)."""

    def __init__(self, every: float = 1.0):
        self.every = every
        self.roots: dict[int, int] = {}  # replaced (not changed) by the daemon's loop
        self.lost: queue.SimpleQueue[tuple[int, str]] = queue.SimpleQueue()  # (job id, why) for the loop
        self._seen: dict[int, dict[Proc, set[Proc]]] = {}  # job -> proxy -> its ranks
        self._told: set[int] = set()
        self._suspect: dict[int, tuple[int, set[Proc]]] = {}  # job -> (proxy gone, its ranks) at the last scan
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="proxy-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=3.0)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            with contextlib.suppress(Exception):  # a scan that fails is tried again next time
                self.scan()

    def scan(self, table: dict[int, tuple[int, str, int]] | None = None) -> None:
        roots = self.roots
        if not roots:
            self._seen.clear()
            return
        table = process_table() if table is None else table
        kids: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in table.items():
            kids.setdefault(ppid, []).append(pid)
        for jid in [j for j in self._seen if j not in roots]:
            del self._seen[jid]
            self._suspect.pop(jid, None)
        self._told &= set(roots)
        for jid, root in roots.items():
            mpiexec = [p for p in kids.get(root, []) if table[p][1].startswith("mpiexec")]
            if not mpiexec or jid in self._told:
                continue
            now: dict[Proc, set[Proc]] = {}
            for m in mpiexec:
                for proxy in kids.get(m, []):
                    if table[proxy][1].startswith("hydra_pmi_prox"):
                        now[(proxy, table[proxy][2])] = {(r, table[r][2]) for r in kids.get(proxy, [])}
            seen = self._seen.setdefault(jid, {})
            suspect = self._suspect.pop(jid, None)
            if suspect is not None:  # gone with ranks alive a second ago: still so, not an ending
                proxy, ranks = suspect
                alive = [r for r, t in ranks if r in table and table[r][2] == t]
                if alive:
                    self._told.add(jid)
                    self.lost.put((jid, f"its Hydra proxy (pid {proxy}) was lost while {len(alive)} of its ranks "
                                        f"still ran (pids {', '.join(map(str, alive[:8]))}); mpiexec did not "
                                        "notice"))
                    continue
            for proxy, ranks in seen.items():
                if proxy not in now and any(r in table and table[r][2] == t for r, t in ranks):
                    self._suspect[jid] = (proxy[0], ranks)
                    break
            for proxy, ranks in now.items():
                seen[proxy] = seen.get(proxy, set()) | ranks
            for proxy in [p for p in seen if p not in now]:
                del seen[proxy]
