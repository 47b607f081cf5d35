"""Real photographs as inputs of the image benchmarks (:mod:`pimforge.verif.models.ipim.image`).

The photographs are the ones scikit-image ships in its wheel (``skimage.data``), so
they install with pimforge's dependencies and need no download; any PNG, JPEG or
``.npy`` file can be used instead. Either is resized with scikit-image
(anti-aliased, bilinear) to the size asked for and converted to a benchmark's
input kind:

``"gray"``
    float32 ``(H, W)`` in [0, 1], the luminance of RGB (ITU-R BT.709 weights,
    ``skimage.color.rgb2gray``); a gray source is taken as is.
``"rgba"``
    float32 ``(H, W, 4)``, *premultiplied* RGBA (``r, g, b <= a``). A source with
    an alpha channel keeps it; otherwise a fraction ``opaque`` of the pixels,
    drawn by ``numpy.random.default_rng(seed)``, is opaque (alpha 1) and the rest
    transparent (alpha 0), the holes that the interpolate benchmark fills.
``"u8"``
    uint8 ``(H, W)``: the gray image as ``round(255 * gray)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pimforge.gen.errors import PimforgeError, UnknownNameError

__all__ = ["PHOTOS", "KINDS", "FORMATS", "ImageLoadError", "load_photo", "load_image",
           "convert"]

#: The photographs of ``skimage.data`` offered by name.
PHOTOS = ("astronaut", "camera", "coffee", "chelsea", "rocket")
#: Input kinds of the benchmarks.
KINDS = ("gray", "rgba", "u8")
#: File suffixes :func:`load_image` reads.
FORMATS = (".png", ".jpg", ".jpeg", ".npy")


class ImageLoadError(PimforgeError, ValueError):
    """An image file that cannot be read, or a size or conversion that cannot be made."""


def _check_size(size) -> tuple[int, int] | None:
    if size is None:
        return None
    ok = (isinstance(size, Sequence) and len(size) == 2
          and all(isinstance(v, int | np.integer) and not isinstance(v, bool) and 1 <= v <= 65536
                  for v in size))
    if not ok:
        raise ImageLoadError(f"size must be (width, height), two integers between 1 and 65536, "
                             f"not {size!r}")
    return int(size[0]), int(size[1])


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise UnknownNameError(f"unknown image kind {kind!r}; choose one of {', '.join(KINDS)}")


def _to_unit(a: np.ndarray, where: str) -> np.ndarray:
    """*a* as float64 in [0, 1] with 2 or 3 dims (channels 1, 3 or 4)."""
    if a.dtype == np.uint8:
        f = a / 255.0
    elif a.dtype == np.uint16:
        f = a / 65535.0
    elif a.dtype == np.bool_:
        f = a.astype(np.float64)
    elif np.issubdtype(a.dtype, np.floating):
        f = a.astype(np.float64)
        if not np.isfinite(f).all() or f.min() < 0 or f.max() > 1:
            raise ImageLoadError(f"{where}: float pixel values must be finite and in [0, 1]")
    else:
        raise ImageLoadError(f"{where}: pixels must be uint8, uint16, bool or float, "
                             f"not {a.dtype}")
    if f.ndim == 3 and f.shape[2] == 1:
        f = f[..., 0]
    if not (f.ndim == 2 or (f.ndim == 3 and f.shape[2] in (3, 4))) or min(f.shape[:2]) < 1:
        raise ImageLoadError(f"{where}: an image must be (H, W), (H, W, 3) or (H, W, 4), "
                             f"not shape {a.shape}")
    return f


def convert(img: np.ndarray, size: tuple[int, int] | None = None, kind: str = "gray", *,
            opaque: float = 0.5, seed: int = 0) -> np.ndarray:
    """Resize *img* and convert it to a benchmark input kind (see the module docstring).

    Parameters
    ----------
    img : ndarray
        ``(H, W)``, ``(H, W, 3)`` or ``(H, W, 4)`` (straight, not premultiplied,
        alpha), uint8, uint16, bool or float in [0, 1].
    size : tuple of int, optional
        ``(width, height)`` of the result; the source size if omitted.
    kind : {"gray", "rgba", "u8"}
        The benchmark input kind.
    opaque : float
        For ``"rgba"`` from a source without alpha: the fraction of opaque pixels.
    seed : int
        Seed of the opaque-pixel draw.

    Returns
    -------
    ndarray
        float32 ``(H, W)`` or ``(H, W, 4)``, or uint8 ``(H, W)``.
    """
    from skimage.color import gray2rgb, rgb2gray
    from skimage.transform import resize

    _check_kind(kind)
    size = _check_size(size)
    if not 0.0 <= opaque <= 1.0:
        raise ImageLoadError(f"opaque must be a fraction between 0 and 1, not {opaque!r}")
    f = _to_unit(np.asarray(img), "image")
    if kind == "rgba":
        rgb = gray2rgb(f) if f.ndim == 2 else f[..., :3]
        if f.ndim == 3 and f.shape[2] == 4:
            a = f[..., 3]
        else:
            a = None
        if a is not None:           # premultiply first, so resampling weighs colour by alpha
            f = np.concatenate([rgb * a[..., None], a[..., None]], axis=2)
        else:
            f = rgb
    elif f.ndim == 3:
        f = rgb2gray(f[..., :3])
    if size is not None and (size[1], size[0]) != f.shape[:2]:
        f = resize(f, (size[1], size[0]) + f.shape[2:], order=1, anti_aliasing=True,
                   preserve_range=True)
    f = np.clip(f, 0.0, 1.0)
    if kind == "gray":
        return f.astype(np.float32)
    if kind == "u8":
        return np.round(f * 255.0).astype(np.uint8)
    if f.shape[2] == 3:
        mask = np.random.default_rng(seed).random(f.shape[:2]) < opaque
        a = mask.astype(np.float32)
        out = np.concatenate([f.astype(np.float32) * a[..., None], a[..., None]], axis=2)
    else:
        out = f.astype(np.float32)
        out[..., :3] = np.minimum(out[..., :3], out[..., 3:4])   # keep r, g, b <= a
    return np.ascontiguousarray(out)


def load_photo(name: str, size: tuple[int, int] | None = None, kind: str = "gray", *,
               opaque: float = 0.5, seed: int = 0) -> np.ndarray:
    """One of :data:`PHOTOS` from ``skimage.data``, resized to *size* and converted to *kind*.

    Parameters
    ----------
    name : str
        ``astronaut`` (512x512 RGB), ``camera`` (512x512 gray), ``coffee`` (600x400
        RGB), ``chelsea`` (451x300 RGB) or ``rocket`` (640x427 RGB).
    size, kind, opaque, seed
        As in :func:`convert`.

    Raises
    ------
    UnknownNameError
        *name* or *kind* is not one of the choices.
    ImageLoadError
        A bad *size* or *opaque*.
    """
    if name not in PHOTOS:
        raise UnknownNameError(f"unknown photo {name!r}; choose one of {', '.join(PHOTOS)}")
    _check_kind(kind)
    _check_size(size)
    import skimage.data

    return convert(getattr(skimage.data, name)(), size, kind, opaque=opaque, seed=seed)


def load_image(path: str | Path, size: tuple[int, int] | None = None, kind: str = "gray", *,
               opaque: float = 0.5, seed: int = 0) -> np.ndarray:
    """An image file (PNG, JPEG or ``.npy``), resized to *size* and converted to *kind*.

    ``.npy`` files hold an array as :func:`convert` takes it (``(H, W[, C])``,
    straight alpha). PNG/JPEG are read with scikit-image.

    Raises
    ------
    ImageLoadError
        The file is missing, not one of :data:`FORMATS`, or cannot be read.
    """
    p = Path(path)
    _check_kind(kind)
    _check_size(size)
    suffix = p.suffix.lower()
    if suffix not in FORMATS:
        raise ImageLoadError(f"{p}: cannot read {suffix or 'a file without suffix'}; give a "
                             f"{', '.join(FORMATS)} file, or use a photo ({', '.join(PHOTOS)})")
    if not p.is_file():
        raise ImageLoadError(f"{p}: no such file; give a {', '.join(FORMATS)} file, or use a "
                             f"photo ({', '.join(PHOTOS)})")
    try:
        if suffix == ".npy":
            arr = np.load(p, allow_pickle=False)
        else:
            from skimage.io import imread
            arr = imread(p)
    except Exception as e:         # any decoder error is the file's fault, named in one line
        raise ImageLoadError(f"{p}: cannot be read as {suffix[1:]} "
                             f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else e})"
                             ) from e
    return convert(arr, size, kind, opaque=opaque, seed=seed)
