"""Bad input to a resizable job: the same clear error on every rank, no hang, nothing left running.

Each run is bounded (``timeout``); the ``mpirun`` fixture fails a run that left a process behind.
"""


import pytest

pytestmark = pytest.mark.procs

CASES = {  # case in tests/mpi/bad_input.py -> what the error must say
    "shape-int": "shape=100: expected a tuple of positive integers, e.g. (100,)",
    "shape-zero": "shape=(0, 10): expected a tuple of positive integers",
    "block-3": "block=(2, 2, 2): layout '2d' needs 2 positive block sizes",
    "init-array": "init: an array of shape (4, 4), expected the whole array, shape (8, 8)",
    "shape-differs": "every rank must pass the same shape: rank 0 passed (8, 8), rank 1 (8, 6)",
    "layout-unknown": "layout='diagonal': expected one of rows, cols, rows-cyclic, cols-cyclic, 2d",
    "init-raises": "init: LinAlgError: Singular matrix (on rank 1)",
    "name-taken": "an array named 'name-taken' is already registered",
    "layout-function": "layout: the function returned Layout(",
}


def test_register_array_errors_are_raised_on_every_rank(mpirun):
    res = mpirun(2, ["-m", "tests.mpi.bad_input"], timeout=60)
    for case, text in CASES.items():
        for rank in (0, 1):
            assert f"rank {rank} {case}: register_array({case!r}): {text}" in res.stdout, (case, rank, res.stdout)
    # every rank carried on together: a good array, a resize point, a gather
    assert "after: registered ['A', 'name-taken'] equal True" in res.stdout


def test_uncaught_error_ends_the_job_once_without_abort(mpirun):
    res = mpirun(2, ["-m", "tests.mpi.bad_input", "--uncaught", "shape-differs"], timeout=60, check=False)
    assert res.returncode == 1, res.stderr
    assert res.stderr.count("UsageError: register_array('shape-differs'): every rank must pass the same shape") == 1
    assert "MPI_Abort" not in res.stderr and "aborting" not in res.stderr
    assert not res.leftovers  # every rank exited by itself


@pytest.mark.parametrize("env, text", [
    ({"RESHAPE_PLAN": "2,0,3"}, "RESHAPE_PLAN='2,0,3': 0 is not a process count; expected process counts >= 1"),
    ({"RESHAPE_PLAN": "2,-1"}, "RESHAPE_PLAN='2,-1': -1 is not a process count"),
    ({"RESHAPE_PLAN": "2,x"}, "RESHAPE_PLAN='2,x': 'x' is not a number"),
    ({"RESHAPE_PLAN": "2,,4"}, "RESHAPE_PLAN='2,,4': an empty entry after 2; expected process counts >= 1"),
    ({"RESHAPE_PLAN": "3,4"}, "RESHAPE_PLAN=3,4: the plan starts at 3 processes but the job runs on 2"),
    ({"RESHAPE_MAX_PROCS": "abc"}, "RESHAPE_MAX_PROCS='abc': expected an integer >= 1"),
    ({"RESHAPE_STANDBY": "2"}, "RESHAPE_STANDBY=2: standby ranks are parked ranks; turn reuse on too"),
])
def test_bad_environment_fails_on_every_rank(mpirun, env, text):
    res = mpirun(2, ["examples/heat.py", "--n", "16", "--steps", "2"], env=env, timeout=60, check=False)
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    assert res.stderr.count(f"UsageError: reshape.init(): {text}") == 1, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, res.stderr  # one line
    assert "sha256" not in res.stdout and not res.leftovers


def test_plan_larger_than_the_data_is_one_line_before_anything_is_spawned(mpirun):
    """The README's heat example (a 64x64 grid, "rows") along a plan with a typo: refused at
    register_array, naming both numbers, before any rank is spawned; RESHAPE_DEBUG=1 adds the traceback."""
    res = mpirun(2, ["examples/heat.py"], env={"RESHAPE_PLAN": "2,99"}, timeout=60, check=False)
    assert res.returncode == 1, (res.returncode, res.stderr)
    assert res.stderr.strip().splitlines() == [
        "UsageError: register_array('T'): RESHAPE_PLAN=2,99: 99 processes > 64 rows of array 'T' (layout 'rows'): "
        "some processes would hold no data (RESHAPE_DEBUG=1 shows the traceback)"], res.stderr
    assert "sha256" not in res.stdout and "plan step" not in res.stderr and not res.leftovers
    res = mpirun(2, ["examples/heat.py"], env={"RESHAPE_PLAN": "2,99", "RESHAPE_DEBUG": "1"}, timeout=60,
                 check=False)
    assert res.returncode == 1 and "Traceback" in res.stderr and res.stderr.count("99 processes > 64 rows") == 1


def test_refused_plan_step_names_the_size_asked_for_and_the_variable_that_lifts_it(mpirun):
    res = mpirun(2, ["examples/heat.py", "--steps", "3"], env={"RESHAPE_PLAN": "2,4,3"}, timeout=120)
    assert ("[reshape] resize 4 -> 3 refused: shrink to 3: the job has only run on [2, 4] processes (a job "
            "shrinks only to sizes it has run at; RESHAPE_ALLOW_NEW_SIZES=1 or init(allow_new_sizes=True) lifts "
            "this); continuing on 4 processes") in res.stderr, res.stderr
    assert "sizes [2, 4] sha256" in res.stdout


def test_a_start_on_more_processes_than_the_data_has_rows_is_one_line_before_anything_runs(mpirun):
    """``mpiexec -n 4`` on a 3-row array: refused at register_array on every rank, naming both numbers, as a
    plan step beyond the data is; the program computes nothing."""
    res = mpirun(4, ["examples/heat.py", "--n", "3", "--steps", "2"], timeout=60, check=False)
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip().splitlines() == [
        "UsageError: register_array('T'): the job runs on 4 processes > 3 rows of array 'T' (layout 'rows'): "
        "some processes would hold no data; start it on fewer (mpiexec -n) (RESHAPE_DEBUG=1 shows the traceback)"
    ], res.stderr
    assert "sha256" not in res.stdout and not res.leftovers


REFUSED = """
import reshape
rt = reshape.init()
rt.register_array("x", (8,), layout="rows")
for _ in rt.iterations(2):
    res = rt.resize()
    if rt.rank == 0 and res.action == "failed":
        print(f"refused: old {res.old} new {res.new} asked {res.asked} size {rt.size}", flush=True)
rt.finish()
"""


def test_a_refused_plan_step_keeps_the_size_it_asked_for_in_its_result(mpirun, tmp_path):
    prog = tmp_path / "refused.py"  # a file: spawned ranks run the program again
    prog.write_text(REFUSED)
    res = mpirun(2, [str(prog)], env={"RESHAPE_PLAN": "2,4,3"}, timeout=120)
    assert "refused: old 4 new 4 asked 3 size 4" in res.stdout, res.stdout + res.stderr
