import dataclasses

import pytest

from pimforge.gen.config import Config, ConfigError, load_config, preset_names
from pimforge.gen.config.base import from_dict


def test_presets_load():
    names = preset_names()
    assert {"default", "hmc_gen3"} <= set(names)
    for n in names:
        cfg = load_config(n)
        assert cfg.name == n


def test_hmc_gen3_values():
    cfg = load_config("hmc_gen3")
    assert cfg.hmc.vaults == 32
    assert cfg.hmc.banks_per_vault == 16
    assert cfg.capsnet.pes_per_vault == 16
    assert cfg.freq_mhz == 312.5
    assert cfg.tck_ns == pytest.approx(3.2)


@pytest.mark.parametrize("data, msg", [
    ({"hmc": {"vaults": 48}}, "hmc.vaults must be a power of two between 1 and 64, not 48"),
    ({"fp": {"add_latency": 0}}, "fp.add_latency must be an integer between 1 and 8, not 0"),
    ({"freq_mhz": -3}, "freq_mhz must be a number between"),
    ({"hmc": {"vault": 4}}, "unknown config key 'hmc.vault'"),
    ({"colour": 1}, "unknown config key 'colour'"),
])
def test_bad_values_name_field(data, msg):
    with pytest.raises(ConfigError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        from_dict(Config, data)


def test_unknown_preset_lists_presets():
    with pytest.raises(ConfigError, match="presets: .*default"):
        load_config("no_such_preset")


def test_toml_file(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('name = "mine"\n[hmc]\nvaults = 4\n')
    cfg = load_config(p)
    assert cfg.hmc.vaults == 4 and cfg.name == "mine"
    p.write_text("name = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(p)


def test_configs_are_frozen_and_replaceable():
    cfg = load_config("default")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.freq_mhz = 1.0
    v = dataclasses.replace(cfg, hmc=dataclasses.replace(cfg.hmc, vaults=8))
    assert v.hmc.vaults == 8 and cfg.hmc.vaults != 8
