"""``pimforge run capsnet``: the command-line side of the ``capsnet`` workload.

The workload itself (steps, result, ablations) is
:mod:`pimforge.sim.capsnet.workload`. This module holds the contract the
``pimforge run WORKLOAD`` dispatcher calls:

- :func:`add_arguments` adds the workload's own options (the dispatcher adds
  the positional workload, ``--config``, ``--set`` and ``--json`` to every
  workload);
- :func:`run` runs with an already-resolved config and returns the
  :class:`~pimforge.sim.capsnet.workload.CapsNetRun`; the dispatcher prints its
  ``summary()``, writes its ``to_json()`` to ``--json`` and exits 0 when it is
  ``ok``, else 1. ``--dump`` is the workload's own output folder;
- :func:`prepare` builds the Verilated vault driver of a config into the build
  cache before ``pimforge sweep`` runs the points that share it
  (:data:`PREPARE_OPTIONS`: the options the build depends on besides the config).

"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from pimforge.gen.args import (
    add_waves_options,
    int_range,
    nonempty,
    number_range,
    out_dir,
    seed,
    waves_window,
)
from pimforge.gen.errors import PimforgeError

from .. import verilator as vl
from .rtl_run import build_vault_driver
from .workload import (
    ABLATIONS,
    DIM_RULES,
    CapsNetRun,
    CapsNetRunOptions,
    resolve_config,
    run_ablations,
)

if TYPE_CHECKING:
    from pimforge.gen.config import Config

__all__ = ["PREPARE_OPTIONS", "add_arguments", "options", "prepare", "run"]

#: The options :func:`prepare`'s build depends on besides the config.
PREPARE_OPTIONS = ("model_only", "freq")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``capsnet`` workload's own options."""
    p.add_argument("--net", required=True, type=nonempty, help="Table 1 network (Caps-MN1 ...)")
    p.add_argument("--scale", type=int_range(1, 1 << 20), default=1,
                   help="divide B and N_L by S (default 1)")
    p.add_argument("--freq", type=number_range(1.0, 5000.0),
                   help="logic-die MHz (default: the config's)")
    p.add_argument("--dim", choices=["B", "L", "H"], help="force the distribution dimension")
    p.add_argument("--dim-rule", choices=list(DIM_RULES), default="compiled",
                   help="how the dimension is chosen without --dim: compiled (default: the "
                        "fewest controller cycles of the compiled programs) or score (the "
                        "paper's Eq. 6-12 score, master-based aggregation)")
    p.add_argument("--seed", type=seed, default=1, help="seed of u and W (default 1)")
    p.add_argument("--dump", type=out_dir, help="write u.npy, W.npy, v.npy, iterations.txt here")
    p.add_argument("--ablation", choices=[*ABLATIONS, "all"], default="pim-capsnet",
                   help="Sec. 6.1 variant (default pim-capsnet); all: every variant with "
                        "speedup_vs ratios")
    p.add_argument("--dram", choices=["banked", "ideal"], default="banked",
                   help="operand memory of the RTL run: banked DRAM throughput model "
                        "(default) or ideal (always ready)")
    p.add_argument("--operand-buffer", choices=["bundle", "none"], default="bundle",
                   help="banked DRAM: the vault operand port's buffers (bundle, default: "
                        "read buffer with run fetches and write combining; the last "
                        "bundle's blocks when prefetch is off) or none (every block "
                        "fetched and written)")
    p.add_argument("--threads", type=int_range(1, 1024), default=None,
                   help="driver threads clocking the vaults (default: the usable cores); "
                        "the result does not depend on it")
    p.add_argument("--model-only", action="store_true",
                   help="skip the RTL: run the ISA-level model and its exact cycle count "
                        "(for sizes the RTL cannot finish here)")
    add_waves_options(p)        # the PIM-CapsNet run's waves of one vault's compute
    p.add_argument("--waves-vault", type=int_range(0), default=0, metavar="V",
                   help="with --waves: the vault whose compute the waves show (default 0)")


def options(args: argparse.Namespace) -> CapsNetRunOptions:
    """The run options of parsed :func:`add_arguments` options."""
    if args.scale < 1:
        raise PimforgeError(f"--scale must be >= 1, not {args.scale}")
    waves = waves_window(args)
    if waves is not None and args.model_only:
        raise PimforgeError("--waves writes the RTL run's waves: leave out --model-only")
    if getattr(args, "waves_vault", 0) and waves is None:
        raise PimforgeError("--waves-vault picks the vault of --waves FILE.vcd; give --waves "
                            "too")
    return CapsNetRunOptions(scale=args.scale, freq=args.freq, dim=args.dim,
                             dim_rule=args.dim_rule, seed=args.seed,
                             model_only=args.model_only, ablation=args.ablation,
                             dram=args.dram, operand_buffer=args.operand_buffer == "bundle",
                             threads=args.threads, waves=waves,
                             waves_vault=getattr(args, "waves_vault", 0))


def run(args: argparse.Namespace, config: Config) -> CapsNetRun:
    """Run ``--net`` with the options in *args* on the resolved *config*."""
    opts = options(args)
    if opts.waves is not None and opts.waves_vault >= config.hmc.vaults:
        raise PimforgeError(f"--waves-vault must be below the config's {config.hmc.vaults} "
                            f"vaults, not {opts.waves_vault}")
    if not args.model_only:
        vl.preflight()          # the RTL run is a Verilated build: say so before the work
    return run_ablations(args.net, config, opts, dump=args.dump)


def prepare(args: argparse.Namespace, config: Config) -> None:
    """Build the Verilated vault driver that :func:`run` will use into the build cache
    (nothing for ``--model-only``); ``pimforge sweep`` runs it once per config."""
    if args.model_only:
        return
    vl.preflight()
    build_vault_driver(resolve_config(config, args.freq))
