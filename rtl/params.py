"""Range checks for generator parameters, shared by every block and by the config tree.

A generator's keyword parameters are checked here so that a bad value is
reported as "vaults must be a power of two between 1 and 64, not 48" whichever
way it arrived (a Python call, a TOML file, ``--set``). The config validators
(:mod:`pimforge.gen.config.base`) call the same functions with their own
exception type, so the wording is defined once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["ParameterError", "check", "check_int", "check_pow2", "check_float", "check_choice",
           "check_bool", "shown", "shown_message"]

#: Characters of a bad value that an error message echoes (a garbage token of 64 KiB
#: would otherwise fill the terminal).
SHOWN_CHARS = 60


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message, cut to about *limit* characters with the
    full length stated: every message that echoes what the user gave goes through this."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return repr(value)
    return f"{text[:limit]!r}... ({len(text)} characters)"


_LONG_RUN = re.compile(rf"\S{{{4 * SHOWN_CHARS},}}")


def shown_message(message: str, limit: int = SHOWN_CHARS) -> str:
    """*message* with every run of non-blank characters longer than ``4 * limit`` cut as
    :func:`shown` cuts a value: the last guard, where one line is printed, for messages
    that echo a value without :func:`shown`."""
    return _LONG_RUN.sub(lambda m: f"{m.group()[:limit]}...({len(m.group())} characters)",
                         message)


class ParameterError(ValueError):
    """A generator parameter is outside the range the block can be built for."""


def check(ok: bool, field: str, value: Any, allowed: str, *,
          error: type[Exception] = ParameterError) -> None:
    """Raise *error* unless *ok*: ``"<field> must be <allowed>, not <value>"``."""
    if not ok:
        raise error(f"{field} must be {allowed}, not {shown(value)}")


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
