"""Which parked ranks an expansion calls back (rank 0's choice, reshape.parking.Reserve.pick)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from reshape.parking import CallBack, Pool, Reserve

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
def test_pick_covers_what_it_can_from_one_pool_and_spawns_the_rest(res, n, data):
    hosts = data.draw(st.one_of(st.just([]), st.lists(st.sampled_from([*HOSTS, "n9"]), min_size=n, max_size=n)))
    cb = res.pick(n, hosts)
    if cb is None:  # nothing parked fits: every pool empty, or none on the hosts asked for
        if hosts:
            assert all(not set(p.parked.values()) & set(hosts) for p in res.pools)
        else:
            assert all(not p.parked for p in res.pools)
        return
    pool = res.pools[cb.pool].parked
    assert cb.members and len(set(cb.members)) == len(cb.members) and set(cb.members) <= set(pool)
    assert len(cb.members) + cb.rest == n
    if hosts:  # each called-back rank is on a host asked for, the rest go to the hosts left over
        assert Counter(pool[r] for r in cb.members) + Counter(cb.rest_hosts) == Counter(hosts)
    else:
        assert cb.rest_hosts == ()
    for p in res.pools:  # no other pool would have covered more
        could = (min(n, len(p.parked)) if not hosts
                 else sum((Counter(p.parked.values()) & Counter(hosts)).values()))
        assert could <= len(cb.members)


def test_pick_examples():
    res = Reserve([Pool(None, {4: "n1", 5: "n2"}), Pool(None, {2: "n2", 3: "n2"})])
    assert res.pick(2, ["n2", "n2"]) == CallBack(1, (2, 3), 0, ())  # the most recent pool that covers all
    assert res.pick(3, ["n1", "n2", "n3"]) == CallBack(0, (4, 5), 1, ("n3",))  # most covered; n3 spawned
    assert res.pick(4, []) == CallBack(1, (2, 3), 2, ())  # a tie: the most recent pool
    assert res.pick(1, ["n3"]) is None
