"""PIM-Tuner's models (Sec. V, VIII-B): the area filter MLP, the Gaussian process, deep
kernel learning and expected improvement.

* :class:`GP` -- an exact Gaussian process with a squared-exponential (RBF) kernel,
  one length scale per input (ARD), a signal variance and a noise variance; the
  hyperparameters maximize the log marginal likelihood (L-BFGS-B with its analytic
  gradient, a few restarts). DKL's kernel on its features.
* :class:`SklearnGP` -- the same model as scikit-learn's
  ``GaussianProcessRegressor`` fits it (constant x ARD RBF + white noise, the same
  bounds): the GaussianProcess baseline of Fig. 9, from a library rather than ours.
* :class:`DKL` -- deep kernel learning (Wilson et al., the paper's ref. [27]): the
  same GP on the features of an MLP (``7 -> 256 -> 64 -> 16``, ReLU between
  layers, Sec. VIII-B), the MLP's weights and the GP's hyperparameters learned
  jointly by maximizing the log marginal likelihood with Adam (Sec. V). NicePIM's
  suggestion model.
* :class:`AreaFilter` -- the filter model: an MLP (``7 -> 256 -> 64 -> 16 -> 1``,
  ReLU) regressing the area, trained with Adam on the mean squared error against
  the simulated area (Sec. V); it regresses ``log(area)`` (areas span four decades).
* :func:`expected_improvement` -- the acquisition, in closed form, for minimization.

Targets are standardized inside the models (zero mean, unit variance); inputs
are the normalized hardware parameters in ``[0, 1]``. Gradients are written out
(the GP's by Rasmussen and Williams' Eq. 5.9, the MLP's by back-propagation) and
checked against finite differences by the tests. Every model takes a
``numpy.random.Generator`` (initial weights, restarts) so a run is reproducible.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import minimize
from scipy.stats import norm
from threadpoolctl import threadpool_limits

__all__ = ["DKL", "GP", "AreaFilter", "SklearnGP", "expected_improvement", "gp_nll", "gp_nll_grad",
           "mlp_apply", "mlp_grad", "mlp_init"]

_LOG2PI = float(np.log(2 * np.pi))


def _one_thread(f):
    """Run *f* with one BLAS thread: these matrices are small, and a thread pool that
    competes for busy cores is many times slower than one thread."""
    import functools

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        with threadpool_limits(1):
            return f(*args, **kwargs)
    return wrapped
#: Floor of the noise variance (standardized targets): keeps the Cholesky factor sane.
NOISE_FLOOR = 1e-6


# ---- the MLP ------------------------------------------------------------------------------

def mlp_init(rng: np.random.Generator, sizes: tuple[int, ...]) -> list[np.ndarray]:
    """He-initialized ``[W0, b0, W1, b1, ...]`` for layer widths *sizes* (input first)."""
    out = []
    for m, n in zip(sizes[:-1], sizes[1:], strict=True):
        out += [rng.normal(0.0, np.sqrt(2.0 / m), (m, n)), np.zeros(n)]
    return out


def mlp_apply(params, x) -> np.ndarray:
    """The MLP: ReLU after every layer but the last (which is linear)."""
    n = len(params) // 2
    for i in range(n):
        x = x @ params[2 * i] + params[2 * i + 1]
        if i + 1 < n:
            x = np.maximum(x, 0.0)
    return x


def mlp_grad(params, x, dout) -> tuple[np.ndarray, list[np.ndarray]]:
    """Forward pass and the backward pass of ``sum(dout_fn(out))``: returns the output
    and, given ``dout(out)`` (a function of the output giving its gradient), the
    gradient of every parameter."""
    n = len(params) // 2
    acts = [np.asarray(x, dtype=float)]
    for i in range(n):
        z = acts[-1] @ params[2 * i] + params[2 * i + 1]
        acts.append(np.maximum(z, 0.0) if i + 1 < n else z)
    g = dout(acts[-1])
    grads: list[np.ndarray] = [np.empty(0)] * (2 * n)
    for i in reversed(range(n)):
        grads[2 * i] = acts[i].T @ g
        grads[2 * i + 1] = g.sum(0)
        if i:
            g = (g @ params[2 * i].T) * (acts[i] > 0)
    return acts[-1], grads


class _Adam:
    """Adam (Kingma and Ba) over a list of arrays, updated in place."""

    def __init__(self, params: list[np.ndarray], step_size: float, b1=0.9, b2=0.999,
                 eps=1e-8):
        self.p = params
        self.m = [np.zeros_like(q) for q in params]
        self.v = [np.zeros_like(q) for q in params]
        self.t = 0
        self.lr, self.b1, self.b2, self.eps = step_size, b1, b2, eps

    def step(self, grads: list[np.ndarray]) -> None:
        self.t += 1
        c1, c2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        for q, g, m, v in zip(self.p, grads, self.m, self.v, strict=True):
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            q -= self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)


# ---- the GP --------------------------------------------------------------------------------

def _sqdist(a, b):
    return np.maximum(np.sum(a ** 2, 1)[:, None] + np.sum(b ** 2, 1)[None, :]
                      - 2.0 * a @ b.T, 0.0)


def _kernel(a, b, log_ls, log_sf2):
    ls = np.exp(log_ls)
    return np.exp(log_sf2) * np.exp(-0.5 * _sqdist(a / ls, b / ls))


def gp_nll_grad(hyp, x, y) -> tuple[float, np.ndarray, np.ndarray]:
    """Negative log marginal likelihood of targets *y* at inputs *x*, and its gradient
    in *hyp* and in *x*. ``hyp`` is one vector: log length scales (one, or one per
    input), log signal variance, log noise variance.

    With ``K = Kf + sn2 I``, ``alpha = K^-1 y`` and ``W = (K^-1 - alpha alpha^T) / 2``,
    ``dNLL/dtheta = sum(W * dK/dtheta)`` (Rasmussen and Williams, Eq. 5.9).
    """
    x = np.asarray(x, dtype=float)
    log_ls, log_sf2, log_sn2 = hyp[:-2], hyp[-2], hyp[-1]
    n = len(x)
    ls2 = np.exp(2 * np.broadcast_to(log_ls, (x.shape[1],)))
    kf = _kernel(x, x, log_ls, log_sf2)
    sn2 = np.exp(log_sn2) + NOISE_FLOOR
    c = cho_factor(kf + sn2 * np.eye(n), lower=True)
    alpha = cho_solve(c, y)
    nll = 0.5 * y @ alpha + np.sum(np.log(np.diag(c[0]))) + 0.5 * n * _LOG2PI
    w = 0.5 * (cho_solve(c, np.eye(n)) - np.outer(alpha, alpha))
    wk = w * kf
    # d/dlog_ls_d: Kf_ij (x_id - x_jd)^2 / ls_d^2
    d2 = (x[:, None, :] - x[None, :, :]) ** 2 / ls2
    g_ls = np.einsum("ij,ijd->d", wk, d2)
    if len(log_ls) == 1:
        g_ls = np.array([g_ls.sum()])
    g = np.r_[g_ls, wk.sum(), np.exp(log_sn2) * np.trace(w)]
    gx = -2.0 * (wk.sum(1)[:, None] * x - wk @ x) / ls2
    return float(nll), g, gx


def gp_nll(hyp, x, y) -> float:
    """Negative log marginal likelihood (see :func:`gp_nll_grad`)."""
    return gp_nll_grad(hyp, x, y)[0]


def _posterior(hyp, x, y, xs):
    log_ls, log_sf2, log_sn2 = hyp[:-2], hyp[-2], hyp[-1]
    k = _kernel(x, x, log_ls, log_sf2) + (np.exp(log_sn2) + NOISE_FLOOR) * np.eye(len(x))
    low = np.linalg.cholesky(k)
    ks = _kernel(x, xs, log_ls, log_sf2)
    v = np.linalg.solve(low, ks)
    alpha = np.linalg.solve(low.T, np.linalg.solve(low, y))
    mu = ks.T @ alpha
    var = np.maximum(np.exp(log_sf2) - np.sum(v * v, 0), 1e-12)
    return mu, np.sqrt(var)


class _Standardized:
    def _set_targets(self, y):
        y = np.asarray(y, dtype=float)
        self.y_mean = float(y.mean())
        self.y_std = float(y.std()) or 1.0
        return (y - self.y_mean) / self.y_std

    def _unscale(self, mu, sd):
        return mu * self.y_std + self.y_mean, sd * self.y_std


class GP(_Standardized):
    """Exact GP, ARD RBF kernel, hyperparameters by type-II maximum likelihood.

    Parameters
    ----------
    rng : numpy.random.Generator
        Draws the restarts' initial length scales.
    restarts : int
        L-BFGS-B runs from random initial hyperparameters, besides the default one.
    """

    def __init__(self, rng: np.random.Generator, restarts: int = 1):
        self.rng = rng
        self.restarts = restarts
        self.hyp: np.ndarray | None = None

    @_one_thread
    def fit(self, x, y) -> GP:
        x = np.asarray(x, dtype=float)
        self.x, self.y = x, self._set_targets(y)
        d = x.shape[1]
        bounds = [(np.log(1e-2), np.log(1e2))] * d + [(np.log(1e-2), np.log(1e2)),
                                                      (np.log(1e-6), np.log(1.0))]
        starts = [np.r_[np.full(d, np.log(0.5)), 0.0, np.log(1e-2)]]
        if self.hyp is not None:
            starts.append(self.hyp)
        for _ in range(self.restarts):
            starts.append(np.r_[self.rng.uniform(np.log(0.05), np.log(5.0), d), 0.0,
                                np.log(1e-2)])
        def f(h):
            v, g, _ = gp_nll_grad(h, self.x, self.y)
            return v, g

        best = None
        for h0 in starts:
            try:
                r = minimize(f, h0, jac=True, method="L-BFGS-B", bounds=bounds,
                             options={"maxiter": 200})
            except np.linalg.LinAlgError:
                continue
            if np.isfinite(r.fun) and (best is None or r.fun < best.fun):
                best = r
        self.hyp = best.x if best is not None else starts[0]
        self.nll = float(best.fun) if best is not None else float("nan")
        return self

    def predict(self, xs):
        """Posterior mean and standard deviation (in the targets' units) at *xs*."""
        return self._unscale(*_posterior(self.hyp, self.x, self.y, np.asarray(xs, float)))


class SklearnGP:
    """The GaussianProcess suggestion model of Fig. 9: scikit-learn's
    ``GaussianProcessRegressor`` with a constant x ARD RBF kernel plus white noise (the
    hyperparameters of :class:`GP`, within the same bounds), targets normalized,
    maximum likelihood by L-BFGS-B from the default and *restarts* random starts.

    Parameters
    ----------
    rng : numpy.random.Generator
        Seeds the restarts (each fit draws its own seed from it).
    restarts : int
        ``n_restarts_optimizer``.
    """

    def __init__(self, rng: np.random.Generator, restarts: int = 1):
        self.rng = rng
        self.restarts = restarts
        self.model = None

    @_one_thread
    def fit(self, x, y) -> SklearnGP:
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

        x = np.asarray(x, dtype=float)
        d = x.shape[1]
        kernel = (ConstantKernel(1.0, (1e-2, 1e2)) * RBF(np.full(d, 0.5), (1e-2, 1e2))
                  + WhiteKernel(1e-2, (1e-6, 1.0)))
        import warnings

        from sklearn.exceptions import ConvergenceWarning

        self.model = GaussianProcessRegressor(
            kernel, normalize_y=True, n_restarts_optimizer=self.restarts,
            random_state=int(self.rng.integers(1 << 31)))
        with warnings.catch_warnings():
            # a length scale at its bound (an input that does not matter) is a result
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.model.fit(x, np.asarray(y, float))
        return self

    @_one_thread
    def predict(self, xs):
        """Posterior mean and standard deviation at *xs*."""
        mu, sd = self.model.predict(np.asarray(xs, dtype=float), return_std=True)
        return mu, sd


class DKL(_Standardized):
    """Deep kernel learning: an RBF GP on MLP features, learned jointly (Adam on the
    negative log marginal likelihood).

    Parameters
    ----------
    rng : numpy.random.Generator
        Initial weights.
    hidden : tuple of int
        Widths of the feature extractor's layers (the paper's 256, 64, 16).
    steps : int
        Adam steps per :meth:`fit`; a refit continues from the previous weights.
    step_size : float
        Adam's learning rate.
    """

    def __init__(self, rng: np.random.Generator, hidden: tuple[int, ...] = (256, 64, 16),
                 steps: int = 300, step_size: float = 3e-3):
        self.rng = rng
        self.hidden = hidden
        self.steps = steps
        self.step_size = step_size
        self.net: list[np.ndarray] | None = None
        self.hyp: np.ndarray | None = None

    @staticmethod
    def nll(net, hyp, x, y) -> float:
        """The objective: the GP's negative log marginal likelihood on the features."""
        return gp_nll(hyp, mlp_apply(net, x), y)

    def nll_grad(self, net, hyp, x, y) -> tuple[float, list[np.ndarray], np.ndarray]:
        """The objective and its gradient in the weights and the hyperparameters: the
        GP's gradient in the features, back-propagated through the MLP."""
        store = {}

        def dout(f):
            store["v"], store["gh"], gf = gp_nll_grad(hyp, f, y)
            return gf

        _, gw = mlp_grad(net, x, dout)
        return float(store["v"]), gw, store["gh"]

    @_one_thread
    def fit(self, x, y) -> DKL:
        x = np.asarray(x, dtype=float)
        self.x, self.y = x, self._set_targets(y)
        if self.net is None:
            self.net = mlp_init(self.rng, (x.shape[1], *self.hidden))
            # log length scale, log signal variance, log noise variance
            self.hyp = np.array([0.0, 0.0, np.log(1e-2)])
            self._opt = _Adam([*self.net, self.hyp], self.step_size)
        for _ in range(self.steps):
            _, gw, gh = self.nll_grad(self.net, self.hyp, self.x, self.y)
            self._opt.step([*gw, gh])
            np.clip(self.hyp, [-8.0, -8.0, np.log(1e-6)], [8.0, 8.0, 0.0], out=self.hyp)
        self.nll_value = self.nll(self.net, self.hyp, self.x, self.y)
        return self

    def features(self, x) -> np.ndarray:
        return mlp_apply(self.net, np.asarray(x, float))

    def predict(self, xs):
        """Posterior mean and standard deviation (in the targets' units) at *xs*."""
        return self._unscale(*_posterior(self.hyp, self.features(self.x), self.y,
                                         self.features(xs)))


def expected_improvement(mu, sd, best: float) -> np.ndarray:
    """EI of a minimization below *best*: ``E[max(best - Y, 0)]``, ``Y ~ N(mu, sd^2)``."""
    mu = np.asarray(mu, dtype=float)
    sd = np.maximum(np.asarray(sd, dtype=float), 1e-12)
    z = (best - mu) / sd
    return (best - mu) * norm.cdf(z) + sd * norm.pdf(z)


class AreaFilter(_Standardized):
    """The filter model: an MLP regressing ``log(area)`` from the normalized parameters,
    trained with Adam on the mean squared error; a refit continues from its weights.

    Parameters
    ----------
    rng : numpy.random.Generator
        Initial weights.
    hidden : tuple of int
        Hidden widths (the paper's 256, 64, 16; the output is one neuron).
    """

    def __init__(self, rng: np.random.Generator, hidden: tuple[int, ...] = (256, 64, 16),
                 step_size: float = 3e-3):
        self.rng = rng
        self.hidden = hidden
        self.step_size = step_size
        self.params = None

    @_one_thread
    def fit(self, x, area, steps: int = 500, batch: int = 256) -> AreaFilter:
        """*steps* Adam steps on mini-batches of *batch* points (stochastic gradient
        descent on the MSE of ``log(area)``, Sec. V)."""
        x = np.asarray(x, dtype=float)
        t = self._set_targets(np.log(np.asarray(area, dtype=float)))
        if self.params is None:
            self.params = mlp_init(self.rng, (x.shape[1], *self.hidden, 1))
            self._opt = _Adam(self.params, self.step_size)
        for _ in range(steps):
            i = (self.rng.choice(len(t), batch, replace=False) if len(t) > batch
                 else slice(None))
            tb = t[i]
            _, g = mlp_grad(self.params, x[i], lambda o, tb=tb: 2.0 * (o - tb[:, None]) / len(tb))
            self._opt.step(g)
        self.mse = float(np.mean((mlp_apply(self.params, x)[:, 0] - t) ** 2))
        return self

    def predict(self, x) -> np.ndarray:
        """Predicted area (the units of the training areas)."""
        out = mlp_apply(self.params, np.asarray(x, dtype=float))[:, 0]
        return np.exp(out * self.y_std + self.y_mean)
