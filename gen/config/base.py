"""Shared machinery of the config tree: validation helpers and the TOML loader.

Every config section is a frozen dataclass whose ``__post_init__`` validates
its fields with the helpers below, so that a bad value is reported with the
field's dotted path, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from pimforge.rtl import params as _p
from pimforge.rtl.params import ParameterError

from ..errors import PimforgeError

__all__ = ["ConfigError", "check", "check_int", "check_pow2", "check_choice", "check_float",
           "check_bool", "from_dict",
           "to_dict"]


class ConfigError(PimforgeError, ParameterError):
    """A config value (from TOML, ``--set`` or code) is out of its allowed range."""


def check(ok: bool, field: str, value: Any, allowed: str) -> None:
    """Raise :class:`ConfigError` unless *ok*: ``"<field> must be <allowed>, not <value>"``."""
    _p.check(ok, field, value, allowed, error=ConfigError)


def check_int(field: str, value: Any, lo: int, hi: int) -> None:
    _p.check_int(field, value, lo, hi, error=ConfigError)


def check_pow2(field: str, value: Any, lo: int, hi: int) -> None:
    _p.check_pow2(field, value, lo, hi, error=ConfigError)


def check_float(field: str, value: Any, lo: float, hi: float) -> None:
    _p.check_float(field, value, lo, hi, error=ConfigError)


def check_choice(field: str, value: Any, choices: typing.Iterable[str]) -> None:
    _p.check_choice(field, value, choices, error=ConfigError)


def check_bool(field: str, value: Any) -> None:
    _p.check_bool(field, value, error=ConfigError)


def _field_type(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


_TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _typed(where: str, ftype: Any, value: Any) -> Any:
    """*value* checked against the field's type (a TOML or ``--set`` value), ints widened
    to float for float fields; a bool is never taken for a number, nor a string for either."""
    ok = {bool: isinstance(value, bool),
          int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, (int, float)) and not isinstance(value, bool),
          str: isinstance(value, str) and value != ""}.get(ftype, True)
    if not ok:
        raise ConfigError(f"{where} must be {_TYPE_WORDS[ftype]}"
                          f"{' (not empty)' if ftype is str else ''}, not {value!r}")
    return float(value) if ftype is float else value


def from_dict(cls: type, data: dict[str, Any], path: str = "") -> Any:
    """Build the dataclass *cls* from a (TOML) mapping, recursing into sections.

    Unknown keys are errors that name the key and list the known ones; a
    section that is absent keeps its defaults.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'} must be a table, not {data!r}")
    known = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{path}.{key}" if path else key
        if key not in known:
            raise ConfigError(f"unknown config key {where!r}; known keys of "
                              f"{path or 'the top level'}: {', '.join(sorted(known))}")
        ftype = _field_type(cls, key)
        if dataclasses.is_dataclass(ftype):
            kwargs[key] = from_dict(ftype, value, where)
        elif typing.get_origin(ftype) is tuple or ftype is tuple:
            kwargs[key] = tuple(value) if isinstance(value, list) else value
        else:
            kwargs[key] = _typed(where, ftype, value)
    try:
        return cls(**kwargs)
    except ConfigError as e:
        if path and not str(e).startswith(path):
            raise ConfigError(f"{path}.{e}") from None
        raise


def to_dict(obj: Any) -> Any:
    """A JSON/TOML-friendly dict of a config (the inverse of :func:`from_dict`)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (tuple, list)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, types.MappingProxyType | dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj
