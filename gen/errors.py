"""Exceptions for errors a user can cause; the CLI prints them without a traceback.

One type per kind of mistake, each message saying what to change.
"""

from __future__ import annotations

__all__ = ["PimforgeError", "UnknownNameError", "ToolMissingError", "CapacityError",
           "SimulationError"]


class PimforgeError(Exception):
    """Base of all user-facing errors; ``pimforge`` exits with status 2 on these."""


class UnknownNameError(PimforgeError, KeyError):
    """An unknown block, benchmark, network or pattern name was asked for."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ToolMissingError(PimforgeError):
    """An external tool (Verilator, Icarus, a C++ compiler) is not available."""


class CapacityError(PimforgeError):
    """A workload or program does not fit the configured memory."""


class SimulationError(PimforgeError):
    """A simulation failed (build error, test failure, timeout)."""
