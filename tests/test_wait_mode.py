"""RESHAPE_WAIT: how a rank waits for redistributed data (spin while its host's cores suffice)."""

import os

from reshape.redistribution.redistribute import spins


def test_auto_spins_only_while_the_ranks_fit_the_cores():
    cores = len(os.sched_getaffinity(0))
    assert spins(cores, {}) and spins(1, {"RESHAPE_WAIT": "auto"})
    assert not spins(cores + 1, {})


def test_explicit_modes_win():
    assert spins(1000, {"RESHAPE_WAIT": "spin"})
    assert not spins(1, {"RESHAPE_WAIT": "poll"})
