"""``pimforge examples DIR`` copies the shipped sweep specs, SIMB programs and image pipeline
files, and they work."""

from __future__ import annotations

from pimforge.gen.cli import main
from pimforge.sim.examples import example_files


def test_examples_are_copied_and_usable(tmp_path, capsys):
    files = example_files()
    assert {"ipim_stencil.s", "ipim_unsharp.py", "sweeps/capsnet_suite.toml"} <= set(files)
    assert "__init__.py" not in files
    out = tmp_path / "ex"
    assert main(["examples", str(out)]) == 0
    for rel, src in files.items():
        assert (out / rel).read_text() == src.read_text()
    for spec in sorted((out / "sweeps").glob("*.toml")):
        assert main(["sweep", str(spec), "--list"]) == 0, spec
    assert main(["simb", "asm", str(out / "ipim_stencil.s"), "-o", str(tmp_path / "p.hex")]) == 0
    for pipe in sorted(out.glob("*.py")):   # outside the package, as a user's file
        assert main(["run", "image", "--pipeline", str(pipe), "--engine", "iss",
                     "--size", "16x16"]) == 0, pipe


def test_examples_refuse_to_replace_files_unless_forced(tmp_path, capsys):
    out = tmp_path / "ex"
    assert main(["examples", str(out)]) == 0
    (out / "ipim_stencil.s").write_text("mine\n")
    capsys.readouterr()
    assert main(["examples", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--force" in err
    assert (out / "ipim_stencil.s").read_text() == "mine\n"
    assert main(["examples", str(out), "--force"]) == 0
    assert (out / "ipim_stencil.s").read_text() != "mine\n"


def test_a_file_in_the_way_of_dir_is_one_line_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    for bad in (str(tmp_path / "afile"), ""):
        assert main(["examples", bad]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
