"""Images whose height the PEs do not divide (and whose width is any multiple of 4): the
bands of the last PEs are shorter or empty, and their rows beyond the image hold its
last row, as a clamped read sees it. The point, stencil and resampling benchmarks at odd
sizes on ipim_small's 16 PEs match numpy on the instruction-set simulator; a halo row too
wide for the scratchpads moves in chunks; an 8K image maps onto Table III's machine.
Random images come from ``numpy.random.default_rng`` seeded by ``PIMFORGE_SEED``
(logged; rerun a failure with the printed seed).
"""

import logging
import os

import numpy as np
import pytest

from pimforge.gen.config import load_config
from pimforge.sim.ipim.image_run import compile_bench, run_bench
from pimforge.sim.ipim.lang import CompileError

log = logging.getLogger(__name__)
SEED = int(os.environ.get("PIMFORGE_SEED", "20261127"))


@pytest.fixture(scope="module")
def cfg():
    return load_config("ipim_small")


#: (bench, W, H, params): 40 rows are 14 bands of 3 on 16 PEs, the last of one row;
#: 36 rows are 12 bands of 3; stencil_chain's stages exchange halos across short bands
_CASES = [("brighten", 72, 40, {}), ("shift", 100, 36, {}), ("blur", 72, 40, {}),
          ("blur", 100, 36, {}), ("stencil_chain", 72, 40, {"stencils": 2}),
          ("stencil_chain", 100, 36, {"stencils": 2}), ("downsample", 72, 40, {}),
          ("upsample", 100, 36, {})]


@pytest.mark.parametrize(("bench", "W", "H", "params"), _CASES,
                         ids=[f"{b}-{w}x{h}" for b, w, h, _ in _CASES])
def test_odd_sizes_match_numpy(cfg, bench, W, H, params):
    log.info("seed %d (rerun with PIMFORGE_SEED=%d)", SEED, SEED)
    rng = np.random.default_rng([SEED, W, H])
    img = rng.random((H, W), dtype=np.float32)
    r = run_bench(bench, img, cfg, engine="iss", **params)
    assert r.output.shape == r.reference.shape
    assert r.max_abs_error == 0.0, r.max_abs_error
    out = r.program.output
    assert out.bands * out.R >= out.H
    if bench in ("blur", "stencil_chain") and H == 40:
        assert out.bands < 16 and out.last_rows < out.R


def test_a_wide_halo_row_moves_in_chunks(cfg):
    """A PGSM of 8 lines holds 8 vectors of a 20-vector halo row: three exchanges."""
    small = load_config("ipim_small", {"ipim.pgsm_bytes": 128})
    rng = np.random.default_rng([SEED, 1])
    img = rng.random((40, 64), dtype=np.float32)
    r = run_bench("stencil_chain", img, small, engine="iss", stencils=2)
    assert r.max_abs_error == 0.0
    assert any("3 chunks of 8 vectors" in k for k in r.program.kernels)


def test_8k_maps_on_table3_in_short_last_bands():
    """4,320 rows on 4,096 PEs: bands of 2 rows on the first 2,160 PEs."""
    prog = compile_bench("brighten", 4320, 7680, load_config("ipim_table3"))
    out = prog.output
    assert (out.R, out.bands, out.last_rows, out.S) == (2, 2160, 2, 1920)
    assert len(prog.programs) == 128


def test_sizes_that_cannot_map_say_why(cfg):
    with pytest.raises(CompileError, match="multiple of 4"):
        compile_bench("blur", 40, 70, cfg)


@pytest.fixture(scope="module")
def cfg8():
    """Two ipim_small cubes: 8 vaults, so that vault 1 has a neighbour on each side."""
    return load_config("ipim_small", {"ipim.cubes": 2})


@pytest.mark.parametrize("bench", ["blur", "stencil_chain", "upsample"])
def test_one_vault_share_matches_numpy(cfg8, bench):
    """Vault 1's share of 72 rows on 8 vaults x 4 PEs (bands of 3), run with its two
    neighbours on a window of four vaults, is its rows of the whole image's output."""
    from pimforge.sim.ipim.one_vault import run_one_vault

    rng = np.random.default_rng([SEED, 2])
    img = rng.random((72, 64), dtype=np.float32)
    params = {"stencils": 3} if bench == "stencil_chain" else {}
    r = run_one_vault(bench, img, cfg8, engine="iss", **params)
    assert r.vault == 1 and r.vaults == 8 and r.window == {0: 0, 1: 1, 2: 2}
    rows = 12 * (2 if bench == "upsample" else 1)
    assert r.rows == (rows, 2 * rows)
    assert r.run.output.shape == r.run.reference.shape
    assert r.run.reference.shape[0] == rows
    assert r.run.max_abs_error == 0.0
    if bench == "stencil_chain":
        assert r.run.counts["req"] > 0
    assert 0 < r.instructions < sum(r.run.counts.values())


def test_one_vault_cli_writes_the_share_and_refuses_a_pipeline(tmp_path, capsys):
    from pimforge.gen.cli import main

    out = tmp_path / "ov.json"
    rc = main(["run", "image", "--bench", "blur", "--config", "ipim_small", "--set",
               "ipim.cubes=2", "--size", "64x72", "--engine", "iss", "--one-vault",
               "--json", str(out)])
    assert rc == 0
    import json

    d = json.loads(out.read_text())
    assert d["one_vault"] is True
    b = d["benches"]["blur"]
    assert b["one_vault"]["vault"] == 1 and b["one_vault"]["output_rows"] == [12, 24]
    assert b["matches_reference"] is True and b["machine_ms"] is None
    capsys.readouterr()
    pipe = tmp_path / "p.py"
    pipe.write_text("def pipeline(H, W):\n    pass\n")
    rc = main(["run", "image", "--pipeline", str(pipe), "--one-vault", "--engine", "iss",
               "--json", str(tmp_path / "p.json")])
    err = capsys.readouterr().err
    assert rc != 0 and "--one-vault" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize(("W", "H"), [(72, 40), (100, 36), (20, 8)])
def test_histogram_of_odd_sizes_counts_only_the_image(cfg, W, H):
    """The rows past the image, and the PEs without a band (8 rows on 16 PEs), count
    into a bucket that the reduction leaves out."""
    rng = np.random.default_rng([SEED, W, H, 3])
    img = rng.integers(0, 256, (H, W), dtype=np.uint8)
    r = run_bench("histogram", img, cfg, engine="iss")
    assert r.max_abs_error == 0.0 and int(r.output.sum()) == W * H


def test_histogram_reduction_is_a_tree_over_the_vaults():
    """64 vaults add their sums in a tree of 6 rounds: in round r every vault whose
    index is a multiple of 2^(r+1) fetches the sums of the vault 2^r further (``req``
    between two ``sync``), so vault v fetches in as many rounds as 2 divides v (vault 0
    in all six) and every vault passes the same 12 barriers; the counts are exact."""
    from pimforge.rtl.ipim.isa import Opcode
    from pimforge.sim.ipim.image_run import compile_bench

    big = load_config("ipim_small", {"ipim.cubes": 16, "ipim.vsm_bytes": 65536,
                                     "ipim.imem_instructions": 16384})
    nv = big.ipim.cubes * big.ipim.vaults
    rng = np.random.default_rng([SEED, 4])
    img = rng.integers(0, 256, (40, 64), dtype=np.uint8)
    r = run_bench("histogram", img, big, engine="iss")
    assert r.max_abs_error == 0.0 and int(r.output.sum()) == 40 * 64
    prog = compile_bench("histogram", 40, 64, big)
    nq = 256 // 4
    for v in range(nv):
        ops = [i.opcode for i in prog.programs[v]]
        fetches = min((v & -v).bit_length() - 1, 6) if v else 6
        assert ops.count(Opcode.REQ) == fetches * nq, v
        assert ops.count(Opcode.SYNC) == 12, v


@pytest.mark.parametrize("vsm_bytes, where", [(4096, "bank"), (65536, "VSM")])
def test_histogram_partials_in_the_vsm_where_it_holds_them(vsm_bytes, where):
    """Every PE's partial histogram goes in the vault's VSM where it holds the four PEs'
    257 lines beside the reduction's (their read-modify-writes then take a few cycles,
    not a DRAM write and read), else in each PE's bank; both count exactly, rows past
    the image (40 rows on 16 PEs) in the bucket nobody reads."""
    cfg = load_config("ipim_small", {"ipim.vsm_bytes": vsm_bytes})
    rng = np.random.default_rng([SEED, vsm_bytes, 5])
    img = rng.integers(0, 256, (40, 72), dtype=np.uint8)
    r = run_bench("histogram", img, cfg, engine="iss")
    assert r.max_abs_error == 0.0 and int(r.output.sum()) == 40 * 72
    kernels = " ".join(r.program.kernels)
    assert f"scatter 3x18 vectors ({where})" in kernels, kernels
    assert ("4 buckets a trip" in kernels) == (where == "VSM"), kernels
