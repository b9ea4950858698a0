"""``reshape simulate`` as a newcomer meets it: the shipped trace, the legend, progress without ``\\r`` in logs."""

import argparse
import os

from scheduler.lab import simulate_cli
from scheduler.lab.swf import read_swf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACE = os.path.join(ROOT, "examples", "traces", "lublin_64.swf")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="reshape")
    simulate_cli.add_commands(ap.add_subparsers())
    return ap


def test_shipped_trace_is_small_and_readable():
    trace = read_swf(TRACE)
    assert len(trace.jobs) == 300 and trace.max_procs == 64 and not trace.warnings
    assert os.path.getsize(TRACE) < 32_000


def test_progress_writes_no_carriage_return_when_stderr_is_not_a_terminal(capsys):
    bar = simulate_cli._Bar(enabled=True)  # pytest's captured stderr is not a terminal
    for done in range(0, 101, 10):
        bar("easy", done, 100)
    err = capsys.readouterr().err
    assert "\r" not in err and err == "easy: 100/100 jobs simulated\n"
    tty = simulate_cli._Bar(enabled=True, tty=True)
    tty("easy", 50, 100)
    assert capsys.readouterr().err.startswith("\r")


def test_table_is_followed_by_a_legend_and_help_explains_the_columns(capsys):
    args = _parser().parse_args(["simulate", TRACE, "--policy", "easy", "--max-jobs", "60"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    for word in ("bsld", "useful", "idle waiting"):
        assert f"\n{word} " in out, out
    assert "bounded slowdown" in out and "parallel efficiency" in out
    helptext = _parser()._subparsers._group_actions[0].choices["simulate"].format_help()
    assert "columns of the table" in helptext and "bounded slowdown" in helptext and "idle waiting" in helptext
