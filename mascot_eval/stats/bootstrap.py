"""Percentile bootstrap intervals, with cluster resampling.

Contexts are the unit of resampling: when several values belong to one cluster (e.g. the agents of
one dialogue, or several user profiles on one context), whole clusters are drawn with replacement
so the interval reflects the real number of independent units.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

_CONTROLLER: Any = None


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with BLAS (numpy's and scipy's) limited to one thread.

    Bootstrap replicates are many small products; a multithreaded BLAS spends more time waking and
    synchronising its threads than computing, and on a shared machine those threads fight every
    other process (measured: a 1,000-replicate alpha bootstrap ran 2-30x slower with 2 BLAS threads
    than with one). threadpoolctl ships with scikit-learn; its controller is built once, at first use.
    """
    global _CONTROLLER
    if _CONTROLLER is None:
        import scipy.linalg  # noqa: F401  (load scipy's BLAS too, so the controller sees it)
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    with _CONTROLLER.limit(limits=1, user_api="blas"):
        yield


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its percentile-bootstrap interval and the number of units behind it."""

    mean: float
    lo: float
    hi: float
    n: int  # independent units (clusters) resampled
    n_obs: int  # individual observations
    std: float  # standard deviation of the observations
    level: float = 0.95

    def to_dict(self) -> dict[str, float | int]:
        return {"mean": self.mean, "lo": self.lo, "hi": self.hi, "n": self.n, "n_obs": self.n_obs, "std": self.std}


def bootstrap_mean(
    values: Sequence[float],
    clusters: Sequence[object] | None = None,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """Mean of ``values`` with a percentile bootstrap interval over clusters (or over values).

    With clusters, each replicate draws clusters with replacement and takes the mean of all the
    observations they contain (the estimator of the overall mean, weighting observations equally).
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0, 0, float("nan"), level)
    if clusters is None:
        ids = np.arange(x.size)
    else:
        _, ids = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    k = int(ids.max()) + 1
    sums = np.bincount(ids, weights=x, minlength=k)
    counts = np.bincount(ids, minlength=k).astype(float)
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if x.size > 1 else 0.0
    if k < 2:
        return Estimate(mean, mean, mean, k, int(x.size), std, level)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, k, size=(n_boot, k))
    boot = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(boot, [alpha, 1.0 - alpha])
    return Estimate(mean, float(lo), float(hi), k, int(x.size), std, level)


def bootstrap_statistic(
    n_units: int,
    statistic: Callable[[np.ndarray], float],
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Generic percentile bootstrap: ``statistic(indices)`` on all units, then on resampled units.

    Returns (point, lo, hi). Replicates where the statistic is undefined (NaN) are dropped. The
    replicates run with one BLAS thread (:func:`one_blas_thread`).
    """
    idx = np.arange(n_units)
    point = float(statistic(idx))
    rng = np.random.default_rng(seed)
    with one_blas_thread():  # a loop of small computations: BLAS threads would only contend
        reps = np.array([statistic(rng.integers(0, n_units, size=n_units)) for _ in range(n_boot)], dtype=float)
    reps = reps[~np.isnan(reps)]
    if reps.size == 0:
        return point, float("nan"), float("nan")
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(reps, [alpha, 1.0 - alpha])
    return point, float(lo), float(hi)
