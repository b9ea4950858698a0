"""``python -m benchmarks.reproduce --quick``: every row of docs/reproduction.md, run small, keeps its verdict."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from reshape.joblink.launch import kill_session
from tests.helpers import ROOT

pytestmark = [pytest.mark.procs, pytest.mark.slow]


@pytest.mark.timeout(1200)
def test_every_reproduction_row_keeps_its_verdict():
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.reproduce", "--quick"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=1100)
    finally:
        kill_session(proc.pid)  # whatever a failed run left behind (daemons, mpiexec)
    summary = json.loads(out.strip().splitlines()[-1])
    bad = summary["verdicts_that_no_longer_hold"]
    assert proc.returncode == 0, f"rows that no longer hold: {bad}\n{out}\n{err[-3000:]}"
    assert summary["rows"] == summary["agrees"] + summary["agrees in shape"] + summary["differs"] \
        + summary["not attempted"]


def test_the_document_lists_every_row():
    from benchmarks.reproduce import ROWS

    with open(f"{ROOT}/docs/reproduction.md") as f:
        doc = f.read().replace("–", "-").replace("→", "->")
    for row in ROWS:
        assert row.item.split(":")[0] in doc, row.item
