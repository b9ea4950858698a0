"""What a checkpoint is on disk, and what the runtime trusts there: no pickle, only the job's user's files.

A checkpoint directory may sit where other users can reach it (a relative ``checkpoint_dir`` in a
shared working directory, a site's ``--checkpoint-root``), so nothing in it is trusted that the
kernel cannot vouch for:

* **Values without code.** The registered values (``rt[name] = value``) are written as JSON (``meta.json``,
  key ``values``) with numpy arrays and scalars as HDF5 datasets (``values.h5``): formats whose
  reading runs no code. Allowed: ``None``, ``bool``, ``int``, ``float``, ``str``, lists, tuples and
  dicts with ``str`` keys of these, and numpy arrays and scalars of bool, integer, float or complex
  dtype. Anything else is refused when the checkpoint is taken, naming the value (:func:`encode`).
  Nothing is ever unpickled; a checkpoint holding ``values.pkl`` (an older format) is refused.
* **Owned by the job's user.** A checkpoint directory is used only if it (and, when it is a symbolic
  link, the link) belongs to the user the job runs as and is not writable by group or others
  (:func:`dir_problem`); one that does not exist is made with ``mkdir`` mode 0700. Every file of a
  checkpoint read back must belong to that user too (:func:`checkpoint_problem`). Anything else is one
  line naming the path, its owner or mode, and what is required.
"""

from __future__ import annotations

import json
import os
import stat

import numpy as np

__all__ = ["ALLOWED", "OLD_FORMAT", "ValueRefused", "checkpoint_problem", "decode", "dir_problem", "encode",
           "make_dir", "read_arrays", "write_arrays"]

ALLOWED = ("None, bool, int, float, str, lists, tuples and dicts with str keys of these, and numpy arrays and "
           "scalars of bool, integer, float or complex dtype")
OLD_FORMAT = "values.pkl"  # how reshape wrote values before: refused, never read
VALUES_FILE = "values.h5"
NUMERIC = "biufc"  # numpy dtype kinds a checkpoint holds


class ValueRefused(ValueError):
    """A registered value a checkpoint cannot hold (the message names it and what is allowed)."""


# ---------------------------------------------------------------------- values
def encode(values: dict) -> tuple[dict, dict[str, np.ndarray]]:
    """``values`` as a JSON-able tree and the numpy arrays it refers to (``{"array": key}``)."""
    arrays: dict[str, np.ndarray] = {}

    def enc(v, where: str):
        if v is None or isinstance(v, bool | str):
            return v
        if isinstance(v, int | float) and not isinstance(v, np.generic):
            return v
        if isinstance(v, np.ndarray | np.generic):
            if v.dtype.kind not in NUMERIC:
                raise ValueRefused(f"value {where}, a numpy {'array' if isinstance(v, np.ndarray) else 'scalar'} "
                                   f"of dtype {v.dtype}, cannot be written to a checkpoint (allowed: {ALLOWED})")
            key = f"v{len(arrays)}"
            arrays[key] = np.asarray(v)
            return {"array" if isinstance(v, np.ndarray) else "scalar": key}
        if isinstance(v, list):
            return [enc(x, f"{where}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, tuple):
            return {"tuple": [enc(x, f"{where}[{i}]") for i, x in enumerate(v)]}
        if isinstance(v, dict):
            bad = next((k for k in v if not isinstance(k, str)), None)
            if bad is not None:
                raise ValueRefused(f"value {where} cannot be written to a checkpoint: its key {bad!r} is of type "
                                   f"{type(bad).__name__}, not str (allowed: {ALLOWED})")
            return {"dict": {k: enc(x, f"{where}[{k!r}]") for k, x in v.items()}}
        raise ValueRefused(f"value {where} of type {type(v).__name__} cannot be written to a checkpoint (allowed: "
                           f"{ALLOWED})")

    tree = {"dict": {name: enc(v, repr(name)) for name, v in values.items()}}
    return tree, arrays


def decode(tree, arrays: dict[str, np.ndarray]):
    """The values :func:`encode` wrote; ValueError for anything it never writes."""
    if tree is None or isinstance(tree, bool | int | float | str):
        return tree
    if isinstance(tree, list):
        return [decode(x, arrays) for x in tree]
    if isinstance(tree, dict) and len(tree) == 1:
        (tag, body), = tree.items()
        if tag == "tuple" and isinstance(body, list):
            return tuple(decode(x, arrays) for x in body)
        if tag == "dict" and isinstance(body, dict):
            return {k: decode(x, arrays) for k, x in body.items()}
        if tag in ("array", "scalar") and body in arrays:
            a = arrays[body]
            return a if tag == "array" else a[()]
    raise ValueError(f"not a value this runtime writes: {str(tree)[:80]!r}")


def write_arrays(path: str, arrays: dict[str, np.ndarray]) -> None:
    """The values' numpy arrays into ``path/values.h5`` (nothing when there are none)."""
    if not arrays:
        return
    import h5py

    with h5py.File(os.path.join(path, VALUES_FILE), "w") as f:
        for k, a in arrays.items():
            f.create_dataset(k, data=a)


def read_arrays(path: str) -> dict[str, np.ndarray]:
    """The arrays of ``path/values.h5`` (numeric datasets only; ValueError for anything else)."""
    file = os.path.join(path, VALUES_FILE)
    if not os.path.exists(file):
        return {}
    import h5py

    out = {}
    with h5py.File(file, "r") as f:
        for k, d in f.items():
            if not isinstance(d, h5py.Dataset) or d.dtype.kind not in NUMERIC:
                raise ValueError(f"{file}: {k!r} is not a numeric dataset")
            out[k] = d[()]
    return out


# ---------------------------------------------------------------------- ownership
def _mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):04o}"


def dir_problem(path: str, uid: int | None = None) -> str | None:
    """Why directory ``path`` must not hold the checkpoints of user ``uid`` (default: this process's) (its or
    its link's owner, its mode), or None; a missing directory is no problem (:func:`make_dir` makes it)."""
    me = os.geteuid() if uid is None else uid
    try:
        lst = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"{path}: {e.strerror or e}"
    if stat.S_ISLNK(lst.st_mode) and lst.st_uid != me:
        return (f"{path} is a symbolic link made by uid {lst.st_uid}, not by the job's user (uid {me}): refusing "
                "to use it as a checkpoint directory")
    try:
        st = os.stat(path)
    except OSError as e:
        return f"{path}: {e.strerror or e}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != me:
        return (f"{path} is owned by uid {st.st_uid}, not by the job's user (uid {me}): refusing to use it as a "
                "checkpoint directory (choose another checkpoint directory)")
    if st.st_mode & 0o022:
        return (f"{path} is writable by group or others (mode {_mode(st)}): refusing to use it as a checkpoint "
                f"directory (chmod go-w {path}, or choose another)")
    return None


def make_dir(path: str) -> str | None:
    """Check ``path`` (:func:`dir_problem`) and make it if missing (mode 0700); a problem, or None."""
    problem = dir_problem(path)
    if problem is not None:
        return problem
    if not os.path.lexists(path):
        parent = os.path.dirname(path)
        try:
            if parent:
                os.makedirs(parent, exist_ok=True)
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass  # another rank made it meanwhile: checked again below
        except OSError as e:
            return f"cannot make {path}: {e.strerror or e}"
        problem = dir_problem(path)
    if problem is None and not os.access(path, os.W_OK):
        problem = f"{path} is not writable"
    return problem


def checkpoint_problem(path: str) -> str | None:
    """Why the complete checkpoint ``path`` must not be read (another user's file in it, the old pickle
    format), or None."""
    me = os.geteuid()
    try:
        names = os.listdir(path)
        owners = {n: os.lstat(os.path.join(path, n)).st_uid for n in names}
        owners["."] = os.lstat(path).st_uid
    except OSError as e:
        return f"checkpoint {path}: {e.strerror or e}"
    foreign = sorted((n, u) for n, u in owners.items() if u != me)
    if foreign:
        n, u = foreign[0]
        what = path if n == "." else os.path.join(path, n)
        return (f"checkpoint {path} was written by another user ({what} is owned by uid {u}, the job runs as uid "
                f"{me}): refusing to read it")
    if OLD_FORMAT in names:
        return (f"checkpoint {path} holds {OLD_FORMAT}, written by an older reshape that pickled the values: "
                "refusing to read it (pickle can run code); remove it, or start the job afresh")
    return None


def read_meta(path: str) -> tuple[dict, dict]:
    """``meta.json`` of checkpoint ``path`` and the values it holds (decoded; never unpickled)."""
    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)
    if not isinstance(meta, dict):
        raise ValueError(f"{path}/meta.json is not a JSON object")
    values = decode(meta.get("values", {"dict": {}}), read_arrays(path))
    if not isinstance(values, dict):
        raise ValueError(f"{path}/meta.json: 'values' is not a table of values")
    return meta, values
