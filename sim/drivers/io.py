"""The Python side of the driver files: named fields in, named stats out, integer tables.

The formats (read and written on the C++ side by ``driver.h``):

* a *fields* file has ``key = value`` lines (``#`` starts a comment); a value
  is an integer, a float (``repr``, which C's ``strtod`` reads back exactly;
  the drivers write doubles with ``%.17g``, which ``float`` reads back
  exactly), a string, or integers/floats separated by spaces;
* a *table* file has a header line of column names and one row of integers per
  line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pimforge.gen.errors import SimulationError

__all__ = ["Fields", "read_fields", "write_fields", "write_table"]

Value = int | float | str | bool | Sequence[int | float]


def _key(key: str) -> str:
    if not key or not all(c.isalnum() or c == "_" for c in key):
        raise ValueError(f"field names are letters, digits and '_', not {key!r}")
    return key


def _number(key: str, x) -> str:
    if isinstance(x, bool):
        return str(int(x))
    if isinstance(x, int) or (hasattr(x, "dtype") and x.dtype.kind in "iu"):
        return str(int(x))
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"field {key!r} must be finite, not {x!r}")
    return repr(x)


def _text(key: str, v: Value) -> str:
    if isinstance(v, str):
        if "\n" in v or "#" in v or v != v.strip():
            raise ValueError(f"field {key!r}: a string value has no newline, '#' or "
                             f"surrounding blanks, not {v!r}")
        return v
    if isinstance(v, Sequence) or hasattr(v, "__array__"):
        return " ".join(_number(key, x) for x in v)
    return _number(key, v)


def write_fields(path: Path, fields: Mapping[str, Value]) -> None:
    """Write *fields* as a fields file at *path* (through a temporary file and a rename)."""
    text = "".join(f"{_key(k)} = {_text(k, v)}\n" for k, v in fields.items())
    tmp = Path(path).with_name(Path(path).name + f".tmp{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)


def write_table(path: Path, columns: Sequence[str], rows: Iterable[Sequence[int]]) -> None:
    """Write integer *rows* under the header *columns* at *path*."""
    cols = [_key(c) for c in columns]
    n = len(cols)
    lines = [" ".join(cols)]
    for r in rows:
        if len(r) != n:
            raise ValueError(f"table row {r!r} has {len(r)} values, not {n} ({' '.join(cols)})")
        lines.append(" ".join(str(int(x)) for x in r))
    Path(path).write_text("\n".join(lines) + "\n")


class Fields(Mapping[str, str]):
    """A fields file read back: the raw strings, and typed getters that name a missing key.

    Parameters
    ----------
    values : mapping of str to str
        The raw values.
    source : str
        Where they came from (for error messages).
    """

    def __init__(self, values: Mapping[str, str], source: str = "fields") -> None:
        self._v = dict(values)
        self.source = source

    def __getitem__(self, key: str) -> str:
        try:
            return self._v[key]
        except KeyError:
            raise SimulationError(f"{self.source}: missing field {key!r} "
                                  f"(it has {', '.join(self._v) or 'none'})") from None

    def __contains__(self, key: object) -> bool:
        return key in self._v

    def get(self, key: str, default=None):
        return self._v.get(key, default)

    def __iter__(self):
        return iter(self._v)

    def __len__(self) -> int:
        return len(self._v)

    def _conv(self, key: str, conv, what: str):
        raw = self[key]
        try:
            return conv(raw)
        except ValueError:
            raise SimulationError(f"{self.source}: field {key!r} is not {what}: {raw!r}"
                                  ) from None

    def int(self, key: str) -> int:
        """The integer value of *key*."""
        return self._conv(key, int, "an integer")

    def float(self, key: str) -> float:
        """The float value of *key* (exactly what the driver wrote)."""
        return self._conv(key, float, "a number")

    def ints(self, key: str) -> list[int]:
        """The integers of *key* (an array field)."""
        return self._conv(key, lambda s: [int(x) for x in s.split()], "a list of integers")

    def floats(self, key: str) -> list[float]:
        """The floats of *key* (an array field)."""
        return self._conv(key, lambda s: [float(x) for x in s.split()], "a list of numbers")


def read_fields(path: Path) -> Fields:
    """Read the fields file at *path*; malformed lines are an error naming the file."""
    values = {}
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        s = line.split("#", 1)[0].strip()
        if not s:
            continue
        k, eq, v = s.partition("=")
        if not eq or not k.strip():
            raise SimulationError(f"{path}:{n}: not a 'key = value' line: {line!r}")
        values[k.strip()] = v.strip()
    return Fields(values, str(path))
