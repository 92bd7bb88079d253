"""The two curves of the crossover (:mod:`kit.analysis.crossover`), fitted for many bootstrap weightings
at once: a logistic of solved on log size (as METR fits success against log task length) and a
log-linear mean of cost (quasi-Poisson: zero costs allowed, the mean fitted, not the mean log).

Both take ``x`` (n,) -- the centred log size --, ``y`` (n,) and ``w`` (B, n) count weights, and return
(B, 2) coefficients (intercept at the centre, slope per unit of log size), by iteratively reweighted
least squares with a weak ridge (:data:`RIDGE`, a prior of standard deviation ~3 on each coefficient):
it keeps a replicate in which a strategy solved every task (or none) finite instead of diverging, and
moves a fit of dozens of runs by a hair.
"""

from __future__ import annotations

import numpy as np

RIDGE = 0.1
ITERATIONS = 30


def _solve2(h00: np.ndarray, h01: np.ndarray, h11: np.ndarray, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    det = h00 * h11 - h01 * h01
    det = np.where(np.abs(det) < 1e-300, 1e-300, det)
    return np.stack([(h11 * g0 - h01 * g1) / det, (h00 * g1 - h01 * g0) / det], axis=1)


def logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """Weighted logistic regression of ``y`` (0/1) on ``x``: P(y) = expit(b0 + b1 x); (B, 2)."""
    beta = np.zeros((w.shape[0], 2))
    for _ in range(ITERATIONS):
        eta = np.clip(beta[:, :1] + beta[:, 1:] * x, -30, 30)
        p = 1 / (1 + np.exp(-eta))
        v = w * p * (1 - p)
        r = w * (y - p)
        g0 = r.sum(1) - ridge * beta[:, 0]
        g1 = (r * x).sum(1) - ridge * beta[:, 1]
        step = _solve2(v.sum(1) + ridge, (v * x).sum(1), (v * x * x).sum(1) + ridge, g0, g1)
        beta += step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def log_mean(x: np.ndarray, y: np.ndarray, w: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """Weighted quasi-Poisson regression: E[y] = exp(b0 + b1 x), y >= 0 (a cost); (B, 2). ``y`` is
    rescaled to mean 1 inside (the fit is scale-free) so the ridge means the same for cents and dollars."""
    scale = float(np.mean(y)) if np.mean(y) > 0 else 1.0
    ys = y / scale
    beta = np.zeros((w.shape[0], 2))
    for _ in range(ITERATIONS):
        mu = np.exp(np.clip(beta[:, :1] + beta[:, 1:] * x, -50, 50))
        v = w * mu
        r = w * (ys - mu)
        g0 = r.sum(1) - ridge * beta[:, 0]
        g1 = (r * x).sum(1) - ridge * beta[:, 1]
        step = _solve2(v.sum(1) + ridge, (v * x).sum(1), (v * x * x).sum(1) + ridge, g0, g1)
        beta += np.clip(step, -5, 5)
        if np.abs(step).max() < 1e-8:
            break
    beta[:, 0] += np.log(scale)
    return beta


def expit(eta: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-np.clip(eta, -30, 30)))
