"""No assertion in tests/ compares a measured duration against a number (a rule of the project: timing
claims live in benchmarks, which report them against a baseline measured in the same run; a test
waits on events, and only a fixture's or helper's timeout bounds a hang).

A pass over every test module's syntax tree. A *duration* is a difference taken from a clock
(``time.monotonic() - t0``, ``perf_counter``, ``time.time``, or names assigned from clock calls), a
name assigned such a difference, a name or field that says it is one (``took``, ``elapsed``,
``delay``, ``..._s``, ``...seconds``, ``latency``), or a difference of timestamps (``..._time``,
``"t"``). An ``assert`` whose comparison (``<``, ``<=``, ``>``, ``>=``) has a duration on one side
and, on another, a non-zero number, a constant or a plain name (a bound) is reported, with its file
and line. Comparing two measured times with each other (an order of events) is not.
"""

from __future__ import annotations

import ast
import os
import re

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
CLOCKS = {"monotonic", "perf_counter", "time", "process_time", "monotonic_ns", "perf_counter_ns", "time_ns"}
DURATION = re.compile(r"^(took|elapsed|duration|delay|dt|latency|spent|waited)$|_(s|ms|secs|seconds|took|elapsed|"
                      r"delay|latency)$|^seconds$")
STAMP = re.compile(r"^t$|^t\d*$|_time$|^t_\w+$|^when$")


def _clock_call(n: ast.AST) -> bool:
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in CLOCKS \
        and isinstance(n.func.value, ast.Name) and n.func.value.id == "time"


def _field(n: ast.AST) -> str | None:
    """The name a value goes by: a variable's, an attribute's, a string subscript's."""
    if isinstance(n, ast.Name):
        return n.id
    if isinstance(n, ast.Attribute):
        return n.attr
    if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
        return n.slice.value
    return None


class _Scope:
    """The clock readings and durations assigned in one function (or module)."""

    def __init__(self, node: ast.AST):
        self.clocks: set[str] = set()
        self.durations: set[str] = set()
        assigns = [n for n in ast.walk(node) if isinstance(n, ast.Assign | ast.AnnAssign)]
        for _ in range(2):  # a name assigned from another one assigned later in the text
            for a in assigns:
                targets = a.targets if isinstance(a, ast.Assign) else [a.target]
                names = {t.id for t in targets if isinstance(t, ast.Name)}
                if a.value is None:
                    continue
                if _clock_call(a.value):
                    self.clocks |= names
                elif self.duration(a.value):
                    self.durations |= names

    def stamp(self, n: ast.AST) -> bool:
        f = _field(n)
        return _clock_call(n) or (isinstance(n, ast.Name) and n.id in self.clocks) or \
            (f is not None and bool(STAMP.search(f)))

    def duration(self, n: ast.AST) -> bool:
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub):
            return self.stamp(n.left) or self.stamp(n.right) or self.duration(n.left)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("abs", "max", "min", "round"):
            return any(self.duration(a) for a in n.args)
        f = _field(n)
        return (isinstance(n, ast.Name) and n.id in self.durations) or (f is not None and bool(DURATION.search(f)))


def _bound(n: ast.AST) -> bool:
    """A number (not zero: ``> 0`` says something happened, not how fast), a constant or a plain name."""
    if isinstance(n, ast.Constant):
        return isinstance(n.value, int | float) and not isinstance(n.value, bool) and n.value != 0
    if isinstance(n, ast.UnaryOp):
        return _bound(n.operand)
    if isinstance(n, ast.BinOp):
        return all(isinstance(x, ast.Constant | ast.Name | ast.UnaryOp | ast.BinOp) for x in (n.left, n.right)) \
            and (_bound(n.left) or _bound(n.right))
    return isinstance(n, ast.Name)


def timed_assertions(source: str) -> list[tuple[int, str]]:
    """(line, text) of every assertion in ``source`` that compares a duration against a bound."""
    tree = ast.parse(source)
    found: set[tuple[int, str]] = set()
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]
    for node in scopes:
        scope = _Scope(node)
        for a in (n for n in ast.walk(node) if isinstance(n, ast.Assert)):
            for c in (n for n in ast.walk(a.test) if isinstance(n, ast.Compare)):
                if not all(isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in c.ops):
                    continue
                sides = [c.left, *c.comparators]
                timed = [s for s in sides if scope.duration(s)]
                if timed and any(_bound(s) for s in sides if s not in timed):
                    found.add((a.lineno, ast.unparse(a.test)[:160]))
    return sorted(found)


def test_no_assertion_in_the_tests_compares_a_measured_duration_against_a_number():
    found, seen = [], 0
    for top, dirs, files in os.walk(TESTS):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(top, name)
            with open(path) as f:
                found += [f"{os.path.relpath(path, os.path.dirname(TESTS))}:{line}: assert {text}"
                          for line, text in timed_assertions(f.read())]
            seen += 1
    assert seen > 50  # the pass read the test modules, those of subdirectories too
    assert not found, "timed assertions (timing claims belong in benchmarks/):\n" + "\n".join(found)


@pytest.mark.parametrize("code", [
    "t0 = time.monotonic()\nrun()\nassert time.monotonic() - t0 < 5",
    "t0 = time.perf_counter()\nrun()\ntook = time.perf_counter() - t0\nassert ok and took < 10, took",
    "def f(bound):\n    delay = end - start\n    assert delay < bound",
    "assert out['first_expansion_s'] is not None and out['first_expansion_s'] < 30",
    "assert h['start_time'] - lo['end_time'] < 1.5",
    "assert 1.0 <= time.monotonic() - t0 < 2.5",
    "assert r.seconds < 0.5",
    "t0 = time.time()\nx()\nt1 = time.time()\nassert t1 - t0 < LIMIT",
])
def test_the_pass_finds_timed_assertions(code):
    assert timed_assertions(code), code


@pytest.mark.parametrize("code", [
    "assert t_end > t_start",  # an order of events
    "assert d['phases']['gc']['total_s'] > 0",  # something was measured at all
    "assert len(jobs) < 5",
    "assert j.run_time >= 1",  # a simulated job's run time is data, not a measurement of the test
    "took = time.monotonic() - t0\nprint(took)",
    "assert b_start >= a_end",
])
def test_the_pass_leaves_other_comparisons_alone(code):
    assert not timed_assertions(code), code
