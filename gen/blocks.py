"""Registry of every generatable block: name -> factory building it from a Config.

``pimforge verilog --top NAME`` and the cocotb regression look blocks up here;
a block that is not registered cannot be generated on its own.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .config import Config
from .errors import UnknownNameError

__all__ = ["Block", "BLOCKS", "get_block", "block_names"]


@dataclass(frozen=True)
class Block:
    """A registered block.

    Parameters
    ----------
    name : str
        Name of the block, used as the Verilog top module name.
    factory : str
        ``"module:function"`` (relative to ``pimforge``) of a function taking a
        :class:`Config` and returning an Amaranth component. Imported lazily so
        that listing blocks stays cheap.
    doc : str
        One line for ``pimforge verilog --list``.
    """

    name: str
    factory: str
    doc: str

    def build(self, config: Config):
        mod, fn = self.factory.split(":")
        return getattr(importlib.import_module(f"pimforge.{mod}"), fn)(config)


BLOCKS: dict[str, Block] = {b.name: b for b in [
    Block("fp32_add", "rtl.fp.add:from_config", "pipelined IEEE-754 binary32 adder (RNE)"),
    Block("fp32_mul", "rtl.fp.mul:from_config", "pipelined IEEE-754 binary32 multiplier (RNE)"),
    Block("fp32_shift", "rtl.fp.shift:from_config",
          "FP32 shifter: exponent add/subtract and logical shifts of the bit pattern"),
    Block("capsnet_pe", "rtl.capsnet.pe:from_config",
          "PIM-CapsNet reconfigurable PE (MAC, inverse sqrt, exp, reciprocal flows)"),
    Block("capsnet_vault", "rtl.capsnet.vault:from_config",
          "PIM-CapsNet vault compute: operation controller (vault ISA) and its PEs"),
    Block("spm", "rtl.spm.scratchpad:from_config",
          "DESCNet power-gated sectored multi-bank scratchpad with its PMU"),
    Block("spm_pmu", "rtl.spm.pmu:from_config",
          "DESCNet PMU: sleep request/acknowledge handshake, wake-up latency, ON counters"),
    Block("descnet_spm", "rtl.spm.organization:from_config",
          "DESCNet SMP/SEP/HY scratchpad organization with data, weight and accumulator ports"),
    Block("dram_bank", "rtl.mem.bank:from_config",
          "one DRAM bank's state machine with its tRCD/tRAS/tRC/tRP/tRTP/tWR/tRFC counters"),
    Block("vault_ctrl", "rtl.mem.vault_ctrl:from_config",
          "HMC vault controller: queue, FCFS/FR-FCFS, open/close page, refresh, banks"),
    Block("rmas", "rtl.mem.rmas:from_config",
          "PIM-CapsNet runtime memory access scheduler (Eq. 15) and naive policies"),
    Block("hmc_mem", "rtl.mem.hmc_mem:from_config",
          "HMC memory system: crossbar, vault controllers, address decoders, RMAS"),
    Block("capsnet_operand_port", "rtl.top.operand_port:from_config",
          "PIM-CapsNet vault operand port: lane bundles to 16 B block requests on a PE port"),
    Block("hmc_capsnet", "rtl.top.hmc_capsnet:from_config",
          "PIM-CapsNet cube: vault computes and operand ports on the HMC memory system"),
]}


def block_names() -> list[str]:
    return sorted(BLOCKS)


def get_block(name: str) -> Block:
    try:
        return BLOCKS[name]
    except KeyError:
        raise UnknownNameError(f"unknown block {name!r}; available blocks: "
                               f"{', '.join(block_names())}") from None
