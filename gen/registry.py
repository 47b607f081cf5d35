"""The registry: what each accelerator contributes to pimforge, found by discovery.

Each accelerator (and the shared hardware, which belongs to none) declares, in
one module of its own under :mod:`pimforge.gen.accelerators`, an
:class:`Accelerator` named ``ACCELERATOR`` listing its config sections, its
generatable blocks, its cocotb benches, its workloads (``pimforge run NAME``)
and its extra commands. Nothing else in the project keeps a list of them: the
config tree, ``pimforge verilog``, the regression and the command line read
this registry, so a new accelerator is a new module in that package (plus its
own ``rtl``/``sim``/``verif`` files) and no edit to a shared file.

Entries name their code as ``"pimforge.module.path:attribute"`` strings,
imported only when used: a declaration imports nothing above the ``gen``
layer, listing stays cheap, and ``tests/test_layering.py`` checks that every
reference resolves and points at the layer it belongs to (blocks at ``rtl``,
benches at ``verif.tb``, workload and command modules at ``sim`` or ``verif``).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .errors import UnknownNameError

__all__ = ["Accelerator", "Bench", "Block", "Command", "Explorer", "Section", "Workload",
           "accelerators", "benches", "blocks", "commands", "explorers", "get_block",
           "get_workload", "resolve", "sections", "workloads"]


def resolve(ref: str) -> Any:
    """The object named by ``"package.module:attribute"``."""
    mod, _, attr = ref.partition(":")
    obj = importlib.import_module(mod)
    return getattr(obj, attr) if attr else obj


@dataclass(frozen=True)
class Section:
    """A config section: ``Config.<name>`` is an instance of the dataclass *cls*.

    Parameters
    ----------
    name : str
        Attribute and TOML table name (``hmc``, ``capsnet``...).
    cls : str
        ``"module:Class"`` of the frozen dataclass, defaults = the default preset.
    """

    name: str
    cls: str


@dataclass(frozen=True)
class Block:
    """A generatable block.

    Parameters
    ----------
    name : str
        Name of the block, used as the Verilog top module name.
    factory : str
        ``"module:function"`` of a function taking a ``Config`` and returning an
        Amaranth component.
    doc : str
        One line for ``pimforge verilog --list``.
    """

    name: str
    factory: str
    doc: str

    def build(self, config):
        return resolve(self.factory)(config)


@dataclass(frozen=True)
class Bench:
    """One cocotb testbench run of the regression.

    Parameters
    ----------
    name : str
        Unique name (``pimforge regress -k`` matches it).
    block : str
        Registered block to generate.
    module : str
        Dotted name of the cocotb test module.
    config : str
        Config preset (or TOML path) the block is generated from.
    overrides : mapping
        ``{"section.field": value}`` (``--set`` names, values already typed)
        applied on top of the preset, so one block is tested at several
        parameter points.
    """

    name: str
    block: str
    module: str
    config: str = "default"
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "overrides", MappingProxyType(dict(self.overrides)))


@dataclass(frozen=True)
class Workload:
    """A workload run end to end by ``pimforge run NAME``.

    Parameters
    ----------
    name : str
        ``pimforge run`` subcommand.
    doc : str
        One line for ``pimforge run --list`` and the help.
    cli : str
        Module with ``add_arguments(parser)`` (the workload's own options;
        ``--config``, ``--set`` and ``--json`` are added by ``pimforge run``)
        and ``run(args, config)`` returning a result with ``to_json()``,
        ``summary()`` and ``ok``. It may also define ``prepare(args, config)``,
        which builds what ``run`` will need (a Verilator build) into the build
        cache and returns nothing; ``pimforge sweep`` runs it once for the points
        that share a config, before their runs, so that N runs of one config do not
        build it N times. ``PREPARE_OPTIONS`` (a tuple of option dest names) lists
        the options the build depends on besides the config (all of them when
        absent); ``prepare`` must be idempotent and cheap once the build exists.
    default_config : str
        Preset used when the user names none.
    """

    name: str
    doc: str
    cli: str
    default_config: str = "default"


@dataclass(frozen=True)
class Command:
    """A ``pimforge`` subcommand contributed by an accelerator.

    Parameters
    ----------
    name : str
        Subcommand name.
    help : str
        One line of help.
    cli : str
        Module with ``add_arguments(parser)`` and ``run(args) -> int``.
    config : str
        ``"option"`` (``--config C --set K=V``), ``"positional"``
        (``CONFIG --set K=V``) or ``""`` (the command takes no config). With a
        config, ``args.config`` is the resolved ``Config`` when ``run`` is called.
    default_config : str
        Preset used when the user names none.
    """

    name: str
    help: str
    cli: str
    config: str = ""
    default_config: str = "default"


@dataclass(frozen=True)
class Explorer:
    """A design-space exploration: ``pimforge dse KIND``.

    Parameters
    ----------
    kind : str
        The ``pimforge dse`` subcommand (``spm``, ``nicepim``...).
    help : str
        One line of help.
    cli : str
        Module with ``add_arguments(parser)`` and ``run(args) -> int``.
    config, default_config : str
        As for :class:`Command`: ``"option"`` gives the kind ``--config C --set K=V``
        and ``run`` gets the resolved config as ``args.config``; ``""`` none.
    """

    kind: str
    help: str
    cli: str
    config: str = ""
    default_config: str = "default"

    @property
    def name(self) -> str:
        return self.kind


@dataclass(frozen=True)
class Accelerator:
    """Everything one accelerator (or the shared hardware) registers."""

    name: str
    doc: str
    sections: tuple[Section, ...] = ()
    blocks: tuple[Block, ...] = ()
    benches: tuple[Bench, ...] = ()
    workloads: tuple[Workload, ...] = ()
    commands: tuple[Command, ...] = ()
    explorers: tuple[Explorer, ...] = ()


#: Discovered first: the hardware every accelerator shares (its sections come
#: first in the config tree).
SHARED = "shared"


@functools.cache
def accelerators() -> tuple[Accelerator, ...]:
    """Every registered accelerator: the modules of :mod:`pimforge.gen.accelerators`."""
    from . import accelerators as pkg

    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__))
    names.sort(key=lambda n: n != SHARED)
    found = []
    for n in names:
        acc = getattr(importlib.import_module(f"{pkg.__name__}.{n}"), "ACCELERATOR", None)
        if not isinstance(acc, Accelerator):
            raise TypeError(f"{pkg.__name__}.{n} must define ACCELERATOR = Accelerator(...)")
        found.append(acc)
    for kind in ("sections", "blocks", "benches", "workloads", "commands", "explorers"):
        seen: dict[str, str] = {}
        for acc in found:
            for entry in getattr(acc, kind):
                if entry.name in seen:
                    raise ValueError(f"{kind[:-1]} {entry.name!r} is registered by both "
                                     f"{seen[entry.name]} and {acc.name}")
                seen[entry.name] = acc.name
    return tuple(found)


def _all(kind: str) -> dict:
    return {e.name: e for acc in accelerators() for e in getattr(acc, kind)}


def sections() -> dict[str, Section]:
    return _all("sections")


def blocks() -> dict[str, Block]:
    return _all("blocks")


def benches() -> dict[str, Bench]:
    return _all("benches")


def workloads() -> dict[str, Workload]:
    return _all("workloads")


def commands() -> dict[str, Command]:
    return _all("commands")


def explorers() -> dict[str, Explorer]:
    """``pimforge dse`` kinds: kind -> :class:`Explorer`."""
    return _all("explorers")


def _get(kind: str, what: str, name: str):
    table = _all(kind)
    try:
        return table[name]
    except KeyError:
        close = difflib.get_close_matches(name, table, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownNameError(f"unknown {what} {name!r}{hint}; available: "
                               f"{', '.join(sorted(table))}") from None


def get_block(name: str) -> Block:
    return _get("blocks", "block", name)


def get_workload(name: str) -> Workload:
    return _get("workloads", "workload", name)
