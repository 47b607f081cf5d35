"""The config tree: frozen dataclasses whose defaults are the ``default`` preset.

A config is the single source of truth for every size, latency and timing in a
generated design; RTL generators, drivers and golden models all read it.
``Config`` is assembled from the sections the accelerators register
(:mod:`pimforge.gen.registry`): ``fp`` and ``hmc`` (shared), ``pe`` and
``capsnet`` (PIM-CapsNet), ``spm`` (DESCNet), so a new accelerator adds its
section without editing this module. The dataclass defaults *are* the
``default`` preset; other presets (TOML files in ``gen/configs/``) state only
what differs, starting from ``extends = "PRESET"`` (``default`` when absent).
Any value can be changed with ``--set SECTION.FIELD=VALUE`` overrides
(:func:`parse_overrides`), validated exactly like TOML values.
``dataclasses.replace`` makes variants.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import field
from importlib import resources
from pathlib import Path
from typing import Any

from pimforge.rtl.params import shown

from ..registry import blocks, resolve, sections
from .base import ConfigError, check, check_float, from_dict, to_dict

__all__ = ["Config", "ConfigError", "bench_config", "load_config", "parse_overrides",
           "preset_names", "to_dict"]


def _post_init(self) -> None:
    # The name ends up in file and folder names (builds, manifests): keep it short.
    check(isinstance(self.name, str) and self.name.isidentifier() and len(self.name) <= 64,
          "name", self.name, "an identifier (letters, digits, underscores) of at most 64 "
          "characters")
    check(self.top in blocks(), "top", self.top,
          "a registered block (`pimforge verilog --list`)")
    check_float("freq_mhz", self.freq_mhz, 1.0, 5000.0)


def _replace(self, **changes):
    return dataclasses.replace(self, **changes)


_DOC = """A whole accelerator configuration.

    Parameters
    ----------
    name : str
        Preset name, recorded in manifests and reports.
    top : str
        Registered block that ``pimforge verilog CONFIG`` generates.
    freq_mhz : float
        Clock of the logic die (PEs, controllers); the DRAM command clock is
        ``hmc.tck_ns``.
    {sections}
        Sections registered by the accelerators, see their classes.
    """


def _make_config() -> type:
    secs = {name: resolve(s.cls) for name, s in sections().items()}
    fields = [("name", str, field(default="default")),
              ("top", str, field(default="capsnet_pe")),
              ("freq_mhz", float, field(default=312.5))]
    fields += [(name, cls, field(default_factory=cls)) for name, cls in secs.items()]
    cls = dataclasses.make_dataclass(
        "Config", fields, frozen=True,
        namespace={"__post_init__": _post_init, "replace": _replace,
                   "__doc__": _DOC.format(sections=", ".join(secs))})
    cls.__module__ = __name__      # (make_dataclass's module= is Python 3.12+)
    return cls


Config = _make_config()


def _presets_dir():
    return resources.files("pimforge.gen") / "configs"


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in _presets_dir().iterdir() if p.name.endswith(".toml"))


def _read_toml(spec: str) -> dict[str, Any]:
    try:
        raw = _read_bytes(spec)
    except OSError as e:            # a name too long, a file that cannot be read
        raise ConfigError(f"config {shown(spec)} cannot be read: {e.strerror}") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"config {spec!r} is not UTF-8 text (byte {e.start}); save it as "
                          "UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config {spec!r} is not valid TOML: {e}") from None


def _read_bytes(spec: str) -> bytes:
    if spec.endswith(".toml") or "/" in spec:
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(f"config file {shown(spec)} does not exist")
        return path.read_bytes()
    res = _presets_dir() / f"{spec}.toml"
    if not res.is_file():
        raise ConfigError(f"unknown config preset {shown(spec)}; presets: "
                          f"{', '.join(preset_names())} (or give a path to a .toml file)")
    return res.read_bytes()


def _merge(base: dict, over: Mapping) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k),
                                                                           dict) else v
    return out


def _resolve_data(spec: str, chain: tuple[str, ...] = ()) -> dict[str, Any]:
    """The TOML mapping of *spec* with its ``extends`` chain merged in (base first)."""
    if spec in chain:
        raise ConfigError(f"config {spec!r} extends itself through "
                          f"{' -> '.join((*chain, spec))}")
    data = _read_toml(spec)
    parent = data.pop("extends", "default")
    check(isinstance(parent, str) and parent != "", f"{spec}: extends", parent,
          "the name of a preset or a path to a .toml file")
    if spec == "default" or parent == "default":
        return data            # the dataclass defaults are the default preset
    base = _resolve_data(parent, (*chain, spec))
    base.pop("name", None)     # a preset's name is its own
    return _merge(base, data)


def _nest(overrides: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        *path, leaf = key.split(".")
        node = out
        for p in path:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {key}: {p!r} is a value, not a section")
        node[leaf] = value
    return out


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """``["hmc.vaults=8", "hmc.scheduler=fcfs"]`` -> ``{"hmc.vaults": 8, ...}``.

    Values are read as TOML values (``8``, ``0.5``, ``true``, ``"x"``, ``[1, 2]``);
    anything else is taken as a string, so ``hmc.scheduler=fcfs`` needs no quotes.
    A key given twice is an error.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or not key or any(not p.isidentifier() for p in key.split(".")):
            raise ConfigError(f"--set takes SECTION.FIELD=VALUE (e.g. hmc.vaults=8), "
                              f"not {item!r}")
        if key in out:
            raise ConfigError(f"--set {key} is given twice")
        text = text.strip()
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except ValueError:     # not TOML (or an integer of thousands of digits): text
            value = text
        if value == "":
            raise ConfigError(f"--set {key} needs a value")
        out[key] = value
    return out


def load_config(spec: str | Path | None = None,
                overrides: Mapping[str, Any] | None = None) -> Config:
    """Load a preset by name (``default``, ``hmc_gen3``...) or a TOML file by path.

    *overrides* (``{"hmc.vaults": 8}``, see :func:`parse_overrides`) are applied
    on top and validated like TOML values.
    """
    spec = "default" if spec is None else str(spec)
    if spec == "":
        raise ConfigError("the config name is empty; give a preset name or a .toml path")
    data = _resolve_data(spec)
    if "name" not in data and (spec.endswith(".toml") or "/" in spec):
        # A file of one's own without `name =` is named after the file, not "default".
        stem = re.sub(r"\W", "_", Path(spec).stem)[:64]
        data["name"] = stem if stem.isidentifier() else f"c_{stem}"[:64]
    data = _merge(data, _nest(overrides or {}))
    return from_dict(Config, data)


def bench_config(bench) -> Config:
    """The config a registered :class:`~pimforge.gen.registry.Bench` runs on: its preset
    with its overrides."""
    return load_config(bench.config, bench.overrides)
