"""The image golden models (iPIM Table II): hand-written checks, Halide, the photographs.

Each numpy reference is checked against something written independently of it:
per-pixel loops in float64 from the formulas (tiny images), ``np.bincount``, a
direct per-pixel bilateral filter through the grid's definition, identities
(an opaque image through interpolate, local Laplacian with no detail gain), and
the same ten pipelines written in Halide. Random inputs come from
``numpy.random.default_rng`` seeded by ``PIMFORGE_SEED`` (logged; rerun a failure
with the same value).
"""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from pimforge.gen.errors import UnknownNameError
from pimforge.sim.ipim.photos import PHOTOS, ImageLoadError, load_image, load_photo
from pimforge.verif.models.ipim import image as im
from pimforge.verif.models.ipim.image import BENCHES, ImageInputError, check_input, reference
from pimforge.verif.models.ipim.image_halide import halide_reference

log = logging.getLogger(__name__)
SEED = int(os.environ.get("PIMFORGE_SEED", "20261125"))


def _rng(salt: int) -> np.random.Generator:
    log.info("seed %d (rerun with PIMFORGE_SEED=%d)", SEED, SEED)
    print(f"seed {SEED} (rerun with PIMFORGE_SEED={SEED})")
    return np.random.default_rng([SEED, salt])


def _random_input(kind: str, h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "gray":
        img = rng.random((h, w), dtype=np.float32)
        img[0, 0], img[-1, -1] = 0.0, 1.0          # the range's ends on purpose
        return img
    if kind == "u8":
        img = rng.integers(0, 256, (h, w), dtype=np.uint8)
        img[0, 0], img[-1, -1] = 0, 255
        return img
    a = (rng.random((h, w)) < 0.4).astype(np.float32)
    a[h // 2, w // 2] = 1.0
    soft = rng.random((h, w), dtype=np.float32) < 0.2
    a[soft] = rng.random(int(soft.sum()), dtype=np.float32)   # some partial alpha too
    rgb = rng.random((h, w, 3), dtype=np.float32) * a[..., None]
    return np.concatenate([rgb, a[..., None]], axis=2)


def _ramp(h: int = 6, w: int = 8) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    return ((x + 3 * y) / 64.0).astype(np.float32) + np.float32(0.125)


def _px(img: np.ndarray, x: int, y: int) -> float:
    h, w = img.shape[:2]
    return float(img[min(max(y, 0), h - 1), min(max(x, 0), w - 1)])


# --- hand-written formulas on a ramp ---------------------------------------------------

def test_brighten_and_shift_on_a_ramp():
    img = _ramp()
    assert np.array_equal(reference("brighten", img), img * np.float32(1.5))
    out = reference("shift", img)
    for y in range(6):
        for x in range(8):
            assert out[y, x] == _px(img, x - 4, y - 4), (x, y)
    # the corner block repeats pixel (0, 0); the last row/column come from (3, 1)
    assert (out[:5, :5] == img[0, 0]).all() and out[5, 7] == img[1, 3]
    assert np.array_equal(reference("shift", img, dx=-1, dy=2)[2:, :7], img[:4, 1:])


def test_blur_downsample_upsample_on_a_ramp():
    img = _ramp()
    b = reference("blur", img)
    assert b.shape == (4, 6)
    for y in range(4):
        for x in range(6):
            want = sum(_px(img, x + i, y + j) for i in range(3) for j in range(3)) / 9
            assert abs(b[y, x] - want) < 1e-6, (x, y)
    # a linear ramp is its own 3x3 average, one pixel in
    assert np.allclose(b, img[1:5, 1:7], atol=1e-6)

    d = reference("downsample", img)
    assert d.shape == (3, 4)
    for y in range(3):
        for x in range(4):
            want = sum(wx * wy * _px(img, 2 * x + i, 2 * y + j)
                       for i, wx in ((-1, 1), (0, 2), (1, 1))
                       for j, wy in ((-1, 1), (0, 2), (1, 1))) / 16
            assert abs(d[y, x] - want) < 1e-6, (x, y)
    assert np.allclose(d[1:, 1:], img[2::2, 2::2], atol=1e-6)     # interior: no clamping

    u = reference("upsample", img)
    assert u.shape == (12, 16)
    for y in range(12):
        for x in range(16):
            want = sum(_px(img, xs, ys) for xs in (x // 2, (x + 1) // 2)
                       for ys in (y // 2, (y + 1) // 2)) / 4
            assert abs(u[y, x] - want) < 1e-6, (x, y)
    assert np.array_equal(u[::2, ::2], img)                    # even pixels copy the source


def test_operation_order_is_the_documented_one():
    # blur is ((a + b) + c) * float32(1/3), not (a + b + c) / 3 in another order or precision
    rng = _rng(1)
    img = rng.random((5, 9), dtype=np.float32)
    k = np.float32(1 / 3)
    bx = ((img[:, :-2] + img[:, 1:-1]) + img[:, 2:]) * k
    assert np.array_equal(reference("blur", img), ((bx[:-2] + bx[1:-1]) + bx[2:]) * k)


def test_histogram_against_bincount():
    rng = _rng(2)
    for img in (rng.integers(0, 256, (13, 29), dtype=np.uint8), np.zeros((3, 4), np.uint8),
                np.full((2, 7), 255, np.uint8)):
        h = reference("histogram", img)
        assert h.dtype == np.int32 and h.shape == (256,)
        assert np.array_equal(h, np.bincount(img.ravel(), minlength=256))
        assert h.sum() == img.size


def test_one_stencil_stage_against_a_direct_loop():
    rng = _rng(3)
    img = rng.random((7, 9), dtype=np.float32)
    one = reference("stencil_chain", img, stencils=1)
    for y in range(7):
        for x in range(9):
            want = sum((i + 3) * (j + 3) * _px(img, x + i, y + j)
                       for i in range(-2, 3) for j in range(-2, 3)) / 225
            assert abs(one[y, x] - want) < 1e-6, (x, y)
    two = reference("stencil_chain", img, stencils=2)
    assert np.array_equal(two, reference("stencil_chain", one, stencils=1))
    assert im.stencil_weights().sum() == 225


def _bilateral_direct(img: np.ndarray, s: int = 8, r_sigma: float = 0.1) -> np.ndarray:
    """Per pixel, from the definition: the 2x2x2 blurred grid cells summed in float64."""
    h, w = img.shape
    inv_r = float(np.float32(1) / np.float32(r_sigma))
    taps = {-2: 1, -1: 4, 0: 6, 1: 4, 2: 1}
    cells = {}

    def cell(gx, gy):           # the (z -> (sum of val, count)) histogram of one cell
        if (gx, gy) not in cells:
            hist = {}
            for ry in range(s):
                for rx in range(s):
                    v = _px(img, gx * s + rx - s // 2, gy * s + ry - s // 2)
                    z = int(np.float32(v) * np.float32(inv_r) + np.float32(0.5))
                    a, n = hist.get(z, (0.0, 0))
                    hist[z] = (a + v, n + 1)
            cells[gx, gy] = hist
        return cells[gx, gy]

    def blurred(gx, gy, gz):
        tot = np.zeros(2)
        for dx, wx in taps.items():
            for dy, wy in taps.items():
                hist = cell(gx + dx, gy + dy)
                for dz, wz in taps.items():
                    a, n = hist.get(gz + dz, (0.0, 0))
                    tot += wx * wy * wz * np.array([a, n])
        return tot

    out = np.zeros((h, w))
    for y in range(h):
        for x in range(w):
            zv = float(np.float32(img[y, x]) * np.float32(inv_r))
            zi = int(zv)
            xf, yf, zf = (x % s) / s, (y % s) / s, zv - zi
            acc = np.zeros(2)
            for dx, fx in ((0, 1 - xf), (1, xf)):
                for dy, fy in ((0, 1 - yf), (1, yf)):
                    for dz, fz in ((0, 1 - zf), (1, zf)):
                        acc += fx * fy * fz * blurred(x // s + dx, y // s + dy, zi + dz)
            out[y, x] = acc[0] / acc[1]
    return out


def test_bilateral_grid_against_a_direct_per_pixel_filter():
    rng = _rng(4)
    img = rng.random((11, 18), dtype=np.float32)
    img[0, :4] = [0.0, 1.0, 0.05, 0.95]          # bin edges and the range's ends
    got = reference("bilateral_grid", img)
    want = _bilateral_direct(img)
    err = np.abs(got - want).max()
    print(f"bilateral_grid vs direct float64: max error {err:.3g}")
    assert err < 1e-5
    # an edge-preserving smoother: a constant image stays constant
    flat = np.full((9, 10), 0.3, np.float32)
    assert np.allclose(reference("bilateral_grid", flat), 0.3, atol=1e-6)


def test_interpolate_identities():
    rng = _rng(5)
    rgb = rng.random((12, 17, 3), dtype=np.float32)
    opaque = np.concatenate([rgb, np.ones((12, 17, 1), np.float32)], axis=2)
    assert np.array_equal(reference("interpolate", opaque), opaque)    # nothing to fill
    # a hole in a flat colour is filled with that colour once the pyramid reaches over it
    flat = np.tile(np.array([0.2, 0.5, 0.7, 1.0], np.float32), (16, 16, 1))
    flat[5:9, 3:6] = 0.0
    for levels in (3, 4, 5):
        out = reference("interpolate", flat, levels=levels)
        assert np.allclose(out, [0.2, 0.5, 0.7, 1.0], atol=1e-6), levels
    for levels in (1, 2):           # too shallow: the hole's middle stays 0/0
        out = reference("interpolate", flat, levels=levels)
        assert np.isnan(out[6, 4]).all() and np.isfinite(out[0]).all(), levels
    assert im.interpolate_levels(16, 16) == 5 and im.interpolate_levels(4000, 3000) == 10


def test_local_laplacian_without_detail_gain_reconstructs_the_image():
    rng = _rng(6)
    img = rng.random((20, 27), dtype=np.float32)
    out = reference("local_laplacian", img, alpha=0.0)
    assert np.abs(out - img).max() < 1e-5
    assert not np.allclose(reference("local_laplacian", img), img, atol=1e-3)   # alpha 1/7 acts
    lut = im.remap_lut()
    assert lut.shape == (2 * 7 * 256 + 1,) and lut[7 * 256] == 0
    assert np.isclose(lut[7 * 256 + 256], np.exp(-0.5) / 7, rtol=1e-6)
    assert im.laplacian_depth(20, 27) == 5 and im.laplacian_depth(4320, 7680) == 8


# --- every benchmark against Halide -----------------------------------------------------

def _compare(name: str, img: np.ndarray, what: str) -> None:
    b = BENCHES[name]
    ref = reference(name, img)
    assert ref.shape == b.out_shape(*img.shape[:2])
    got = halide_reference(name, img)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    finite = np.isfinite(ref)
    assert np.array_equal(finite, np.isfinite(got)), f"{name}: NaN in different places"
    err = float(np.abs(ref[finite].astype(np.float64) - got[finite]).max())
    print(f"{name} on {what}: max |numpy - halide| = {err:.3g} (atol {b.atol:g})")
    assert err <= b.atol, f"{name} on {what}: {err} > atol {b.atol}"


@pytest.mark.parametrize("name", list(BENCHES))
def test_matches_halide_on_a_random_image(name):
    rng = _rng(7 + list(BENCHES).index(name))
    h, w = (17, 35) if name != "stencil_chain" else (12, 20)
    _compare(name, _random_input(BENCHES[name].input_kind, h, w, rng), f"random {w}x{h}")


@pytest.mark.parametrize("name", list(BENCHES))
def test_matches_halide_on_a_photograph(name):
    kind = BENCHES[name].input_kind
    img = load_photo("astronaut", (40, 32), kind)
    _compare(name, img, "astronaut 40x32")


@pytest.mark.parametrize("name", ["blur", "bilateral_grid", "interpolate", "local_laplacian",
                                  "stencil_chain"])
def test_another_legal_order_stays_within_atol(name):
    # Halide without strict_float fuses multiply-adds: a different but legal float32 order
    rng = _rng(40 + list(BENCHES).index(name))
    img = _random_input(BENCHES[name].input_kind, 12, 20, rng)
    ref = reference(name, img)
    got = halide_reference(name, img, strict_float=False)
    finite = np.isfinite(ref)
    err = float(np.abs(ref[finite].astype(np.float64) - got[finite]).max())
    print(f"{name}, Halide without strict_float: max error {err:.3g} (atol {BENCHES[name].atol:g})")
    assert err <= BENCHES[name].atol


# --- input checks -------------------------------------------------------------------------

@pytest.mark.parametrize("name, img, match", [
    ("blur", np.zeros((4, 4)), "float32"),
    ("blur", np.zeros((4, 4, 4), np.float32), "shape"),
    ("blur", np.zeros((2, 9), np.float32), "at least 3x3"),
    ("downsample", np.zeros((1, 9), np.float32), "at least 2x2"),
    ("brighten", np.full((3, 3), 1.5, np.float32), r"\[0, 1\]"),
    ("brighten", np.full((3, 3), np.nan, np.float32), "finite"),
    ("histogram", np.zeros((3, 3), np.float32), "uint8"),
    ("interpolate", np.zeros((4, 4), np.float32), "shape"),
    ("interpolate", np.tile(np.float32([0.5, 0, 0, 0.25]), (4, 4, 1)), "premultiplied"),
    ("brighten", [[0.5]], "numpy array"),
])
def test_bad_inputs_are_one_line_errors(name, img, match):
    with pytest.raises(ImageInputError, match=match) as e:
        reference(name, img)
    assert "\n" not in str(e.value) and isinstance(e.value, ValueError)


def test_bad_parameters_and_names():
    img = np.zeros((16, 16), np.float32)
    with pytest.raises(ImageInputError, match="needs an image of at least 32x32"):
        check_input("local_laplacian", img, depth=6)
    check_input("local_laplacian", img, depth=5)
    with pytest.raises(ImageInputError, match="unknown parameter sigma"):
        reference("bilateral_grid", img, sigma=3)
    with pytest.raises(ImageInputError, match="stencils must be"):
        reference("stencil_chain", img, stencils=0)
    with pytest.raises(UnknownNameError, match="choose one of brighten, blur"):
        reference("sharpen", img)


def test_table_is_consistent():
    assert len(BENCHES) == 10
    for name, b in BENCHES.items():
        assert b.name == name and b.input_kind in ("gray", "rgba", "u8") and b.stages >= 1
        assert (b.atol == 0) == (name in ("brighten", "shift", "histogram")), name
        img = _random_input(b.input_kind, 16, 24, _rng(30))
        assert np.array_equal(b.reference(img), reference(name, img), equal_nan=True)
        with pytest.raises(TypeError):
            b.params["x"] = 1


# --- photographs --------------------------------------------------------------------------

@pytest.mark.parametrize("photo", PHOTOS)
def test_photos_convert_to_every_input_kind(photo):
    g = load_photo(photo, (24, 16), "gray")
    assert g.shape == (16, 24) and g.dtype == np.float32 and 0 <= g.min() and g.max() <= 1
    assert g.std() > 0.02                                    # a picture, not a flat field
    u = load_photo(photo, (24, 16), "u8")
    assert u.dtype == np.uint8 and np.abs(u / 255.0 - g).max() <= 0.5 / 255 + 1e-6
    r = load_photo(photo, (24, 16), "rgba", opaque=0.3, seed=4)
    assert r.shape == (16, 24, 4) and r.dtype == np.float32
    assert (r[..., :3] <= r[..., 3:4]).all() and set(np.unique(r[..., 3])) <= {0.0, 1.0}
    assert 0.1 < r[..., 3].mean() < 0.5
    for kind, img in (("gray", g), ("u8", u), ("rgba", r)):
        check_input({"gray": "blur", "u8": "histogram", "rgba": "interpolate"}[kind], img)


def test_photo_resizing_is_anti_aliased():
    full = load_photo("camera", None, "gray")
    assert full.shape == (512, 512)
    small = load_photo("camera", (64, 64), "gray")
    # anti-aliased: close to 8x8 block means, unlike picking every 8th pixel
    blocks = full.reshape(64, 8, 64, 8).mean(axis=(1, 3))
    assert np.abs(small - blocks).mean() < np.abs(full[::8, ::8] - blocks).mean()


def test_load_image_files(tmp_path):
    from skimage.io import imsave

    rgba = np.zeros((6, 10, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 200, 255
    rgba[2:4, 2:5, 3] = 0
    imsave(tmp_path / "a.png", rgba, check_contrast=False)
    got = load_image(tmp_path / "a.png", None, "rgba")
    assert got.shape == (6, 10, 4) and (got[2:4, 2:5] == 0).all()      # its own alpha
    assert np.allclose(got[0, 0], [200 / 255, 0, 0, 1])
    np.save(tmp_path / "g.npy", np.linspace(0, 1, 30, dtype=np.float32).reshape(5, 6))
    g = load_image(tmp_path / "g.npy", (3, 5), "gray")
    assert g.shape == (5, 3) and g.dtype == np.float32
    (tmp_path / "bad.png").write_bytes(b"not a png")
    for path, match in ((tmp_path / "bad.png", "cannot be read as png"),
                        (tmp_path / "none.jpg", "no such file.*astronaut"),
                        (tmp_path / "x.gif", "cannot read .gif.*astronaut")):
        with pytest.raises(ImageLoadError, match=match) as e:
            load_image(path)
        assert "\n" not in str(e.value)


def test_photo_errors_name_the_choices():
    with pytest.raises(UnknownNameError, match="astronaut, camera, coffee, chelsea, rocket"):
        load_photo("lena")
    with pytest.raises(UnknownNameError, match="gray, rgba, u8"):
        load_photo("camera", kind="rgb")
    with pytest.raises(ImageLoadError, match="width, height"):
        load_photo("camera", (0, 8))
