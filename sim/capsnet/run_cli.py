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
  ``ok``, else 1. ``--dump`` is the workload's own output folder.

:func:`add_standalone_arguments` and :func:`run_standalone` are a temporary
adapter doing the dispatcher's part for ``capsnet`` alone, until the
dispatcher lands.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from .workload import ABLATIONS

if TYPE_CHECKING:
    from ...gen.config import Config
    from .workload import CapsNetRun, CapsNetRunOptions

__all__ = ["add_arguments", "add_standalone_arguments", "options", "run", "run_standalone"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``capsnet`` workload's own options."""
    p.add_argument("--net", required=True, help="Table 1 network (Caps-MN1 ...)")
    p.add_argument("--scale", type=int, default=1, help="divide B and N_L by S (default 1)")
    p.add_argument("--freq", type=float, help="logic-die MHz (default: the config's)")
    p.add_argument("--dim", choices=["B", "L", "H"], help="force the distribution dimension")
    p.add_argument("--seed", type=int, default=1, help="seed of u and W (default 1)")
    p.add_argument("--dump", help="write u.npy, W.npy, v.npy, iterations.txt here")
    p.add_argument("--ablation", choices=[*ABLATIONS, "all"], default="pim-capsnet",
                   help="Sec. 6.1 variant (default pim-capsnet); all: every variant with "
                        "speedup_vs ratios")
    p.add_argument("--dram", choices=["banked", "ideal"], default="banked",
                   help="operand memory of the RTL run: banked DRAM throughput model "
                        "(default) or ideal (always ready)")
    p.add_argument("--operand-buffer", choices=["bundle", "none"], default="bundle",
                   help="banked DRAM: the read ports keep the last bundle's blocks "
                        "(bundle, default) or refetch every block (none)")
    p.add_argument("--model-only", action="store_true",
                   help="skip the RTL: run the ISA-level model and its exact cycle count "
                        "(for sizes the RTL cannot finish here)")


def options(args: argparse.Namespace) -> CapsNetRunOptions:
    """The run options of parsed :func:`add_arguments` options."""
    from ...gen.errors import PimforgeError
    from .workload import CapsNetRunOptions

    if args.scale < 1:
        raise PimforgeError(f"--scale must be >= 1, not {args.scale}")
    return CapsNetRunOptions(scale=args.scale, freq=args.freq, dim=args.dim, seed=args.seed,
                             model_only=args.model_only, ablation=args.ablation,
                             dram=args.dram, operand_buffer=args.operand_buffer == "bundle")


def run(args: argparse.Namespace, config: Config) -> CapsNetRun:
    """Run ``--net`` with the options in *args* on the resolved *config*."""
    from .workload import run_ablations

    return run_ablations(args.net, config, options(args), dump=args.dump)


def add_standalone_arguments(p: argparse.ArgumentParser) -> None:
    """Temporary adapter: the dispatcher's options for ``capsnet`` alone, then its own."""
    p.add_argument("workload", choices=["capsnet"], help="workload (capsnet)")
    p.add_argument("--config", help="config preset or TOML path (default: default)")
    p.add_argument("--json", help="write the results JSON here")
    add_arguments(p)


def run_standalone(args: argparse.Namespace) -> int:
    """Temporary adapter: resolve ``--config``, :func:`run`, print, write ``--json``."""
    from ...gen.config import load_config

    res = run(args, load_config(args.config))
    print(res.summary())
    if args.json:
        Path(args.json).write_text(json.dumps(res.to_json(), indent=2))
    return 0 if res.ok else 1
