"""What made a result: the fields every JSON output starts with (and a CSV's first line).

Every command's JSON carries ``schema`` (``pimforge.COMMAND...``), ``schema_version``,
``pimforge_version``, ``config`` (the preset name, or the path of the TOML file the
user gave), ``config_sha256`` (of the resolved config, ``--set`` changes included:
two results with the same hash were made from the same parameters) and ``argv``
(the command line after ``pimforge``). :func:`stamp` puts them in front of a
result; :func:`csv_comment` writes them as a ``#`` line for the top of a CSV file.

:func:`pimforge.gen.cli.main` records the command line and the config the user
named for the duration of a command (:func:`invocation`, and :func:`name_config` where
the config is resolved); a result built outside a command (a library call, a test)
falls back on ``sys.argv`` and the config's name.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["PROVENANCE_FIELDS", "config_sha256", "config_spec", "csv_comment", "invocation",
           "name_config", "pimforge_version", "read_csv_comment", "stamp"]

#: The keys :func:`stamp` puts first in every result.
PROVENANCE_FIELDS = ("schema", "schema_version", "pimforge_version", "config",
                     "config_sha256", "argv")

_current: list[list] = []          # [argv, config as named] of the commands running


@functools.cache
def pimforge_version() -> str:
    """The installed pimforge's version (``0.0.0+unknown`` when run from an uninstalled
    tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pimforge")
    except PackageNotFoundError:
        return "0.0.0+unknown"


def config_spec(spec: str | Path | None) -> str:
    """How a config the user named is recorded: a preset by its name, a TOML file by its
    absolute path."""
    spec = "default" if spec is None else str(spec)
    if spec.endswith(".toml") or "/" in spec:
        return str(Path(spec).resolve())
    return spec


@contextlib.contextmanager
def invocation(argv: list[str], config: str | Path | None = None) -> Iterator[None]:
    """Within the block, results record *argv* and the config named *config* (a preset
    name or a TOML path, None when the command takes none)."""
    _current.append([list(argv), None if config is None else config_spec(config)])
    try:
        yield
    finally:
        _current.pop()


def name_config(config: str | Path | None) -> None:
    """Record that the running command resolved the config the user named *config* (a
    preset name or a TOML path): its results say so."""
    if _current:
        _current[-1][1] = config_spec(config)


def config_sha256(config: Any) -> str:
    """SHA-256 of the resolved config's canonical JSON (sorted keys, every field)."""
    from .config import to_dict  # the config tree pulls in the registry's sections

    text = json.dumps(to_dict(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def stamp(data: Mapping[str, Any], schema: str | None = None, schema_version: int | None = None,
          config: Any = None) -> dict[str, Any]:
    """*data* with the provenance fields in front (see the module doc).

    Parameters
    ----------
    data : mapping
        The result; its own ``schema``/``schema_version`` are used when *schema* is
        None, and a ``config`` key in it (a config name) is replaced.
    schema : str, optional
        ``pimforge.COMMAND[.PART]``.
    schema_version : int, optional
        Raised whenever a field of *schema* is renamed, removed or changes meaning.
    config : Config, optional
        The resolved config the result was made from (None: the command takes none).
    """
    schema = data.get("schema") if schema is None else schema
    version = data.get("schema_version") if schema_version is None else schema_version
    if not schema or version is None:
        raise ValueError("a result needs a schema name and version")
    argv, named = _current[-1] if _current else (sys.argv[1:], None)
    if config is None:
        name, sha = None, None
    else:
        name, sha = named or getattr(config, "name", None), config_sha256(config)
    head = {"schema": schema, "schema_version": version, "pimforge_version": pimforge_version(),
            "config": name, "config_sha256": sha, "argv": list(argv)}
    return {**head, **{k: v for k, v in data.items() if k not in head}}


def csv_comment(prov: Mapping[str, Any]) -> str:
    """The provenance fields of *prov* (a :func:`stamp`-ed result) as the ``# {...}`` line
    (newline included) that starts a CSV file."""
    return "# " + json.dumps({k: prov[k] for k in PROVENANCE_FIELDS}) + "\n"


def read_csv_comment(text: str) -> tuple[dict[str, Any], str]:
    """The provenance of a CSV file's text and the rest of the text (the CSV itself)."""
    first, _, rest = text.partition("\n")
    if not first.startswith("# "):
        raise ValueError("the CSV text does not start with a '# {...}' provenance line")
    return json.loads(first[2:]), rest
