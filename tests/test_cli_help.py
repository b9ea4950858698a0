"""Every ``reshape`` subcommand explains itself in its own ``--help`` (run in-process, pure)."""

import argparse
import os

import pytest

from scheduler.cli import build_parser, main
from scheduler.core.jobfile import FIELDS
from scheduler.core.policy import app_policy_names, remap_policy_names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def commands(parser=None, prefix=()):
    """Every subcommand path, e.g. ("daemon",), ("netns", "up")."""
    parser = parser or build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from commands(sub, (*prefix, name))


def help_of(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


ALL = sorted(commands())


def test_the_commands_the_issue_names_are_there():
    assert {("daemon",), ("keys",), ("nodemon",), ("submit",), ("status",), ("cancel",), ("history",), ("log",),
            ("stop",), ("demo",), ("simulate",), ("redistribution-demo",)} <= set(ALL)


@pytest.mark.parametrize("argv", ALL, ids=" ".join)
def test_each_subcommand_help_has_a_description(capsys, argv):
    text = help_of(capsys, *argv)
    # usage, a blank line, then the description before the first option list
    body = text.split("\n\n", 1)[1]
    first = body.split("\n\n", 1)[0]
    assert not first.startswith(("options:", "positional arguments:")) and len(first) > 15, text
    assert "``" not in text, text


def test_daemon_help_shows_defaults_and_every_policy(capsys):
    text = " ".join(help_of(capsys, "daemon").split())
    assert "ZeroMQ endpoint to bind (default $RESHAPE_DAEMON or ipc://" in text
    assert "journal and job logs (default $RESHAPE_STATE_DIR or ~/.reshape" in text
    assert ", ".join(app_policy_names()) in text and ", ".join(remap_policy_names()) in text


def test_submit_help_lists_the_job_file_fields_and_the_docs_do_too(capsys):
    text = help_of(capsys, "submit")
    with open(os.path.join(ROOT, "docs", "daemon.md")) as fh:
        doc = fh.read().split("## Job files", 1)[1]
    for field in FIELDS:
        assert f"\n  {field} " in text, field
        assert f"| `{field}`" in doc or f"`{field}`," in doc, field


def test_zero_slots_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        main(["daemon", "--slots", "0"])
    assert e.value.code == 2 and "argument --slots: must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("argv, text", [
    (["status", "--limit", "-1"], "argument --limit: must be >= 0, got -1"),
    (["history", "--since", "nan"], "argument --since: must be a finite number of seconds >= 0"),
    (["log", "1", "--tail", "x"], "argument --tail: not an integer: 'x'"),
    (["submit", "a.toml", "--delay", "-2"], "argument --delay: must be a finite number of seconds >= 0"),
])
def test_bad_option_values_are_refused(capsys, argv, text):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and text in capsys.readouterr().err


def test_a_refused_connection_fails_at_once():
    """Refused connections end a request after ``fail_fast``, with their own message; the request's timeout (an
    hour here: a hang the test's timeout would end) is never waited for."""
    from reshape.joblink.client import Connection, SchedulerUnavailable
    from tests.helpers import free_port

    conn = Connection(f"tcp://127.0.0.1:{free_port()}", timeout=3600.0, fail_fast=1.0)
    with pytest.raises(SchedulerUnavailable, match=r"no scheduler daemon listens at tcp://127\.0\.0\.1:"):
        conn.request("ping")
    conn.close()
