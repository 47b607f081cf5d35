"""Fig. 8's process-on-base-die machine (``ipim.pe_placement = "base-die"``): the TSV
arbiter against its rules on random ``want`` patterns, the config's error, and on the cube
RTL a benchmark that still equals numpy and a bank-bound one that is slower than
near-bank, with the TSV energy of every bank access.

The RTL test uses ``ipim_small`` at 16x16: its near-bank cube is the one the other
cube tests build, so the test adds one cube build, the base-die one, unoptimized for its
short run (``ipim_eval``, the config ``scripts/ipim/ipim_fig8.py`` uses, would add two).
"""

import logging
import os
import random

import numpy as np
import pytest

from pimforge.gen.config import load_config
from pimforge.gen.config.base import ConfigError
from pimforge.rtl.ipim.tsv import TSVArbiter
from pimforge.verif.tb.amaranth_sim import simulate

log = logging.getLogger(__name__)
SEED = int(os.environ.get("PIMFORGE_SEED", "20261127"))


@pytest.mark.parametrize("pes, beats", [(4, 1), (4, 2), (32, 1), (3, 4), (1, 3)])
def test_tsv_arbiter_one_vector_per_beats_round_robin(pes, beats):
    seed = SEED + 97 * pes + beats
    log.info("seed %d (rerun with PIMFORGE_SEED)", seed)
    rng = random.Random(seed)
    dut = TSVArbiter(pes=pes, beats=beats)
    bad, grants = [], []

    async def tb(ctx):
        pending = set()            # PEs that keep wanting until granted, as a controller does
        waited = {}
        last = None
        for c in range(600):
            for p in range(pes):
                if p not in pending and rng.random() < 0.3:
                    pending.add(p)
                    waited[p] = c
            ctx.set(dut.want, sum(1 << p for p in pending))
            ok = ctx.get(dut.ok)
            got = [p for p in range(pes) if ok >> p & 1]
            where = f"seed {seed} pes {pes} beats {beats} cycle {c}"
            if len(got) > 1:
                bad.append(f"{where}: {len(got)} grants")
            free = last is None or c - last >= beats
            if got and not free:
                bad.append(f"{where}: grant {c - last} cycles after the last (beats {beats})")
            if free and pending and not got:
                bad.append(f"{where}: TSVs free and {sorted(pending)} want, no grant")
            for p in got:
                if p not in pending:
                    bad.append(f"{where}: grant to PE {p}, which does not want")
                elif c - waited[p] > pes * beats:
                    bad.append(f"{where}: PE {p} waited {c - waited[p]} > {pes * beats}")
                pending.discard(p)
                last = c
                grants.append(p)
            await ctx.tick()

    simulate(dut, tb)
    assert not bad, bad[:5]
    assert len(grants) > 600 // (beats * 4)


def test_bad_placement_is_one_line_naming_the_field():
    with pytest.raises(ConfigError) as e:
        load_config("ipim_small", {"ipim.pe_placement": "logic-die"})
    msg = str(e.value)
    assert "ipim.pe_placement" in msg and "'near-bank', 'base-die'" in msg and "\n" not in msg
    with pytest.raises(ConfigError, match="ipim.tsv_bits"):
        load_config("ipim_small", {"ipim.tsv_bits": 96})


@pytest.fixture(scope="module")
def cfgs():
    return {"near-bank": load_config("ipim_small"),
            "base-die": load_config("ipim_small", {"ipim.pe_placement": "base-die"})}


def test_base_die_cube_computes_the_image_and_is_slower_when_bank_bound(cfgs):
    from pimforge.sim.ipim.image_run import cube_driver, run_bench
    from pimforge.sim.ipim.rtl_run import build_cube_driver

    rng = np.random.default_rng(SEED)
    log.info("seed %d (rerun with PIMFORGE_SEED=%d)", SEED, SEED)
    img = rng.random((16, 16), dtype=np.float32)
    # the near-bank cube is the other tests' one; the base-die cube runs a few thousand
    # cycles here only, so its cycle loop is built unoptimized (15 % less CPU)
    exes = {"near-bank": cube_driver(cfgs["near-bank"]),
            "base-die": build_cube_driver(cfgs["base-die"], opt="-O0")}
    runs = {p: run_bench("brighten", img, c, exe=exes[p]) for p, c in cfgs.items()}
    near, base = runs["near-bank"], runs["base-die"]
    for r in runs.values():
        assert r.max_abs_error == 0.0, f"seed {SEED}"
    np.testing.assert_array_equal(near.output, base.output)
    # Same program, same bank accesses; the TSVs (one vector per cycle per vault for
    # four banks that can each take one per tCCD = 2 cycles) make brighten slower.
    assert near.pe_counters["rdwr"] == base.pe_counters["rdwr"]
    assert base.cycles > near.cycles, (near.cycles, base.cycles)
    ip = cfgs["base-die"].ipim
    assert base.energy["tsv"] == pytest.approx(
        base.pe_counters["rdwr"] * 128 * ip.e_tsv_pj_bit / 1e3)
    assert base.energy["total"] > near.energy["total"]


def test_fig8_leaves_out_what_does_not_compile_before_any_run(tmp_path):
    """scripts/ipim/ipim_fig8.py compiles every benchmark before it builds or runs a cube:
    one that does not fit is left out (here every one, with a program memory of 16
    words), and with nothing left the script stops with a one-line error, writing nothing."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "ipim" / "ipim_fig8.py"
    out = tmp_path / "fig8.json"
    p = subprocess.run([sys.executable, str(script), "--bench", "brighten", "--size", "16x16",
                        "--set", "ipim.imem_instructions=16", "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "brighten" in p.stdout and "does not compile" in p.stdout
    assert "no benchmark compiles at this size" in p.stderr
    assert not out.exists()
