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


def test_hmc_gen3_values(preset):
    cfg = preset("hmc_gen3")
    assert cfg.hmc.vaults == 32
    assert cfg.hmc.banks_per_vault == 16
    assert cfg.capsnet.pes_per_vault == 16
    assert cfg.freq_mhz == 312.5
    assert cfg.hmc.tck_ns == pytest.approx(0.8)   # DRAM command clock; the logic clock: freq_mhz


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


def test_configs_are_frozen_and_replaceable(preset):
    cfg = preset("default")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.freq_mhz = 1.0
    v = dataclasses.replace(cfg, hmc=dataclasses.replace(cfg.hmc, vaults=8))
    assert v.hmc.vaults == 8 and cfg.hmc.vaults != 8


def test_dataclass_defaults_are_the_default_preset():
    assert load_config("default") == Config()


def test_presets_extend_the_default(tmp_path, preset):
    from pimforge.gen.config import to_dict

    gen3 = preset("hmc_gen3")
    assert gen3.hmc.vaults == 32 and gen3.hmc.timing == Config().hmc.timing
    mine = tmp_path / "mine.toml"
    mine.write_text('extends = "hmc_gen3"\nname = "mine"\n[hmc]\nvaults = 8\n')
    cfg = load_config(mine)
    assert cfg.name == "mine" and cfg.hmc.vaults == 8 and cfg.hmc.links == 4
    assert to_dict(cfg)["capsnet"] == to_dict(gen3)["capsnet"]
    loop = tmp_path / "loop.toml"
    loop.write_text(f'extends = "{loop}"\n')
    with pytest.raises(ConfigError, match="extends itself"):
        load_config(loop)


@pytest.mark.parametrize("overrides, msg", [
    ({"pe.exp_recovery": "false"}, "pe.exp_recovery must be true or false, not 'false'"),
    ({"hmc.vaults": True}, "hmc.vaults must be an integer, not True"),
    ({"freq_mhz": "fast"}, "freq_mhz must be a number, not 'fast'"),
    ({"hmc.scheduler": ""}, "hmc.scheduler must be a string (not empty)"),
    ({"top": "nope"}, "top must be a registered block"),
    ({"hmc.timing.tREFI": 10.0}, "hmc.timing.tREFI must be"),
])
def test_values_are_type_checked(overrides, msg):
    with pytest.raises(ConfigError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        load_config("default", overrides)


def test_non_utf8_toml_is_a_clean_error(tmp_path):
    p = tmp_path / "latin1.toml"
    p.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(p)
