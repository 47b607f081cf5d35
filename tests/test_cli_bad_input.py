"""No registered command prints a traceback, runs, or writes anything for a bad argument.

The bad values are derived from each option's declared type, so a new command's
options are covered as soon as it is registered: every subcommand of the parser
(the framework's and every accelerator's), every option with a validating type,
and ``--config``/``--set`` wherever a command takes a config.
"""

from __future__ import annotations

import argparse

import pytest

from pimforge.gen import args as A
from pimforge.gen.cli import build_parser, main


def _subcommands():
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, p in sub.choices.items():
        nested = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if nested:                                  # pimforge run WORKLOAD
            for wname, wp in nested[0].choices.items():
                yield [name, wname], wp
        else:
            yield [name], p


def _bad_values(action, tmp_path):
    t = action.type
    name = getattr(t, "__name__", "")
    if t in (A.out_file, A.out_dir):
        (tmp_path / "afile").write_text("x")
        if not (tmp_path / "loop1").is_symlink():
            (tmp_path / "loop1").symlink_to("loop2")
            (tmp_path / "loop2").symlink_to("loop1")
        loops = [str(tmp_path / "loop1"), str(tmp_path / "loop2" / "sub")]
        if t is A.out_file:
            return [str(tmp_path / "afile" / "r.json"), "", *loops]
        return [str(tmp_path / "afile"), "", *loops]
    if t is A.waves_file:
        (tmp_path / "afile").write_text("x")
        return [str(tmp_path / "afile" / "w.vcd"), "w.fst", "w.txt", "", str(tmp_path)]
    if t is A.nonempty or t is A.in_file:
        return ["", "  "]
    if name == "int":
        return ["-7", "abc", "1.5", "99999999999999999999"]
    if name == "float":
        return ["abc", "nan", "inf", "-1e9"]
    if name == "size_arg":
        return ["64", "0x0", "axb", "64x64x3", "99999x4", ""]
    if name == "param_arg":
        return ["depth", "depth=deep", "=2", "2=depth", "", "a=nan", "a=inf", "a=-inf",
                "a=1e400"]
    if name == "_bench_names":
        return ["nonesuch", "", "bilateral grid"]
    if name == "_executor":
        return ["nonesuch", "dask://", "tcp://host", ""]
    if isinstance(action, A.AppendUnique):
        return None                                  # covered by the twice-given case
    return []


def _required(p, tmp_path):
    """Minimal good values for the required arguments, so only the bad one is bad."""
    argv = []
    for a in p._actions:
        if not a.option_strings and a.dest not in ("help", "config") and a.nargs != "?":
            argv.append("spm" if a.dest == "kind" else "x")
        elif a.required:
            good = {"--net": "Caps-MN1", "--out": str(tmp_path / "out"),
                    "--json": str(tmp_path / "out.json"), "--bench": "brighten"}
            argv += [a.option_strings[0], good.get(a.option_strings[0], "1")]
    return argv


CASES = []
for cmd, p in _subcommands():
    for a in p._actions:
        if a.option_strings and (a.type is not None or isinstance(a, A.AppendUnique)):
            CASES.append((cmd, a.option_strings[-1], a))
    if any(a.dest == "overrides" for a in p._actions):
        CASES.append((cmd, "--set", None))
        CASES.append((cmd, "--config", None))


@pytest.mark.parametrize("cmd, opt, action", CASES,
                         ids=[f"{' '.join(c)} {o}" for c, o, _ in CASES])
def test_bad_argument_is_one_line_exit_2_nothing_written(cmd, opt, action, tmp_path,
                                                         capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = dict((tuple(c), q) for c, q in _subcommands())[tuple(cmd)]
    base = _required(p, tmp_path)
    if opt == "--set":
        trials = [["--set", "hmc.vaults=7"], ["--set", "hmc.nope=1"], ["--set", "hmc"],
                  ["--set", "pe.exp_recovery=\"false\""], ["--set", "top=5"]]
    elif opt == "--config":
        trials = [["--config", "no_such_preset"], ["--config", ""]]
        if not any(a.option_strings == ["--config"] for a in p._actions):
            trials = [["no_such_preset"]]
    elif isinstance(action, A.AppendUnique):
        v = "Caps-MN1" if opt == "--net" else ("312.5" if opt == "--freq" else "HY")
        trials = [[opt, v, opt, v], [opt, ""]]
    else:
        trials = [[opt, v] for v in _bad_values(action, tmp_path)]
    assert trials, f"no bad value known for {opt} of {' '.join(cmd)}"
    before = sorted(tmp_path.rglob("*"))
    for extra in trials:
        argv = [*cmd, *extra, *base] if cmd[0] != "run" else [*cmd, *base, *extra]
        with pytest.raises(SystemExit) as e:
            raise SystemExit(main(argv))
        err = capsys.readouterr().err
        assert e.value.code == 2, (argv, err)
        assert "Traceback" not in err, (argv, err)
        assert len(err.strip().splitlines()) == 1, (argv, err)
        assert sorted(tmp_path.rglob("*")) == before, (argv, "wrote something")


#: Commands whose only validated argument is positional, with their bad values.
POSITIONAL_CASES = {"examples": lambda tmp: ["", str(tmp / "afile"), str(tmp / "afile" / "x")]}


@pytest.mark.parametrize("cmd", sorted(POSITIONAL_CASES))
def test_bad_positional_is_one_line_exit_2_nothing_written(cmd, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    before = sorted(tmp_path.rglob("*"))
    for bad in POSITIONAL_CASES[cmd](tmp_path):
        with pytest.raises(SystemExit) as e:
            raise SystemExit(main([cmd, bad]))
        err = capsys.readouterr().err
        assert e.value.code == 2, (cmd, bad, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, (cmd, bad, err)
        assert sorted(tmp_path.rglob("*")) == before, (cmd, bad, "wrote something")


def test_every_command_is_covered():
    covered = {" ".join(c) for c, _, _ in CASES} | set(POSITIONAL_CASES)
    every = {" ".join(c) for c, _ in _subcommands()}
    # config takes only --set; examples only a folder (POSITIONAL_CASES); verilog/regress/run
    # have validated options: all must appear
    assert every - covered <= {"config"}, every - covered


PATH_CASES = []
for cmd, p in _subcommands():
    outs = [a for a in p._actions if a.option_strings and a.type in (A.out_file, A.out_dir)]
    files = [a for a in outs if a.type is A.out_file]
    if len(files) >= 2:
        PATH_CASES.append((cmd, [files[0].option_strings[-1], files[1].option_strings[-1]]))


@pytest.mark.parametrize("cmd, opts", PATH_CASES, ids=[" ".join(c) for c, _ in PATH_CASES])
def test_two_outputs_on_one_path_are_refused(cmd, opts, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = dict((tuple(c), q) for c, q in _subcommands())[tuple(cmd)]
    req, base = _required(p, tmp_path), []
    while req:
        a = req.pop(0)
        if a in opts:
            req.pop(0)          # and its value: given below
        else:
            base.append(a)
    argv = [*cmd, *base, opts[0], "r.json", opts[1], str(tmp_path / "r.json")]
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "is the same file as" in err[0], (argv, err)
    assert not (tmp_path / "r.json").exists()


def test_path_cases_exist():
    assert len(PATH_CASES) >= 2, PATH_CASES     # noc --json/--png, membench --json/--trace
