"""``pimforge run WORKLOAD``: the registered workloads' options, parsing and running.

``pimforge sweep`` parses and runs each of its points with the same functions
(:func:`workload_parser`, :func:`run_workload`), so a point of a sweep is exactly the
``pimforge run`` command it names.
"""

from __future__ import annotations

import argparse

from .args import Parser, add_config_option, out_file, resolve_config
from .errors import PimforgeError
from .output import write_json
from .provenance import stamp
from .registry import resolve, workloads

__all__ = ["add_run", "add_workload_arguments", "cmd_run", "run_workload", "workload_parser"]


def add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("--list", action="store_true", help="list the registered workloads")
    sub = p.add_subparsers(dest="workload", metavar="WORKLOAD")
    for name, w in workloads().items():
        sub.add_lazy(name, lambda q, name=name: add_workload_arguments(q, name),
                     help=w.doc, description=w.doc)


def add_workload_arguments(p: argparse.ArgumentParser, name: str) -> None:
    """The options of ``pimforge run NAME``: ``--config``, ``--set``, ``--json`` and the
    workload's own."""
    add_config_option(p, workloads()[name].default_config)
    p.add_argument("--json", type=out_file, help="write the results JSON here")
    resolve(workloads()[name].cli).add_arguments(p)


def workload_parser(name: str, parser_class: type[argparse.ArgumentParser] | None = None
                    ) -> argparse.ArgumentParser:
    """A parser of the arguments after ``pimforge run NAME`` (``pimforge sweep`` parses
    each point with it)."""
    p = (parser_class or Parser)(prog=f"pimforge run {name}")
    add_workload_arguments(p, name)
    return p


def run_workload(name: str, args: argparse.Namespace):
    """Resolve the config of parsed *args* and run workload *name*: the result object
    (``to_json()``, ``summary()``, ``ok``) that ``pimforge run`` prints and writes."""
    resolve_config(args)
    return resolve(workloads()[name].cli).run(args, args.config)


def cmd_run(args) -> int:
    if args.list:
        for name, w in sorted(workloads().items()):
            print(f"{name:12s} {w.doc}")
        return 0
    if not args.workload:
        raise PimforgeError("name a workload: pimforge run WORKLOAD ... "
                            f"({', '.join(sorted(workloads()))}; `pimforge run --list`)")
    out = args.json
    result = run_workload(args.workload, args)
    print(result.summary())
    if out is not None:
        write_json(out, stamp(result.to_json(), config=args.config))
    return 0 if result.ok else 1
