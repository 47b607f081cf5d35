"""The result of one workload run (``pimforge run WORKLOAD``), typed, with its JSON form.

Every workload (``capsnet`` today; iPIM ``image`` and NicePIM ``dnn`` later)
returns a dataclass derived from :class:`WorkloadResult`. The dataclass is the
one description of what a run reports: its fields are the keys of the run's
JSON, :meth:`~WorkloadResult.to_json` writes them (plain ``dict``/``list``/
``str``/``int``/``float``/``bool``/``None`` only) together with the schema name
and version, and :meth:`~WorkloadResult.from_json` reads them back, refusing a
document of another workload or another schema version. The command-line
dispatcher prints :meth:`~WorkloadResult.summary`, writes
:meth:`~WorkloadResult.to_json` to ``--json`` and exits 0 when
:attr:`~WorkloadResult.ok`, else 1.

Nested parts that deserve names are dataclasses themselves (decoded from the
field's type hint: a dataclass, ``X | None``, ``dict[str, X]`` or
``list[X]``); the rest stay plain dicts. A field whose metadata has
``omit_if_none`` is left out of the JSON while it is ``None`` (sections only
some runs have). Fields the schema version does not know are ignored on
reading, so a producer may add a section of its own (``pimforge demo`` adds
``demo``); a missing field is an error.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

import numpy as np

from pimforge.gen.errors import PimforgeError

__all__ = ["OMIT_IF_NONE", "ResultSchemaError", "WorkloadResult", "to_plain"]

#: ``dataclasses.field(metadata=OMIT_IF_NONE)``: leave the key out of the JSON
#: while the value is None.
OMIT_IF_NONE = {"omit_if_none": True}

R = TypeVar("R", bound="WorkloadResult")


class ResultSchemaError(PimforgeError, ValueError):
    """A results document is not of the expected workload, schema version or shape."""


def to_plain(value: Any) -> Any:
    """*value* as plain JSON types: dataclasses become dicts (fields in order,
    ``omit_if_none`` fields left out while None), tuples become lists and numpy
    scalars Python numbers (their ``repr``, hence their JSON text, is kept)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not (f.metadata.get("omit_if_none") and getattr(value, f.name) is None)}
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return to_plain(value.tolist())
    return value


def _decode(tp: Any, value: Any, where: str) -> Any:
    """*value* (plain JSON) as the type hint *tp*: only dataclasses need building."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _decode(args[0], value, where) if len(args) == 1 else value
    if origin is dict and isinstance(value, Mapping):
        vt = typing.get_args(tp)[1] if typing.get_args(tp) else Any
        return {k: _decode(vt, v, f"{where}.{k}") for k, v in value.items()}
    if origin is list and isinstance(value, list):
        vt = typing.get_args(tp)[0] if typing.get_args(tp) else Any
        return [_decode(vt, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ResultSchemaError(f"{where} must be an object, not {type(value).__name__}")
        return _build(tp, value, where)
    return value


def _build(cls: type, d: Mapping, where: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    missing = [f.name for f in fields if f.name not in d
               and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ResultSchemaError(f"{where} lacks {', '.join(repr(m) for m in missing)}")
    return cls(**{f.name: _decode(hints[f.name], d[f.name], f"{where}.{f.name}")
                  for f in fields if f.name in d})


@dataclasses.dataclass(frozen=True)
class WorkloadResult:
    """Base of every workload's result (see the module doc).

    A subclass is a frozen dataclass that sets :attr:`SCHEMA` and
    :attr:`SCHEMA_VERSION` and implements :meth:`summary` and :attr:`ok`.

    Attributes
    ----------
    SCHEMA : str
        Name of the JSON schema, ``"pimforge.run.WORKLOAD"``.
    SCHEMA_VERSION : int
        Raised whenever a field is renamed, removed or changes meaning.
    """

    SCHEMA: ClassVar[str] = ""
    SCHEMA_VERSION: ClassVar[int] = 0

    def to_json(self) -> dict:
        """The run as a JSON-ready dict: ``schema``, ``schema_version``, then the fields."""
        return {"schema": self.SCHEMA, "schema_version": self.SCHEMA_VERSION,
                **to_plain(self)}

    @classmethod
    def from_json(cls: type[R], d: Mapping) -> R:
        """The result *d* (a :meth:`to_json` dict, e.g. ``json.load`` of ``--json``) describes.

        Raises
        ------
        ResultSchemaError
            *d* is not an object, is of another schema, of another schema
            version, or lacks a field.
        """
        if not isinstance(d, Mapping):
            raise ResultSchemaError(f"a {cls.SCHEMA} result must be a JSON object, "
                                    f"not {type(d).__name__}")
        schema, version = d.get("schema"), d.get("schema_version")
        if schema is None:
            raise ResultSchemaError(f"not a {cls.SCHEMA} result: it has no 'schema' field "
                                    f"(results written before schema versions cannot be "
                                    f"read back; rerun the workload)")
        if schema != cls.SCHEMA:
            raise ResultSchemaError(f"schema must be {cls.SCHEMA!r} to read a "
                                    f"{cls.__name__}, not {schema!r}")
        if version != cls.SCHEMA_VERSION:
            raise ResultSchemaError(f"{cls.SCHEMA} schema_version must be "
                                    f"{cls.SCHEMA_VERSION} (what this pimforge reads), "
                                    f"not {version!r}")
        return _build(cls, d, cls.SCHEMA)

    def summary(self) -> str:
        """The human-readable lines the command line prints for this run."""
        raise NotImplementedError

    @property
    def ok(self) -> bool:
        """Whether the run checked out (the command exits 0 when true, else 1)."""
        raise NotImplementedError
