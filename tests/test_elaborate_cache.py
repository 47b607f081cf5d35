"""The kept elaborations (gen/elaborate.py): a second elaboration of the same block and
config is the first's result, a broken entry is elaborated again, any change to the
generators, the config or the top gives another entry, and a cache that cannot be
written or a plugin's block only costs the time."""

import json
import shutil
from importlib import resources
from types import SimpleNamespace

import pytest

from pimforge.gen import elaborate as el_mod
from pimforge.gen.config import load_config
from pimforge.gen.elaborate import elaborate, elaboration_cache_path, generator_key
from pimforge.gen.registry import get_block

BLOCK = "fp32_add"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIMFORGE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _path(config, top=BLOCK):
    return elaboration_cache_path(get_block(BLOCK), top, config)


def test_second_elaboration_is_the_kept_one(cache, monkeypatch):
    cfg = load_config("default")
    first = elaborate(BLOCK, cfg)
    path = _path(cfg)
    assert path.parent == cache / "elaborated" and path.exists()
    # The kept entry is what is returned: the generator is not run again.
    monkeypatch.setattr(el_mod, "_elaborate", lambda *a: pytest.fail("elaborated again"))
    again = elaborate(BLOCK, cfg)
    assert (again.top, again.verilog, again.manifest) == (first.top, first.verilog,
                                                          first.manifest)


@pytest.mark.parametrize("damage", ["cut", "empty", "not json", "other top"])
def test_broken_entry_is_elaborated_again_and_replaced(cache, damage):
    cfg = load_config("default")
    first = elaborate(BLOCK, cfg)
    path = _path(cfg)
    text = path.read_text()
    path.write_text({"cut": text[: len(text) // 2], "empty": "", "not json": "{]",
                     "other top": json.dumps({"top": "x", "verilog": "", "manifest": {}})
                     }[damage])
    again = elaborate(BLOCK, cfg)
    assert again.verilog == first.verilog and again.manifest == first.manifest
    assert json.loads(path.read_text())["verilog"] == first.verilog


def test_config_and_top_name_other_entries(cache):
    a = load_config("default")
    b = load_config("default", {"fp.add_latency": 1})
    assert len({_path(a), _path(b), _path(a, top="other_name")}) == 3
    assert elaborate(BLOCK, b).manifest["config"]["fp"]["add_latency"] == 1
    assert elaborate(BLOCK, a, top="other_name").top == "other_name"


def test_editing_a_generator_changes_the_key(tmp_path):
    root = tmp_path / "pkg"
    for sub in ("rtl", "gen"):
        shutil.copytree(resources.files(f"pimforge.{sub}"), root / sub,
                        ignore=shutil.ignore_patterns("__pycache__"))
    assert generator_key(root) == generator_key()     # the copy hashes like the package
    keys = [generator_key(root)]
    f = root / "rtl" / "fp" / "add.py"
    f.write_text(f.read_text() + "\n# edited\n")
    generator_key.cache_clear()
    keys.append(generator_key(root))
    (root / "gen" / "configs" / "default.toml").write_text("# edited\n")
    generator_key.cache_clear()
    keys.append(generator_key(root))
    generator_key.cache_clear()
    assert len(set(keys)) == 3


def test_unwritable_cache_costs_only_the_time(cache):
    cache.write_text("a file where the cache folder should be\n")
    cfg = load_config("default")
    assert elaborate(BLOCK, cfg).top == BLOCK
    assert cache.is_file()


def test_plugin_blocks_are_not_kept():
    spec = SimpleNamespace(name="x", factory="someplugin.rtl:from_config")
    assert elaboration_cache_path(spec, "x", load_config("default")) is None
