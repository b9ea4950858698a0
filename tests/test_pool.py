"""The slot pool's allocation: first on the hosts a job prefers (its parked ranks), then first fit."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.pool import Node, Pool, PoolError

HOSTS = ["a", "b", "c", "d"]


@st.composite
def pools(draw):
    slots = draw(st.lists(st.integers(1, 4), min_size=1, max_size=len(HOSTS)))
    pool = Pool([Node(h, s) for h, s in zip(HOSTS, slots, strict=False)])
    for node in pool.nodes:
        pool.used[node.host] = draw(st.integers(0, node.slots))
    if draw(st.booleans()):
        pool.set_draining(draw(st.sampled_from([n.host for n in pool.nodes])))
    return pool


def first_fit(pool: Pool, n: int) -> list[str]:
    """The allocation without a preference, computed independently: free slots in node order."""
    free = [n.host for n in pool.nodes if n.host not in pool.draining for _ in range(n.slots - pool.used[n.host])]
    return free[:n]


@settings(max_examples=300, deadline=None)
@given(pools(), st.data())
def test_allocate_prefers_the_named_hosts_then_fills_first_fit(pool, data):
    if pool.free == 0:
        with pytest.raises(PoolError, match="cannot allocate 1 slots"):
            pool.allocate(1)
        return
    n = data.draw(st.integers(1, pool.free))
    prefer = data.draw(st.lists(st.sampled_from([*HOSTS, "elsewhere"]), max_size=6))
    free = {node.host: (0 if node.host in pool.draining else node.slots - pool.used[node.host])
            for node in pool.nodes}
    used = Counter(pool.used)
    expect_plain = first_fit(pool, n)
    out = pool.allocate(n, prefer=prefer)
    got = Counter(out)
    assert len(out) == n
    assert all(got[h] <= free[h] for h in got)  # never more than a node's free slots, never a draining node
    assert pool.used == used + got  # the slots handed out are marked used
    want = Counter(h for h in prefer if h in free)
    covered = {h: min(k, free[h]) for h, k in want.items()}
    if sum(covered.values()) <= n:  # room for every preferred slot: each is in the allocation
        assert all(got[h] >= k for h, k in covered.items())
    else:  # the preferred hosts alone fill it
        assert set(got) <= set(want)
    if not want:
        assert out == expect_plain


def test_allocate_examples():
    pool = Pool([Node("a", 2), Node("b", 2), Node("c", 2)])
    pool.used["a"] = 1
    assert pool.allocate(2, prefer=["c", "nowhere"]) == ["c", "a"]  # the preferred slot, then first fit
    assert pool.allocate(2) == ["b", "b"]
    assert pool.allocate(1, prefer=["b"]) == ["c"]  # b is full: first fit
