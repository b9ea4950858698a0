"""Checkpoints trust nothing another user could have put there (reshape.runtime.ckptfiles): values are
written without pickle and come back with their types; a directory or checkpoint of another user, a
directory others may write, and the old pickle format are refused with one line, and nothing planted
there runs. The planted files are made by uid 65534 (a forked child that drops to it), as another
local user would; those tests need root and skip without it.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import stat
import tempfile
import traceback

import numpy as np
import pytest

from reshape.runtime import ckptfiles

h5py = pytest.importorskip("h5py")  # imported here: its import runs a subprocess, which a pure-tier test may not

NOBODY = 65534
VALUES = ["-m", "tests.mpi.ckpt_values"]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making files as uid 65534 needs root")


class _Planted:
    """What an attacker pickles: unpickling it makes the directory ``path`` (as whoever unpickles it)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return os.mkdir, (self.path,)


def as_user(uid: int, fn) -> None:
    """Run ``fn()`` in a forked child that has dropped to ``uid`` (umask 0); fail if it fails."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.umask(0)
            fn()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"the child as uid {uid} failed"


def plant(directory: str, marker: str, mode: int = 0o755) -> None:
    """A complete checkpoint at iteration 2 as reshape used to write it, with a ``values.pkl`` that makes
    ``marker`` when unpickled."""
    if not os.path.isdir(directory):
        os.mkdir(directory, mode)
    ck = os.path.join(directory, "ckpt-00000002")
    os.mkdir(ck, 0o755)
    with open(os.path.join(ck, "meta.json"), "w") as f:
        json.dump({"iteration": 2, "size": 2, "job": "0", "time": 0.0, "arrays": {}}, f)
    with open(os.path.join(ck, "values.pkl"), "wb") as f:
        pickle.dump({"count": _Planted(marker)}, f)


@pytest.fixture
def shared():
    """A directory every user may write (mode 1777, like /tmp), outside pytest's private tmp_path."""
    d = tempfile.mkdtemp(prefix="reshape-shared-", dir="/tmp")
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def refused(res, *words: str) -> list[str]:
    lines = [ln for ln in res.stderr.splitlines() if all(w in ln for w in words)]
    assert res.returncode != 0 and len(lines) == 1, res.stderr
    return lines


def test_values_go_to_json_and_hdf5_and_come_back_with_their_types(tmp_path):
    values = {"n": 3, "x": 0.1, "big": 2 ** 70, "s": "é", "none": None, "yes": True, "l": [1, [2.5, "a"]],
              "t": (1, (None, "b")), "d": {"k": {"z": [np.int8(1)]}}, "a": np.arange(6, dtype=np.int32).reshape(2, 3),
              "i": np.int64(7), "f": np.float32(1.5), "c": np.complex64(1 - 2j), "nan": float("nan"), "b": np.bool_(1)}
    tree, arrays = ckptfiles.encode(values)
    (tmp_path / "meta.json").write_text(json.dumps({"values": tree}))
    ckptfiles.write_arrays(str(tmp_path), arrays)
    _, back = ckptfiles.read_meta(str(tmp_path))
    assert repr(back) == repr(values)
    assert {k: type(v) for k, v in back.items()} == {k: type(v) for k, v in values.items()}
    assert back["a"].dtype == np.int32 and back["d"]["k"]["z"][0].dtype == np.int8


@pytest.mark.parametrize("value,says", [({1}, "value 'v' of type set"), (b"x", "value 'v' of type bytes"),
                                        ([1, object()], "value 'v'[1] of type object"),
                                        ({"k": {2: 1}}, "value 'v'['k'] cannot be written to a checkpoint: its key 2"),
                                        (np.array([None]), "value 'v', a numpy array of dtype object")])
def test_a_value_no_checkpoint_may_hold_is_named_with_what_is_allowed(value, says):
    with pytest.raises(ckptfiles.ValueRefused, match=re.escape(says)) as e:
        ckptfiles.encode({"v": value})
    assert ckptfiles.ALLOWED in str(e.value)


def test_a_value_file_holding_anything_but_numbers_is_refused(tmp_path):
    with h5py.File(tmp_path / "values.h5", "w") as f:
        f.create_dataset("v0", data=np.array([b"x"], dtype=h5py.string_dtype()))
    (tmp_path / "meta.json").write_text(json.dumps({"values": {"dict": {"a": {"array": "v0"}}}}))
    with pytest.raises(ValueError, match="not a numeric dataset"):
        ckptfiles.read_meta(str(tmp_path))


@pytest.mark.procs
def test_a_resumed_job_gets_its_values_back_without_pickle_from_a_private_directory(mpirun, tmp_path):
    whole = re.search(r"values .*", mpirun(2, [*VALUES, "--steps", "6"]).stdout).group(0)
    ck = tmp_path / "ck"
    env = {"RESHAPE_CHECKPOINT": "every:2", "RESHAPE_CHECKPOINT_DIR": str(ck)}
    mpirun(2, [*VALUES, "--steps", "4"], env=env)
    assert stat.S_IMODE(os.stat(ck).st_mode) == 0o700
    files = {f for d in os.listdir(ck) for f in os.listdir(ck / d)}
    assert "values.h5" in files and not [f for f in files if f.endswith(".pkl")], files
    res = mpirun(3, [*VALUES, "--steps", "6"], env=env)
    assert "resuming at iteration 4" in res.stderr
    assert re.search(r"values .*", res.stdout).group(0) == whole


@pytest.mark.procs
@pytest.mark.parametrize("bad", ["set", "object", "intkey", "strarray"])
def test_a_value_no_checkpoint_may_hold_stops_the_job_at_its_first_checkpoint_with_one_line(mpirun, tmp_path, bad):
    res = mpirun(2, [*VALUES, "--steps", "4", "--bad", bad], check=False,
                 env={"RESHAPE_CHECKPOINT": "every:2", "RESHAPE_CHECKPOINT_DIR": str(tmp_path / "ck")})
    (line,) = refused(res, "checkpoint at iteration 2: value 'bad'")
    assert "allowed: None, bool, int, float, str" in line


@pytest.mark.procs
def test_a_checkpoint_in_the_old_pickle_format_is_refused_unread(mpirun, tmp_path):
    ck, marker = tmp_path / "ck", str(tmp_path / "ran")
    plant(str(ck), marker, 0o700)
    res = mpirun(2, [*VALUES, "--steps", "4"], check=False,
                 env={"RESHAPE_CHECKPOINT": "every:2", "RESHAPE_CHECKPOINT_DIR": str(ck)})
    refused(res, "holds values.pkl, written by an older reshape")
    assert not os.path.exists(marker)


@pytest.mark.procs
def test_a_checkpoint_directory_others_may_write_is_refused(mpirun, tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    os.chmod(ck, 0o777)
    res = mpirun(2, [*VALUES, "--steps", "4"], check=False,
                 env={"RESHAPE_CHECKPOINT": "every:2", "RESHAPE_CHECKPOINT_DIR": str(ck)})
    refused(res, f"RESHAPE_CHECKPOINT_DIR='{ck}'", "writable by group or others (mode 0777)")
    assert os.listdir(ck) == []


@needs_root
@pytest.mark.procs
@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_a_checkpoint_another_user_planted_in_a_shared_directory_never_runs(mpirun, shared, tmp_path, where):
    """uid 65534 prepares ``reshape-checkpoints`` (the default, relative directory) in a shared working
    directory, or the directory a job names, with a checkpoint whose values would run code: refused."""
    marker = str(tmp_path / "ran")
    planted = os.path.join(shared, "reshape-checkpoints")
    as_user(NOBODY, lambda: plant(planted, marker))
    env = {"RESHAPE_CHECKPOINT": "every:2", **({"RESHAPE_CHECKPOINT_DIR": planted} if where == "absolute" else {})}
    res = mpirun(2, [*VALUES, "--steps", "4"], check=False, env=env, cwd=shared)
    refused(res, f"{planted} is owned by uid {NOBODY}, not by the job's user (uid {os.geteuid()})")
    assert not os.path.exists(marker)


@needs_root
@pytest.mark.procs
def test_a_checkpoint_another_user_wrote_into_the_jobs_own_directory_is_refused(mpirun, shared, tmp_path):
    """The job's directory was open to others for a while: the checkpoint uid 65534 left there is refused."""
    ck, marker = os.path.join(shared, "ck"), str(tmp_path / "ran")
    os.mkdir(ck, 0o700)
    os.chmod(ck, 0o777)
    as_user(NOBODY, lambda: plant(ck, marker, 0o777))
    os.chmod(ck, 0o700)
    res = mpirun(2, [*VALUES, "--steps", "4"], check=False,
                 env={"RESHAPE_CHECKPOINT": "every:2", "RESHAPE_CHECKPOINT_DIR": str(ck)})
    refused(res, f"checkpoint {ck}/ckpt-00000002 was written by another user", f"owned by uid {NOBODY}")
    assert not os.path.exists(marker)


@needs_root
@pytest.mark.procs
def test_the_daemon_refuses_a_job_directory_another_user_made_in_a_shared_checkpoint_root(daemon, shared, tmp_path):
    """``--checkpoint-root`` is world-writable; uid 65534 made ``job-1`` there (mode 0777) with a
    checkpoint whose values would run code: the job fails to start, saying why, and nothing runs."""
    marker = str(tmp_path / "ran")
    as_user(NOBODY, lambda: plant(os.path.join(shared, "job-1"), marker, 0o777))
    d = daemon(2, remap="static", extra=("--checkpoint-root", shared))
    from tests.helpers import wait_for

    jid = d.submit(name="planted", command=["python", *VALUES, "--steps", "4"], nprocs=2, resizable=False,
                   checkpoint="every:2")
    assert jid == 1
    j = wait_for(lambda: (j := d.job(jid))["state"] in ("done", "failed") and j, 60, every=0.2)
    assert j["state"] == "failed" and f"job-1 is owned by uid {NOBODY}, not by the job's user" in j["error"], j
    assert not os.path.exists(marker)
