"""Application structure for MHETA (Nakazawa 2005 §5.1-5.2) and its JSON file format.

An iteration is an ordered list of *parallel sections*; each section has
``tiles`` repetitions of its ordered *stages* and ends with one communication
event (``nearest-neighbour``, ``reduction``, ``pipeline`` or ``none``). A stage
does computation and I/O only, over the *arrays* it reads and writes.

File format (JSON)::

    {"name": "jacobi",
     "arrays": [{"name": "grid", "rows": 512, "row_bytes": 16384,
                 "read_row_bytes": 8192, "write_row_bytes": 8192,
                 "distributed": true, "read_only": false, "frequency": 1,
                 "resident": false}],
     "stages": [{"name": "sweep", "reads": ["grid"], "writes": ["grid"],
                 "scales": true, "prefetch": false}],
     "sections": [{"name": "update", "stages": ["sweep"], "tiles": 1,
                   "comm": {"pattern": "nearest-neighbour", "bytes": 8192,
                            "source": "grid", "source_rows": 1}}]}

``row_bytes`` is the memory footprint of one row (all buffers of it);
``read_row_bytes``/``write_row_bytes`` what one row moves to and from disk.
``scales``: the stage's work is proportional to the node's rows (else constant,
e.g. work on replicated data). ``resident``: a distributed array the program
keeps in core whatever the memory (it has no out-of-core code path for it, as
CG's vectors, which the thesis's CG keeps in core being small); a node whose
memory cannot hold it for its rows cannot run the split. Sections name stages; an unknown stage or array
name is an error.

The out-of-core decision (:func:`plan_memory`) lives here because the model and
the runtime must take the same one (the thesis's mispredictions for CG came
from its heuristic disagreeing with the real run, §6.2.3).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = [
    "PATTERNS",
    "AppStructure",
    "ArraySpec",
    "CommSpec",
    "Section",
    "Stage",
    "StructureError",
    "load_structure",
    "max_resident_rows",
    "plan_memory",
    "structure_from_dict",
]

PATTERNS = ("nearest-neighbour", "reduction", "pipeline", "none")


class StructureError(ValueError):
    """A malformed application structure (unknown stage or array, bad pattern, ...)."""


@dataclass(frozen=True)
class ArraySpec:
    name: str
    rows: int
    row_bytes: int
    read_row_bytes: int = 0  # default: row_bytes
    write_row_bytes: int = 0  # default: row_bytes unless read_only
    distributed: bool = True
    read_only: bool = False
    frequency: int = 1
    resident: bool = False  # distributed but always in core (no out-of-core code path)

    def __post_init__(self) -> None:
        if self.rows < 0 or self.row_bytes <= 0:
            raise StructureError(f"array {self.name!r}: rows must be >= 0 and row_bytes > 0")
        if not self.read_row_bytes:
            object.__setattr__(self, "read_row_bytes", self.row_bytes)
        if not self.write_row_bytes and not self.read_only:
            object.__setattr__(self, "write_row_bytes", self.row_bytes)


@dataclass(frozen=True)
class Stage:
    name: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    scales: bool = True
    prefetch: bool = False


@dataclass(frozen=True)
class CommSpec:
    pattern: str = "none"
    bytes: int = 0
    source: str | None = None  # array the message is read from (extra disk read if OOC)
    source_rows: int = 1
    root: int = 0

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise StructureError(f"unknown communication pattern {self.pattern!r}; use one of {PATTERNS}")


@dataclass(frozen=True)
class Section:
    name: str
    stages: tuple[Stage, ...]
    comm: CommSpec = field(default_factory=CommSpec)
    tiles: int = 1


@dataclass(frozen=True)
class AppStructure:
    name: str
    arrays: tuple[ArraySpec, ...]
    sections: tuple[Section, ...]

    def __post_init__(self) -> None:
        names = [a.name for a in self.arrays]
        if len(set(names)) != len(names):
            raise StructureError(f"duplicate array names in {names}")
        dist = {a.rows for a in self.arrays if a.distributed}
        if len(dist) > 1:
            raise StructureError(f"distributed arrays must share the distributed dimension, got {dist}")
        for sec in self.sections:
            if sec.tiles < 1:
                raise StructureError(f"section {sec.name!r}: tiles must be >= 1")
            for st in sec.stages:
                for a in (*st.reads, *st.writes):
                    if a not in names:
                        raise StructureError(
                            f"stage {st.name!r} uses unknown array {a!r} (known: {names})"
                        )
                for a in st.writes:
                    if self.array(a).read_only:
                        raise StructureError(f"stage {st.name!r} writes read-only array {a!r}")
            if sec.comm.source is not None and sec.comm.source not in names:
                raise StructureError(
                    f"section {sec.name!r}: message source {sec.comm.source!r} is not an array"
                )

    @property
    def rows(self) -> int:
        """Size S of the distributed dimension."""
        for a in self.arrays:
            if a.distributed:
                return a.rows
        raise StructureError(f"structure {self.name!r} has no distributed array")

    def array(self, name: str) -> ArraySpec:
        for a in self.arrays:
            if a.name == name:
                return a
        raise StructureError(f"unknown array {name!r}")

    def stage_names(self) -> list[str]:
        return [st.name for sec in self.sections for st in sec.stages]

    def to_dict(self) -> dict:
        stages: dict[str, dict] = {}
        for sec in self.sections:
            for st in sec.stages:
                stages[st.name] = {**asdict(st), "reads": list(st.reads), "writes": list(st.writes)}
        return {
            "name": self.name,
            "arrays": [asdict(a) for a in self.arrays],
            "stages": list(stages.values()),
            "sections": [
                {"name": s.name, "stages": [st.name for st in s.stages], "tiles": s.tiles,
                 "comm": {**asdict(s.comm), "bytes": s.comm.bytes}}
                for s in self.sections
            ],
        }

    def dump(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))


def structure_from_dict(d: dict) -> AppStructure:
    """Build and validate a structure from the JSON form (see module docstring)."""
    try:
        arrays = tuple(ArraySpec(**a) for a in d["arrays"])
        stages = {}
        for s in d.get("stages", []):
            s = dict(s)
            s["reads"] = tuple(s.get("reads", ()))
            s["writes"] = tuple(s.get("writes", ()))
            stages[s["name"]] = Stage(**s)
        sections = []
        for sec in d["sections"]:
            names = sec.get("stages", [])
            for n in names:
                if n not in stages:
                    raise StructureError(
                        f"section {sec.get('name')!r} refers to unknown stage {n!r} "
                        f"(defined stages: {sorted(stages)})"
                    )
            sections.append(Section(
                sec["name"], tuple(stages[n] for n in names),
                CommSpec(**sec.get("comm", {})), int(sec.get("tiles", 1)),
            ))
        return AppStructure(d.get("name", "app"), arrays, tuple(sections))
    except KeyError as e:
        raise StructureError(f"structure is missing the field {e}") from None
    except TypeError as e:
        raise StructureError(f"bad structure entry: {e}") from None


def load_structure(path: str | Path) -> AppStructure:
    """Read a structure file (JSON)."""
    try:
        d = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise StructureError(f"{path}: not valid JSON: {e}") from None
    return structure_from_dict(d)


def plan_memory(app: AppStructure, rows: int, memory: int) -> dict[str, int | None]:
    """Which arrays stay in core on a node holding ``rows`` rows with ``memory`` bytes.

    The thesis's "simple heuristic" (§5.3.1), made precise: replicated arrays
    are always resident; distributed arrays sorted by (access frequency
    descending, local size ascending, name) stay in core greedily while they
    fit; the memory left is split equally among the out-of-core arrays, giving
    each an ICLA of ``floor(share / row_bytes)`` rows. Returns
    ``{array: None}`` for in core, ``{array: icla_rows}`` for out of core.

    Resident arrays (``resident=True``) come first, in core, like replicated
    ones. Raises StructureError when the node has no memory, or not enough for
    the replicated data, the resident arrays' rows and one row of every
    out-of-core array.
    """
    if memory <= 0:
        raise StructureError(f"a node has no memory ({memory} bytes) for the job's arrays")
    left = memory - sum(a.rows * a.row_bytes for a in app.arrays if not a.distributed)
    if left <= 0:
        raise StructureError(f"replicated arrays need more than the node's {memory} bytes")
    plan: dict[str, int | None] = {}
    resident = [a for a in app.arrays if a.distributed and a.resident]
    need = sum(rows * a.row_bytes for a in resident)
    if resident and need > left:
        names = ", ".join(repr(a.name) for a in resident)
        raise StructureError(f"{memory} bytes of memory cannot keep the in-core arrays {names} for "
                             f"{rows} rows ({need} bytes; at most {max_resident_rows(app, memory)} rows)")
    for a in resident:
        plan[a.name] = None
    left -= need
    dist = sorted((a for a in app.arrays if a.distributed and not a.resident),
                  key=lambda a: (-a.frequency, rows * a.row_bytes, a.name))
    ooc = []
    for a in dist:
        need = rows * a.row_bytes
        if need <= left:
            plan[a.name] = None
            left -= need
        else:
            ooc.append(a)
    for a in ooc:
        icla = math.floor(left / len(ooc) / a.row_bytes)
        if icla < 1:
            raise StructureError(
                f"{memory} bytes of memory cannot hold one row of out-of-core array {a.name!r}"
            )
        plan[a.name] = icla
    return plan


def max_resident_rows(app: AppStructure, memory: int) -> int:
    """The most rows a node with ``memory`` bytes can run when the structure has resident arrays:
    those in core for its rows, plus one row of every array that goes out of core
    (:func:`plan_memory` succeeds up to there, and fails beyond). ``app.rows`` when the
    structure has no resident array (its limits, if any, are :func:`plan_memory`'s errors)."""
    per_row = sum(a.row_bytes for a in app.arrays if a.distributed and a.resident)
    if not per_row:
        return app.rows
    left = memory - sum(a.rows * a.row_bytes for a in app.arrays if not a.distributed)
    lo, hi = 0, max(0, min(app.rows, left // per_row))
    while lo < hi:  # plan_memory's success is monotone in the rows
        mid = (lo + hi + 1) // 2
        try:
            plan_memory(app, mid, memory)
            lo = mid
        except StructureError:
            hi = mid - 1
    return lo
