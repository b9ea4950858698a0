"""What ranks print reaches the job's log line by line: under the daemon (real ``mpiexec``, 4 ranks on one
slot each) a program that ``print``s many lines of several pieces from every rank at once finds each of its
lines whole in the log. Jobs run with ``PYTHONUNBUFFERED=1`` (``reshape.joblink.launch.mpi_env``: nothing is
held back or lost when a rank dies), where ``print('a', r)`` is one ``write`` per piece and the pieces of
several ranks interleave; ``reshape.init()`` makes each line one ``write``
(``reshape.runtime.start.whole_lines``).
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from tests.helpers import wait_for

pytestmark = pytest.mark.procs

LINES = 300
TALK = f"""
import sys
import reshape
rt = reshape.init()
for i in range({LINES}):
    print("line", rt.rank, i, "of", {LINES}, "x" * 40)
    print("err", rt.rank, i, file=sys.stderr)
rt.finish()
"""
WHOLE = re.compile(rf"^(line (\d) (\d+) of {LINES} x{{40}}|err (\d) (\d+))$")


def test_lines_printed_by_several_ranks_reach_the_log_whole(daemon):
    d = daemon(4)
    jid = d.submit(name="talk", command=[sys.executable, "-c", TALK], nprocs=4, resizable=False)
    job = wait_for(lambda: (j := d.job(jid))["state"] in ("done", "failed") and j, 120, every=0.2)
    assert job["state"] == "done", job
    with open(os.path.join(d.state_dir, "logs", f"job-{jid}.log")) as f:  # all of it (``log`` sends the last 32 KiB)
        text = f.read()
    mine = [ln for ln in text.splitlines() if "line" in ln or "err" in ln or "x" in ln]
    broken = [ln for ln in mine if not WHOLE.match(ln)]
    assert not broken, f"{len(broken)} lines garbled, e.g. {broken[:5]}"
    for what in ("line", "err"):
        got = sorted((int(m[1]), int(m[2])) for m in re.finditer(rf"^{what} (\d) (\d+)", text, re.M))
        assert got == [(r, i) for r in range(4) for i in range(LINES)], what
