"""The 12 CapsNet benchmarks of PIM-CapsNet Table 1.

Every benchmark is a CapsNet-MNIST-like network (Sec. 3): batch size ``BS``,
``N_L`` low-level (PrimeCaps) capsules of ``C_L = 8`` scalars, ``N_H``
high-level capsules of ``C_H = 16`` scalars (Table 3), and the number of
dynamic-routing iterations.  The table gives only these routing sizes; for
the layers around the routing (used by the GPU roofline) the Sabour et al.
structure is assumed: a 9x9 256-channel convolution and a 9x9 stride-2
PrimeCaps convolution on a 28x28 input, which gives a 6x6 capsule grid, so
the PrimeCaps layer has ``N_L / 36`` capsule types (1152 = 6*6*32, 2304 =
6*6*64, 576 = 6*6*16), and an FC decoder 512-1024-(28*28*channels).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pimforge.gen.errors import UnknownNameError

__all__ = ["CapsNetSpec", "NETWORKS", "network", "network_names"]


@dataclass(frozen=True)
class CapsNetSpec:
    """One routing benchmark.

    Parameters
    ----------
    name : str
        The paper's name (``Caps-MN1`` ...).
    dataset : str
        Dataset the paper trains it on.
    batch : int
        ``N_B``, input sets routed together (``b_ij`` is shared by them).
    n_l, n_h : int
        Low- and high-level capsule counts.
    iterations : int
        Routing iterations ``I``.
    c_l, c_h : int
        Scalars per low- and high-level capsule.
    in_channels : int
        Image channels of the dataset (for the surrounding layers only).
    scale : int
        Factor by which :meth:`scaled` shrank ``batch`` and ``n_l`` (1 = Table 1 size).
    """

    name: str
    dataset: str
    batch: int
    n_l: int
    n_h: int
    iterations: int
    c_l: int = 8
    c_h: int = 16
    in_channels: int = 1
    scale: int = 1

    def __post_init__(self):
        for f in ("batch", "n_l", "n_h", "iterations", "c_l", "c_h", "in_channels", "scale"):
            value = getattr(self, f)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ValueError(f"{f} must be an integer >= 1, not {value!r}")

    @property
    def primary_grid(self) -> int:
        """Side of the PrimeCaps capsule grid of the assumed structure (6)."""
        return 6

    @property
    def weight_count(self) -> int:
        """Scalars in the routing weights ``W`` (N_L x N_H x C_H x C_L)."""
        return self.n_l * self.n_h * self.c_h * self.c_l

    def scaled(self, factor: int) -> CapsNetSpec:
        """A reduced-size variant: ``batch`` and ``n_l`` divided by *factor*.

        Rounding is upward, ``ceil(x / factor)``, which is never below 1, so the
        reduced network keeps at least ``1/factor`` of the work.  ``n_h``,
        ``iterations`` and the capsule sizes are unchanged.
        """
        if not (isinstance(factor, int) and not isinstance(factor, bool) and factor >= 1):
            raise ValueError(f"scale factor must be an integer >= 1, not {factor!r}")
        return dataclasses.replace(self, batch=-(-self.batch // factor),
                                   n_l=-(-self.n_l // factor), scale=self.scale * factor)


def _net(name: str, dataset: str, batch: int, n_l: int, n_h: int, it: int, ch: int = 1):
    return CapsNetSpec(name=name, dataset=dataset, batch=batch, n_l=n_l, n_h=n_h,
                       iterations=it, in_channels=ch)


#: Table 1 in the paper's order.
NETWORKS: tuple[CapsNetSpec, ...] = (
    _net("Caps-MN1", "MNIST", 100, 1152, 10, 3),
    _net("Caps-MN2", "MNIST", 200, 1152, 10, 3),
    _net("Caps-MN3", "MNIST", 300, 1152, 10, 3),
    _net("Caps-CF1", "CIFAR10", 100, 2304, 11, 3, ch=3),
    _net("Caps-CF2", "CIFAR10", 100, 3456, 11, 3, ch=3),
    _net("Caps-CF3", "CIFAR10", 100, 4608, 11, 3, ch=3),
    _net("Caps-EN1", "EMNIST_Letter", 100, 1152, 26, 3),
    _net("Caps-EN2", "EMNIST_Balanced", 100, 1152, 47, 3),
    _net("Caps-EN3", "EMNIST_By_Class", 100, 1152, 62, 3),
    _net("Caps-SV1", "SVHN", 100, 576, 10, 3, ch=3),
    _net("Caps-SV2", "SVHN", 100, 576, 10, 6, ch=3),
    _net("Caps-SV3", "SVHN", 100, 576, 10, 9, ch=3),
)

_BY_NAME = {n.name.lower(): n for n in NETWORKS}


def network_names() -> list[str]:
    return [n.name for n in NETWORKS]


def network(name: str) -> CapsNetSpec:
    """The Table 1 benchmark called *name* (case-insensitive)."""
    try:
        return _BY_NAME[str(name).lower()]
    except KeyError:
        raise UnknownNameError(f"unknown CapsNet benchmark {name!r}; "
                               f"known: {', '.join(network_names())}") from None
