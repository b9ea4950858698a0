"""The sizes a job's runtime accepts (Resizer.legal_sizes) and their announcement in hello.

One process (MPI.COMM_SELF); nothing is resized, so no mpiexec is needed.
"""

from __future__ import annotations

from dataclasses import replace

from mpi4py import MPI

from reshape.joblink import protocol as P
from reshape.joblink.client import SchedulerClient
from reshape.joblink.protocol import Advice, ResizePoint
from reshape.redistribution.layout import LayoutError, block
from reshape.runtime import Resizer


def even_rows(p: int):
    if p % 2 and p > 1:
        raise LayoutError(f"odd process count {p}")
    return block((64, 4), p, 0)


def test_legal_sizes_apply_max_procs_the_sizes_test_and_array_layouts():
    rt = Resizer(MPI.COMM_SELF, None)
    assert rt.legal_sizes(6) == [1, 2, 3, 4, 5, 6]
    rt.max_procs = 12
    assert rt.legal_sizes(100) == list(range(1, 13))
    rt.sizes = lambda p: 48 % p == 0
    assert rt.legal_sizes(100) == [1, 2, 3, 4, 6, 8, 12]
    rt.register_array("A", (64, 4), layout=even_rows)
    assert rt.legal_sizes(100) == [1, 2, 4, 6, 8, 12]


def test_legal_sizes_leave_out_direction_and_history():
    rt = Resizer(MPI.COMM_SELF, None, history=[1])
    # a shrink to 2 or an expansion to 1 would be refused now, but both sizes are legal
    assert rt._check_size(1, "expand") and rt._check_size(2, "shrink")
    assert rt.legal_sizes(3) == [1, 2, 3]
    rt.sizes = lambda p: p != 2
    assert "not a legal size" in rt._check_size(2, "expand")


class Recorder:
    def __init__(self):
        self.announced: list[list[int]] = []

    def announce_sizes(self, sizes):
        self.announced.append(list(sizes))

    def advise(self, report: ResizePoint) -> Advice:
        return Advice("continue", report.nprocs)

    def resized(self, *a, **k):
        pass

    def finished(self, *a, **k):
        pass


def test_rank_0_announces_once_and_again_when_arrays_change():
    adv = Recorder()
    rt = Resizer(MPI.COMM_SELF, adv, max_procs=8, sizes=lambda p: p != 3)
    rt.contact_scheduler(1.0)
    rt.contact_scheduler(1.0)
    assert adv.announced == [[1, 2, 4, 5, 6, 7, 8]]
    rt.register_array("A", (64, 4), layout=even_rows)
    rt.contact_scheduler(1.0)
    assert adv.announced[1:] == [[1, 2, 4, 6, 8]]


def test_without_max_procs_the_announcement_stops_at_the_protocol_bound():
    adv = Recorder()
    Resizer(MPI.COMM_SELF, adv).contact_scheduler(1.0)
    assert adv.announced == [list(range(1, P.MAX_SIZES + 1))]


class FakeConnection:
    def __init__(self):
        self.sent: list[P.Message] = []

    def send(self, msg, timeout=None):
        msg = replace(msg, seq=len(self.sent) + 1)
        self.sent.append(P.decode(P.encode(msg)))  # what the daemon would read
        if msg.type == "resize_point":
            return P.answer(msg, P.Advice("continue", msg.nprocs))
        return P.answer(msg, P.Ok())

    def close(self):
        pass


def test_client_sends_the_sizes_in_hello_and_greets_again_when_they_change():
    c = SchedulerClient("tcp://127.0.0.1:9", 7)
    c.conn = conn = FakeConnection()
    report = ResizePoint(job_id=7, iteration=1, nprocs=4, grid=(2, 2), iter_time=0.5)
    c.announce_sizes([8, 4, 2, 1, 4, 5000])
    c.advise(report)
    c.advise(report)
    assert [m.type for m in conn.sent] == ["hello", "resize_point", "resize_point"]
    assert conn.sent[0].body["sizes"] == [1, 2, 4, 8] and conn.sent[0].body["nprocs"] == 4
    c.announce_sizes([1, 2, 4, 8])  # the same: no new hello
    c.advise(report)
    c.announce_sizes([2, 4])
    c.advise(report)
    assert [m.type for m in conn.sent[3:]] == ["resize_point", "hello", "resize_point"]
    assert conn.sent[4].body["sizes"] == [2, 4]


def test_client_without_announced_sizes_sends_a_plain_hello():
    c = SchedulerClient("tcp://127.0.0.1:9", 7)
    c.conn = conn = FakeConnection()
    c.advise(ResizePoint(job_id=7, iteration=1, nprocs=4, grid=(2, 2), iter_time=0.5))
    assert conn.sent[0].type == "hello" and "sizes" not in conn.sent[0].body


def test_sizes_beyond_the_data_are_not_announced_and_an_offered_one_is_refused_naming_both_numbers():
    """A 6-row array in "rows" takes at most 6 processes: the scheduler is told 1..6, and an expansion
    it offers beyond that anyway is refused at the resize point with the reason."""
    adv = Recorder()
    rt = Resizer(MPI.COMM_SELF, adv)
    rt.register_array("T", (6, 4), layout="rows")
    rt.contact_scheduler(1.0)
    assert adv.announced == [[1, 2, 3, 4, 5, 6]]
    assert rt._check_size(7, "expand") == ("7 processes > 6 rows of array 'T' (layout 'rows'): some processes "
                                           "would hold no data")
    res = rt._act(Advice("expand", 7), 1)
    assert res.action == "failed" and res.asked == 7 and "7 processes > 6 rows" in res.error and rt.size == 1
