"""The iPIM compiler as an ordered list of passes (:mod:`pimforge.sim.ipim.passes`).

The programs are those of the compiler before it was split into passes (the hashes of
every vault's words below were taken then), whether the passes run one by one, each
result printed, or in one call; bounds inference returns the halos the in-place code
computed and edits no array; ``--dump-ir`` writes one file per pass, in order.
"""

from __future__ import annotations

import hashlib

import pytest

from pimforge.gen.cli import main
from pimforge.gen.config import load_config
from pimforge.rtl.ipim.isa import encode
from pimforge.sim.ipim.backend import OPT_LEVELS
from pimforge.sim.ipim.bounds import infer_bounds, needs_even, tiled
from pimforge.sim.ipim.emit import array_refs
from pimforge.sim.ipim.image_benches import PIPELINES, build
from pimforge.sim.ipim.image_run import compile_bench
from pimforge.sim.ipim.lang import CompileError
from pimforge.sim.ipim.layout import Program
from pimforge.sim.ipim.lower import build_graph
from pimforge.sim.ipim.passes import PASSES, Source, ir_text, steps

#: the size and parameters of each benchmark compiled here (32x32 unless named)
SMALL = {"stencil_chain": ({"stencils": 4}, 32), "local_laplacian": ({"depth": 2}, 16)}
#: the benchmarks whose compile takes ten seconds or more here (checked pass by pass only)
SLOW = {"local_laplacian", "interpolate", "bilateral_grid"}

#: sha256 (first 16 hex digits) of every vault's program words, in vault order, on
#: ipim_small, as the compiler made them before it was a list of passes (updated since
#: where a compiler change altered a program: the stencils' loads in address order; the
#: schedule letting a bank access follow another one that may touch its address right
#: behind it, as the request queue keeps their order: the halo exchanges; the histogram's
#: reduction over the vaults as a tree)
WORDS = {
    "bilateral_grid/baseline1": "02cef86854b0a438",
    "bilateral_grid/baseline2": "952c7c0c99b3f7c5",
    "bilateral_grid/baseline3": "0b8ece4b6e87c65e",
    "bilateral_grid/baseline4": "ba83e3c8dc4c4ec3",
    "bilateral_grid/opt": "d0e2d9644fbf92c0",
    "blur/baseline1": "bcb6af737786bcf9",
    "blur/baseline2": "359e4cba95c94b58",
    "blur/baseline3": "1b5d9de33680fd6c",
    "blur/baseline4": "7452fce390be4516",
    "blur/opt": "563582dda62a7990",
    "brighten/baseline1": "af1ff777d7a4c146",
    "brighten/baseline2": "41e9ded6efbeba5a",
    "brighten/baseline3": "e175f7b1ae3c91d7",
    "brighten/baseline4": "4caa8cff50920506",
    "brighten/opt": "13e44375a23d1580",
    "downsample/baseline1": "b41603e7e7383f29",
    "downsample/baseline2": "ddcb0ce4fbc58104",
    "downsample/baseline3": "2139454e766a0511",
    "downsample/baseline4": "cc8f8925b35eee58",
    "downsample/opt": "c98a5473eced5181",
    "histogram/baseline1": "a536ee4832acdb58",
    "histogram/baseline2": "3426794320959946",
    "histogram/baseline3": "444583696c7a710d",
    "histogram/baseline4": "a673cdfd661986f3",
    "histogram/opt": "ff89f382949a95e0",
    "interpolate/baseline1": "79762e5e01c4f675",
    "interpolate/baseline2": "48783bdc47025f89",
    "interpolate/baseline3": "44da8dded75bea7b",
    "interpolate/baseline4": "9d54b4efebf8fc6a",
    "interpolate/opt": "38191d1edec3d22c",
    "local_laplacian/baseline1": "5bc3a6c18f6dac25",
    "local_laplacian/baseline2": "898714be1494b197",
    "local_laplacian/baseline3": "b2fd7ff2d79f81c0",
    "local_laplacian/baseline4": "8583730df63389e1",
    "local_laplacian/opt": "471a79ddd504abf4",
    "shift/baseline1": "b53d4a322927423e",
    "shift/baseline2": "ccc27aed895068b5",
    "shift/baseline3": "c73d962c1f380884",
    "shift/baseline4": "ccc27aed895068b5",
    "shift/opt": "ccc27aed895068b5",
    "stencil_chain/baseline1": "dcca88023811380b",
    "stencil_chain/baseline2": "38860c16cc8972e1",
    "stencil_chain/baseline3": "30c1f7e649d8028a",
    "stencil_chain/baseline4": "5687261bc5cdb75a",
    "stencil_chain/opt": "ddb150c1a4c3fc6f",
    "upsample/baseline1": "a7810e4f4e5f3117",
    "upsample/baseline2": "52b30acf42107cb4",
    "upsample/baseline3": "d13e7e502ebe789a",
    "upsample/baseline4": "c036c898854bf042",
    "upsample/opt": "9ff816ea0b3f4b51",
}


@pytest.fixture(scope="module")
def cfg():
    return load_config("ipim_small")


def _digest(prog: Program) -> str:
    h = hashlib.sha256()
    for v in sorted(prog.programs):
        for ins in prog.programs[v]:
            h.update(encode(ins).to_bytes(16, "little"))
    return h.hexdigest()[:16]


def _source(cfg, bench: str, opt: str) -> Source:
    params, n = SMALL.get(bench, ({}, 32))
    ip = cfg.ipim
    out, size, crop = build(bench, n, n, ip.cubes * ip.vaults * ip.pes, **params)
    return Source(out, size, cfg, OPT_LEVELS[opt], crop)


def test_the_passes_are_in_order():
    assert [p.name for p in PASSES] == ["graph", "bounds", "layout", "select", "preschedule",
                                        "regalloc", "reorder", "assemble"]


@pytest.mark.parametrize("bench", sorted(PIPELINES))
def test_pass_by_pass_and_one_call_make_the_programs_of_before(cfg, bench):
    """Every Table II benchmark under opt and baseline1..4: the passes run one at a time,
    each result printed before the next runs, make the words the compiler made before
    it was split into passes; under opt and baseline1 (the two ends of Fig. 12) the
    one-call compile makes the same words too (for the benchmarks that compile in
    seconds: the same passes run, only the printing between them differs)."""
    params, n = SMALL.get(bench, ({}, 32))
    for opt in sorted(OPT_LEVELS):
        ir = None
        for p, ir in steps(_source(cfg, bench, opt)):
            assert ir_text(ir, vault=0).strip(), p.name
        assert isinstance(ir, Program)
        if opt in ("opt", "baseline1") and bench not in SLOW:
            one = compile_bench(bench, n, n, cfg, opt, **params)
            assert ir.programs == one.programs, (bench, opt)
        assert _digest(ir) == WORDS[f"{bench}/{opt}"], (bench, opt)


def _old_bounds(g, npe: int) -> dict:
    """The rows per PE and halos as the compiler computed them before the bounds pass,
    writing into the arrays: ``{name: (R, hxl, hxr, hyt, hyb)}``."""
    want: dict[int, int] = {}
    for a in reversed(g.order):
        body = g.bodies.get(id(a))
        if tiled(a):
            if id(a) in want:
                a.R = want[id(a)]
            else:
                a.R = -(-a.H // npe)
                if body is not None and needs_even(body)[1]:
                    a.R += a.R % 2
        if body is None or not tiled(a):
            continue
        for r in array_refs(body):
            p = r.arr
            if tiled(p):
                want.setdefault(id(p), a.R * r.ay[0] // r.ay[2])
    for a in g.order:
        body = g.bodies.get(id(a))
        if body is None:
            continue
        for r in array_refs(body):
            p = r.arr
            xa, xb, xd = r.ax
            ya, yb, yd = r.ay
            p.hxl = max(p.hxl, -(xb // xd))
            p.hxr = max(p.hxr, (xa * (a.S - 1) + xb) // xd - (p.S - 1))
            p.hyt = max(p.hyt, -(yb // yd))
            p.hyb = max(p.hyb, (ya * (a.R - 1) + yb) // yd - (p.R - 1))
    return {a.name: (a.R, a.hxl, a.hxr, a.hyt, a.hyb) for a in g.order}


@pytest.mark.parametrize("bench", sorted(set(PIPELINES) - {"histogram"}))
def test_bounds_pass_returns_the_halos_of_before_and_edits_nothing(cfg, bench):
    params, n = SMALL.get(bench, ({}, 32))
    ip = cfg.ipim
    npe = ip.cubes * ip.vaults * ip.pes

    def graph():
        out, size, _ = build(bench, n, n, npe, **params)
        return build_graph(list(out) if isinstance(out, tuple) else [out], size, npe)

    old = _old_bounds(graph(), npe)
    g = graph()
    fields = ("R", "hxl", "hxr", "hyt", "hyb", "base")
    before = [tuple(getattr(a, f) for f in fields) for a in g.order]
    b = infer_bounds(g, npe)
    assert [tuple(getattr(a, f) for f in fields) for a in g.order] == before
    new = {a.name: (b.rows[a], *b.halos[a]) for a in g.order}
    assert new == old
    assert any(h != (0, 0, 0, 0) for h in b.halos.values()) or bench in (
        "brighten", "shift", "downsample")


def test_bounds_pass_raises_what_the_compile_did(cfg):
    """A height whose bands cannot feed a replicated copy fails in the bounds pass,
    with the message the compiler gave before."""
    ip = cfg.ipim
    out, size, crop = build("interpolate", 24, 32, ip.cubes * ip.vaults * ip.pes)
    done = []
    with pytest.raises(CompileError, match=r"needs its height \(24\) a multiple of the 16"):
        for p, _ in steps(Source(out, size, cfg, OPT_LEVELS["opt"], crop)):
            done.append(p.name)
    assert done == ["graph"]


def test_dump_ir_writes_one_file_per_pass_in_order(cfg, tmp_path, capsys):
    d = tmp_path / "ir"
    asm = tmp_path / "blur.s"
    assert main(["compile", "image", "--bench", "blur", "--size", "32x32", "--dump-ir",
                 str(d), "-o", str(asm)]) == 0
    capsys.readouterr()
    files = sorted(d.iterdir())
    assert [f.name for f in files] == [f"{n:02d}-{p.name}.txt" for n, p in
                                       enumerate(PASSES, 1)]
    for f, p in zip(files, PASSES):
        text = f.read_text()
        assert text.startswith(f"# pass {PASSES.index(p) + 1} of {len(PASSES)}: {p.name}:")
        assert len(text.splitlines()) > 3, f.name
    assert "in: R 2; halo 0 2 0 2" in (d / "02-bounds.txt").read_text()
    assert "%1" in (d / "04-select.txt").read_text()      # virtual registers
    assert "%1" not in (d / "06-regalloc.txt").read_text()
    # the last file is the assembly the -o file holds (with pcs)
    last = (d / "08-assemble.txt").read_text()
    code = [ln.split("#")[0].strip() for ln in last.splitlines()[3:] if ln]
    assert code == asm.read_text().strip().splitlines()


@pytest.mark.parametrize("target", ["file", "under_file", "is_output"])
def test_bad_dump_ir_target_is_one_line(tmp_path, capsys, target):
    f = tmp_path / "f"
    f.write_text("x")
    argv = ["compile", "image", "--bench", "blur", "--size", "16x16", "--dump-ir"]
    argv += {"file": [str(f)], "under_file": [str(f / "ir")],
             "is_output": [str(tmp_path), "-o", str(tmp_path / "08-assemble.txt")]}[target]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert f.read_text() == "x"
    assert not (tmp_path / "08-assemble.txt").exists()
