"""The README's "Write a resizable program" snippets, run exactly as printed.

The Python block is written to a file unchanged and run under ``mpiexec -n 2``,
statically and along a scripted plan; the shell block's command lines are run
by ``bash`` from the repository root with this environment's ``bin`` first on
``PATH`` (so ``python`` and ``mpiexec`` are the installed ones). Every process
of a run carries a tag and is killed afterwards, as in the ``mpirun`` fixture.
"""

import os
import re
import subprocess
import sys

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


def test_run_commands_as_printed_give_the_same_field():
    blocks = [text for lang, text in section_blocks("Write a resizable program") if lang == "sh"]
    lines = [ln for ln in blocks[0].splitlines() if ln.strip()]
    assert lines == ["mpiexec -n 2 python examples/heat.py",
                     "RESHAPE_PLAN=2,4,3,5,1 RESHAPE_ALLOW_NEW_SIZES=1 mpiexec -n 2 python examples/heat.py"]
    digests = []
    for line in lines:
        res = sh(line)
        assert res.returncode == 0, res.stderr
        m = re.search(r"sizes \[([\d, ]+)\] sha256 (\w+)", res.stdout)
        assert m, res.stdout + res.stderr
        digests.append((m.group(1), m.group(2)))
    assert [d[0] for d in digests] == ["2", "2, 4, 3, 5, 1"]
    assert digests[0][1] == digests[1][1]
    assert "asks for up to 5 processes on a machine with" in res.stderr or len(os.sched_getaffinity(0)) >= 5


def test_import_reshape_exports_the_runtime_lazily():
    code = ("import sys, reshape.redistribution.layout; assert 'mpi4py.MPI' not in sys.modules; import reshape; "
            "assert 'reshape.runtime' not in sys.modules; print(reshape.init.__module__, reshape.UsageError.__name__)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.split() == ["reshape.runtime.resizer", "UsageError"], res.stderr


def test_resizable_application_command_as_printed():
    (block,) = [text for lang, text in section_blocks("Resizable applications") if lang == "sh"]
    assert block.strip() == "RESHAPE_PLAN=2,4,6,4 mpiexec -n 2 python -m apps.lu --n 512 --iters 5"
    res = sh(block, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "sizes [2, 4, 6, 4, 4, 4] final size 4" in res.stdout and "result OK" in res.stdout


def test_scheduler_snippet_as_printed(tmp_path):
    """The "Run the scheduler" block as one script, in a scratch directory (for alloc.png) that sees the
    repository's examples, with its own state directory (the default endpoint lives there)."""
    (block,) = [text for lang, text in section_blocks("Run the scheduler") if lang == "sh"]
    os.symlink(os.path.join(ROOT, "examples"), tmp_path / "examples")
    state = tmp_path / "state"
    # 'reshape stop' leaves running jobs running (as the README says): the job may outlive the script
    res = sh(block + "wait\n", timeout=120, cwd=str(tmp_path), env={"RESHAPE_STATE_DIR": str(state)},
             allow_left=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"reshape daemon on ipc://{state}/daemon.sock: 8 slots" in res.stdout
    assert "submitted job 1" in res.stdout and "8 slots free" in res.stdout and "hello" in res.stdout
    assert "wrote alloc.png" in res.stdout and (tmp_path / "alloc.png").stat().st_size > 0
    assert "daemon stopping" in res.stdout
