"""Job-file mistakes get one message that says how to fix them (pure): the nearest field name, the
bounds that were checked, the type that was given, and what a command should look like."""

import pytest

from scheduler.core.jobfile import JobFileError, load_job_file, validate_job

BASE = {"command": ["python", "app.py"], "nprocs": 2}


@pytest.mark.parametrize("job, message", [
    ({**BASE, "max_proc": 4}, "unknown job field 'max_proc' (did you mean 'max_procs'?); known: arrival_delay, "),
    ({**BASE, "nproc": 2, "walltim": 9}, "unknown job fields 'nproc' (did you mean 'nprocs'?), 'walltim' (did "
                                         "you mean 'walltime'?)"),
    ({**BASE, "colour": "red"}, "unknown job field 'colour'; known: "),
    ({**BASE, "nprocs": 6, "min_procs": 2, "max_procs": 4}, "nprocs 6 outside [min_procs=2, max_procs=4]"),
    ({**BASE, "nprocs": 1, "min_procs": 2}, "nprocs 1 outside [min_procs=2, max_procs=the pool]"),
    ({**BASE, "max_procs": "4"}, "'max_procs' must be an integer >= 1, got the string '4'"),
    ({**BASE, "max_procs": 4.0}, "'max_procs' must be an integer >= 1, got the number 4.0"),
    ({**BASE, "nprocs": 0}, "'nprocs' must be an integer >= 1, got 0"),
    ({**BASE, "max_restarts": -1}, "'max_restarts' must be an integer >= 0, got -1"),
    ({**BASE, "max_procs": 2**40}, "'max_procs' must be at most 2,147,483,647 (more is a mistake, not a cluster)"),
    ({"nprocs": 2}, "'command' is required: the program and its arguments as a list of strings, e.g. "
                    'command = ["python", "app.py"]'),
    ({**BASE, "command": "python -m apps.lu --n 512"}, "'command' must be a list of strings, not one string: "
                                                       'write command = ["python", "-m", "apps.lu", "--n", "512"]'),
    ({**BASE, "command": []}, "'command' must be a non-empty list of non-empty strings, got []"),
])
def test_message(job, message):
    with pytest.raises(JobFileError) as e:
        validate_job(job, 8)
    assert message in str(e.value), str(e.value)
    assert "2147483648" not in str(e.value) and "[1, " not in str(e.value)


def test_job_file_message_names_the_file(tmp_path):
    f = tmp_path / "job.toml"
    f.write_text('command = ["python", "app.py"]\nnprocs = 2\nmax_proc = 4\n')
    with pytest.raises(JobFileError, match=r"job\.toml: unknown job field 'max_proc' \(did you mean 'max_procs'\?\)"):
        load_job_file(str(f), 8)
