"""SWF reader: variants of the shared traces, and clear errors naming file and line."""

from __future__ import annotations

import pytest

from scheduler.lab.jobmodel import from_trace
from scheduler.lab.swf import SwfError, read_swf, trace_unit

HEAD = "; Version: 2\n; MaxProcs: 64\n;\n"


def _write(tmp_path, text, name="t.swf"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_space_and_tab_separated_and_unknown_fields(tmp_path):
    sp = HEAD + "1 0 -1 100 4 -1 -1 -1 200 -1 1 -1 -1 -1 0 -1 -1 -1\n" \
        "2    50 -1   30  -1 -1 -1 8 -1 -1 1 -1 -1 -1 0 -1 -1 -1   \n"
    tab = sp.replace(" -1", "\t-1")
    for text in (sp, tab):
        tr = read_swf(_write(tmp_path, text))
        assert [j.procs for j in tr.jobs] == [4, 8]  # allocated, else requested
        assert tr.jobs[0].req_time == 200 and tr.jobs[1].req_time is None
        assert tr.max_procs == 64 and tr.header["Version"] == "2"


def test_estimate_in_cpu_time_column_and_skips(tmp_path):
    text = HEAD + "1 0 5 100 4 150 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n" \
        "2 9 -1 -1 4 -1 -1 -1 -1 -1 0 -1 -1 -1 0 -1 -1 -1\n" \
        "3 5 -1 10 4\n"
    tr = read_swf(_write(tmp_path, text))
    assert tr.jobs[0].req_time == 150  # Mira variant
    assert tr.skipped == 1 and len(tr.jobs) == 2
    assert [j.job_id for j in tr.jobs] == [1, 3]


@pytest.mark.parametrize(
    "line, what",
    [("1 0 -1 abc 4", "field 4"), ("1 0 -1", "at least 5"), ("1 " * 19, "at most 18"),
     ("1 -5 -1 10 4", "negative submit"), ("1 0 -1 10 128", "more than the machine")],
)
def test_malformed_line_names_file_and_line(tmp_path, line, what):
    path = _write(tmp_path, HEAD + "1 0 -1 10 4\n" + line + "\n")
    with pytest.raises(SwfError) as e:
        read_swf(path)
    assert path in str(e.value) and what in str(e.value)
    if "machine" not in what:
        assert ":5:" in str(e.value)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(SwfError, match="cannot open"):
        read_swf(str(tmp_path / "nope.swf"))
    with pytest.raises(SwfError, match="no runnable jobs"):
        read_swf(_write(tmp_path, HEAD))


def test_units_load_and_malleable_fraction(tmp_path):
    lines = [f"{i} {i * 100} -1 50 {512 * (1 + i % 3)} -1 -1 -1 60" for i in range(40)]
    lines.append("99 9999 -1 50 100 -1 -1 -1 60")  # a small job rounds up to one block
    tr = read_swf(_write(tmp_path, "; MaxNodes: 49152\n" + "\n".join(lines) + "\n"))
    assert trace_unit(tr) == 512
    jobs, slots = from_trace(tr, load=2.0, malleable_fraction=0.5, seed=1)
    assert slots == 96
    assert jobs[1].spec.submit_time == pytest.approx(50.0)  # 100 s apart / load 2
    assert jobs[-1].spec.nprocs == 1
    n_mall = sum(j.spec.resizable for j in jobs)
    assert 0 < n_mall < len(jobs)
    again, _ = from_trace(tr, load=2.0, malleable_fraction=0.5, seed=1)
    assert again == jobs  # reproducible from the seed
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="load"):
            from_trace(tr, load=bad)
    with pytest.raises(ValueError, match="malleable"):
        from_trace(tr, malleable_fraction=1.5)


def test_shared_traces_read():
    import os

    d = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "traces")
    if not os.path.isdir(d):
        pytest.skip("shared traces not present")
    tr = read_swf(os.path.join(d, "mira.swf"), max_jobs=500)
    assert trace_unit(tr) == 512 and tr.max_procs == 49152
    tr = read_swf(os.path.join(d, "lublin_256.swf"), max_jobs=500)
    assert trace_unit(tr) == 1 and tr.max_procs == 256
