"""Every RESHAPE_* variable a job reads is checked with a message naming it and what is allowed (pure)."""

import pytest

from reshape.joblink import jobenv as E
from reshape.runtime.checks import plan_problems
from reshape.runtime.settings import env_problems

BAD = {
    E.PLAN: ("2,x", "'x' is not a number"),
    E.PLAN_EVERY: ("0", "expected an integer >= 1"),
    E.MAX_PROCS: ("abc", "expected an integer >= 1"),
    E.ALLOW_NEW_SIZES: ("maybe", "expected 1/true/yes/on or 0/false/no/off"),
    E.BACKGROUND: ("2", "expected 1/true/yes/on or 0/false/no/off"),
    E.ABORT_ON_ERROR: ("sometimes", "expected 1/true/yes/on or 0/false/no/off"),
    E.REDIST_METHOD: ("mpi", "expected one of circulant, alltoallv, checkpoint"),
    E.WAIT: ("sleep", "expected one of auto, spin, poll"),
    E.LAUNCHER: ("rsh", "expected one of"),
    E.RESIZE_TIMEOUT: ("-1", "expected a number of seconds > 0"),
    E.SCHEDULER_TIMEOUT: ("soon", "expected a number of seconds > 0"),
    E.FAULT: ("transfer:me", "expected WHERE:WHO:HOW"),
    E.JOB_ID: ("seven", "expected an integer >= 0"),
    E.NPROCS: ("0", "expected an integer >= 1"),
    E.HOSTS: ("a,,b", "expected host names separated by commas"),
    E.SCHEDULER: ("localhost:5555", "expected a ZeroMQ endpoint"),
    E.RELABEL: ("maybe", "expected 1/true/yes/on or 0/false/no/off"),
    E.REUSE: ("2", "expected 1/true/yes/on or 0/false/no/off"),
    E.STANDBY: ("-1", "expected an integer >= 0"),
    E.ONECOPY: ("maybe", "expected one of auto, 1, 0"),
    E.KEEP_BLOCKS: ("maybe", "expected 1/true/yes/on or 0/false/no/off"),
    E.PAGES: ("large", "expected one of auto, huge, small"),
    E.CHECKPOINT: ("every:0", "expected every:N (iterations, N >= 1), seconds:T (T > 0) or auto"),
    E.CHECKPOINT_DIR: (" ", "expected a directory path"),
    E.FAULT_ONCE: ("", "expected a file path"),
    E.DEBUG: ("verbose", "expected 1/true/yes/on or 0/false/no/off"),
    E.INPLACE: ("maybe", "expected 1/true/yes/on or 0/false/no/off"),
    E.BUDDY: ("every:0", "expected every:N (iterations, N >= 1)"),
}


@pytest.mark.parametrize("var", sorted(BAD))
def test_each_bad_variable_is_named_with_what_is_allowed(var):
    value, allowed = BAD[var]
    _, problems = env_problems({var: value})
    assert len(problems) == 1 and problems[0].startswith(f"{var}={value!r}: ") and allowed in problems[0], problems


def test_every_job_variable_is_checked():
    every = {getattr(E, n) for n in E.__all__ if n.isupper() and isinstance(getattr(E, n), str)}
    tools = {E.DAEMON, E.STATE_DIR, E.CLIENT_KEY, E.RUN_TAG, E.NETNS_HOSTS, E.NETNS_PREFIX, E.TRACES, E.KEYS,
             E.MPI}
    # free-form by design: the job tag is any string; the CLI, tools and reshape.joblink.auth check theirs where used
    assert every - tools - {E.JOB_TAG} == set(BAD)


def test_good_values_parse():
    s, problems = env_problems({E.PLAN: "2->4 6", E.MAX_PROCS: "8", E.ALLOW_NEW_SIZES: "True", E.BACKGROUND: "0",
                                E.REDIST_METHOD: "alltoallv", E.RESIZE_TIMEOUT: "30", E.JOB_ID: "3",
                                E.NPROCS: "2", E.HOSTS: "a,b", E.SCHEDULER: "tcp://head:5555"})
    assert not problems
    assert (s.plan, s.max_procs, s.allow_new_sizes, s.background, s.method, s.resize_timeout, s.job_id) == \
        ((2, 4, 6), 8, True, False, "alltoallv", 30.0, 3)
    assert env_problems({})[1] == []


def test_plan_must_start_at_the_job_size():
    assert plan_problems((2, 4), 2) == [] and plan_problems(None, 3) == []
    assert "the plan starts at 2 processes but the job runs on 3" in plan_problems((2, 4), 3)[0]


def test_runtime_api_is_documented():
    from reshape.runtime import Registered, Resizer
    from reshape.runtime.darray import DistArray

    assert "Collective" in Registered.gather.__doc__ and "``dist``" in Registered.__doc__
    assert "``history`` lists the sizes the" in Resizer.__doc__ and "global_indices" in DistArray.__doc__


def test_job_settings_on_one_rank():
    from mpi4py import MPI

    from reshape.runtime.checks import UsageError, job_settings

    assert job_settings(MPI.COMM_SELF, env={E.PLAN: "1,2"}).plan == (1, 2)
    with pytest.raises(UsageError, match=r"init\(max_procs=0\): expected an integer >= 1"):
        job_settings(MPI.COMM_SELF, env={}, max_procs=0)
    with pytest.raises(UsageError, match="the plan starts at 2 processes but the job runs on 1"):
        job_settings(MPI.COMM_SELF, env={E.PLAN: "2,4"})
    assert job_settings(MPI.COMM_SELF, spawned=True, env={E.PLAN: "2,4"}).plan == (2, 4)  # a spawned group


def test_sizes_are_checked_against_the_data():
    """An expansion the scheduler offers beyond an array's blocks is refused naming both numbers, and such
    sizes are not among those announced to the scheduler (legal_sizes uses the same check)."""
    from types import SimpleNamespace

    from reshape.runtime.checks import data_limit, plan_data_problem, resize_problem
    from reshape.runtime.darray import layout_rule

    rows = data_limit("T", (64, 64), "rows", None)
    assert rows(64) is None and rows(99) == ("99 processes > 64 rows of array 'T' (layout 'rows'): "
                                             "some processes would hold no data")
    assert plan_data_problem((2, 4, 99, 3), rows).startswith("RESHAPE_PLAN=2,4,99,3: 99 processes > 64 rows")
    assert plan_data_problem((2, 64), rows) is None and plan_data_problem(None, rows) is None
    grid = data_limit("A", (512, 512), "2d", (64, 64))
    assert grid(64) is None and "9x9 grid" in grid(81) and "8 blocks of 64 rows (512 rows)" in grid(81)
    assert "3 blocks of 4 columns (10 columns)" in data_limit("x", (3, 10), "cols-cyclic", 4)(4)
    assert data_limit("f", (4,), lambda p: None, None)(99) is None  # a layout function is not second-guessed
    reg = SimpleNamespace(name="T", rule=layout_rule((64, 64), "rows"), limit=rows)
    rt = SimpleNamespace(size=4, max_procs=None, sizes=None, arrays={"T": reg}, allow_new_sizes=False,
                         history=[2, 4])
    assert resize_problem(rt, 99, "expand") == rows(99) and resize_problem(rt, 64, "expand") is None
    assert "RESHAPE_ALLOW_NEW_SIZES=1 or init(allow_new_sizes=True) lifts this" in resize_problem(rt, 3, "shrink")


def test_plan_entries_are_not_skipped():
    from reshape.joblink.advice import parse_plan

    assert parse_plan("2,4,6") == parse_plan("2 -> 4 -> 6") == parse_plan("2, 4, 6") == [2, 4, 6]
    for text, msg in (("2,,4", "an empty entry after 2"), ("2,4,", "an empty entry at the end"),
                      (",2", "an empty entry at the start"), ("2,0,3", "0 is not a process count")):
        with pytest.raises(ValueError, match=msg):
            parse_plan(text)


def test_docs_import_reshape_one_way_and_document_what_programs_use():
    import glob
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for path in [os.path.join(root, "README.md"), *glob.glob(os.path.join(root, "docs", "*.md")),
                 *glob.glob(os.path.join(root, "examples", "*.py"))]:
        with open(path) as f:
            assert "import reshape.runtime as reshape" not in f.read(), path
    with open(os.path.join(root, "docs", "resizable-programs.md")) as f:
        doc = f.read()
    for name in ("import reshape\n", "reshape.layout_rule(", "`DistArray`", "X.dist.redistribute(", "rt.history",
                 "rt.results", "global_indices"):
        assert name in doc, name
