"""Outputs that are checked before the work and written atomically.

Every command that writes a result checks its destination first (so a long
run never ends in "no such folder"), then writes to a temporary file in the
same folder and renames it into place: an error or Ctrl-C leaves either the
old file or the new one, never a cut-off one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .errors import PimforgeError

__all__ = ["OutputError", "check_output_dir", "check_output_file", "write_json", "write_text"]


class OutputError(PimforgeError):
    """An output path cannot be written (missing folder, a file in the way, no permission)."""


def check_output_file(path: str | Path, what: str = "output") -> Path:
    """*path* as a Path after checking that a file can be created or replaced there (its
    folder exists or can be created, and is writable)."""
    p = Path(path)
    if str(path) == "" or p.name == "":
        raise OutputError(f"{what} path is empty; give a file name")
    if p.is_dir():
        raise OutputError(f"{what} {str(p)!r} is a folder; give a file name")
    check_output_dir(p.parent if str(p.parent) else Path("."), f"{what}'s folder")
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputError(f"{what} {str(p)!r} is not writable")
    return p


def check_output_dir(path: str | Path, what: str = "output folder") -> Path:
    """*path* as a Path after checking that it is (or can be made) a writable folder."""
    p = Path(path)
    if str(path) == "":
        raise OutputError(f"{what} is empty; give a folder")
    if p.exists() and not p.is_dir():
        raise OutputError(f"{what} {str(p)!r} is a file; give a folder")
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise OutputError(f"{what} {str(p)!r} cannot be created: {str(probe)!r} is not a "
                          "writable folder")
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | Path, text: str) -> Path:
    """Write *text* to *path* atomically (temporary file in the same folder, then rename);
    missing parent folders are created."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent or ".")
    try:
        os.chmod(tmp, 0o666 & ~_umask())   # mkstemp makes it private; a result is not
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def write_json(path: str | Path, data: Any) -> Path:
    """Write *data* as indented JSON to *path* atomically."""
    return write_text(path, json.dumps(data, indent=2) + "\n")


class FileSet:
    """Several files published together, with *marker* (written last) as proof of completion.

    Each file is written to a temporary name in the destination folder
    (:meth:`path` gives it); :meth:`publish` removes the old marker, renames every
    file into place and the marker last. So a reader that finds the marker finds a
    complete, consistent set, and an error or Ctrl-C before :meth:`publish` leaves
    the previous set untouched (the temporaries are removed).
    """

    def __init__(self, folder: str | Path, marker: str):
        self.folder = check_output_dir(folder)
        self.marker = marker
        self._tmp: dict[str, Path] = {}
        self._dir: Path | None = None

    def __enter__(self) -> FileSet:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._dir = Path(tempfile.mkdtemp(prefix=".partial-", dir=self.folder))
        return self

    def path(self, name: str) -> Path:
        """The temporary path to write *name* to."""
        assert self._dir is not None, "use FileSet as a context manager"
        self._tmp[name] = self._dir / name
        return self._tmp[name]

    def publish(self) -> None:
        if self.marker not in self._tmp:
            raise ValueError(f"the marker {self.marker!r} was never written")
        (self.folder / self.marker).unlink(missing_ok=True)
        for name, tmp in self._tmp.items():
            if name != self.marker:
                os.replace(tmp, self.folder / name)
        os.replace(self._tmp[self.marker], self.folder / self.marker)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.publish()

        shutil.rmtree(self._dir, ignore_errors=True)
