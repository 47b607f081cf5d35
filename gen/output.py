"""Outputs that are checked before the work and written atomically.

Every command that writes a result checks its destination first (so a long
run never ends in "no such folder"), then writes to a temporary file in the
same folder and renames it into place: an error or Ctrl-C leaves either the
old file or the new one, never a cut-off one. A write that fails (a full disk, a
file-size limit) raises :class:`OutputWriteError` naming the folder, after removing
its temporaries; a result of several files goes through :class:`FileSet`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .errors import PimforgeError

__all__ = ["FileSet", "OutputError", "OutputWriteError", "cache_root", "check_output_dir",
           "check_output_file", "write_json", "write_text"]


def cache_root() -> Path:
    """The folder of kept builds and results: ``$PIMFORGE_CACHE``, or
    ``~/.cache/pimforge`` (not checked or created here)."""
    return Path(os.environ.get("PIMFORGE_CACHE") or Path.home() / ".cache" / "pimforge")


class OutputError(PimforgeError):
    """An output path cannot be written (missing folder, a file in the way, no permission)."""


class OutputWriteError(OutputError):
    """Writing an output failed after the work was done (a full disk, a file-size limit,
    an I/O error); the previous file or file set is left as it was."""

    @classmethod
    def of(cls, folder: str | Path, e: OSError) -> OutputWriteError:
        why = e.strerror or str(e) or type(e).__name__
        return cls(f"cannot write to the folder {os.path.abspath(folder)!r}: {why}; nothing "
                   "there was replaced (free space or choose another folder, then rerun)")


def _resolved(p: Path, what: str) -> Path:
    """*p* with symbolic links resolved, refusing a link loop or a dangling link (writing
    through either fails only after the work)."""
    try:
        r = p.resolve()
    except (RuntimeError, OSError):        # RuntimeError: Python < 3.13's loop report
        raise OutputError(f"{what} {str(p)!r} cannot be resolved: it goes through a "
                          "symbolic link loop") from None
    probe = p
    while True:
        if probe.is_symlink() and not probe.exists():
            raise OutputError(f"{what} {str(p)!r} goes through a broken or looping symbolic "
                              f"link {str(probe)!r}")
        if probe == probe.parent or str(probe) in ("", "."):
            break
        probe = probe.parent
    return r


def check_output_file(path: str | Path, what: str = "output") -> Path:
    """*path* as a Path after checking that a file can be created or replaced there (its
    folder exists or can be created, and is writable)."""
    p = Path(path)
    if str(path) == "" or p.name == "":
        raise OutputError(f"{what} path is empty; give a file name")
    _resolved(p, what)
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
    _resolved(p, what)
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
    folder = p.parent
    made = _missing_folders(folder)
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=folder)
        os.chmod(tmp, 0o666 & ~_umask())   # mkstemp makes it private; a result is not
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        _remove_empty(made)
        if isinstance(e, OSError):
            raise OutputWriteError.of(folder, e) from e
        raise
    return p


def _missing_folders(folder: Path) -> list[Path]:
    """The folders on the way to *folder* that do not exist yet, deepest first."""
    out = []
    while str(folder) not in ("", ".") and not folder.exists() and folder != folder.parent:
        out.append(folder)
        folder = folder.parent
    return out


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders a failed write created (deepest first), where still empty."""
    for f in folders:
        try:
            f.rmdir()
        except OSError:
            break


def write_json(path: str | Path, data: Any) -> Path:
    """Write *data* as indented JSON to *path* atomically."""
    return write_text(path, json.dumps(data, indent=2) + "\n")


class FileSet:
    """Several files published together, with *marker* (written last) as proof of completion.

    Every result of more than one file is written through this. Each file is written
    to a temporary name in the destination folder (:meth:`path` gives it);
    :meth:`publish` removes the old marker, renames every
    file into place and the marker last. So a reader that finds the marker finds a
    complete, consistent set, and an error or Ctrl-C before :meth:`publish` leaves
    the previous set untouched (the temporaries are removed, and so is the folder
    if this set created it). A write that fails with an :class:`OSError` (a full
    disk) is raised as :class:`OutputWriteError` naming the folder.
    """

    def __init__(self, folder: str | Path, marker: str):
        self.folder = check_output_dir(folder)
        self.marker = marker
        self._tmp: dict[str, Path] = {}
        self._dir: Path | None = None
        self._made: list[Path] = []

    def __enter__(self) -> FileSet:
        self._made = _missing_folders(self.folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._dir = Path(tempfile.mkdtemp(prefix=".partial-", dir=self.folder))
        except OSError as e:
            _remove_empty(self._made)
            raise OutputWriteError.of(self.folder, e) from e
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
        try:
            if exc_type is None:
                self.publish()
        except OSError as e:
            exc = e
            raise OutputWriteError.of(self.folder, e) from e
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)
            if exc is not None:
                _remove_empty(self._made)
        if isinstance(exc, OSError) and self._writing(exc):
            raise OutputWriteError.of(self.folder, exc) from exc

    def _writing(self, e: OSError) -> bool:
        """Whether *e* came from writing this set (np.save into an open file names no
        file), not from something else done inside the ``with``."""
        return e.filename is None or (self._dir is not None
                                      and str(e.filename).startswith(str(self._dir)))
