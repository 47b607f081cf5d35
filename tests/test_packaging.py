"""The package works outside the source tree: a built wheel holds every file the code
reads, and an installed (not editable) wheel runs the demo from another folder."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rtl", "gen", "sim", "verif")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # Built from a copy of the tree: setuptools builds in the source folder (build/,
    # *.egg-info), where the other worker's tests run at the same time.
    src = tmp_path_factory.mktemp("src")
    for name in (*PACKAGES, "pyproject.toml", "README.md"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                          str(out), str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    (whl,) = out.glob("pimforge-*.whl")
    return whl


def _tree_files() -> set[str]:
    """Every file under the four package folders, as its path inside the wheel."""
    files = set()
    for top in PACKAGES:
        for f in (ROOT / top).rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                files.add("pimforge/" + f.relative_to(ROOT).as_posix())
    return files


def _resource_reads() -> set[str]:
    """Files the code reads with ``importlib.resources.files(PKG) / "a" / "b"`` (literal
    parts), as paths inside the wheel: a cheap static list of what must be packaged."""
    found = set()
    for top in PACKAGES:
        for f in (ROOT / top).rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text())):
                if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "files"
                        and node.args and isinstance(node.args[0], ast.Constant)):
                    continue
                pkg = node.args[0].value
                if isinstance(pkg, str) and pkg.startswith("pimforge."):
                    found.add(pkg.replace(".", "/"))
    return found


def test_wheel_holds_every_file_of_the_tree(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(_tree_files() - names)
    assert not missing, f"not in the wheel (add to package-data in pyproject.toml): {missing}"


def test_wheel_holds_the_examples(wheel):
    # What `pimforge examples DIR` copies: the README's sweep specs, SIMB programs and
    # image pipeline files.
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("ipim_stencil.s", "ipim_unsharp.py", "sweeps/capsnet_suite.toml",
                 "sweeps/capsnet_ablations.toml", "sweeps/ipim_image_opts.toml"):
        assert f"pimforge/sim/examples/{name}" in names, name


def test_resource_packages_exist_in_the_wheel(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    reads = _resource_reads()
    assert reads, "expected importlib.resources reads in the package"
    for pkg in reads:
        assert any(n.startswith(pkg + "/") for n in names), pkg


def test_no_module_reads_files_next_to_itself():
    # Package data is found with importlib.resources, which works in a zip or an
    # installed wheel alike; a path built from __file__ is how files go missing.
    offenders = []
    for top in PACKAGES:
        for f in (ROOT / top).rglob("*.py"):
            if "Path(__file__)" in f.read_text():
                offenders.append(str(f.relative_to(ROOT)))
    assert not offenders, offenders


@pytest.mark.slow
def test_installed_wheel_runs_the_demo(wheel, tmp_path):
    """`pip install pimforge-*.whl` into a fresh virtualenv, `pimforge demo` from elsewhere."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    res = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-cache-dir", str(wheel)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # The demo's Verilator build is keyed by the Verilator it uses: pointing the new
    # environment at this one's (VERILATOR_ROOT, which users may set too) lets it share
    # the build test_capsnet_run makes instead of compiling the vault a second time.
    # The installed package still supplies every file of the run (the driver's C++ is
    # read from it for the build key).
    from pimforge.sim.verilator import verilator_root
    env["VERILATOR_ROOT"] = str(verilator_root())
    res = subprocess.run([str(env_dir / "bin" / "pimforge"), "demo"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "bit-exact" in res.stdout or "matches" in res.stdout, res.stdout[-2000:]
    # The package ran from the virtualenv, not from the source tree.
    where = subprocess.run([str(py), "-c", "import pimforge.gen, sys; "
                            "print(pimforge.gen.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True)
    assert str(env_dir) in where.stdout and str(ROOT) not in where.stdout
