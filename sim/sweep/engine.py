"""Run a sweep's grid on Dask: a local cluster, a running scheduler, or Slurm/PBS jobs.

The points are independent runs; the engine only decides what to run, in what
order, and where the results go:

- a point whose ``points/NAME.json`` exists, records the point's key
  (:attr:`~pimforge.sim.sweep.spec.Point.key`) and no error is skipped;
  every other point (missing, stale or failed before) runs;
- points that share a resolved config (and the options the workload's build
  depends on) share one *prepare* task, which builds what their runs need into
  the build cache (``prepare`` of the workload's module, e.g. the Verilator
  build of the config); their run tasks depend on it, so N runs of one config
  do not build it N times, however many workers there are;
- each finished point is written at once by this process (atomically), so
  workers need no shared file system for results, and Ctrl-C or a crash keeps
  every finished point; a failed point is written with its ``error`` and the
  grid goes on;
- at the end (or at Ctrl-C) ``results.json`` and ``results.csv`` combine every
  point of the spec, and a table is printed.

Builds go to the cache folder each worker reads (``$PIMFORGE_CACHE``, or the
``cache`` argument, which the tasks set on the worker): workers on one machine,
or on a shared file system, share it.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import FileSet, check_output_dir, write_json
from pimforge.gen.provenance import csv_comment, stamp

from .spec import Point, SweepSpec, config_identity

__all__ = ["EXECUTORS", "Runner", "SweepOutcome", "check_executor", "parse_executor",
           "prepare_groups", "run_sweep", "summary_table", "usable_cores"]

#: The topic the tasks announce their start on (the progress line's "running").
TOPIC = "pimforge-sweep"
EXECUTORS = ("local", "slurm", "pbs")


class ExecutorError(PimforgeError):
    """The executor cannot be started or reached."""


@dataclass(frozen=True)
class Runner:
    """What the engine runs, given by the command-line layer (module-level functions,
    so that Dask sends them to the workers by name).

    Attributes
    ----------
    run : callable
        ``run(workload, argv, cache, prepared) -> dict``: one point through
        ``pimforge run``'s code path; ``{"result", "ok", "summary", "wall_s"}`` or
        ``{"error", "wall_s"}``.
    prepare : callable
        ``prepare(workload, argv, cache) -> dict``: the workload's prepare hook
        for one point's arguments; ``{"wall_s"}`` or ``{"error"}``.
    has_prepare : callable
        ``has_prepare(workload) -> bool``.
    prepare_options : callable
        ``prepare_options(workload) -> tuple of flags or None``: the options the
        prepared build depends on besides the config (None: all of them).
    """

    run: Callable[..., dict]
    prepare: Callable[..., dict]
    has_prepare: Callable[[str], bool]
    prepare_options: Callable[[str], tuple[str, ...] | None]


@dataclass
class SweepOutcome:
    """Counts of one sweep (the exit status is 0 when every point is ``ok``)."""

    total: int
    skipped: int = 0
    ran: int = 0
    failed: int = 0
    not_ok: int = 0
    prepared: int = 0
    wall_s: float = 0.0
    rows: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r["status"] == "ok" for r in self.rows) and len(self.rows) == self.total


def usable_cores() -> int:
    """The cores this process may run on (the default number of local workers)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:       # not Linux
        return os.cpu_count() or 1


def parse_executor(text: str) -> str:
    """``local``, ``slurm``, ``pbs`` or ``tcp://HOST:PORT`` (from ``dask://HOST:PORT``)."""
    if text in EXECUTORS:
        return text
    for scheme in ("dask://", "tcp://"):
        if text.startswith(scheme):
            host, _, port = text[len(scheme):].rpartition(":")
            if host and port.isdigit():
                return f"tcp://{host}:{port}"
    raise ExecutorError(f"--executor must be local, slurm, pbs or dask://HOST:PORT, not "
                        f"{text!r}")


# ------------------------------------------------------------------------- worker side

def _task(tag: str, fn: Callable[..., dict], *args) -> dict:
    """Run ``fn(*args)`` on a worker, announcing the start (for the progress line)."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:           # not on a worker (a synchronous scheduler)
        worker = None
    if worker is not None:
        worker.log_event(TOPIC, {"start": tag})
    out: dict = {"error": "the task raised"}
    try:
        out = fn(*args)
    finally:
        if worker is not None:
            worker.log_event(TOPIC, {"end": tag, "wall_s": out.get("wall_s"),
                                     "error": str(out.get("error", ""))[:200]})
    out["worker"] = worker.address if worker is not None else None
    return out


# ------------------------------------------------------------------------- client side

def check_executor(executor: str, workers: int | None) -> None:
    """Refuse, before anything runs or is written, an executor that cannot start here:
    slurm/pbs without ``--workers``, without dask-jobqueue or without their submit
    command on PATH; ``--workers`` with a running scheduler."""
    if executor in ("slurm", "pbs"):
        if not workers:
            raise ExecutorError(f"--executor {executor} needs --workers N (the number of "
                                "batch jobs to submit, one worker each)")
        submit = {"slurm": "sbatch", "pbs": "qsub"}[executor]
        if shutil.which(submit) is None:
            raise ExecutorError(f"--executor {executor} submits jobs with {submit}, which is "
                                "not on PATH here: run the sweep on the cluster's login node")
        try:
            import dask_jobqueue  # noqa: F401
        except ImportError:
            raise ExecutorError(f"--executor {executor} needs dask-jobqueue: pip install "
                                "dask-jobqueue") from None
    elif executor != "local" and workers:
        raise ExecutorError("--workers applies to local, slurm and pbs; a running scheduler "
                            "has the workers that were started for it")


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Start worker processes with SIGINT ignored (they inherit it): a Ctrl-C reaches
    this process, which stops the sweep and says so, and no worker prints a traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _client(executor: str, workers: int | None, job_cores: int | None,
            job_memory: str | None):
    """(client, cluster or None) for *executor*; the cluster is closed with the client."""
    from distributed import Client, LocalCluster

    if executor == "local":
        n = workers or usable_cores()
        with _sigint_ignored():
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.ERROR)
        return Client(cluster), cluster
    check_executor(executor, workers)
    if executor in ("slurm", "pbs"):
        import dask
        import dask_jobqueue

        cls = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster}[executor]
        kw: dict[str, Any] = {"processes": 1}
        cores = job_cores or dask.config.get(f"jobqueue.{executor}.cores", None) or 1
        memory = job_memory or dask.config.get(f"jobqueue.{executor}.memory", None) or "4GiB"
        kw.update(cores=cores, memory=memory)
        try:
            cluster = cls(**kw)
        except (ValueError, OSError, RuntimeError) as e:
            raise ExecutorError(f"cannot set up the {executor} cluster: {e} (queue, account "
                                "and walltime come from ~/.config/dask/jobqueue.yaml)") from None
        cluster.scale(jobs=workers)
        return Client(cluster), cluster
    try:
        return Client(executor, timeout="15s"), None
    except (OSError, TimeoutError) as e:
        raise ExecutorError(f"cannot reach the Dask scheduler at {executor}: {e}") from None


def _read_point(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("sweep"), dict) else None


def _argv_options(argv: tuple[str, ...], flags: tuple[str, ...] | None) -> tuple:
    """The (flag, value) pairs of *argv* whose flag is in *flags* (all options but the
    config when None)."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        val = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
        if a not in ("--config", "--set") and (flags is None or a in flags):
            out.append((a, val))
        i += 2 if val is not None else 1
    return tuple(out)


def prepare_groups(points: list[Point], flags: tuple[str, ...] | None
                   ) -> dict[str, list[Point]]:
    """*points* grouped by what their prepared build depends on: the resolved config and
    the options *flags* (all options when None); one prepare task serves each group."""
    groups: dict[str, list[Point]] = {}
    for pt in points:
        gkey = json.dumps([config_identity(pt), _argv_options(pt.argv, flags)])
        groups.setdefault(hashlib.sha256(gkey.encode()).hexdigest()[:16], []).append(pt)
    return groups


def _fmt_s(s: float) -> str:
    if s < 60:
        return f"{s:.0f}s"
    m, s = divmod(int(s), 60)
    return f"{m}m{s:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m"


class _Progress:
    """Done / running / failed counts and an ETA from this run's finished points."""

    def __init__(self, total: int, log: Callable[[str], None]):
        self.total, self.log = total, log
        self.done = self.failed = 0
        self.running: set[str] = set()
        #: Prepare group -> what the log calls it.
        self.groups: dict[str, str] = {}
        self.walls: list[float] = []
        self.lock = threading.Lock()

    def event(self, ev) -> None:          # Dask's event thread
        msg = ev[1] if isinstance(ev, tuple) else ev
        with self.lock:
            kind, _, name = (msg.get("start") or msg.get("end") or "").partition(":")
            if kind == "run" and "start" in msg:
                self.running.add(name)
            elif kind == "run":
                self.running.discard(name)
            elif kind == "prepare":      # a build can take minutes: say when it starts/ends
                what = self.groups.get(name, name)
                if "start" in msg:
                    self.log(f"prepare {what}: started")
                else:
                    took = f" in {msg['wall_s']:.1f}s" if msg.get("wall_s") is not None else ""
                    self.log(f"prepare {what}: " + (f"FAILED: {msg['error']}" if msg.get("error")
                                                     else f"done{took}"))

    def finished(self, name: str, status: str, wall: float, workers: int, note: str) -> None:
        with self.lock:
            self.running.discard(name)
            self.done += 1
            self.failed += status == "error"
            self.walls.append(wall)
            left = self.total - self.done
            eta = "?"
            if self.walls:
                eta = _fmt_s(left * (sum(self.walls) / len(self.walls))
                             / max(1, min(workers, left)) if left else 0)
            self.log(f"[{self.done}/{self.total} done, {len(self.running)} running, "
                     f"{self.failed} failed, ETA {eta}] {name}: {status} ({wall:.1f}s)"
                     + (f" {note}" if note else ""))


def _status(rec: dict | None) -> str:
    if rec is None:
        return "pending"
    if "error" in rec:
        return "error"
    return "ok" if rec.get("ok") else "not-ok"


def _lookup(d: Any, path: str, point: Mapping[str, Any]) -> Any:
    """The field *path* (dotted) of result *d*; ``{KEY}`` in it is the point's value of
    KEY (``benches.{bench}.cycles``)."""
    for k, v in point.items():
        path = path.replace("{" + k + "}", str(v))
    for part in path.split("."):
        if not isinstance(d, Mapping) or part not in d:
            return None
        d = d[part]
    return d


def _flatten(d: Mapping, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{prefix}{k}."))
        elif not isinstance(v, list):
            out[f"{prefix}{k}"] = v
    return out


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _ratios(spec: SweepSpec, rows: list[dict]) -> None:
    """Set each row's ``ratio`` (``[report] ratio``): its column over the same column of
    the ``ok`` row that differs only in the ratio's axis, at the baseline value."""
    if spec.ratio is None:
        return
    col, axis, base = spec.ratio["column"], spec.ratio["axis"], spec.ratio["baseline"]

    def rest(r: dict) -> str:
        return json.dumps({k: v for k, v in r["point"].items() if k != axis}, sort_keys=True)

    bases = {rest(r): _number(_lookup(r["result"], col, r["point"])) for r in rows
             if r["status"] == "ok" and r["point"].get(axis) == base}
    for r in rows:
        mine = _number(_lookup(r["result"], col, r["point"])) if r["status"] == "ok" else None
        b = bases.get(rest(r))
        r["ratio"] = mine / b if mine is not None and b else None


def ratio_means(spec: SweepSpec, rows: list[dict]) -> list[str]:
    """One line per value of the ratio's axis: the mean ratio over its points."""
    if spec.ratio is None:
        return []
    col, axis, base = spec.ratio["column"], spec.ratio["axis"], spec.ratio["baseline"]
    out = []
    for v in dict.fromkeys(r["point"].get(axis) for r in rows):
        got = [r["ratio"] for r in rows if r["point"].get(axis) == v and r["ratio"] is not None]
        if v != base and got:
            out.append(f"mean {col} at {axis}={v} over {axis}={base}: "
                       f"{sum(got) / len(got):.3f} ({len(got)} points)")
    return out


def summary_table(spec: SweepSpec, rows: list[dict]) -> str:
    """The printed table: the varied keys, the status, the spec's report columns (and
    ratio), the wall time, and the mean of each numeric column over the ``ok`` points."""
    rcol = [f"{spec.ratio['column']}/{spec.ratio['baseline']}"] if spec.ratio else []
    head = [*spec.axes, "status", *spec.columns, *rcol, "wall_s"]
    body = [[_cell(r["point"].get(a)) for a in spec.axes] + [r["status"]]
            + [_cell(_lookup(r.get("result"), c, r["point"])) for c in spec.columns]
            + [_cell(r.get("ratio")) for _ in rcol]
            + [_cell(r.get("wall_s"))] for r in rows]
    oks = [r for r in rows if r["status"] == "ok"]
    if oks and spec.columns:
        means = []
        for c in spec.columns:
            vals = [_lookup(r["result"], c, r["point"]) for r in oks]
            num = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
            means.append(_cell(sum(num) / len(num)) if len(num) == len(vals) else "")
        if any(means):
            body.append([f"mean of {len(oks)} ok", *[""] * len(spec.axes), *means,
                         *[""] * len(rcol), ""])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip()
             for line in (head, *body)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + ratio_means(spec, rows))


def _combine(spec: SweepSpec, out: Path, records: dict[str, dict | None]) -> list[dict]:
    rows = []
    for pt in spec.points:
        rec = records.get(pt.name)
        row = {"point": pt.values, "name": pt.name, "status": _status(rec),
               "file": f"points/{pt.name}.json" if rec is not None else None,
               "wall_s": rec["sweep"].get("wall_s") if rec else None,
               "error": rec.get("error") if rec else None,
               "result": rec.get("result") if rec else None}
        rows.append(row)
    _ratios(spec, rows)
    # A sweep spans configs: each point's result names its own (config: null here).
    doc = stamp({"spec": str(spec.path),
                 "spec_sha256": hashlib.sha256(spec.text.encode()).hexdigest(),
                 "workload": spec.workload, "description": spec.description,
                 "axes": list(spec.axes), "ratio": spec.ratio, "points": rows},
                "pimforge.sweep", 1)
    flat = [_flatten(r["result"]) if r["result"] else {} for r in rows]
    cols: dict[str, None] = {}
    for f in flat:
        cols.update(dict.fromkeys(f))
    buf = io.StringIO(csv_comment(doc))
    buf.seek(0, io.SEEK_END)
    w = csv.writer(buf, lineterminator="\n")
    rcol = [f"{spec.ratio['column']}/{spec.ratio['baseline']}"] if spec.ratio else []
    w.writerow([*spec.axes, "status", "wall_s", "error", *rcol,
                *(f"result.{c}" for c in cols)])
    for r, f in zip(rows, flat):
        w.writerow([r["point"].get(a) for a in spec.axes] + [r["status"], r["wall_s"],
                   r["error"] or ""] + [r["ratio"] for _ in rcol] + [f.get(c) for c in cols])
    with FileSet(out, marker="results.json") as fs:   # the two tables agree
        fs.path("results.csv").write_text(buf.getvalue(), encoding="utf-8")
        fs.path("results.json").write_text(json.dumps(doc, indent=2) + "\n",
                                           encoding="utf-8")
    return rows


def run_sweep(spec: SweepSpec, out: str | Path, runner: Runner, *, executor: str = "local",
              workers: int | None = None, cache: str | None = None,
              job_cores: int | None = None, job_memory: str | None = None,
              log: Callable[[str], None] = print) -> SweepOutcome:
    """Run the points of *spec* that are not done yet on *executor* and write
    ``OUT/points/NAME.json``, ``OUT/results.json`` and ``OUT/results.csv``.

    Parameters
    ----------
    spec : SweepSpec
        The checked spec (:func:`~pimforge.sim.sweep.spec.load_spec`).
    out : path
        Output folder (checked before anything runs).
    runner : Runner
        The point and prepare functions.
    executor : str
        ``local``, ``slurm``, ``pbs`` or a scheduler address ``tcp://HOST:PORT``.
    workers : int, optional
        Local worker processes (default: the usable cores) or batch jobs.
    cache : str, optional
        Build cache folder set on the workers (default: their ``$PIMFORGE_CACHE``).
    job_cores, job_memory : optional
        Per-job resources of Slurm/PBS (default: the Dask jobqueue config, else 1
        core and 4 GiB).
    log : callable
        Where progress lines go.
    """
    out = check_output_dir(out, "--out")
    check_executor(executor, workers)
    points_dir = out / "points"
    t0 = time.monotonic()
    records: dict[str, dict | None] = {}
    todo: list[Point] = []
    for pt in spec.points:
        rec = _read_point(points_dir / f"{pt.name}.json")
        if rec is not None and rec["sweep"].get("key") == pt.key and "error" not in rec:
            records[pt.name] = rec
        else:
            todo.append(pt)
    outcome = SweepOutcome(total=len(spec.points), skipped=len(spec.points) - len(todo))
    log(f"sweep {spec.path.name}: {len(spec.points)} points of {spec.workload}, "
        f"{outcome.skipped} already done, {len(todo)} to run")
    if todo:
        made = [d for d in (points_dir, out) if not d.exists()]
        points_dir.mkdir(parents=True, exist_ok=True)
        try:
            _run_points(spec, todo, points_dir, runner, records, outcome, executor, workers,
                        cache, job_cores, job_memory, log)
        finally:
            if outcome.ran or outcome.skipped:   # something to keep: the tables say what
                outcome.rows = _combine(spec, out, records)
            else:                                # refused before any point ran: no trace
                for d in made:
                    with contextlib.suppress(OSError):
                        d.rmdir()
            outcome.wall_s = time.monotonic() - t0
    else:
        outcome.rows = _combine(spec, out, records)
    log(summary_table(spec, outcome.rows))
    log(f"{sum(r['status'] == 'ok' for r in outcome.rows)} ok, {outcome.not_ok} not ok, "
        f"{outcome.failed} failed, {outcome.skipped} skipped; {outcome.prepared} prepare "
        f"tasks; {time.monotonic() - t0:.1f}s; {out / 'results.csv'}")
    return outcome


def _run_points(spec, todo, points_dir, runner, records, outcome, executor, workers, cache,
                job_cores, job_memory, log) -> None:
    from distributed import as_completed

    wl = spec.workload
    groups = prepare_groups(todo, runner.prepare_options(wl)) if runner.has_prepare(wl) else {}
    client, cluster = _client(executor, workers, job_cores, job_memory)
    progress = _Progress(len(todo), log)
    futures = {}
    try:
        client.subscribe_topic(TOPIC, progress.event)
        nworkers = len(client.scheduler_info(n_workers=-1)["workers"])
        jobs = f", {workers} jobs requested" if executor in ("slurm", "pbs") else ""
        log(f"executor {executor}: {nworkers} worker{'s' * (nworkers != 1)}{jobs}")
        prepared = {}
        for g, pts in groups.items():
            progress.groups[g] = f"{g[:8]} (for {len(pts)} point{'s' * (len(pts) != 1)})"
            prepared[g] = client.submit(_task, f"prepare:{g}", runner.prepare, wl,
                                        list(pts[0].argv), cache, key=f"prepare-{g}",
                                        pure=False, priority=10)
            for pt in pts:
                futures[client.submit(_task, f"run:{pt.name}", runner.run, wl, list(pt.argv),
                                      cache, prepared[g], key=f"run-{pt.key[:16]}",
                                      pure=False)] = pt
        grouped = {pt.name for pts in groups.values() for pt in pts}
        for pt in todo:
            if pt.name not in grouped:
                futures[client.submit(_task, f"run:{pt.name}", runner.run, wl, list(pt.argv),
                                      cache, None, key=f"run-{pt.key[:16]}",
                                      pure=False)] = pt
        outcome.prepared = len(groups)
        for fut in as_completed(list(futures)):
            pt = futures.pop(fut)
            try:
                res = fut.result()
            except Exception as e:        # a worker died or the task could not run
                res = {"error": f"{type(e).__name__}: {e}", "wall_s": None}
            _record(spec, pt, res, points_dir, records, outcome)
            nworkers = len(client.scheduler_info(n_workers=-1)["workers"]) or 1
            note = (res["error"].splitlines()[0][:160] if "error" in res else
                    "checks failed" if not res.get("ok") else "")
            progress.finished(pt.name, _status(records[pt.name]), res.get("wall_s") or 0.0,
                              nworkers, note)
    except KeyboardInterrupt:
        log(f"interrupted: {progress.done} of {len(todo)} points finished and kept; "
            "run the same command again to continue")
        raise
    finally:
        for f in futures:
            f.cancel()
        try:
            client.close(timeout=10)
            if cluster is not None:
                cluster.close(timeout=10)
        except Exception:          # noqa: BLE001 (closing after a failure: best effort)
            pass


def _record(spec: SweepSpec, pt: Point, res: dict, points_dir: Path, records: dict,
            outcome: SweepOutcome) -> None:
    meta = {"spec": str(spec.path), "workload": spec.workload, "point": pt.values,
            "argv": list(pt.argv), "key": pt.key, "wall_s": res.get("wall_s"),
            "worker": res.get("worker"),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    if "error" in res:
        rec = {"sweep": meta, "error": res["error"]}
        if res.get("traceback"):
            rec["traceback"] = res["traceback"]
    else:
        rec = {"sweep": meta, "ok": bool(res.get("ok")), "summary": res.get("summary", ""),
               **({"printed": res["printed"]} if "printed" in res else {}),
               "result": res["result"]}
    write_json(points_dir / f"{pt.name}.json", rec)    # counted once it is kept
    outcome.failed += "error" in rec
    outcome.not_ok += "error" not in rec and not rec["ok"]
    outcome.ran += 1
    result = rec.get("result") or {}
    rec = stamp(rec, "pimforge.sweep.point", 1)
    rec["config"], rec["config_sha256"] = result.get("config"), result.get("config_sha256")
    write_json(points_dir / f"{pt.name}.json", rec)
    records[pt.name] = rec
