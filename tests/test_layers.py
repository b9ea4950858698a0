"""The shape of the source tree, read from its syntax trees (no import is executed).

* the sans-I/O core (``scheduler/core``) imports nothing from the application's runtime
  (``reshape.runtime``) or the launchers (``reshape.joblink.launchers``), at module level or
  inside a function;
* no module over :data:`MAX_MODULE` lines, no function over :data:`MAX_FUNCTION` lines;
* no import cycle among the modules of ``reshape/`` and ``scheduler/``, counting imports made
  inside functions (a cycle hidden in a function still ties the modules together);
* no import cycle among their packages either (``scheduler.daemon``, ``scheduler.cli``,
  ``reshape.runtime``, ...): each package only uses the ones below it;
* the resource managers (``scheduler/rm``) change the cluster only through the core's node events:
  no call of a pool mutator, no write of another component's fields (``self.broker.held[h] = ...``,
  ``state.pool.down.add(h)``).

A present offender that cannot be fixed at once is listed in :data:`LONG_MODULES`,
:data:`LONG_FUNCTIONS` or :data:`CYCLES` with its present size; the lists may only shrink: an entry
that grew, or that is now within the limits and still listed, fails.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("reshape", "scheduler")
CORE = "scheduler.core"
FORBIDDEN_IN_CORE = ("reshape.runtime", "reshape.joblink.launchers")
MAX_MODULE = 600      # lines of one module
MAX_FUNCTION = 80     # lines of one function, ``def`` to its last line

# present offenders: path -> lines (may only shrink, then go)
LONG_MODULES: dict[str, int] = {}
# present offenders: "path:qualified.name" -> lines
LONG_FUNCTIONS: dict[str, int] = {}
# present cycles, each as its sorted tuple of modules
CYCLES: set[tuple[str, ...]] = set()


def _modules() -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every module of the packages."""
    out = {}
    for top in PACKAGES:
        for f in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" in f.parts:
                continue
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


MODULES = _modules()
TREES = {name: ast.parse(f.read_text(), str(f)) for name, f in MODULES.items()}


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str) -> set[str]:
    """The modules of the packages that module *name* imports, anywhere in its body."""
    out: set[str] = set()
    for node in ast.walk(TREES[name]):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if _is_package(name) else name.split(".")[:-1]
                here = here[:len(here) - (node.level - 1)]
                base = ".".join(here + ([base] if base else []))
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` the module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:   # ``import a.b.c`` where c is a name: the nearest module
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


GRAPH = {name: _imports(name) for name in MODULES}


def _rel(name: str) -> str:
    return str(MODULES[name].relative_to(ROOT))


def test_core_imports_neither_the_runtime_nor_the_launchers():
    bad = sorted(f"{_rel(m)} imports {t}" for m, targets in GRAPH.items()
                 if m == CORE or m.startswith(CORE + ".")
                 for t in targets
                 if any(t == f or t.startswith(f + ".") for f in FORBIDDEN_IN_CORE))
    assert not bad, "the core must not depend on the runtime or the launchers:\n" + "\n".join(bad)


def test_the_values_the_core_checks_are_the_runtimes():
    """The core checks launcher and MPI names and the default resize timeout against ``jobenv``'s
    lists, not the runtime's modules: those lists must be what the runtime implements."""
    from reshape.joblink import jobenv, launchers, mpis
    from reshape.runtime import watchdog
    assert tuple(launchers.LAUNCHERS) == jobenv.LAUNCHER_NAMES
    assert mpis.FLAVOURS == jobenv.MPI_FLAVOURS
    assert watchdog.DEFAULT_TIMEOUT == jobenv.RESIZE_TIMEOUT_DEFAULT


def _module_sizes() -> dict[str, int]:
    return {_rel(m): len(f.read_text().splitlines()) for m, f in MODULES.items()}


def _function_sizes() -> dict[str, int]:
    out = {}

    def visit(node: ast.AST, prefix: str, path: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out[f"{path}:{qual}"] = child.end_lineno - child.lineno + 1
                visit(child, qual + ".", path)
            else:
                visit(child, prefix, path)

    for m, tree in TREES.items():
        visit(tree, "", _rel(m))
    return out


def _check_sizes(sizes: dict[str, int], limit: int, allowed: dict[str, int], what: str) -> list[str]:
    bad = [f"{k}: {n} lines (limit {limit})" for k, n in sorted(sizes.items())
           if n > limit and k not in allowed]
    for k, was in sorted(allowed.items()):
        now = sizes.get(k)
        if now is None or now <= limit:
            bad.append(f"{k}: now within the limit ({now}): remove it from the allowed {what}")
        elif now > was:
            bad.append(f"{k}: grew from {was} to {now} lines: shorten it")
    return bad


def test_no_module_over_the_limit():
    bad = _check_sizes(_module_sizes(), MAX_MODULE, LONG_MODULES, "LONG_MODULES")
    assert not bad, "\n".join(bad)


def test_no_function_over_the_limit():
    bad = _check_sizes(_function_sizes(), MAX_FUNCTION, LONG_FUNCTIONS, "LONG_FUNCTIONS")
    assert not bad, "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan 1972)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: set[tuple[str, ...]] = set()
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.add(tuple(sorted(comp)))
    return found


def test_no_import_cycle():
    found = _cycles(GRAPH)
    bad = [" -> ".join(c) for c in sorted(found - CYCLES)]
    gone = [" -> ".join(c) for c in sorted(CYCLES - found)]
    assert not bad and not gone, ("import cycles (counting imports inside functions):\n" + "\n".join(bad)
                                  + ("\nno longer cycles, remove them from CYCLES:\n" + "\n".join(gone)
                                     if gone else ""))


def _package(name: str) -> str:
    """The package a module belongs to, one level below the top (``scheduler.daemon.loop`` -> ``scheduler.daemon``)."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (len(parts) == 2 and _is_package(name)) else name


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m, targets in graph.items():
        edges = out.setdefault(_package(m), set())
        edges.update(p for p in map(_package, targets) if p != _package(m))
    return out


def test_no_import_cycle_among_the_packages():
    found = _cycles(_package_graph(GRAPH))
    assert not found, "import cycles among packages (counting imports inside functions):\n" + "\n".join(
        " -> ".join(c) for c in sorted(found))


def test_the_checks_see_function_level_imports_and_cycles():
    """An import made inside a function, or relative, is an edge; a cycle through one is found."""
    probe = "reshape.runtime._probe"
    TREES[probe] = ast.parse("def f():\n    from reshape.runtime import checks\n    from . import ftcomm\n")
    MODULES[probe] = ROOT / "reshape" / "runtime" / "_probe.py"
    try:
        edges = _imports(probe)
    finally:
        del TREES[probe], MODULES[probe]
    assert edges == {"reshape.runtime.checks", "reshape.runtime.ftcomm"}
    graph = {**GRAPH, probe: edges, "reshape.runtime.checks": GRAPH["reshape.runtime.checks"] | {probe}}
    assert (probe, "reshape.runtime.checks") in _cycles(graph)
    # one import of the command line inside a function of the daemon's loop ties the two packages
    daemon = "scheduler.daemon.loop"
    graph = {**GRAPH, daemon: GRAPH[daemon] | {"scheduler.cli.commands"}}
    assert any({"scheduler.cli", "scheduler.daemon"} <= set(c) for c in _cycles(_package_graph(graph)))


def _self_names(cls: ast.ClassDef) -> tuple[set[str], set[str]]:
    """The names a class defines on ``self`` (its methods, class-level names, attributes it assigns) and
    the names it reads through ``self``."""
    defined = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    defined |= {t.id for n in cls.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    read: set[str] = set()
    for n in ast.walk(cls):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
            (defined if isinstance(n.ctx, ast.Store) else read).add(n.attr)
    return defined, read


def _core_classes() -> dict[str, ast.ClassDef]:
    return {f"{m}.{c.name}": c for m, tree in TREES.items() if m.startswith(CORE + ".")
            for c in tree.body if isinstance(c, ast.ClassDef)}


def test_the_core_state_is_composed_not_mixed_in():
    """``ClusterState`` holds its parts (job table, nodes, resizes, restarts, kills, ...) and inherits from
    none; each class of the core reads through ``self`` only what it defines itself (a part reaches another
    through the reference it was given, never through fields another class sets on a shared ``self``)."""
    classes = _core_classes()
    state = classes["scheduler.core.state.ClusterState"]
    assert not state.bases, f"ClusterState inherits {[ast.unparse(b) for b in state.bases]}: compose parts instead"
    borrowed = {}
    for name, cls in classes.items():
        if cls.bases and not all(ast.unparse(b) in ("Sequence", "Exception", "ValueError") for b in cls.bases):
            continue  # a policy or record type: not a part of the state
        defined, read = _self_names(cls)
        if read - defined:
            borrowed[name] = sorted(read - defined)
    assert not borrowed, f"classes reading fields they do not define: {borrowed}"


def test_the_core_takes_its_own_events_not_the_wire_classes():
    """The core's events and advice are its own (``scheduler.core.events``); the daemon converts the protocol's
    at its edge. Only the job-file rules share a limit with the wire (the most sizes a job may list)."""
    users = sorted(m for m, targets in GRAPH.items()
                   if m.startswith(CORE + ".") and "reshape.joblink.protocol" in targets)
    assert users == ["scheduler.core.jobfile"], users


# ---------------------------------------------------------------------- resource managers
RM = "scheduler.rm"
POOL_MUTATORS = {"set_down", "set_up", "set_draining", "lease", "claim", "allocate"}  # ``release``: on a pool
CONTAINER_MUTATORS = {"pop", "popitem", "add", "discard", "update", "clear", "setdefault", "append", "extend",
                      "insert", "remove"}


def _chain(node: ast.expr) -> list[str]:
    """``self.broker.held[h]`` -> ["self", "broker", "held"]: the names down to the root (subscripts skipped);
    empty when the root is not a plain name."""
    names: list[str] = []
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
        node = node.value
    return [node.id, *reversed(names)] if isinstance(node, ast.Name) else []


def _foreign(chain: list[str]) -> bool:
    """Whether a chain names another component's field: two steps below ``self``, or any attribute of
    another object (the core's state, a job, a pool)."""
    return len(chain) >= 3 if chain[:1] == ["self"] else len(chain) >= 2


def _rm_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """The pool mutator calls and writes of other components' fields in one module's tree."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            chain, attr = _chain(node.func.value), node.func.attr
            if attr in POOL_MUTATORS or (attr == "release" and any("pool" in n for n in chain)):
                out.append((node.lineno, f"pool mutator .{attr}()"))
            elif attr in CONTAINER_MUTATORS and chain and _foreign(chain):
                out.append((node.lineno, f"{'.'.join(chain)}.{attr}()"))
        targets = (node.targets if isinstance(node, ast.Assign | ast.Delete)
                   else [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else [])
        for t in targets:
            for e in (t.elts if isinstance(t, ast.Tuple | ast.List) else [t]):
                chain = _chain(e)
                if isinstance(e, ast.Attribute | ast.Subscript) and chain and _foreign(chain):
                    out.append((node.lineno, f"write of {'.'.join(chain)}"))
    return sorted(out)


def _rm_offences() -> list[str]:
    return [f"{_rel(name)}:{line}: {what}" for name, tree in TREES.items()
            if name == RM or name.startswith(RM + ".") for line, what in _rm_writes(tree)]


def test_resource_managers_change_the_cluster_only_through_node_events():
    bad = _rm_offences()
    assert not bad, "a resource manager writes the pool or another component's fields:\n" + "\n".join(bad)


def test_the_resource_manager_check_sees_writes():
    src = ("def f(self, s, pool):\n    s.pool.set_draining('n1')\n    pool.release(['n1'])\n"
           "    self.broker.held['n1'] = 'j'\n    self.broker.gone.pop('n1')\n    s.pool.down.add('n1')\n"
           "    self.edge.watch = ()\n    self._keeps['j'] = 1\n    out = []\n    out.append(1)\n"
           "    self.notes.append('x')\n    j.state = 'x'\n")
    assert [line for line, _ in _rm_writes(ast.parse(src))] == [2, 3, 4, 5, 6, 7, 12]
