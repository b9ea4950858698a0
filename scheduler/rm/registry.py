"""The resource managers the daemon can run, each registered by its own package.

A manager registers, with :func:`register`, the flag that chooses it (``--NAME`` of
``reshape daemon``), its help, the option set it reads and how it is built from the parsed
options. An option set (:class:`Options`) adds a package's options to the daemon's parser and
checks them; the managers of one package share theirs (Slurm's ``--slurm-grow`` and
``--slurm-site`` both read the broker's options), and each set is added and checked once, in the
order it was first registered. ``scheduler.rm`` (:func:`scheduler.rm.add_options`,
:func:`scheduler.rm.from_args`) iterates this registry; the policies have the same kind of
registry (:func:`scheduler.core.policy.register`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.rm.base import ResourceManager

__all__ = ["Manager", "Options", "managers", "option_sets", "register"]


def _no_check(args: argparse.Namespace) -> None:
    return None


@dataclass(frozen=True)
class Options:
    """A package's daemon options: ``add`` puts them in the resource-manager group of the parser;
    ``check`` raises ValueError (naming the option) for a value that cannot be used, whichever
    manager is chosen."""

    add: Callable[[argparse._ArgumentGroup], None]
    check: Callable[[argparse.Namespace], None] = _no_check


@dataclass(frozen=True)
class Manager:
    """One registered manager: ``--name`` chooses it, ``build`` makes it from the parsed options
    (ValueError where it cannot run here)."""

    name: str
    help: str
    build: Callable[[argparse.Namespace], ResourceManager]
    options: Options | None = None

    @property
    def flag(self) -> str:
        return f"--{self.name}"

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


_MANAGERS: dict[str, Manager] = {}


def register(name: str, help: str, options: Options | None = None):
    """Decorator of a builder ``build(args) -> ResourceManager``: make it the manager ``--name`` chooses."""
    if name in _MANAGERS:
        raise ValueError(f"resource manager {name!r} is registered twice")

    def deco(build: Callable[[argparse.Namespace], ResourceManager]):
        _MANAGERS[name] = Manager(name, help, build, options)
        return build

    return deco


def managers() -> list[Manager]:
    """The registered managers, in the order they registered."""
    return list(_MANAGERS.values())


def option_sets() -> list[Options]:
    """Every manager's option set, each once, in the order first registered."""
    out: list[Options] = []
    for m in _MANAGERS.values():
        if m.options is not None and m.options not in out:
            out.append(m.options)
    return out
