"""Table 1 benchmark definitions (sim/capsnet/networks.py)."""

import dataclasses

import pytest

from pimforge.gen.errors import UnknownNameError
from pimforge.sim.capsnet.networks import NETWORKS, network, network_names

TABLE1 = """
Caps-MN1 100 1152 10 3
Caps-MN2 200 1152 10 3
Caps-MN3 300 1152 10 3
Caps-CF1 100 2304 11 3
Caps-CF2 100 3456 11 3
Caps-CF3 100 4608 11 3
Caps-EN1 100 1152 26 3
Caps-EN2 100 1152 47 3
Caps-EN3 100 1152 62 3
Caps-SV1 100 576 10 3
Caps-SV2 100 576 10 6
Caps-SV3 100 576 10 9
"""


def test_table1_values():
    rows = [line.split() for line in TABLE1.strip().splitlines()]
    assert network_names() == [r[0] for r in rows]
    for name, b, nl, nh, it in rows:
        n = network(name)
        assert (n.batch, n.n_l, n.n_h, n.iterations) == (int(b), int(nl), int(nh), int(it))
        assert (n.c_l, n.c_h) == (8, 16)
        assert n.n_l % 36 == 0          # 6x6 PrimeCaps grid of the assumed structure


def test_lookup_is_case_insensitive_and_unknown_lists_names():
    assert network("caps-sv2") is network("Caps-SV2")
    with pytest.raises(UnknownNameError, match="Caps-MN1.*Caps-SV3"):
        network("Caps-XX9")
    with pytest.raises(KeyError):       # UnknownNameError is also a KeyError
        network("")


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        NETWORKS[0].batch = 1


@pytest.mark.parametrize("factor, batch, n_l", [(1, 100, 576), (4, 25, 144), (7, 15, 83),
                                                (1000, 1, 1)])
def test_scaled_rounds_up_never_below_one(factor, batch, n_l):
    s = network("Caps-SV1").scaled(factor)
    assert (s.batch, s.n_l, s.n_h, s.iterations, s.scale) == (batch, n_l, 10, 3, factor)
    assert s.scaled(2).scale == 2 * factor


def test_scaled_rejects_bad_factor():
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="scale factor"):
            network("Caps-MN1").scaled(bad)
