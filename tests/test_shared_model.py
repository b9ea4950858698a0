"""Structure files, the out-of-core plan, cluster descriptions and the MHETA model (pure)."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.ooc_jacobi import structure as jacobi_structure
from reshape.mheta.cluster import Cluster, ClusterError, Node, load_cluster
from reshape.mheta.distribute import (
    balanced_split,
    choose_split,
    in_core_balanced_split,
    in_core_capacity,
    in_core_split,
    sweep,
)
from reshape.mheta.model import CommProfile, Mheta, NodeProfile, Profile
from reshape.mheta.search import exhaustive
from reshape.mheta.structure import (
    StructureError,
    load_structure,
    plan_memory,
    structure_from_dict,
)
from reshape.redistribution.layout import gen_block

ROWS, COLS = 64, 16
ROW = 2 * COLS * 8


COMM = CommProfile(1e-5, 1e-5, 1e-4)


def profile(memories, cpus, comm=COMM):
    return Profile(tuple(
        NodeProfile(rows=ROWS // len(cpus), memory=m, compute={"sweep": 0.016 / c},
                    read_seek=1e-3, write_seek=1e-3, read_row={"grid": 1e-4},
                    write_row={"grid": 1e-4})
        for m, c in zip(memories, cpus, strict=True)), comm)


def test_structure_file_round_trip(tmp_path):
    app = jacobi_structure(ROWS, COLS)
    path = tmp_path / "jacobi.json"
    app.dump(path)
    assert load_structure(path) == app


def test_unknown_stage_in_structure_file(tmp_path):
    d = jacobi_structure(ROWS, COLS).to_dict()
    d["sections"][0]["stages"] = ["sweep", "smooth"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(StructureError, match="unknown stage 'smooth'"):
        load_structure(path)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["stages"][0].update(reads=["nope"]), "unknown array 'nope'"),
    (lambda d: d["sections"][0]["comm"].update(pattern="shuffle"), "unknown communication pattern"),
    (lambda d: d.pop("sections"), "missing the field 'sections'"),
    (lambda d: d["arrays"][0].update(read_only=True), "writes read-only array"),
])
def test_bad_structures(edit, message):
    d = jacobi_structure(ROWS, COLS).to_dict()
    edit(d)
    with pytest.raises(StructureError, match=message):
        structure_from_dict(d)


def test_plan_memory_heuristic_and_errors():
    app = jacobi_structure(ROWS, COLS)
    assert plan_memory(app, 10, 10 * ROW) == {"grid": None}
    assert plan_memory(app, 11, 10 * ROW) == {"grid": 10}
    assert in_core_capacity(app, 10 * ROW) == 10
    with pytest.raises(StructureError, match="no memory"):
        plan_memory(app, 10, 0)
    with pytest.raises(StructureError, match="cannot hold one row"):
        plan_memory(app, 10, ROW - 1)


def test_resident_arrays_stay_in_core_or_the_split_is_refused():
    from apps.ooc_cg import structure as cg_structure
    from reshape.mheta.structure import max_resident_rows

    app = cg_structure(64, 8)  # a grid row: 64 bytes; matrix 5 of them, vectors 4 (resident)
    mem = 20 * 256 + 3 * 320  # vectors of 20 rows and 3 matrix rows
    assert max_resident_rows(app, mem) == 22  # 23 rows of vectors leave no room for a matrix row
    assert plan_memory(app, 20, mem) == {"vectors": None, "matrix": 3}  # the matrix goes out
    assert in_core_capacity(app, mem) == 10  # 10 rows of everything: 720 bytes
    with pytest.raises(StructureError, match=r"cannot keep the in-core arrays 'vectors' for 24 rows .*at most 22"):
        plan_memory(app, 24, mem)
    with pytest.raises(StructureError, match="cannot hold one row of out-of-core array 'matrix'"):
        plan_memory(app, 23, mem)
    # round trip of the flag through the JSON form
    assert structure_from_dict(app.to_dict()).array("vectors").resident


def test_cluster_bad_input():
    with pytest.raises(ClusterError, match="no memory"):
        Node(memory=0)
    with pytest.raises(ClusterError, match="CPU speed"):
        Node(cpu=0)
    with pytest.raises(ClusterError, match="not valid JSON"):
        load_cluster("{nodes: ")
    c = load_cluster('{"nodes": [{"cpu": 2.0}, {"memory": 4096}], "element_time": 1e-6}')
    assert c.nodes[0].cpu == 2.0 and c.nodes[1].memory == 4096
    assert Cluster.from_dict(c.to_dict()) == c


def test_split_must_sum_to_array_size():
    m = Mheta(jacobi_structure(ROWS, COLS), profile([1 << 20] * 4, [1, 1, 1, 1]))
    with pytest.raises(StructureError, match="sums to 63, but the array has 64 rows"):
        m.evaluate([16, 16, 16, 15])
    with pytest.raises(StructureError, match="3 parts for 4 nodes"):
        m.evaluate([32, 16, 16])


def test_eq_5_1_io_time():
    """An out-of-core node's stage time is T_phi*W'/W + N_L (O_r + O_w) + (r + w) rows."""
    m = Mheta(jacobi_structure(ROWS, COLS), profile([5 * ROW, 1 << 20], [1, 1]))
    rows = 23  # ICLA 5 rows -> N_L = 5
    expect = 0.016 * rows / 32 + 5 * (1e-3 + 1e-3) + (1e-4 + 1e-4) * rows
    assert m.section_work(0, 0, rows) == pytest.approx(expect)
    assert m.section_work(1, 0, rows) == pytest.approx(0.016 * rows / 32)  # in core: no I/O


def test_prefetch_hides_reads_behind_computation():
    sync = Mheta(jacobi_structure(ROWS, COLS), profile([5 * ROW, 1 << 20], [1, 1]))
    pre = Mheta(jacobi_structure(ROWS, COLS, prefetch=True), profile([5 * ROW, 1 << 20], [1, 1]))
    assert pre.section_work(0, 0, 30) < sync.section_work(0, 0, 30)
    assert pre.section_work(1, 0, 30) == sync.section_work(1, 0, 30)


def test_prefetch_overlaps_the_next_read_with_computation_and_write_back():
    """LocalStore.stream(prefetch=True): piece k+1's read (seek included) runs while piece k is
    computed and written back; the first read and O_A per piece are paid in full."""
    from dataclasses import replace

    prof = profile([5 * ROW, 1 << 20], [1, 1])
    prof = replace(prof, nodes=tuple(replace(n, async_overhead=5e-5) for n in prof.nodes))
    pre = Mheta(jacobi_structure(ROWS, COLS, prefetch=True), prof)
    rows, nl = 30, 6  # ICLA 5 rows
    phi, writes = 0.016 * rows / 32, nl * 1e-3 + 1e-4 * rows
    ta = (phi + writes) / nl
    hidden = (nl - 1) * max(0.0, 1e-3 + 1e-4 * 5 - ta)
    expect = phi + writes + 1e-3 + 1e-4 * 5 + hidden + nl * 5e-5
    assert pre.section_work(0, 0, rows) == pytest.approx(expect)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=2, max_size=5),
       st.lists(st.floats(0.25, 4.0), min_size=5, max_size=5),
       st.lists(st.integers(1, 80), min_size=5, max_size=5))
def test_node_cost_monotone_and_blocking_only_adds(split_seed, cpus, mems):
    p = len(split_seed)
    x = [max(1, v) for v in split_seed]
    x[-1] += ROWS - sum(x) if sum(x) < ROWS else 0
    if sum(x) != ROWS:
        return
    m = Mheta(jacobi_structure(ROWS, COLS), profile([k * ROW for k in mems[:p]], cpus[:p]))
    for i in range(p):
        costs = [m.node_cost(i, v) for v in range(ROWS + 1)]
        assert all(a <= b for a, b in itertools.pairwise(costs))
    pred = m.evaluate(x)
    assert pred.time >= max(pred.unblocked) - 1e-12
    assert all(t >= u - 1e-12 for t, u in zip(pred.node_times, pred.unblocked, strict=True))


def test_choose_split_is_gbs_optimal_and_a_gen_block():
    app = jacobi_structure(ROWS, COLS)
    prof = profile([6 * ROW, 1 << 20, 1 << 20, 12 * ROW], [0.5, 1.0, 2.0, 1.0])
    ch = choose_split(app, prof, budget=2.0, search="gbs")
    assert ch.search.certified and sum(ch.counts) == ROWS
    gen_block((ROWS, COLS), list(ch.counts))
    m = Mheta(app, prof)
    _, opt = exhaustive(m.node_cost, 4, ROWS, min_rows=1)
    assert max(m.node_cost(i, v) for i, v in enumerate(ch.counts)) == pytest.approx(opt)
    assert ch.predicted < ch.block_predicted
    # the default (GBS, then descent on the time with blocking) is never predicted slower than GBS
    assert choose_split(app, prof, budget=2.0).predicted <= ch.predicted
    cluster = Cluster.uniform(3)
    with pytest.raises(StructureError, match="3 nodes but the profile has 4"):
        choose_split(app, prof, cluster)


def test_distribution_spectrum():
    caps = [4, 40, 40, 40]
    cpus = [1.0, 1.0, 2.0, 0.5]
    assert sum(balanced_split(64, cpus)) == 64
    ic = in_core_split(64, caps)
    assert ic[0] <= 4 and sum(ic) == 64
    icb = in_core_balanced_split(64, caps, cpus)
    assert icb[0] <= 4 and icb[2] >= icb[3] and sum(icb) == 64
    pts = sweep([[16] * 4, ic, icb, balanced_split(64, cpus)], 3)
    assert all(sum(p) == 64 and min(p) >= 1 for p in pts)
    assert len({tuple(p) for p in pts}) == len(pts)
    assert not math.isnan(sum(map(sum, pts)))


def test_searches_avoid_splits_a_node_cannot_hold():
    """CG on a node too small for BLOCK's vectors: MHETA prices such splits infinite, and every
    search returns a split the node can run (none raises)."""
    import random

    from apps.ooc_cg import structure as cg_structure
    from reshape.mheta.model import CommProfile, Mheta, NodeProfile, Profile
    from reshape.mheta.search import ga, gbs, gs, sa

    app, row = cg_structure(256, 512), 512 * 8
    mems = [(4 * 60 + 5) * row, 1 << 26, 1 << 26, 1 << 26]  # node 0: vectors of 60 rows and a matrix row
    prof = Profile(tuple(
        NodeProfile(rows=64, memory=m, compute={s: 0.05 for s in app.stage_names()}, read_seek=2e-3,
                    write_seek=2e-3, read_row={a.name: 2e-4 for a in app.arrays},
                    write_row={a.name: 2e-4 for a in app.arrays}) for m in mems),
        CommProfile(1e-5, 1e-5, 1e-4, 0.0, 0.0))
    model = Mheta(app, prof)
    assert model.hold == (60, 256, 256, 256)
    assert model.predict([64] * 4) == float("inf")
    for fn, kw in ((gbs, {}), (gs, {}), (ga, {"budget": 0.2}), (sa, {"budget": 0.2})):
        r = fn(model.node_cost, 4, 256, objective=model.predict, min_rows=1, rng=random.Random(1), **kw)
        assert r.split[0] <= 60 and r.value < float("inf"), (fn.__name__, r)
