"""The cocotb regression: every registered bench, one source for pytest and the CLI.

The benches themselves are declared by the accelerators
(:mod:`pimforge.gen.accelerators`); this module only lists and selects them.
"""

from __future__ import annotations

import fnmatch

from pimforge.gen.registry import Bench, benches

__all__ = ["BENCHES", "Bench", "select"]

#: Every registered bench, in registration order (shared hardware first).
BENCHES: list[Bench] = list(benches().values())


def select(pattern: str | None) -> list[Bench]:
    """The benches whose name contains *pattern* or matches it as a glob (all if None)."""
    return [b for b in BENCHES
            if not pattern or pattern in b.name or fnmatch.fnmatch(b.name, pattern)]
