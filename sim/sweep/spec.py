"""Sweep specs: a TOML file naming a workload, a base config and the axes to vary.

A spec is read and checked whole before anything runs (:func:`load_spec`);
its grid is a list of :class:`Point`, each the argument list of one
``pimforge run WORKLOAD`` invocation. The format::

    description = "the 12 Table 1 networks at 1/32"   # optional
    workload = "capsnet"          # any registered workload (`pimforge run --list`)
    config = "default"            # preset or .toml path (relative to the spec file)

    [set]                         # config changes for every point, by their --set names
    "hmc.mapping" = "capsnet"

    [options]                     # workload options for every point (--scale 32 ...)
    scale = 32
    model-only = true             # a flag: true gives it, false leaves it out

    [axes]                        # varied: every combination (product)
    net = ["Caps-MN1", "Caps-SV1"]
    "hmc.vaults" = [2, 4]         # a dotted name (or name, top, freq_mhz) is a config field

    [zip]                         # varied together (equal lengths), crossed with [axes]
    net = [...]
    scale = [...]

    [report]
    columns = ["cycles", "speedup_vs.pim-inter"]   # result fields in the summary table
                                  # ({KEY}: the point's value of KEY, "benches.{bench}.ipc")
    # a column over the same column of the point that differs only in one axis,
    # and its mean per value of that axis (e.g. each variant's cycles over PIM-CapsNet's)
    ratio = { column = "cycles", axis = "ablation", baseline = "pim-capsnet" }

``config`` may also be an axis. A key that is neither a config field nor an
option of the workload, a key that is both fixed and varied, an empty axis or
zip lists of different lengths are :class:`SpecError` naming the key; a value
is checked by the point that uses it (a value the workload rejects fails that
point only).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import itertools
import json
import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pimforge.gen.config import Config, load_config, preset_names, to_dict
from pimforge.gen.errors import PimforgeError
from pimforge.gen.registry import get_workload

__all__ = ["MAX_POINTS", "Option", "Point", "SpecError", "SweepSpec", "load_spec",
           "config_field_exists"]

#: The most points a spec may expand to unless the user raises it (``--max-points``):
#: a larger grid is refused, with its count, before it is expanded.
MAX_POINTS = 10_000

_TOP_KEYS = {"description", "workload", "config", "set", "options", "axes", "zip", "report"}
#: Options ``pimforge run`` adds to every workload that a spec sets otherwise: the
#: config is its own key, ``--set`` the [set] table, and the sweep writes the JSON.
_RESERVED = {"--config", "--set", "--json", "--help", "-h"}
#: Config fields outside any section (``--set freq_mhz=400``).
_CONFIG_TOP = tuple(f.name for f in dataclasses.fields(Config))


class SpecError(PimforgeError):
    """A sweep spec is malformed: unknown key, unknown workload or field, empty axis."""


@dataclass(frozen=True)
class Option:
    """One option of a workload's parser.

    Attributes
    ----------
    flag : str
        The long option string (``--net``).
    takes_value : bool
        False for a switch (``--model-only``), which a spec gives as a boolean.
    """

    flag: str
    takes_value: bool


@dataclass(frozen=True)
class Point:
    """One run of the grid.

    Attributes
    ----------
    values : dict
        The varied keys and this point's values, in spec order.
    argv : tuple of str
        The arguments of ``pimforge run WORKLOAD`` (without ``--json``).
    name : str
        File-name-safe id (``net=Caps-MN1,scale=32``); the point's JSON is
        ``points/NAME.json``.
    key : str
        SHA-256 of the workload, the arguments and the contents of a config
        file the point reads: a point JSON recorded under another key is stale.
    config : str
        The config (preset name or absolute path) of this point.
    overrides : dict
        Its ``--set`` values, typed.
    """

    values: dict[str, Any]
    argv: tuple[str, ...]
    name: str
    key: str
    config: str
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepSpec:
    """A checked spec (:func:`load_spec`) and its grid."""

    path: Path
    workload: str
    description: str
    points: tuple[Point, ...]
    axes: tuple[str, ...]
    columns: tuple[str, ...]
    #: ``{"column", "axis", "baseline"}`` of ``[report] ratio``, or None.
    ratio: dict[str, Any] | None
    #: The spec file's text, recorded with the combined results.
    text: str


def config_field_exists(key: str) -> bool:
    """True if *key* (``hmc.vaults``, ``freq_mhz``) names a field of the config tree."""
    node: Any = Config()
    for part in key.split("."):
        if not dataclasses.is_dataclass(node) or part not in {
                f.name for f in dataclasses.fields(node)}:
            return False
        node = getattr(node, part)
    return True


def _toml_value(value: Any) -> str:
    """*value* as the TOML text ``--set`` reads back (strings quoted, so ``"8"`` stays
    a string)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise SpecError(f"a config value must be a string, number, boolean or list, not "
                    f"{value!r}")


def _slug(values: Mapping[str, Any]) -> str:
    text = ",".join(f"{k}={v}" for k, v in values.items()) or "point"
    return re.sub(r"[^A-Za-z0-9._=,+-]", "_", text)


class _Reader:
    """Reads one spec: keeps the path for messages and the workload's options."""

    def __init__(self, path: Path, options: Mapping[str, Option]):
        self.path = path
        self.options = options

    def fail(self, what: str) -> SpecError:
        return SpecError(f"sweep spec {str(self.path)!r}: {what}")

    def kind(self, key: str) -> str:
        """``"config"``, ``"option"`` or ``"config-name"`` of a spec key, or an error."""
        if key == "config":
            return "config-name"
        if "." in key or key in _CONFIG_TOP:
            if not config_field_exists(key):
                raise self.fail(f"unknown config field {key!r} (`pimforge config` prints "
                                "the fields)")
            return "config"
        if self.flag(key) in self.options:
            return "option"
        raise self.fail(f"{key!r} is neither a config field (SECTION.FIELD) nor an option "
                        f"of the workload; its options: "
                        f"{', '.join(sorted(o[2:] for o in self.options))}")

    @staticmethod
    def flag(key: str) -> str:
        return "--" + key.replace("_", "-")

    def table(self, data: Mapping, name: str) -> dict[str, Any]:
        t = data.get(name, {})
        if not isinstance(t, dict):
            raise self.fail(f"[{name}] must be a table")
        return t

    def option_args(self, key: str, value: Any) -> list[str]:
        opt = self.options[self.flag(key)]
        if not opt.takes_value:
            if not isinstance(value, bool):
                raise self.fail(f"{key} is a switch: give true or false, not {value!r}")
            return [opt.flag] if value else []
        if isinstance(value, bool) or isinstance(value, dict):
            raise self.fail(f"{key} takes a value, not {value!r}")
        if isinstance(value, list):     # a repeatable option: given once per item
            return [a for v in value for a in (opt.flag, str(v))]
        return [opt.flag, str(value)]

    def config_path(self, value: Any) -> str:
        if not isinstance(value, str) or value == "":
            raise self.fail(f"config must be a preset name or a .toml path, not {value!r}")
        if value.endswith(".toml") or "/" in value:
            p = Path(value)
            p = p if p.is_absolute() else (self.path.parent / p).resolve()
            if not p.is_file():
                raise self.fail(f"config file {str(p)!r} does not exist")
            return str(p)
        if value not in preset_names():
            raise self.fail(f"unknown config preset {value!r}; presets: "
                            f"{', '.join(preset_names())} (or a path to a .toml file)")
        return value

    def plain(self, value: Any, where: str, *, tables: bool = False) -> None:
        """Refuse a value of a type the spec does not take: a TOML date or time anywhere,
        an inline table where a value (or a list of values) goes."""
        if isinstance(value, (datetime.date, datetime.time)):
            raise self.fail(f"{where} is a TOML date or time ({value.isoformat()}); give a "
                            "string, number or boolean")
        if isinstance(value, dict):
            if not tables:
                raise self.fail(f"{where} is a table; give a string, number, boolean or a "
                                "list of them")
            for k, v in value.items():
                self.plain(v, f"{where}.{k}" if where else k, tables=tables)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.plain(v, f"{where}[{i}]")


def load_spec(path: str | Path, options: Callable[[str], Mapping[str, Option]], *,
              max_points: int = MAX_POINTS) -> SweepSpec:
    """Read and check the spec at *path*; ``options(workload)`` gives the workload's
    parser options by flag. A grid of more than *max_points* points is refused (with
    its count) before it is expanded.

    Raises
    ------
    SpecError
        In one line, naming the key to change.
    """
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"sweep spec {str(p)!r} does not exist")
    try:
        text = p.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError:
        raise SpecError(f"sweep spec {str(p)!r} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"sweep spec {str(p)!r} is not valid TOML: {e}") from None
    r = _Reader(p, {})
    r.plain(data, "", tables=True)
    for name in ("set", "options", "axes", "zip"):
        for k, v in r.table(data, name).items():
            r.plain(v, f"[{name}] {k}")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise r.fail(f"unknown key {unknown[0]!r}; a spec has "
                     f"{', '.join(sorted(_TOP_KEYS))}")
    workload = data.get("workload")
    if not isinstance(workload, str) or not workload:
        raise r.fail("name the workload: workload = \"NAME\" (`pimforge run --list`)")
    try:
        get_workload(workload)
    except PimforgeError as e:
        raise r.fail(str(e)) from None
    r.options = {f: o for f, o in options(workload).items() if f not in _RESERVED}

    fixed: dict[str, Any] = {}
    for table in ("set", "options"):
        for k, v in r.table(data, table).items():
            kind = r.kind(k)
            if table == "set" and kind != "config":
                raise r.fail(f"[set] takes config fields (SECTION.FIELD), not {k!r}; "
                             "workload options go in [options]")
            if table == "options" and kind != "option":
                raise r.fail(f"[options] takes workload options, not {k!r}; config "
                             "fields go in [set]")
            fixed[k] = v
    if "config" in data:
        fixed["config"] = data["config"]

    axes = r.table(data, "axes")
    zipped = r.table(data, "zip")
    varied: list[str] = []
    for name, table in (("axes", axes), ("zip", zipped)):
        for k, v in table.items():
            r.kind(k)
            if k in fixed:
                raise r.fail(f"{k!r} is both fixed and varied (in [{name}])")
            if k in varied:
                raise r.fail(f"{k!r} is varied twice ([axes] and [zip])")
            if not isinstance(v, list) or not v:
                raise r.fail(f"[{name}] {k} must be a non-empty list of values, "
                             f"not {v!r}")
            if name == "axes" and len(set(map(json.dumps, v))) != len(v):
                raise r.fail(f"[axes] {k} lists a value twice")
            varied.append(k)
    lengths = {len(v) for v in zipped.values()}
    if len(lengths) > 1:
        raise r.fail(f"the [zip] lists must have the same length, not "
                     f"{', '.join(f'{k}: {len(v)}' for k, v in zipped.items())}")
    if len(set(json.dumps(c) for c in zip(*zipped.values()))) != min(lengths, default=0):
        raise r.fail("[zip] lists the same combination twice")
    report = r.table(data, "report")
    if set(report) - {"columns", "ratio"}:
        raise r.fail(f"[report] has columns and ratio, not "
                     f"{sorted(set(report) - {'columns', 'ratio'})[0]!r}")
    ratio = report.get("ratio")
    if ratio is not None:
        if not isinstance(ratio, dict) or set(ratio) != {"column", "axis", "baseline"} \
                or not isinstance(ratio["column"], str) or not ratio["column"]:
            raise r.fail("[report] ratio must be { column = \"FIELD\", axis = \"KEY\", "
                         "baseline = VALUE }")
        values = {**axes, **zipped}.get(ratio["axis"])
        if values is None:
            raise r.fail(f"[report] ratio: {ratio['axis']!r} is not a varied key")
        if ratio["baseline"] not in values:
            raise r.fail(f"[report] ratio: baseline {ratio['baseline']!r} is not a value of "
                         f"{ratio['axis']}")
    columns = report.get("columns", [])
    if not isinstance(columns, list) or not all(isinstance(c, str) and c for c in columns):
        raise r.fail("[report] columns must be a list of result field names "
                     "(dotted for nested ones)")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise r.fail("description must be a string")

    count = math.prod(len(v) for v in axes.values()) * min(lengths, default=1)
    if count > max_points:
        raise r.fail(f"the grid has {count:,} points, more than {max_points:,}; vary fewer "
                     "keys, or give --max-points N to run that many")
    combos = [dict(zip(axes, c)) for c in itertools.product(*axes.values())]
    zips = [dict(zip(zipped, c)) for c in zip(*zipped.values())] if zipped else [{}]
    points = [_point(r, workload, fixed, {**a, **z}) for a in combos for z in zips]
    names = [pt.name for pt in points]
    points = [pt if names.count(pt.name) == 1 and len(pt.name) <= 120 else
              dataclasses.replace(pt, name=f"{pt.name[:80]}-{pt.key[:12]}") for pt in points]
    return SweepSpec(path=p, workload=workload, description=description, points=tuple(points),
                     axes=tuple(varied), columns=tuple(columns), ratio=ratio,
                     text=text)


def _point(r: _Reader, workload: str, fixed: Mapping[str, Any],
           values: dict[str, Any]) -> Point:
    every = {**fixed, **values}
    config = r.config_path(every.get("config", "default"))
    argv = ["--config", config]
    overrides = {}
    for k, v in every.items():
        kind = r.kind(k)
        if kind == "config":
            argv += ["--set", f"{k}={_toml_value(v)}"]
            overrides[k] = v
        elif kind == "option":
            argv += r.option_args(k, v)
    h = hashlib.sha256(json.dumps([workload, argv]).encode())
    if Path(config).is_file():       # a file's contents, not its name, make the point
        h.update(Path(config).read_bytes())
    return Point(values=values, argv=tuple(argv), name=_slug(values), key=h.hexdigest(),
                 config=config, overrides=overrides)


def config_identity(point: Point) -> str:
    """The resolved config of *point* as canonical JSON (points with the same one share
    a build), or its arguments when the config does not load (the run reports why)."""
    try:
        return json.dumps(to_dict(load_config(point.config, point.overrides)), sort_keys=True)
    except PimforgeError:
        return json.dumps(list(point.argv))
