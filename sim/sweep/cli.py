"""``pimforge sweep SPEC.toml``: a grid of ``pimforge run`` invocations on Dask.

Every point is parsed by the parser of ``pimforge run WORKLOAD`` and run by the
same function (:func:`pimforge.gen.run_cli.run_workload`), on a Dask worker; the
spec format is :mod:`pimforge.sim.sweep.spec`, what is run where and what is
written is :mod:`pimforge.sim.sweep.engine`. A workload module may define
``prepare(args, config)`` (build into the cache what ``run`` will need; see
:class:`pimforge.gen.registry.Workload`), which the sweep runs once per config
before the runs that use it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import time
import traceback

from pimforge.gen.args import Parser, in_file, int_range, nonempty, out_dir, resolve_config
from pimforge.gen.errors import PimforgeError
from pimforge.gen.provenance import invocation, stamp
from pimforge.gen.registry import get_workload, resolve
from pimforge.gen.run_cli import run_workload, workload_parser
from pimforge.rtl.params import ParameterError

from .engine import Runner, check_executor, parse_executor, run_sweep, usable_cores
from .spec import MAX_POINTS, Option, load_spec

__all__ = ["add_arguments", "run", "run_point", "prepare_point", "workload_options"]


class PointError(PimforgeError):
    """A point's arguments are refused by the workload's parser."""


class _PointParser(Parser):
    """``pimforge run WORKLOAD``'s parser for one point: a refused argument raises
    instead of exiting, and the options are recorded (for checking a spec's keys)."""

    def __init__(self, *args, **kwargs):
        self.recorded: dict[str, Option] = {}
        super().__init__(*args, **kwargs)

    def _record(self, action: argparse.Action) -> argparse.Action:
        for s in action.option_strings:
            if s.startswith("--"):
                self.recorded[s] = Option(s, action.nargs != 0)
        return action

    def add_argument(self, *args, **kwargs):
        return self._record(super().add_argument(*args, **kwargs))

    def _recording(self, group):
        add = group.add_argument
        group.add_argument = lambda *a, **kw: self._record(add(*a, **kw))
        return group

    def add_argument_group(self, *args, **kwargs):
        return self._recording(super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, **kwargs):
        return self._recording(super().add_mutually_exclusive_group(**kwargs))

    def error(self, message: str):
        raise PointError(message)

    def exit(self, status: int = 0, message: str | None = None):
        raise PointError((message or "").strip() or f"the arguments end with status {status}")


def workload_options(workload: str) -> dict[str, Option]:
    """The options of ``pimforge run WORKLOAD`` by flag (``--net`` ...)."""
    return workload_parser(workload, _PointParser).recorded


def _module(workload: str):
    return resolve(get_workload(workload).cli)


def has_prepare(workload: str) -> bool:
    return callable(getattr(_module(workload), "prepare", None))


def prepare_options(workload: str) -> tuple[str, ...] | None:
    names = getattr(_module(workload), "PREPARE_OPTIONS", None)
    return None if names is None else tuple("--" + n.replace("_", "-") for n in names)


def _use_cache(cache: str | None) -> None:
    if cache:
        os.environ["PIMFORGE_CACHE"] = cache


def _guarded(fn, t0: float) -> dict:
    try:
        return fn()
    except (PimforgeError, ParameterError) as e:
        return {"error": str(e), "wall_s": time.monotonic() - t0}
    except Exception as e:       # a bug, not a user error: keep the traceback in the JSON
        return {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(),
                "wall_s": time.monotonic() - t0}


def prepare_point(workload: str, argv: list[str], cache: str | None) -> dict:
    """Run the workload's ``prepare(args, config)`` for one point's arguments."""
    _use_cache(cache)
    t0 = time.monotonic()

    def go() -> dict:
        try:
            args = workload_parser(workload, _PointParser).parse_args(argv)
            resolve_config(args)
        except (PimforgeError, ParameterError) as e:
            # This point's own arguments: the other points of the group still run.
            return {"error": str(e), "arguments": True, "wall_s": time.monotonic() - t0}
        _module(workload).prepare(args, args.config)
        return {"wall_s": time.monotonic() - t0}

    return _guarded(go, t0)


def run_point(workload: str, argv: list[str], cache: str | None,
              prepared: dict | None = None) -> dict:
    """One point, as ``pimforge run WORKLOAD ARGV`` runs it: the result's JSON, ``ok``
    and summary, or the error (a point whose prepared build failed reports that error;
    when only the arguments of the point that prepared were refused, it runs)."""
    if prepared is not None and "error" in prepared and not prepared.get("arguments"):
        return {"error": f"prepare failed: {prepared['error']}", "wall_s": 0.0}
    _use_cache(cache)
    t0 = time.monotonic()

    def go() -> dict:
        args = workload_parser(workload, _PointParser).parse_args(argv)
        printed = io.StringIO()
        named = args.config if args.config is not None else args._default_config
        with (contextlib.redirect_stdout(printed),   # kept in the point's JSON
              invocation(["run", workload, *argv], named)):
            result = run_workload(workload, args)
            doc = stamp(result.to_json(), config=args.config)
        out = {"result": doc, "ok": bool(result.ok), "summary": result.summary(),
               "wall_s": time.monotonic() - t0}
        if printed.getvalue():
            out["printed"] = printed.getvalue()[-20000:]
        return out

    return _guarded(go, t0)


RUNNER = Runner(run=run_point, prepare=prepare_point, has_prepare=has_prepare,
                prepare_options=prepare_options)


def _executor(text: str) -> str:
    try:
        return parse_executor(text)
    except PimforgeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``pimforge sweep``."""
    p.add_argument("spec", type=in_file, metavar="SPEC.toml",
                   help="the sweep spec (`pimforge examples DIR` copies some into DIR/sweeps)")
    p.add_argument("--executor", type=_executor, default="local",
                   help="local (a Dask LocalCluster, default), dask://HOST:PORT (a running "
                        "scheduler), slurm or pbs (dask-jobqueue)")
    p.add_argument("--workers", type=int_range(1, 4096), default=None,
                   help=f"local worker processes (default: the usable cores, "
                        f"{usable_cores()} here) or batch jobs (slurm/pbs)")
    p.add_argument("--out", type=out_dir, help="output folder: points/*.json, results.json, "
                   "results.csv")
    p.add_argument("--cache", type=out_dir, default=None,
                   help="build cache folder for the workers (default: their $PIMFORGE_CACHE "
                        "or ~/.cache/pimforge); a shared file system shares the builds")
    p.add_argument("--job-cores", type=int_range(1, 1024), default=None,
                   help="slurm/pbs: cores per job (default: the Dask jobqueue config, else 1)")
    p.add_argument("--job-memory", type=nonempty, default=None,
                   help="slurm/pbs: memory per job, e.g. 8GiB (default: the Dask jobqueue "
                        "config, else 4GiB)")
    p.add_argument("--list", action="store_true",
                   help="print the points and their arguments, run nothing")
    p.add_argument("--max-points", type=int_range(1, 10**9), default=MAX_POINTS,
                   help=f"refuse a spec whose grid has more points (default {MAX_POINTS:,})")


def run(args: argparse.Namespace) -> int:
    """``pimforge sweep``: 0 when every point is ok, 1 otherwise."""
    spec = load_spec(args.spec, workload_options, max_points=args.max_points)
    if args.list:
        for pt in spec.points:
            print(f"{pt.name}: pimforge run {spec.workload} {' '.join(pt.argv)}")
        return 0
    if args.out is None:
        raise PimforgeError("--out DIR is required (the folder for the points and tables)")
    cache = str(args.cache.resolve()) if args.cache is not None else None
    check_executor(args.executor, args.workers)    # a missing tool before anything is written
    outcome = run_sweep(spec, args.out, RUNNER, executor=args.executor, workers=args.workers,
                        cache=cache, job_cores=args.job_cores, job_memory=args.job_memory,
                        log=lambda line: print(line, flush=True))
    return 0 if outcome.ok else 1
