"""Benchmark: MPICH's cross-memory attach (CMA) on and off, within a node and across nodes.

``python -m benchmarks.transport [--hosts node1:2,node2:2] [--rounds 3] [--quick]``

In a container MPICH's single-copy transfer between ranks of one node
(``process_vm_readv``) needs the ``SYS_PTRACE`` capability; the alternative
is ``MPIR_CVAR_CH4_CMA_ENABLE=0`` (copies through shared-memory cells). This
measures both in the same run, alternating, on 4 ranks over two hosts (ranks
0 and 1 on the first, 2 and 3 on the second): ping-pong bandwidth between
ranks 0 and 1 (same node) and 0 and 2 (across nodes), and the data motion of a
2 -> 4 expansion across nodes (``reshape.redistribution.redistribute``, an N x N float64
array from the two ranks of the first host to all four). Each case reports
its best (minimum time) and median over rounds; the ratio is CMA on / off.

Run it in the compose cluster (which has the capability):
``docker compose exec head python -m benchmarks.transport``. Writes
``benchmarks/results/transport.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

SETTINGS = {"cma": "1", "no-cma": "0"}  # MPIR_CVAR_CH4_CMA_ENABLE


def _ranks(n: int, reps: int) -> None:
    """Rank side: print one JSON line of best times (s) per case from rank 0."""
    import numpy as np
    from mpi4py import MPI

    from reshape.redistribution.layout import block
    from reshape.redistribution.redistribute import redistribute

    comm = MPI.COMM_WORLD
    assert comm.size == 4, "run on 4 ranks: two per host"
    out: dict[str, float] = {}
    for nbytes in (64 << 10, 8 << 20):
        buf = np.ones(nbytes // 8)
        for peer, where in ((1, "same node"), (2, "across nodes")):
            best = float("inf")
            for _ in range(reps):
                comm.Barrier()
                t0 = time.perf_counter()
                for _ in range(10):
                    if comm.rank == 0:
                        comm.Send(buf, peer)
                        comm.Recv(buf, peer)
                    elif comm.rank == peer:
                        comm.Recv(buf, 0)
                        comm.Send(buf, 0)
                best = min(best, (time.perf_counter() - t0) / 20)
            if comm.rank == 0:
                out[f"ping-pong {nbytes >> 10} KiB, {where}"] = best
    src, dst = block((n, n), 2, 0), block((n, n), 4, 0)
    local = np.full((src.local_shape(comm.rank) if comm.rank < 2 else (0, n)), float(comm.rank))
    best = float("inf")
    for _ in range(reps):
        comm.Barrier()
        t0 = time.perf_counter()
        redistribute(comm, src, local if comm.rank < 2 else None, dst, src_ranks=range(2), dst_ranks=range(4))
        best = min(best, comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    if comm.rank == 0:
        out[f"expand 2->4 across nodes, {n}x{n} float64"] = best
        print("RESULT " + json.dumps(out), flush=True)


def _bytes(case: str, n: int) -> float:
    if case.startswith("ping-pong"):
        kib = int(case.split()[1])
        return kib * 1024.0
    return n * n * 8 / 2  # half the array changes owner (to the new host's two ranks)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.transport", description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", default="node1:2,node2:2", help="two hosts with two ranks each (Hydra -hosts)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating runs per setting")
    ap.add_argument("--n", type=int, default=2048, help="array side for the expansion case")
    ap.add_argument("--quick", action="store_true", help="one round, smaller array")
    ap.add_argument("--ranks", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--reps", type=int, default=5, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.ranks:
        _ranks(a.n, a.reps)
        return 0
    from benchmarks._common import table, write_result
    from reshape.joblink.launch import mpirun

    if a.quick:
        a.rounds, a.n = 1, 1024
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in SETTINGS}
    for _ in range(a.rounds):
        for name, value in SETTINGS.items():
            res = mpirun(4, ["-m", "benchmarks.transport", "--ranks", "--n", str(a.n)], timeout=300,
                         env={"MPIR_CVAR_CH4_CMA_ENABLE": value}, mpiexec_args=("-hosts", a.hosts))
            line = next(x for x in res.stdout.splitlines() if x.startswith("RESULT "))
            runs[name].append(json.loads(line[len("RESULT "):]))
    rows = []
    for case in runs["cma"][0]:
        on = [r[case] for r in runs["cma"]]
        off = [r[case] for r in runs["no-cma"]]
        nb = _bytes(case, a.n)
        rows.append({"case": case, "cma_gbs": nb / min(on) / 1e9, "nocma_gbs": nb / min(off) / 1e9,
                     "cma_med_gbs": nb / statistics.median(on) / 1e9,
                     "nocma_med_gbs": nb / statistics.median(off) / 1e9,
                     "ratio": min(off) / min(on), "ratio_med": statistics.median(off) / statistics.median(on)})
    print(f"hosts {a.hosts}, {a.rounds} round(s) per setting, alternating; GB/s from the best time (median)")
    print(table([{**r, "cma": f"{r['cma_gbs']:.2f} ({r['cma_med_gbs']:.2f})",
                  "off": f"{r['nocma_gbs']:.2f} ({r['nocma_med_gbs']:.2f})"} for r in rows],
                [("case", "case", "s"), ("cma", "CMA on", "s"), ("off", "CMA off", "s"),
                 ("ratio", "on/off (best)", ".2f"), ("ratio_med", "on/off (median)", ".2f")]))
    ratios = [r["ratio"] for r in rows]
    summary = {"median_on_over_off": statistics.median(ratios), "worst_on_over_off": min(ratios),
               "best_on_over_off": max(ratios),
               "per_case_on_over_off": {r["case"]: r["ratio"] for r in rows}}
    path = write_result("transport-quick" if a.quick else "transport",
                        {"hosts": a.hosts, "rounds": a.rounds, "n": a.n, "rows": rows, "runs": runs,
                         "summary": summary})
    print(f"summary: CMA on/off median {summary['median_on_over_off']:.2f}x, worst case "
          f"{summary['worst_on_over_off']:.2f}x, best {summary['best_on_over_off']:.2f}x; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
