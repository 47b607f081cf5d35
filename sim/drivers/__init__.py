"""The native Verilator drivers: C++ mains, their shared header and their Python contracts.

Every C++ file of the drivers lives here as package data (``*.cpp``, ``*.h``)
and is read with :func:`sources`. A driver build is its Verilog top (a
:func:`~pimforge.sim.drivers.pins.driver_top` wrapper with plain pin names),
its main, ``driver.h`` and a generated ``pimforge_params.h``
(:func:`~pimforge.sim.drivers.params.params_header`); Python and C++ exchange
named fields (:mod:`pimforge.sim.drivers.io`), never positions.
"""

from __future__ import annotations

from importlib import resources

from .params import PARAMS_HEADER, params_header

__all__ = ["PARAMS_HEADER", "params_header", "source", "sources"]


def source(name: str) -> str:
    """The text of the driver file *name* (e.g. ``"driver.h"``)."""
    return resources.files(__name__).joinpath(name).read_text()


def sources(main: str, params: str, headers: tuple[str, ...] = ()) -> dict[str, str]:
    """The C++ files of one driver build: *main*, ``driver.h``, the driver's own *headers*
    and the *params* header text."""
    return {main: source(main), "driver.h": source("driver.h"),
            **{h: source(h) for h in headers}, PARAMS_HEADER: params}
