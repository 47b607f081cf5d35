"""A small CapsNet for scikit-learn's 8x8 digits: forward, margin loss and gradients in numpy.

Architecture (a scaled-down CapsNet-MNIST, Sabour et al. / PIM-CapsNet Fig. 2):

* ``conv1``: 3x3, 1 -> 32 channels, valid, ReLU: 8x8 -> 6x6;
* ``primary``: 3x3, 32 -> 4 x 8 channels, valid: a 4x4 grid of 4 capsule
  types, ``N_L = 64`` capsules of ``C_L = 8``, squashed;
* digit capsules: ``W`` of shape ``(64, 10, 16, 8)``, ``N_H = 10``,
  ``C_H = 16``, dynamic routing (Algorithm 1, batch-shared ``b_ij``);
* class = the longest digit capsule; margin loss (m+ = 0.9, m- = 0.1,
  lambda = 0.5).  No reconstruction decoder (it only regularizes training).

Backward pass: exact gradients of the convolutions, the squashes and the
prediction vectors, with the routing coefficients ``c_ij`` of the last
iteration treated as constants (the usual simplification; the gradient does
not flow through the routing iterations' ``b`` updates).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from pimforge.verif.models.capsnet.routing import RoutingResult, route_f64

__all__ = ["DigitsCapsNet", "load_trained", "load_digits_split", "margin_loss",
           "trained_meta", "WEIGHTS_FILE", "WEIGHTS_VERSION", "N_L", "N_H", "C_L", "C_H",
           "ITERATIONS", "EVAL_BATCH", "TEST_IMAGES"]

C_L, C_H, N_H = 8, 16, 10
TYPES, GRID = 4, 4
N_L = TYPES * GRID * GRID
ITERATIONS = 3
#: Batch of input sets routed together at evaluation (Caps-MN1's batch size).
EVAL_BATCH = 100
WEIGHTS_FILE = "digits_capsnet.npz"
#: Bumped whenever the architecture or the file layout changes.
WEIGHTS_VERSION = 1
SPLIT_SEED = 0
TEST_FRACTION = 0.25
#: Held-out images of the split (25 % of the 1797), known without loading them so
#: that commands can check an image count while parsing their arguments.
TEST_IMAGES = 450

Router = Callable[[np.ndarray, np.ndarray, int], RoutingResult]


def load_digits_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The fixed stratified split of scikit-learn's digits: ``x_train, y_train, x_test, y_test``.

    Images are ``(N, 1, 8, 8)`` float64 in [0, 1] (pixel / 16); 25 % of the
    1797 images (450) are held out, ``random_state=0``.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images / 16.0).reshape(-1, 1, 8, 8)
    xtr, xte, ytr, yte = train_test_split(x, d.target, test_size=TEST_FRACTION,
                                          random_state=SPLIT_SEED, stratify=d.target)
    return xtr, ytr, xte, yte


def _conv_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray):
    n, c = x.shape[:2]
    k = w.shape[2]
    cols = sliding_window_view(x, (k, k), axis=(2, 3))          # n, c, ho, wo, k, k
    ho, wo = cols.shape[2], cols.shape[3]
    cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, c * k * k)
    out = cols @ w.reshape(w.shape[0], -1).T + b
    return out.reshape(n, ho, wo, -1).transpose(0, 3, 1, 2), cols


def _conv_backward(g: np.ndarray, cols: np.ndarray, x_shape, w: np.ndarray):
    n, c = x_shape[:2]
    k = w.shape[2]
    cout, ho, wo = g.shape[1], g.shape[2], g.shape[3]
    gf = g.transpose(0, 2, 3, 1).reshape(-1, cout)
    gw = (gf.T @ cols).reshape(w.shape)
    gb = gf.sum(axis=0)
    gcols = (gf @ w.reshape(cout, -1)).reshape(n, ho, wo, c, k, k)
    gx = np.zeros(x_shape)
    for dy in range(k):
        for dx in range(k):
            gx[:, :, dy:dy + ho, dx:dx + wo] += gcols[:, :, :, :, dy, dx].transpose(0, 3, 1, 2)
    return gx, gw, gb


def _squash_with_grad(s: np.ndarray):
    """Squash along the last axis and a closure for its vector-Jacobian product."""
    n = np.sum(s * s, axis=-1, keepdims=True)
    r = np.sqrt(n + 1e-12)
    g = r / (1.0 + n)                                    # v = g(n) * s
    dg = (1.0 - n) / (2.0 * r * (1.0 + n) ** 2)          # g'(n)

    def back(gv: np.ndarray) -> np.ndarray:
        return g * gv + 2.0 * dg * np.sum(s * gv, axis=-1, keepdims=True) * s

    return s * g, back


def margin_loss(v: np.ndarray, y: np.ndarray, m_pos: float = 0.9, m_neg: float = 0.1,
                lam: float = 0.5) -> tuple[float, np.ndarray]:
    """Mean margin loss over the batch and its gradient with respect to ``v``."""
    length = np.sqrt(np.sum(v * v, axis=-1) + 1e-12)     # B, N_H
    t = np.eye(v.shape[1])[y]
    pos = np.maximum(0.0, m_pos - length)
    neg = np.maximum(0.0, length - m_neg)
    loss = np.sum(t * pos ** 2 + lam * (1 - t) * neg ** 2) / len(y)
    dlen = (-2.0 * t * pos + 2.0 * lam * (1 - t) * neg) / len(y)
    return float(loss), (dlen / length)[:, :, None] * v


@dataclass
class DigitsCapsNet:
    """Parameters of the digits CapsNet (float64 while training)."""

    conv1_w: np.ndarray
    conv1_b: np.ndarray
    prim_w: np.ndarray
    prim_b: np.ndarray
    W: np.ndarray

    NAMES = ("conv1_w", "conv1_b", "prim_w", "prim_b", "W")

    @classmethod
    def init(cls, rng: np.random.Generator, w_std: float = 0.1) -> DigitsCapsNet:
        return cls(conv1_w=rng.normal(0, np.sqrt(2 / 9), (32, 1, 3, 3)),
                   conv1_b=np.zeros(32),
                   prim_w=rng.normal(0, np.sqrt(2 / (32 * 9)), (TYPES * C_L, 32, 3, 3)),
                   prim_b=np.zeros(TYPES * C_L),
                   W=rng.normal(0, w_std, (N_L, N_H, C_H, C_L)))

    def params(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in self.NAMES}

    def primary_capsules(self, x: np.ndarray) -> np.ndarray:
        """Squashed low-level capsules ``u`` of shape ``(N, N_L, C_L)`` (float64)."""
        return self._features(x)[0]

    def _features(self, x: np.ndarray):
        h1, cols1 = _conv_forward(x, self.conv1_w, self.conv1_b)
        a1 = np.maximum(h1, 0.0)
        h2, cols2 = _conv_forward(a1, self.prim_w, self.prim_b)     # N, T*C_L, 4, 4
        n = x.shape[0]
        p = h2.reshape(n, TYPES, C_L, GRID, GRID).transpose(0, 1, 3, 4, 2).reshape(n, N_L, C_L)
        u, sq_back = _squash_with_grad(p)
        return u, (x.shape, cols1, h1, a1.shape, cols2, sq_back)

    def predict(self, x: np.ndarray, router: Router = route_f64,
                batch: int = EVAL_BATCH) -> np.ndarray:
        """Class per image; the routing runs on consecutive batches of *batch* images."""
        u = self.primary_capsules(x)
        out = []
        for s in range(0, len(x), batch):
            v = np.asarray(router(u[s:s + batch], self.W, ITERATIONS).v, dtype=np.float64)
            out.append(np.argmax(np.sum(v * v, axis=-1), axis=1))
        return np.concatenate(out)

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
        """Margin loss of one routed batch and gradients of every parameter."""
        u, (x_shape, cols1, h1, a1_shape, cols2, sq_back) = self._features(x)
        r = route_f64(u, self.W, ITERATIONS)
        loss, gv = margin_loss(r.v, y)
        _, s_back = _squash_with_grad(r.s)
        gs = s_back(gv)                                               # B, N_H, C_H
        gu_hat = np.einsum("ij,kjc->kijc", r.c, gs)                   # c held constant
        gW = np.einsum("kijc,kil->ijcl", gu_hat, u)
        gu = np.einsum("ijcl,kijc->kil", self.W, gu_hat)
        gp = sq_back(gu)
        n = x.shape[0]
        gh2 = gp.reshape(n, TYPES, GRID, GRID, C_L).transpose(0, 1, 4, 2, 3)
        gh2 = gh2.reshape(n, TYPES * C_L, GRID, GRID)
        ga1, gprim_w, gprim_b = _conv_backward(gh2, cols2, a1_shape, self.prim_w)
        gh1 = ga1 * (h1 > 0)
        _, gconv1_w, gconv1_b = _conv_backward(gh1, cols1, x_shape, self.conv1_w)
        return loss, {"conv1_w": gconv1_w, "conv1_b": gconv1_b, "prim_w": gprim_w,
                      "prim_b": gprim_b, "W": gW}

    def save(self, path, **meta) -> None:
        """Float32 weights plus a JSON ``meta`` record (format version, training settings)."""
        meta = {"version": WEIGHTS_VERSION, **meta}
        np.savez_compressed(path, meta=np.array(json.dumps(meta, sort_keys=True)),
                            **{k: v.astype(np.float32) for k, v in self.params().items()})


def load_trained() -> DigitsCapsNet:
    """The weights shipped with the package (trained by
    ``scripts/capsnet/train_capsnet_digits.py``)."""
    res = resources.files("pimforge.sim.capsnet") / "weights" / WEIGHTS_FILE
    with res.open("rb") as fh, np.load(fh) as z:
        meta = json.loads(str(z["meta"]))
        if meta.get("version") != WEIGHTS_VERSION:
            raise ValueError(f"{WEIGHTS_FILE} has weights format {meta.get('version')}, this "
                             f"code reads {WEIGHTS_VERSION}; rerun "
                             "scripts/capsnet/train_capsnet_digits.py")
        return DigitsCapsNet(**{k: z[k].astype(np.float64) for k in DigitsCapsNet.NAMES})


def trained_meta() -> dict:
    """The ``meta`` record of the shipped weights."""
    res = resources.files("pimforge.sim.capsnet") / "weights" / WEIGHTS_FILE
    with res.open("rb") as fh, np.load(fh) as z:
        return json.loads(str(z["meta"]))
