"""The resize runtime under real MPI: spawned ranks join, retired ranks leave, data survives."""

import os
import re

import pytest

pytestmark = pytest.mark.procs
# .ci/run runs this file under Open MPI too; parking is off there (docs/mpi.md)
parking = pytest.mark.skipif(os.environ.get("RESHAPE_MPI") == "openmpi",
                             reason="parked ranks are not supported on Open MPI 5.0 (their MPI_Finalize crashes)")


def run_plan(mpirun, start, plan, tmp_path, extra_env=None, iters=6):
    pidlog = tmp_path / "pids.txt"
    env = {"RESHAPE_PLAN": plan, **(extra_env or {})}
    res = mpirun(start, ["-m", "tests.mpi.resize_plan", "--iters", str(iters), "--pidlog", str(pidlog)],
                 env=env, timeout=120)
    lines = [ln.split() for ln in pidlog.read_text().splitlines()]
    return res, lines


def test_expand_and_shrink_1_2_4_2_1(mpirun, tmp_path):
    res, lines = run_plan(mpirun, 1, "1,2,4,2,1", tmp_path)
    assert "final size 1 sizes [2, 4, 2, 1, 1, 1] checksum 15 data OK" in res.stdout
    start = {int(p) for p, size, rank, tag in lines if tag == "start"}
    joined = {int(p) for p, size, rank, tag in lines if tag == "join"}
    assert len(start) == 1 and len(joined) == 3          # 1 -> 2 spawns one, 2 -> 4 spawns two
    assert not (start & joined) and os.getpid() not in joined  # spawned ranks are new OS processes
    # each shrink retired whole spawn groups, and every retired rank exited
    assert res.stdout.count("retired 2: exited 2 parked 0") == 1
    assert res.stdout.count("retired 1: exited 1 parked 0") == 1


def test_2_4_6_3_needs_opt_in_and_then_parks_a_split_group(mpirun, tmp_path):
    res, _ = run_plan(mpirun, 2, "2,4,6,3", tmp_path)
    assert "refused: shrink to 3: the job has only run on [2, 4, 6] processes" in res.stdout
    assert "final size 6" in res.stdout and "data OK" in res.stdout
    res, _lines = run_plan(mpirun, 2, "2,4,6,3", tmp_path, {"RESHAPE_ALLOW_NEW_SIZES": "1"})
    assert "final size 3 sizes [4, 6, 3, 3, 3, 3] checksum 15 data OK" in res.stdout
    # ranks 4 and 5 (one spawn group) exit; rank 3 parks until rank 2, its sibling, finishes
    assert "retired 3: exited 2 parked 1" in res.stdout


def test_impossible_step_is_refused_and_the_run_finishes(mpirun, tmp_path):
    res, _ = run_plan(mpirun, 2, "2,4,2", tmp_path, {"RESHAPE_MAX_PROCS": "3"})
    assert "refused: 4 exceeds the job's maximum of 3 processes" in res.stderr + res.stdout
    assert "final size 2 sizes [2, 2, 2, 2, 2, 2] checksum 15 data OK" in res.stdout


def test_unreachable_and_unknown_hosts_are_refused(mpirun, tmp_path):
    res = mpirun(1, ["-m", "tests.mpi.resize_hosts", "nosuchhost.invalid"], timeout=60)
    assert "unknown host 'nosuchhost.invalid'" in res.stdout and "final size 1 data OK" in res.stdout
    res = mpirun(1, ["-m", "tests.mpi.resize_hosts", "127.0.0.2"], timeout=60)
    assert "not reachable" in res.stdout and "final size 1 data OK" in res.stdout
    res = mpirun(1, ["-m", "tests.mpi.resize_hosts", "localhost,localhost"], timeout=60)
    assert "final size 3 data OK" in res.stdout


def _ranks_by_pid(lines) -> dict[int, list[tuple[int, int]]]:
    """Each process's (size, rank) after every resize it took part in, in order."""
    out: dict[int, list[tuple[int, int]]] = {}
    for pid, size, rank, _tag in lines:
        out.setdefault(int(pid), []).append((int(size), int(rank)))
    return out


def _rank_at(seq, size: int) -> int | None:
    return next((r for s, r in seq if s == size), None)


@pytest.mark.parametrize("relabel", ["1", "0"])
def test_positions_go_to_the_ranks_holding_the_data_and_whole_groups_retire(mpirun, tmp_path, relabel):
    from reshape.redistribution import placement
    from reshape.runtime import layout_rule

    res, lines = run_plan(mpirun, 2, "2,4,6,4,2", tmp_path, {"RESHAPE_RELABEL": relabel})
    assert "final size 2 sizes [4, 6, 4, 2, 2, 2] checksum 15 data OK" in res.stdout
    # the placement the runtime must choose for 4 -> 6 (the program's arrays, reshape.redistribution.placement)
    A, x = layout_rule((37, 40), "2d", (4, 5)), layout_rule((37,), "rows")
    want = placement.choose([(A(4), A(6), 8), (x(4), x(6), 4)], range(6), relabel == "1")
    assert (want != tuple(range(6))) == (relabel == "1")  # the case relabels
    seqs = _ranks_by_pid(lines)
    at4 = {pid: _rank_at(s, 4) for pid, s in seqs.items() if _rank_at(s, 4) is not None}
    new6 = {pid for pid, s in seqs.items() if s[0][0] == 6}  # spawned by 4 -> 6
    assert len(at4) == 4 and len(new6) == 2
    for pid, r4 in at4.items():  # a rank of size 4 now holds the position the placement gave it
        assert _rank_at(seqs[pid], 6) == want.index(r4)
    assert {_rank_at(seqs[p], 6) for p in new6} == {want.index(4), want.index(5)}
    # 6 -> 4 retires the spawn group of 4 -> 6 whole, whatever its ranks had become: both exit at once
    assert "retired 2: exited 2 parked 0" in res.stdout
    assert all(len(seqs[p]) == 1 for p in new6)
    # rank 0 is the process mpiexec started as rank 0 throughout
    first = next(int(p) for p, size, rank, tag in lines if tag == "start" and rank == "0")
    assert all(r == 0 for _, r in seqs[first])


@parking
def test_reuse_calls_parked_ranks_back_instead_of_spawning(mpirun, tmp_path):
    res, lines = run_plan(mpirun, 2, "2,4,2,4,2", tmp_path, {"RESHAPE_REUSE": "1"})
    assert "final size 2 sizes [4, 2, 4, 2, 2, 2] checksum 15 data OK" in res.stdout
    seqs = _ranks_by_pid(lines)
    joined = {int(p) for p, size, rank, tag in lines if tag == "join"}
    assert len(joined) == 2 and len(seqs) == 4  # the second 2 -> 4 spawned no process
    for p in joined:  # the spawned pair ran at 4, parked at the shrink, and came back at 4
        assert [s for s, _ in seqs[p]] == [4, 4]
    assert res.stdout.count("retired 2: exited 0 parked 2") == 2  # shrinks park instead of retiring
    # each resize point tells the scheduler where the parked ranks are, so it can place the expansion there
    parked = re.findall(r"^PARKED (\d+) here (\d+)$", res.stdout, re.M)
    assert parked[:4] == [("0", "0"), ("0", "0"), ("2", "2"), ("0", "0")], parked
    assert set(parked[4:]) == {("2", "2")}, parked


@parking
def test_standby_ranks_started_with_the_job_serve_its_first_expansion(mpirun, tmp_path):
    """A warm pool: RESHAPE_STANDBY=2 spawns two ranks at start that park at once; the first 2 -> 4
    calls them back (no spawn: four processes in all), and the second 2 -> 4 calls them back again."""
    res, lines = run_plan(mpirun, 2, "2,4,2,4,2", tmp_path, {"RESHAPE_REUSE": "1", "RESHAPE_STANDBY": "2"})
    assert "final size 2 sizes [4, 2, 4, 2, 2, 2] checksum 15 data OK" in res.stdout
    assert len(_ranks_by_pid(lines)) == 4  # two started by mpiexec, two standbys; nothing spawned later
    parked = re.findall(r"^PARKED (\d+) here (\d+)$", res.stdout, re.M)
    assert parked[:4] == [("2", "2"), ("0", "0"), ("2", "2"), ("0", "0")], parked  # standbys parked from the start
    assert not res.leftovers


@parking
def test_parked_ranks_cover_part_of_an_expansion_and_the_rest_is_spawned(mpirun, tmp_path):
    """Two standbys, then 2 -> 6: the two are called back and two more are spawned over the communicator
    they joined (six processes in all); a shrink to 2 parks four, and 2 -> 4 calls back two of them."""
    res, lines = run_plan(mpirun, 2, "2,6,2,4,2", tmp_path, {"RESHAPE_REUSE": "1", "RESHAPE_STANDBY": "2"})
    assert "final size 2 sizes [6, 2, 4, 2, 2, 2] checksum 15 data OK called back [2, 2]" in res.stdout, res.stdout
    assert len(_ranks_by_pid(lines)) == 6
    parked = re.findall(r"^PARKED (\d+) here (\d+)$", res.stdout, re.M)
    assert parked[:4] == [("2", "2"), ("0", "0"), ("4", "4"), ("2", "2")], parked


@parking
def test_parked_ranks_of_two_shrinks_are_called_back_together(mpirun, tmp_path):
    """4 -> 3 -> 2 parks one rank at each shrink, in two pools; 2 -> 4 calls both back, pool by pool, and
    spawns nothing (four processes in all), the data right after every step."""
    res, lines = run_plan(mpirun, 2, "2,4,3,2,4", tmp_path, {"RESHAPE_REUSE": "1", "RESHAPE_ALLOW_NEW_SIZES": "1"})
    assert "final size 4 sizes [4, 3, 2, 4, 4, 4] checksum 15 data OK called back [0, 2]" in res.stdout, res.stdout
    assert len(_ranks_by_pid(lines)) == 4
    assert res.stdout.count("retired 1: exited 0 parked 1") == 2
    parked = re.findall(r"^PARKED (\d+) here (\d+)$", res.stdout, re.M)
    assert parked == [("0", "0"), ("0", "0"), ("1", "1"), ("2", "2"), ("0", "0"), ("0", "0")], parked
    assert not res.leftovers


@parking
def test_parked_ranks_leave_when_the_program_ends_without_finish(mpirun):
    res = mpirun(2, ["-m", "tests.mpi.resize_nofinish"], env={"RESHAPE_REUSE": "1", "RESHAPE_PLAN": "2,4,2"},
                 timeout=60)
    assert "sum 940 size 2 sizes [4, 2, 2, 2]" in res.stdout
