"""The config tree: frozen dataclasses loaded from TOML presets in ``gen/configs/``.

A config is the single source of truth for every size, latency and timing in a
generated design; RTL generators, drivers and golden models all read it.
``dataclasses.replace`` makes variants.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .base import ConfigError, check, check_float, from_dict, to_dict
from .capsnet import CapsNetConfig, PEConfig
from .fp import FPConfig
from .hmc import HMCConfig
from .spm import SPMConfig

__all__ = ["Config", "ConfigError", "FPConfig", "PEConfig", "CapsNetConfig", "HMCConfig",
           "SPMConfig",
           "load_config", "preset_names", "to_dict"]


@dataclass(frozen=True)
class Config:
    """A whole accelerator configuration.

    Parameters
    ----------
    name : str
        Preset name, recorded in manifests and reports.
    top : str
        Registered block that ``pimforge verilog CONFIG`` generates.
    freq_mhz : float
        Clock of the logic die (PEs, controllers).
    fp, pe, capsnet, hmc, spm
        Sections, see their classes.
    """

    name: str = "default"
    top: str = "capsnet_pe"
    freq_mhz: float = 312.5
    fp: FPConfig = field(default_factory=FPConfig)
    pe: PEConfig = field(default_factory=PEConfig)
    capsnet: CapsNetConfig = field(default_factory=CapsNetConfig)
    hmc: HMCConfig = field(default_factory=HMCConfig)
    spm: SPMConfig = field(default_factory=SPMConfig)

    def __post_init__(self):
        check(isinstance(self.name, str) and self.name.isidentifier(), "name", self.name,
              "an identifier (letters, digits, underscores)")
        check_float("freq_mhz", self.freq_mhz, 1.0, 5000.0)

    @property
    def tck_ns(self) -> float:
        return 1000.0 / self.freq_mhz

    def replace(self, **changes) -> Config:
        return dataclasses.replace(self, **changes)


def _presets_dir():
    return resources.files("pimforge.gen") / "configs"


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in _presets_dir().iterdir() if p.name.endswith(".toml"))


def load_config(spec: str | Path | None = None) -> Config:
    """Load a preset by name (``default``, ``hmc_gen3``...) or a TOML file by path."""
    if spec is None:
        spec = "default"
    spec = str(spec)
    if spec.endswith(".toml") or "/" in spec:
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(f"config file {spec!r} does not exist")
        text = path.read_text()
    else:
        res = _presets_dir() / f"{spec}.toml"
        if not res.is_file():
            raise ConfigError(f"unknown config preset {spec!r}; presets: "
                              f"{', '.join(preset_names())} (or give a path to a .toml file)")
        text = res.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config {spec!r} is not valid TOML: {e}") from None
    return from_dict(Config, data)
