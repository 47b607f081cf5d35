"""A pipeline of the user's own: a Python file written with the front end
(:mod:`pimforge.sim.ipim.lang`) that ``pimforge run image --pipeline FILE.py`` and
``pimforge compile image --pipeline FILE.py`` compile and run as they do a Table II
benchmark.

The file defines
----------------
``pipeline(H, W, **params)`` (required)
    The pipeline for an ``H x W`` input (rows, columns): its output :class:`Func`,
    scheduled, computed over the whole ``(W, H)`` image; or, as the benchmark
    builders of :mod:`pimforge.sim.ipim.image_benches` return, ``(out, (W', H'),
    crop)``: the output computed over ``W' x H'`` and the ``(rows, cols[, channels])``
    of it that is the result. Its keyword parameters with defaults are the ones
    ``--param NAME=VALUE`` sets.
``reference(img, **params)`` (optional)
    The numpy result for the input ``img`` (an ndarray of the ``INPUT`` kind) with the
    same parameters, compared with the machine's output within ``ATOL``.
``INPUT`` (optional, default ``"gray"``)
    The input kind (:data:`pimforge.sim.ipim.photos.KINDS`): ``"gray"`` float32
    ``(H, W)`` in [0, 1] (an ``ImageParam(name, FP32)``), ``"rgba"`` premultiplied
    float32 ``(H, W, 4)`` (``ImageParam(name, FP32, channels=4)``) or ``"u8"`` uint8
    ``(H, W)`` (``ImageParam(name, INT32)``). Every ``ImageParam`` reads that one image.
``ATOL`` (optional, default :data:`DEFAULT_ATOL`)
    The largest absolute difference from ``reference`` that still matches: 0 for a
    reference that follows the pipeline's float32 operations in their order, more
    where it legally does not (another association of a sum).

A file that cannot be imported, lacks ``pipeline``, defines a bad ``INPUT`` or
``ATOL``, or whose pipeline fails or does not compile, is a one-line
:class:`PipelineFileError` (or :class:`~pimforge.sim.ipim.lang.CompileError`) naming
the file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import math
import numbers
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np

from pimforge.gen.errors import PimforgeError

from .backend import OPT_LEVELS, Options
from .lang import FP32, INT32, CompileError, Func
from .lower import Program
from .passes import compile_pipeline
from .photos import KINDS

__all__ = ["DEFAULT_ATOL", "PipelineFileError", "UserPipeline", "load_pipeline"]

#: ``ATOL`` of a file that sets none: the blur's and the resamplings' (values in [0, 1],
#: float32 sums in another order).
DEFAULT_ATOL = 1e-6


class PipelineFileError(PimforgeError):
    """A pipeline file that cannot be used, with what is wrong."""


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


@dataclass
class UserPipeline:
    """A loaded pipeline file (:func:`load_pipeline`)."""

    path: str
    sha256: str
    module: ModuleType = field(repr=False)
    input_kind: str = "gray"
    atol: float = DEFAULT_ATOL
    #: ``pipeline``'s keyword parameters and their defaults
    params: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The file's stem: the key of its run in the results."""
        return Path(self.path).stem

    @property
    def has_reference(self) -> bool:
        return callable(getattr(self.module, "reference", None))

    def _fail(self, what: str) -> PipelineFileError:
        return PipelineFileError(f"{self.path}: {what}")

    def check_params(self, given: list[tuple[str, int | float]] | None) -> dict:
        """``{name: value}`` of ``--param`` values; a name ``pipeline`` does not take or
        one given twice is a one-line error."""
        names = [k for k, _ in given or []]
        twice = sorted({k for k in names if names.count(k) > 1})
        if twice:
            raise PimforgeError(f"--param {', '.join(twice)}: given twice; give each "
                                "parameter once")
        unknown = sorted(set(names) - set(self.params))
        if unknown:
            takes = ", ".join(sorted(self.params)) or "none"
            raise PimforgeError(f"--param {', '.join(unknown)}: not a parameter of "
                                f"pipeline() in {self.path} (it takes: {takes})")
        return dict(given or [])

    def build(self, H: int, W: int, **params) -> tuple[Func, tuple[int, int], tuple]:
        """``(out, (W', H'), crop)`` of the file's ``pipeline(H, W, **params)``."""
        try:
            got = self.module.pipeline(H, W, **params)
        except CompileError as e:
            raise CompileError(f"{self.path}: {e}") from None
        except Exception as e:  # the user's code: any failure is one line naming the file
            raise self._fail(f"pipeline({H}, {W}) failed: {_one_line(e)}") from None
        if isinstance(got, Func):
            return got, (W, H), (H, W)
        ok = (isinstance(got, tuple) and len(got) == 3 and isinstance(got[0], Func)
              and _ints(got[1], 2) and _ints(got[2], None))
        if not ok:
            raise self._fail(f"pipeline({H}, {W}) must return its output Func or "
                             f"(Func, (W, H), crop), not {_brief(got)}")
        return got[0], tuple(got[1]), tuple(got[2])

    def compile(self, H: int, W: int, cfg, opts: Options | str = "opt", *,
                observe: Callable | None = None, **params) -> Program:
        """The program of the pipeline for an ``(H, W)`` input on *cfg*; its inputs checked
        against ``INPUT`` (*observe*: see :func:`~.passes.compile_pipeline`)."""
        out, layout, crop = self.build(H, W, **params)
        o = OPT_LEVELS[opts] if isinstance(opts, str) else opts
        try:
            prog = compile_pipeline(out, layout, cfg, o, out_shape=crop, observe=observe)
        except CompileError as e:
            raise CompileError(f"{self.path}: {e}") from None
        want = INT32 if self.input_kind == "u8" else FP32
        for arr in prog.inputs.values():
            if arr.kind != "input":
                continue
            if arr.dtype != want:
                raise self._fail(f"input {arr.name} is {arr.dtype} but INPUT = "
                                 f"{self.input_kind!r} holds {want} pixels (set INPUT or the "
                                 "ImageParam's type)")
            if (arr.channel is not None) != (self.input_kind == "rgba"):
                raise self._fail(f"input {arr.name} has "
                                 f"{'channels' if arr.channel is not None else 'no channels'}"
                                 f" but INPUT = {self.input_kind!r} "
                                 f"{'is 4 channels' if self.input_kind == 'rgba' else 'has none'}"
                                 " (set INPUT or ImageParam's channels=)")
        return prog

    def reference(self, img: np.ndarray, **params) -> np.ndarray | None:
        """The file's ``reference(img, **params)`` (``None`` without one)."""
        if not self.has_reference:
            return None
        try:
            ref = self.module.reference(img.copy(), **params)
            return np.asarray(ref)
        except Exception as e:  # the user's code: any failure is one line naming the file
            raise self._fail(f"reference(img) failed: {_one_line(e)}") from None


def _ints(v, n: int | None) -> bool:
    return (isinstance(v, tuple | list) and (n is None or len(v) == n) and len(v) > 0
            and all(isinstance(x, numbers.Integral) and not isinstance(x, bool) and x > 0
                    for x in v))


def _brief(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else f"a {type(v).__name__}"


def load_pipeline(path: str | Path) -> UserPipeline:
    """Import the pipeline file *path* (see the module docstring).

    Raises
    ------
    PipelineFileError
        The file is missing, not ``.py``, cannot be imported, or its names are wrong.
    """
    p = Path(path)
    if p.suffix != ".py":
        raise PipelineFileError(f"{path}: a pipeline is a Python file (.py)")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise PipelineFileError(f"{path}: cannot be read ({e.strerror or e})") from None
    digest = hashlib.sha256(data).hexdigest()
    modname = f"_pimforge_pipeline_{digest[:16]}"
    spec = importlib.util.spec_from_file_location(modname, p)
    if spec is None or spec.loader is None:
        raise PipelineFileError(f"{path}: cannot be imported")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod          # dataclasses and pickling look their module up
    try:
        spec.loader.exec_module(mod)
    except SystemExit as e:
        sys.modules.pop(modname, None)
        raise PipelineFileError(f"{path}: cannot be imported (it exits, status {e.code})"
                                ) from None
    except Exception as e:  # the user's code: any failure is one line naming the file
        sys.modules.pop(modname, None)
        raise PipelineFileError(f"{path}: cannot be imported: {_one_line(e)}") from None
    fn = getattr(mod, "pipeline", None)
    if not callable(fn):
        raise PipelineFileError(f"{path}: defines no pipeline(H, W) function (the output "
                                "Func of the pipeline for an H x W input)")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise PipelineFileError(f"{path}: pipeline has no signature to call") from None
    ps = list(sig.parameters.values())
    pos = [q for q in ps if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)
           and q.default is q.empty]
    if len(pos) != 2 or any(q.kind == q.KEYWORD_ONLY and q.default is q.empty for q in ps):
        raise PipelineFileError(f"{path}: pipeline must take (H, W) and keyword parameters "
                                f"with defaults, not {fn.__name__}{sig}")
    params = {q.name: q.default for q in ps
              if q.default is not q.empty and q.kind != q.VAR_KEYWORD}
    kind = getattr(mod, "INPUT", "gray")
    if kind not in KINDS:
        raise PipelineFileError(f"{path}: INPUT must be one of {', '.join(map(repr, KINDS))}, "
                                f"not {_brief(kind)}")
    atol = getattr(mod, "ATOL", DEFAULT_ATOL)
    if (not isinstance(atol, numbers.Real) or isinstance(atol, bool)
            or not math.isfinite(float(atol)) or atol < 0):
        raise PipelineFileError(f"{path}: ATOL must be a finite number >= 0, not {_brief(atol)}")
    ref = getattr(mod, "reference", None)
    if ref is not None and not callable(ref):
        raise PipelineFileError(f"{path}: reference must be a function reference(img), "
                                f"not {_brief(ref)}")
    return UserPipeline(str(path), digest, mod, kind, float(atol), params)
