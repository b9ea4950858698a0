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


def test_max_jobs_takes_the_first_jobs_by_submit_time(tmp_path):
    text = HEAD + "1 300 -1 10 4\n2 100 -1 10 4\n3 0 -1 10 4\n4 200 -1 10 4\n5 50 -1 10 4\n"
    path = _write(tmp_path, text)
    tr = read_swf(path, max_jobs=3)
    assert [j.job_id for j in tr.jobs] == [3, 5, 2]
    assert [j.job_id for j in read_swf(path).jobs] == [3, 5, 2, 4, 1]


def test_skipped_jobs_are_reported_with_the_first_line(tmp_path):
    text = HEAD + "1 0 -1 10 4\n2 5 -1 -1 4\n3 6 -1 10 -1\n4 7 -1 0 4\n5 8 -1 10 4\n"
    tr = read_swf(_write(tmp_path, text))
    assert tr.skipped == 3 and tr.skipped_first_line == 5
    assert len(tr.warnings) == 1
    assert "t.swf: 3 jobs skipped (run time or processors unknown or not positive), " \
        "first at line 5" in tr.warnings[0]
    # with max_jobs, the skipped jobs submitted before the last one kept
    head = read_swf(_write(tmp_path, text), max_jobs=1)
    assert head.skipped == 0 and head.skipped_first_line is None and head.warnings == ()
    clean = read_swf(_write(tmp_path, HEAD + "1 0 -1 10 4\n"))
    assert clean.skipped == 0 and clean.warnings == ()


def test_headerless_trace_warns_of_the_machine_size_assumed(tmp_path):
    tr = read_swf(_write(tmp_path, "1 0 -1 10 128\n2 5 -1 10 4\n3 9 -1 10 16\n"), max_jobs=1)
    assert tr.max_procs == 128  # the largest job of the file, whatever max_jobs
    assert any("no MaxProcs/MaxNodes header: assuming a machine of 128 processors, the largest job"
               in w for w in tr.warnings)


@pytest.mark.parametrize(
    "line, field",
    [("1 0 -1 2e9 4", "run time (field 4)"),
     ("1 0 -1 10 4 -1 -1 -1 1e10", "requested time (field 9)"),
     ("1 0 -1 10 2e8", "allocated processors (field 5)"),
     ("1 0 -1 10 -1 -1 -1 5e8", "requested processors (field 8)"),
     ("1 0 -1 -1 2e8", "allocated processors (field 5)"),  # refused even if it would be skipped
     ("1 0 -1 10 4 3e9", "average CPU time"),
     ("1 2e9 -1 10 4", "submit time (field 2)")],
)
def test_absurd_values_are_refused_naming_the_field_and_range(tmp_path, line, field):
    path = _write(tmp_path, HEAD + "1 0 -1 10 4\n" + line + "\n")
    with pytest.raises(SwfError) as e:
        read_swf(path)
    msg = str(e.value)
    assert f"{path}:5:" in msg and field in msg and "allowed" in msg
    assert "1e+09" in msg or "1e+08" in msg


def test_absolute_submit_times_are_fine(tmp_path):
    tr = read_swf(_write(tmp_path, HEAD + "1 1535348017 -1 10 4\n2 1535348117 -1 10 4\n"))
    assert len(tr.jobs) == 2 and tr.warnings == ()


def test_simulate_cli_prints_trace_warnings_and_takes_the_model_options(tmp_path, capsys):
    from scheduler.cli import main

    path = _write(tmp_path, "".join(f"{i} {i * 60} -1 {-1 if i == 3 else 300} {1 + i % 4}\n"
                                    for i in range(30)))
    argv = ["simulate", path, "--policy", "easy", "--policy", "reshape", "--json"]
    for extra in ([], ["--parallelism", "relative:0:2", "--estimates", "exact", "--step", "2"]):
        assert main(argv + extra) == 0
        err = capsys.readouterr().err
        assert f"reshape simulate: warning: {path}: 1 job skipped" in err and "first at line 4" in err
        assert "reshape simulate: warning: " + path + ": no MaxProcs/MaxNodes header: assuming " \
            "a machine of 4 processors" in err
    for bad in (["--parallelism", "relative:3:1"], ["--step", "0"]):
        assert main(argv + bad) == 2
        assert "reshape simulate: error: " in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*argv, "--estimates", "perfect"])
    assert "invalid choice" in capsys.readouterr().err
