"""Waves from a native driver: the ``waves`` fields of its run file and the VCD put in place.

The driver (``pf::Waves`` of ``driver.h``) writes ``DIR/waves.vcd`` of its run
folder; that name is a symbolic link to a temporary file beside the destination,
so a long run's waves are written once, where they belong, and renamed into place
only when the driver has finished: a failed or interrupted run leaves the previous
file as it was. Cycle N of the waves is the N-th clock cycle after reset, at time
``10 N`` (the clock low, the cycle's inputs set) and ``10 N + 5`` (after its
rising edge); runs of one driver that follow each other are numbered on.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

from pimforge.gen.args import WavesWindow
from pimforge.gen.output import OutputWriteError

__all__ = ["DriverWaves"]

#: The name the driver writes its waves to, in its run folder.
_WAVES_NAME = "waves.vcd"


class DriverWaves:
    """The waves of one driver run, or none (*window* None).

    Use as a context manager around the run: :attr:`fields` go into the run file,
    :meth:`publish` (after the driver has exited) renames the waves into place and
    says where they are; leaving the ``with`` without publishing removes them.
    """

    def __init__(self, window: WavesWindow | None, run_dir: Path) -> None:
        self.window = window
        self.run_dir = Path(run_dir)
        self._tmp: Path | None = None

    @property
    def fields(self) -> dict[str, int | str]:
        """The run-file fields asking the driver for waves (none without a window)."""
        if self.window is None:
            return {}
        return {"waves": _WAVES_NAME, "waves_from": self.window.start,
                "waves_to": -1 if self.window.stop is None else self.window.stop}

    def __enter__(self) -> DriverWaves:
        if self.window is not None:
            dest = self.window.path
            folder = dest.parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=folder)
                os.close(fd)
                self._tmp = Path(tmp)
                (self.run_dir / _WAVES_NAME).symlink_to(self._tmp.resolve())
            except OSError as e:
                self._discard()
                raise OutputWriteError.of(folder, e) from e
        return self

    def publish(self) -> Path | None:
        """Rename the waves into place and print their path on stderr; None without
        waves, or when the driver wrote none."""
        if self._tmp is None or self.window is None:
            return None
        if self._tmp.stat().st_size == 0:
            return None
        mask = os.umask(0)
        os.umask(mask)
        try:
            os.chmod(self._tmp, 0o666 & ~mask)   # mkstemp makes it private; waves are not
            os.replace(self._tmp, self.window.path)
        except OSError as e:
            raise OutputWriteError.of(self.window.path.parent, e) from e
        self._tmp = None
        w = self.window
        span = f"cycles {w.start} to {'the end' if w.stop is None else w.stop}"
        print(f"waves ({span}): {w.path}", file=sys.stderr, flush=True)
        return w.path

    def _discard(self) -> None:
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                self._tmp.unlink()
            self._tmp = None

    def __exit__(self, *exc) -> None:
        self._discard()
