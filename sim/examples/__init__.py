"""``pimforge examples DIR``: copy the example inputs that ship with the package.

The sweep specs (``sweeps/*.toml``, for ``pimforge sweep``), the SIMB programs
(``*.s``, for ``pimforge simb``) and the image pipeline files (``*.py`` but this one,
for ``pimforge run image --pipeline``) the README uses live here as package data, so
an installed wheel has them too; ``pimforge examples DIR`` writes them into ``DIR``
with the same layout (``DIR/sweeps/capsnet_suite.toml``, ``DIR/ipim_stencil.s``,
``DIR/ipim_unsharp.py``).
"""

from __future__ import annotations

import argparse
from importlib import resources
from importlib.resources.abc import Traversable

from pimforge.gen.args import out_dir
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import check_output_dir, check_output_file, write_text

__all__ = ["add_arguments", "example_files", "run"]

_SUFFIXES = (".s", ".toml", ".py")


def example_files() -> dict[str, Traversable]:
    """Every example, by its path relative to the examples folder (``sweeps/x.toml``)."""
    found: dict[str, Traversable] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir() and child.name != "__pycache__":
                walk(child, f"{prefix}{child.name}/")
            elif (child.is_file() and child.name.endswith(_SUFFIXES)
                  and child.name != "__init__.py"):
                found[prefix + child.name] = child

    walk(resources.files("pimforge.sim.examples"), "")
    return dict(sorted(found.items()))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=out_dir, metavar="DIR",
                   help="folder to copy the examples into (created if missing)")
    p.add_argument("--force", action="store_true",
                   help="replace example files already in DIR (default: refuse)")


def run(args: argparse.Namespace) -> int:
    out = check_output_dir(args.dir, "DIR")
    files = example_files()
    targets = {rel: check_output_file(out / rel, "example") for rel in files}
    there = [str(t) for t in targets.values() if t.exists()]
    if there and not args.force:
        raise PimforgeError(f"{len(there)} example file(s) already in {str(out)!r} (e.g. "
                            f"{there[0]!r}); give another DIR or --force to replace them")
    for rel, src in files.items():
        write_text(targets[rel], src.read_text(encoding="utf-8"))
    for rel in files:
        print(f"  {out / rel}")
    print(f"copied {len(files)} examples to {out}: pimforge sweep {out}/sweeps/NAME.toml, "
          f"pimforge simb run {out}/NAME.s, pimforge run image --pipeline {out}/NAME.py")
    return 0
