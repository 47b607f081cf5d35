"""The package list in pyproject.toml matches the folders of the four subsystems."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    found = set()
    for top in ("rtl", "gen", "sim", "verif"):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT)
            found.add("pimforge." + ".".join(rel.parts))
    assert found == listed, (f"add to pyproject: {sorted(found - listed)}; "
                             f"remove: {sorted(listed - found)}")
