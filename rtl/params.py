"""Range checks for generator parameters, shared by every block and by the config tree.

A generator's keyword parameters are checked here so that a bad value is
reported as "vaults must be a power of two between 1 and 64, not 48" whichever
way it arrived (a Python call, a TOML file, ``--set``). The config validators
(:mod:`pimforge.gen.config.base`) call the same functions with their own
exception type, so the wording is defined once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["ParameterError", "check", "check_int", "check_pow2", "check_float", "check_choice",
           "check_bool"]


class ParameterError(ValueError):
    """A generator parameter is outside the range the block can be built for."""


def check(ok: bool, field: str, value: Any, allowed: str, *,
          error: type[Exception] = ParameterError) -> None:
    """Raise *error* unless *ok*: ``"<field> must be <allowed>, not <value>"``."""
    if not ok:
        raise error(f"{field} must be {allowed}, not {value!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(field: str, value: Any, lo: int, hi: int, *,
              error: type[Exception] = ParameterError) -> None:
    check(_is_int(value) and lo <= value <= hi, field, value,
          f"an integer between {lo} and {hi}", error=error)


def check_pow2(field: str, value: Any, lo: int, hi: int, *,
               error: type[Exception] = ParameterError) -> None:
    check(_is_int(value) and lo <= value <= hi and value & (value - 1) == 0, field, value,
          f"a power of two between {lo} and {hi}", error=error)


def check_float(field: str, value: Any, lo: float, hi: float, *,
                error: type[Exception] = ParameterError) -> None:
    check((_is_int(value) or isinstance(value, float)) and lo <= value <= hi, field, value,
          f"a number between {lo} and {hi}", error=error)


def check_choice(field: str, value: Any, choices: Iterable[Any], *,
                 error: type[Exception] = ParameterError) -> None:
    choices = tuple(choices)
    check(value in choices, field, value, "one of " + ", ".join(map(repr, choices)),
          error=error)


def check_bool(field: str, value: Any, *, error: type[Exception] = ParameterError) -> None:
    check(isinstance(value, bool), field, value, "true or false", error=error)
