"""The 32-vault HMC-Gen3 memory system elaborates quickly, with one shared
vault-controller module (and one bank-machine module) instantiated per use."""

import re
import time

from pimforge.gen.elaborate import elaborate
from pimforge.rtl.mem.vault_ctrl import vault_leaf_name

# Elaboration takes 10-40 s on a loaded 2-core machine; a per-instance copy of
# the vault controllers or an O(V^3) arbiter takes many minutes.
ELABORATE_LIMIT_S = 120


def test_hmc_gen3_elaborates_with_one_vault_controller_module(preset):
    cfg = preset("hmc_gen3")
    start = time.monotonic()
    e = elaborate("hmc_mem", cfg)
    took = time.monotonic() - start
    assert took < ELABORATE_LIMIT_S, f"hmc_mem/hmc_gen3 took {took:.1f} s to elaborate"
    defs = re.findall(r"^module (vault_ctrl_\w+)\(", e.verilog, re.M)
    assert len(defs) == 1, defs
    vc = defs[0]
    assert len(re.findall(rf"^\s*{vc} ", e.verilog, re.M)) == cfg.hmc.vaults
    banks = re.findall(r"^module (bank_machine_\w+)\(", e.verilog, re.M)
    assert len(banks) == 1, banks
    assert len(re.findall(rf"^\s*{banks[0]} ", e.verilog, re.M)) == cfg.hmc.banks_per_vault
    assert e.manifest["modules"].count(vc) == 1


def test_vault_leaf_names_encode_every_parameter(preset):
    cfg = preset("default")
    from pimforge.rtl.mem.timing import resolve_timing

    t = resolve_timing(cfg.hmc.timing, cfg.hmc.tck_ns)
    def name(**kw) -> str:
        return vault_leaf_name(**kw)

    base = dict(timing=t, banks=4, rows=8, columns=16, queue_depth=8)
    names = {name(**base), name(**base, scheduler="fcfs"), name(**base, page_policy="close"),
             name(**{**base, "queue_depth": 4}),
             name(**{**base, "timing": resolve_timing(cfg.hmc.timing, 2 * cfg.hmc.tck_ns)})}
    assert len(names) == 5
    assert name(**base) == name(**dict(reversed(base.items())))
