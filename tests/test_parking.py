"""Which parked ranks an expansion calls back, pool by pool (rank 0's choice, reshape.runtime.parking.Reserve.pick)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.runtime.parking import CallBack, Pool, Reserve, Step

HOSTS = ["n1", "n2", "n3"]


@st.composite
def reserves(draw):
    pools = []
    for _ in range(draw(st.integers(0, 3))):
        ranks = draw(st.lists(st.integers(1, 12), unique=True, max_size=5))
        pools.append(Pool(comm=None, parked={r: draw(st.sampled_from(HOSTS)) for r in ranks}))
    return Reserve(pools)


@settings(max_examples=300, deadline=None)
@given(reserves(), st.integers(1, 6), st.data())
def test_pick_covers_all_that_the_pools_can_and_spawns_the_rest(res, n, data):
    hosts = data.draw(st.one_of(st.just([]), st.lists(st.sampled_from([*HOSTS, "n9"]), min_size=n, max_size=n)))
    cb = res.pick(n, hosts)
    parked = Counter(h for p in res.pools for h in p.parked.values())
    can = min(n, sum(parked.values())) if not hosts else sum((parked & Counter(hosts)).values())
    if cb is None:  # nothing parked fits: every pool empty, or none on the hosts asked for
        assert can == 0
        return
    pools = [s.pool for s in cb.steps]
    assert len(set(pools)) == len(pools) and all(s.members for s in cb.steps)  # each pool once, none empty
    for step in cb.steps:
        assert len(set(step.members)) == len(step.members) and set(step.members) <= set(res.pools[step.pool].parked)
    assert [len(s.members) for s in cb.steps] == sorted((len(s.members) for s in cb.steps), reverse=True)
    assert len(cb.members) == can and len(cb.members) + cb.rest == n  # as many as any choice of pools covers
    if hosts:  # each called-back rank is on a host asked for, the rest go to the hosts left over
        on = Counter(res.pools[s.pool].parked[r] for s in cb.steps for r in s.members)
        assert on + Counter(cb.rest_hosts) == Counter(hosts)
    else:
        assert cb.rest_hosts == ()


def test_pick_examples():
    res = Reserve([Pool(None, {4: "n1", 5: "n2"}), Pool(None, {2: "n2", 3: "n2"})])
    assert res.pick(2, ["n2", "n2"]) == CallBack((Step(1, (2, 3)),))  # the most recent pool that covers all
    assert res.pick(3, ["n1", "n2", "n3"]) == CallBack((Step(0, (4, 5)),), 1, ("n3",))  # most covered; n3 spawned
    assert res.pick(4, []) == CallBack((Step(1, (2, 3)), Step(0, (4, 5))))  # a tie: the most recent pool first
    assert res.pick(3, ["n2", "n2", "n2"]) == CallBack((Step(1, (2, 3)), Step(0, (5,))))  # two pools
    assert res.pick(1, ["n3"]) is None
