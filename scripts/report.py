"""The ending every script shares: Markdown tables, the geometric mean, outputs checked
before the work and written atomically (:mod:`pimforge.gen.output`), and the report of
runs that do not match their golden model with exit status 1.

The scripts are not a package. A script in ``scripts/ACCELERATOR/`` puts ``scripts/``
on the import path first::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from report import finish, geomean, md_table  # noqa: E402

(a script in ``scripts/`` itself uses ``parent`` instead of ``parents[1]``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pimforge.gen.output import OutputError, check_output_file, write_json, write_text

__all__ = ["check_outputs", "finish", "geomean", "md_header", "md_row", "md_table",
           "verdict", "write_json", "write_text"]


def geomean(xs: Iterable[float]) -> float:
    """The geometric mean of *xs* (positive numbers, at least one)."""
    xs = list(xs)
    return math.exp(sum(map(math.log, xs)) / len(xs))


def md_row(cells: Iterable[object]) -> str:
    """One Markdown table row: ``| a | b | c |``."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def md_header(names: Sequence[str], align: Sequence[str] | str | None = None) -> list[str]:
    """The header row and the rule under it. *align* gives each column's rule (``---``,
    ``---:``...), as a sequence or as the rule line itself (``"|---|---:|"``); by default
    ``---`` for every column."""
    if align is None:
        rule = "|" + "---|" * len(names)
    elif isinstance(align, str):
        rule = align
    else:
        rule = "|" + "".join(f"{a}|" for a in align)
    return [md_row(names), rule]


def md_table(names: Sequence[str], rows: Iterable[Iterable[object]],
             align: Sequence[str] | str | None = None) -> list[str]:
    """A whole Markdown table as lines: header, rule, one line per row."""
    return md_header(names, align) + [md_row(r) for r in rows]


def verdict(ok: bool) -> str:
    """What a run's progress line says of its check against the golden model."""
    return "ok" if ok else "MISMATCH"


def check_outputs(parser: argparse.ArgumentParser, **paths: Path | None) -> None:
    """Check, before any work, that each given output file can be written; a bad one is
    ``parser.error`` (one line, exit status 2). Keywords name the options:
    ``check_outputs(p, json=a.json, md=a.md)``."""
    for name, path in paths.items():
        if path is not None:
            try:
                check_output_file(path, f"--{name.replace('_', '-')}")
            except OutputError as e:
                parser.error(str(e))


def finish(text: str, result: dict[str, Any] | None = None, *, json: Path | None = None,
           md: Path | None = None, bad: Sequence[str] = (), t0: float | None = None) -> int:
    """Print *text*, record the wall time since *t0* in *result* as ``wall_s``, write
    *result* to *json* and *text* to *md* (each when given, atomically), report the runs
    in *bad* (those that did not match their golden model) on stderr; the exit status:
    1 when any did not match, else 0."""
    print(text)
    if result is not None and t0 is not None:
        result["wall_s"] = time.time() - t0
    if json is not None:
        write_json(json, result)
    if md is not None:
        write_text(md, text + "\n")
    if bad:
        print("MISMATCH: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0
