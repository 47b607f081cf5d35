"""Unsharp mask: ``out = clamp(in + amount * (in - blur(in)), 0, 1)`` with a 5-tap
binomial (1-4-6-4-1) Gaussian blur, separable.

Run it with ``pimforge run image --pipeline ipim_unsharp.py --size 64x64`` (the
cube RTL and the instruction-set simulator, checked against ``reference``), or
``--engine iss`` for the simulator alone; ``--param amount=2.5`` sharpens more.
"""

import numpy as np

from pimforge.sim.ipim.lang import FP32, Func, ImageParam, Var, clamp

#: The input: a gray float32 image in [0, 1] (the default; "rgba" and "u8" exist too).
INPUT = "gray"
#: The reference below follows the pipeline's float32 operations in their order: exact.
ATOL = 0.0


def pipeline(H: int, W: int, amount: float = 1.5) -> Func:
    x, y, xi, yi = Var("x"), Var("y"), Var("xi"), Var("yi")
    inp = ImageParam("in", FP32)
    # the blur in x, inlined into the blur in y (no schedule: Halide's default)
    bx = Func("blur_x")
    bx[x, y] = ((((inp[x - 2, y] + inp[x - 1, y] * 4.0) + inp[x, y] * 6.0)
                 + inp[x + 1, y] * 4.0) + inp[x + 2, y]) * 0.0625
    # the blur in y, a kernel of its own: its rows above and below a PE's band come from
    # its neighbours
    by = Func("blur_y")
    by[x, y] = ((((bx[x, y - 2] + bx[x, y - 1] * 4.0) + bx[x, y] * 6.0)
                 + bx[x, y + 1] * 4.0) + bx[x, y + 2]) * 0.0625
    by.compute_root().ipim_tile(x, y, xi, yi, 8, 8).load_pgs().vectorize(xi, 4)
    out = Func("out")
    out[x, y] = clamp(inp[x, y] + (inp[x, y] - by[x, y]) * amount, 0.0, 1.0)
    return out.compute_root().ipim_tile(x, y, xi, yi, 8, 8).load_pgs().vectorize(xi, 4)


def reference(img: np.ndarray, amount: float = 1.5) -> np.ndarray:
    """The same, in float32 numpy: reads past the edge take the edge pixel."""
    a = np.float32(amount)

    def blur(v: np.ndarray, axis: int) -> np.ndarray:
        p = np.pad(v, [(2, 2) if i == axis else (0, 0) for i in range(2)], mode="edge")
        n = v.shape[axis]
        t = [np.take(p, range(k, k + n), axis=axis) for k in range(5)]
        f4, f6 = np.float32(4), np.float32(6)
        return ((((t[0] + t[1] * f4) + t[2] * f6) + t[3] * f4) + t[4]) * np.float32(0.0625)

    b = blur(blur(img, 1), 0)
    return np.clip(img + (img - b) * a, np.float32(0), np.float32(1)).astype(np.float32)
