"""Journal: a state reloaded from SQLite has the same queue, jobs, profiles and pool usage."""

from __future__ import annotations

from scheduler.jobfile import validate_job
from scheduler.journal import Journal
from scheduler.policy import app_policy, remap_policy
from scheduler.pool import default_pool
from scheduler.state import ClusterState


def test_roundtrip(tmp_path):
    st = ClusterState(default_pool(6), app_policy("fcfs"), remap_policy("reshape"))
    a = st.submit(validate_job({"command": ["x"], "nprocs": 2}), 0.0)
    b = st.submit(validate_job({"command": ["y"], "nprocs": 6}), 0.0)
    st.tick(0.0)
    st.launched(a, 1234)
    adv = st.resize_point(a, {"iteration": 1, "nprocs": 2, "iter_time": 1.5}, 1.0)
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
