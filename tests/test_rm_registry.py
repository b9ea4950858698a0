"""Resource managers register themselves (``scheduler.rm.registry``): the daemon's options, their
checks and the manager built come from the registry, and Slurm's options keep their messages."""

from __future__ import annotations

import argparse

import pytest

from scheduler import rm
from scheduler.cli import main
from scheduler.rm import registry
from scheduler.rm.base import ResourceManager


@pytest.mark.parametrize("argv, text", [
    (["--grant-timeout", "-1"], "--grant-timeout must be a number of seconds >= 0, got -1.0"),
    (["--idle-release", "inf"], "--idle-release must be a number of seconds >= 0, got inf"),
    (["--expire-margin", "nan"], "--expire-margin must be a number of seconds >= 0, got nan"),
    (["--max-stretch", "0.5"], "--max-stretch must be a factor >= 1, got 0.5"),
    (["--partition", "p"], "--partition is for --slurm-site (--slurm-grow uses its own job's partition)"),
    (["--partition", "p", "--slurm-grow"],
     "--partition is for --slurm-site (--slurm-grow uses its own job's partition)"),
])
def test_the_daemon_refuses_bad_slurm_options_in_one_line(tmp_path, capsys, monkeypatch, argv, text):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    rc = main(["daemon", "--state-dir", str(tmp_path), "--endpoint", f"ipc://{tmp_path}/d", *argv])
    assert rc == 2 and capsys.readouterr().err == f"reshape daemon: {text}\n"


def test_slurm_grow_outside_a_slurm_job_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    rc = main(["daemon", "--state-dir", str(tmp_path), "--endpoint", f"ipc://{tmp_path}/d", "--slurm-grow"])
    assert rc == 2
    assert capsys.readouterr().err == "reshape daemon: --slurm-grow needs to run inside a Slurm job (no SLURM_JOB_ID)\n"


class _Held(ResourceManager):
    kind = "held"

    def __init__(self, where: str):
        self.where = where

    def pool(self, saved_slots):
        raise NotImplementedError


@pytest.fixture
def held_registered():
    """A manager registered as a package would register it; removed afterwards."""
    rm.add_options(argparse.ArgumentParser())  # the built-in packages registered first

    def add(g):
        g.add_argument("--held-at", metavar="WHERE", default="here", help="where the nodes are held")

    def check(args):
        if not args.held_at.isalnum():
            raise ValueError(f"--held-at must be a name, got {args.held_at!r}")

    registry.register("held", "nodes held elsewhere", registry.Options(add, check))(lambda a: _Held(a.held_at))
    yield
    del registry._MANAGERS["held"]


def test_a_registered_manager_gets_its_flag_options_check_and_builder(held_registered):
    p = argparse.ArgumentParser()
    rm.add_options(p)
    assert "--held-at WHERE" in p.format_help() and "nodes held elsewhere" in p.format_help()
    built = rm.from_args(p.parse_args(["--held", "--held-at", "rack1"]))
    assert isinstance(built, _Held) and built.where == "rack1"
    assert rm.from_args(p.parse_args([])) is None  # no flag: the fixed pool
    with pytest.raises(ValueError, match=r"^--held-at must be a name, got 'a b'$"):
        rm.from_args(p.parse_args(["--slurm-site", "--held-at", "a b"]))  # checked whichever manager is chosen
    with pytest.raises(SystemExit):  # one manager at a time
        p.parse_args(["--held", "--slurm-site"])


def test_options_shared_by_managers_are_added_once_and_a_name_registers_once():
    p = argparse.ArgumentParser()
    rm.add_options(p)  # --slurm-site and --slurm-grow share the broker's options: no conflict
    assert [m.flag for m in registry.managers()][:2] == ["--slurm-site", "--slurm-grow"]
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("slurm-site", "again")(lambda a: None)
