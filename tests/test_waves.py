"""Waves from the native drivers: ``--waves FILE.vcd`` with a window of cycles.

The NoC command on a 2x2 mesh writes a VCD that pyvcd's reader parses: the clock
toggles in it, and it holds every cycle of the window and nothing outside it
(cycle N at time 10 N with the clock low and 10 N + 5 after its rising edge).
"""

import json
import logging
import random

import pytest
from vcd.reader import TokenKind, tokenize

from pimforge.gen.cli import main

log = logging.getLogger(__name__)

MESH = ["--set", "noc.flit_bits=32", "--set", "noc.buffer_depth=2", "--mesh", "2x2",
        "--packet-flits", "3", "--step", "0.5", "--warmup", "100", "--measure", "200"]


def read_vcd(path):
    """(variables by id code as (scope, name), sorted times, {id code: [(time, value)]})."""
    scopes, names, times, changes, now = [], {}, [], {}, None
    with open(path, "rb") as f:
        for tok in tokenize(f):
            if tok.kind is TokenKind.SCOPE:
                scopes.append(tok.scope.ident)
            elif tok.kind is TokenKind.UPSCOPE:
                scopes.pop()
            elif tok.kind is TokenKind.VAR:
                names.setdefault(tok.var.id_code, (".".join(scopes),
                                                         tok.var.reference))
            elif tok.kind is TokenKind.CHANGE_TIME:
                now = tok.time_change
                times.append(now)
            elif tok.kind is TokenKind.CHANGE_SCALAR:
                changes.setdefault(tok.scalar_change.id_code, []).append(
                    (now, tok.scalar_change.value))
            elif tok.kind is TokenKind.CHANGE_VECTOR:
                changes.setdefault(tok.vector_change.id_code, []).append(
                    (now, tok.vector_change.value))
    return names, times, changes


def test_noc_writes_the_waves_of_the_window(tmp_path, capsys):
    rng = random.Random()
    seed = rng.randrange(2**16)
    start = 40 + rng.randrange(60)
    stop = start + 10 + rng.randrange(30)
    log.info("seed %d, waves of cycles %d to %d", seed, start, stop)
    out, vcd = tmp_path / "r.json", tmp_path / "w.vcd"
    assert main(["noc", *MESH, "--seed", str(seed), "--json", str(out), "--waves", str(vcd),
                 "--waves-from", str(start), "--waves-to", str(stop)]) == 0
    assert json.loads(out.read_text())["mesh"] == "2x2"
    assert str(vcd) in capsys.readouterr().err
    assert not list(tmp_path.glob(".w.vcd.*"))        # no temporary left beside it
    names, times, changes = read_vcd(vcd)
    assert times == sorted(times)
    # every cycle of the window, both clock phases, and nothing else
    assert times == [10 * c + p for c in range(start, stop + 1) for p in (0, 5)], times[:6]
    (clk,) = {k for k, (scope, name) in names.items() if name == "clk" and scope.count(".") == 0}
    assert [v for _, v in changes[clk]] == ["0", "1"] * (stop - start + 1)
    # the mesh inside is there too, not only the top's pins
    assert any("router" in scope.lower() or "noc_mesh" in scope for scope, _ in names.values())


@pytest.mark.parametrize("argv, msg", [
    (["--waves", "w.fst"], "FST is not available"),
    (["--waves", "w.txt"], "must be a .vcd file, not 'w.txt'"),
    (["--waves", "w.vcd", "--waves-from", "9", "--waves-to", "3"],
     "--waves-to (3) must be at least --waves-from (9)"),
    (["--waves", "w.vcd", "--waves-to", "3", "--waves-from", "9"],
     "--waves-to (3) must be at least --waves-from (9)"),
    (["--waves", "w.vcd", "--waves-from", "-1"], "must be at least 0, not -1"),
    (["--waves-from", "5"], "give --waves too"),
    (["--waves", "nofolder/w.vcd"], "nofolder"),
])
def test_bad_waves_options_are_one_line(tmp_path, monkeypatch, capsys, argv, msg):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nofolder").write_text("a file in the way")
    assert main(["noc", *MESH, "--json", "r.json", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nofolder"]


def test_membench_waves_end_with_the_run(tmp_path):
    """A window past the end of the run holds the cycles up to its end."""
    out, vcd = tmp_path / "r.json", tmp_path / "m.vcd"
    assert main(["membench", "--pattern", "random", "--requests", "200", "--json", str(out),
                 "--waves", str(vcd), "--waves-from", "700", "--waves-to", "100000"]) == 0
    cycles = json.loads(out.read_text())["cycles"]
    names, times, changes = read_vcd(vcd)
    assert times[0] == 7000 and times == sorted(set(times)) and times[-1] % 10 == 5
    last = times[-1] // 10
    assert 700 < last < 100000 and last >= cycles - 1, (last, cycles)
    assert len(times) == 2 * (last - 700 + 1)
    assert {name for _, name in names.values()} >= {"clk", "rst"}


@pytest.mark.parametrize("argv, msg", [
    (["simb", "run", "prog.s", "--waves", "w.vcd"], "give --rtl too"),
    (["run", "image", "--bench", "all", "--waves", "w.vcd"], "one benchmark"),
    (["run", "image", "--bench", "brighten", "--engine", "iss", "--waves", "w.vcd"],
     "--engine rtl"),
    (["run", "dnn", "--net", "resnet152", "--scale", "1", "--waves", "w.vcd"],
     "--scale 2 or more"),
    (["run", "dnn", "--net", "resnet152", "--scale", "8", "--waves", "w.vcd",
      "--waves-layer", "res2_9_a"], "'res2_9_a' is no layer of resnet152; give a layer with "
     "MACs: conv1, res2_0_a"),
    (["run", "dnn", "--net", "resnet152", "--scale", "8", "--waves", "w.vcd",
      "--waves-layer", "pool1"], "'pool1' has no MACs"),
    (["run", "dnn", "--net", "resnet152", "--scale", "8", "--waves-layer", "conv1"],
     "give --waves too"),
])
def test_waves_need_a_run_on_the_rtl(tmp_path, monkeypatch, capsys, argv, msg):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prog.s").write_text("halt\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.s"]


def _vault_waves_ok(vcd, start, stop):
    names, times, _ = read_vcd(vcd)
    # every cycle of the window, both clock phases, and nothing else
    assert times == [10 * c + p for c in range(start, stop + 1) for p in (0, 5)], times[:6]
    # the vault compute inside: its controller's instruction memory and the PE lanes
    scopes = {scope for scope, _ in names.values()}
    assert any("pe" in s.lower() for s in scopes), sorted(scopes)[:20]
    assert {name for _, name in names.values()} >= {"clk", "rd_valid", "at_bar"}


#: the vault with 2 PEs: its traced build (made only for waves) is a fraction of the
#: default's 16-PE one, and the two capsnet tests below share it
SMALL_VAULT = ["--set", "capsnet.pes_per_vault=2"]


def test_demo_writes_the_waves_of_one_vault(tmp_path, capsys):
    """``pimforge demo --waves``: the routing's waves of one vault's compute, the window
    only, on a traced build of a small vault."""
    rng = random.Random()
    seed = rng.randrange(2**16)
    rng = random.Random(seed)
    start = 20 + rng.randrange(200)
    stop = start + 5 + rng.randrange(40)
    log.info("seed %d, waves of cycles %d to %d", seed, start, stop)
    vcd = tmp_path / "demo.vcd"
    assert main(["demo", *SMALL_VAULT, "--batch", "2", "--waves", str(vcd), "--waves-from",
                 str(start), "--waves-to", str(stop), "--waves-vault", "1"]) == 0
    assert str(vcd) in capsys.readouterr().err
    assert not list(tmp_path.glob(".demo.vcd.*"))
    _vault_waves_ok(vcd, start, stop)


def test_run_capsnet_writes_the_waves_of_the_rtl_run(tmp_path, capsys):
    rng = random.Random()
    seed = rng.randrange(2**16)
    rng = random.Random(seed)
    start = rng.randrange(100)
    stop = start + 5 + rng.randrange(20)
    log.info("seed %d, waves of cycles %d to %d", seed, start, stop)
    vcd, out = tmp_path / "r.vcd", tmp_path / "r.json"
    assert main(["run", "capsnet", "--net", "Caps-MN1", "--scale", "128", *SMALL_VAULT,
                 "--json", str(out), "--waves", str(vcd), "--waves-from", str(start), "--waves-to",
                 str(stop)]) == 0
    assert str(vcd) in capsys.readouterr().err
    _vault_waves_ok(vcd, start, stop)
    # waves need the RTL run, and a vault of the cube
    for argv, msg in ((["--model-only"], "leave out --model-only"),
                      (["--waves-vault", "2"], "below the config's 2 vaults")):
        assert main(["run", "capsnet", "--net", "Caps-MN1", "--scale", "128", "--waves",
                     str(tmp_path / "x.vcd"), *argv]) == 2
        assert msg in capsys.readouterr().err
    assert main(["run", "capsnet", "--net", "Caps-MN1", "--waves-vault", "1"]) == 2
    assert "give --waves too" in capsys.readouterr().err
    assert not (tmp_path / "x.vcd").exists()
