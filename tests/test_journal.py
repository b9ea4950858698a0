"""Journal: a state reloaded from SQLite has the same queue, jobs, profiles and pool usage."""

from __future__ import annotations

import json
from dataclasses import replace

from scheduler.core import events as C
from scheduler.core.jobfile import validate_job
from scheduler.core.policy import app_policy, remap_policy
from scheduler.core.pool import default_pool
from scheduler.core.state import ClusterState
from scheduler.daemon.journal import Journal


def test_roundtrip(tmp_path):
    st = ClusterState(default_pool(6), app_policy("fcfs"), remap_policy("reshape"))
    a = st.submit(validate_job({"command": ["x"], "nprocs": 2}), 0.0)
    b = st.submit(validate_job({"command": ["y"], "nprocs": 6}), 0.0)
    st.tick(0.0)
    st.launched(a, 1234)
    adv = st.handle(C.ResizePoint(job_id=a, iteration=1, nprocs=2, iter_time=1.5), 1.0)[0]
    assert adv.action == "shrink" or adv.action == "continue"  # b waits; a has no shrink point
    j = Journal(str(tmp_path / "j.sqlite"))
    j.save(list(st.jobs.values()), st.events, {"next_id": st.next_id})
    j.close()

    j = Journal(str(tmp_path / "j.sqlite"))
    jobs, meta = j.load()
    st2 = ClusterState(default_pool(6), app_policy("fcfs"), remap_policy("reshape"))
    st2.restore(jobs, meta["next_id"])
    st2.validate()
    assert st2.jobs[a].state == "running" and st2.jobs[a].sid == 1234
    assert st2.jobs[a].profile.iter_time == {2: 1.5}
    assert [q.job_id for q in st2.queue()] == [b]
    assert st2.pool.free == 4 and st2.next_id == 3
    assert [e["kind"] for e in j.history()] == ["submit", "submit", "start"]


def test_background_checkpoints_keep_the_wal_small(tmp_path):
    """Commits never checkpoint themselves; the WAL is rewound when idle or past its limit."""
    import os
    import time

    path = str(tmp_path / "j.sqlite")
    st = ClusterState(default_pool(4), app_policy("fcfs"), remap_policy("static"))
    j = Journal(path, checkpoint_every=0.05)
    assert j.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    for i in range(600):
        st.submit(validate_job({"command": ["x", "y" * 2000], "nprocs": 1, "name": f"j{i}"}), float(i))
        j.save([st.jobs[k] for k in sorted(st.dirty)], st.events, {"next_id": st.next_id})
        st.dirty.clear()
        st.events = []
    time.sleep(0.3)  # the background checkpointer has seen the WAL
    grown = os.path.getsize(path + "-wal")
    j.wal_limit_pages = 1 << 20
    j.idle(force=True)  # under the limit: nothing happens
    assert os.path.getsize(path + "-wal") == grown > 1 << 20
    j.wal_limit_pages = 100
    j.idle(force=True)  # over the limit: rewound and truncated
    assert os.path.getsize(path + "-wal") == 0
    st.submit(validate_job({"command": ["x"], "nprocs": 1}), 600.0)
    j.save([st.jobs[k] for k in sorted(st.dirty)], st.events, {"next_id": st.next_id})
    time.sleep(0.2)
    j.idle()  # the daemon found no request: rewind
    assert os.path.getsize(path + "-wal") == 0
    j.close()
    j = Journal(path)
    jobs, meta = j.load()
    j.close()
    assert len(jobs) == 601 and meta["next_id"] == 602


# a job description exactly as ``validate_job`` returned it when it was a dict, and so as the journal and
# ``submit`` bodies hold it (key order included)
OLD_DESC = {"name": "app", "command": ["python", "app.py", "--n", "8"], "nprocs": 2, "min_procs": 1,
            "max_procs": 8, "sizes": [2, 4, 8], "divides": None, "topology": "1d", "resizable": True,
            "walltime": 60.0, "arrival_delay": 0.0, "launch": "mpi", "env": {"A": "1"}, "iterations": 20,
            "resize_timeout": 120.0, "checkpoint": "every:5", "checkpoint_dir": None, "max_restarts": 3,
            "mpi": "mpich"}


def test_job_descriptions_serialise_as_before_and_old_rows_load(tmp_path):
    desc = validate_job({"name": "app", "command": ["python", "app.py", "--n", "8"], "nprocs": 2, "max_procs": 8,
                         "sizes": [8, 4, 2, 4], "walltime": 60, "env": {"A": "1"}, "iterations": 20,
                         "checkpoint": "every:5", "mpi": "mpich"})
    assert list(desc.to_dict().items()) == list(OLD_DESC.items())
    assert "mpi" not in validate_job({"command": ["x"], "nprocs": 1}).to_dict()
    st = ClusterState(default_pool(4), app_policy("fcfs"), remap_policy("static"))
    a = st.submit(desc, 0.0)
    old = {**st.jobs[a].to_dict(), "desc": dict(OLD_DESC)}
    # journaled before resize_timeout, checkpoints and restarts existed: no such fields
    legacy = {**old, "job_id": a + 1, "desc": {k: v for k, v in OLD_DESC.items()
                                               if k not in ("resize_timeout", "checkpoint", "checkpoint_dir",
                                                            "max_restarts", "mpi")}}
    j = Journal(str(tmp_path / "j.sqlite"))
    j.db.executemany("INSERT INTO jobs(job_id, state, record, end_time) VALUES (?, ?, ?, NULL)",
                     [(r["job_id"], r["state"], json.dumps(r)) for r in (old, legacy)])
    j.db.commit()
    j.close()
    j = Journal(str(tmp_path / "j.sqlite"))
    jobs, _ = j.load()
    j.close()
    back = {job.job_id: job for job in jobs}
    assert back[a].desc == desc and back[a].to_dict() == old
    assert back[a].desc.command == ("python", "app.py", "--n", "8") and back[a].desc.env["A"] == "1"
    d = back[a + 1].desc
    assert d.max_restarts == 0 and d.checkpoint is None and d.resize_timeout == 120.0 and d.mpi is None
    assert replace(back[a + 1].spec, job_id=a) == back[a].spec
