"""The uncertainty of a spread: its 95% interval, and the noise floor it is compared with.

The paper's spread is "max minus min over the sigma_w grid of the test accuracy at the
checkpoint with the best validation loss". A max minus a min of noisy numbers is never 0,
even when sigma_w does nothing, so it is reported with

- a **95% interval** from ``scipy.stats.bootstrap``: the test images are resampled (one
  resample for every run, since all runs are measured on the same test set: paired) and, with
  two or more seeds, the seeds are resampled too (independently), the statistic being the mean
  over seeds of the spread over sigma_w. This is the uncertainty of the number we report,
  from the two sources of noise we measure: which test images, which seeds.
- a **noise floor**: the spread that the same number of sigma_w points would show if sigma_w
  had no effect. Under that null every run's selected accuracy is one draw with the spread of
  run-to-run noise, sd ``s``; the range of k such draws has expectation ``s * d_k`` (d_k the
  expected range of k standard normals: 2.326 for k = 5) and 95% quantile from the
  studentized range with infinite degrees of freedom (3.858 for k = 5). ``s`` is the pooled
  seed-to-seed sd at fixed sigma_w when there are >= 2 seeds (it holds training noise and
  test-sampling noise), else the binomial sd of one accuracy on the test set (a lower bound:
  test sampling only), and the floor says which.

Small pure functions, each tested on hand-computed cases in tests/test_stats.py.
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from scipy import integrate, stats


def spread(acc: np.ndarray):
    """Mean over seeds (rows) of max minus min over sigma_w (columns); for a stack of such
    matrices (..., seeds, sigma_w), one value per matrix."""
    acc = np.atleast_2d(np.asarray(acc, dtype=float))
    out = (acc.max(axis=-1) - acc.min(axis=-1)).mean(axis=-1)
    return float(out) if out.ndim == 0 else out


@functools.cache  # a pure function of k, asked for once per table row
def expected_range(k: int) -> float:
    """d_k: the expected range (max - min) of k independent standard normal draws,
    int (1 - Phi(x)^k - (1 - Phi(x))^k) dx."""
    if k < 2:
        return 0.0
    f = lambda x: 1.0 - stats.norm.cdf(x) ** k - stats.norm.sf(x) ** k  # noqa: E731
    return float(integrate.quad(f, -np.inf, np.inf)[0])


@functools.cache
def range_quantile(k: int, q: float = 0.95) -> float:
    """The q-quantile of the range of k standard normal draws (studentized range, df = inf)."""
    return float(stats.studentized_range.ppf(q, k, np.inf)) if k >= 2 else 0.0


def pooled_seed_sd(acc: np.ndarray) -> float:
    """The seed-to-seed sd at fixed sigma_w, pooled over sigma_w: acc is (seeds, sigma_w).
    Each column's deviations from its own mean, sum of squares over (seeds - 1) * columns."""
    acc = np.asarray(acc, dtype=float)
    n_seeds, k = acc.shape
    if n_seeds < 2:
        return math.nan
    dev = acc - acc.mean(axis=0, keepdims=True)
    return float(math.sqrt((dev ** 2).sum() / ((n_seeds - 1) * k)))


def binomial_sd(p: float, n: int) -> float:
    """The sd of an accuracy p measured on n independent test images."""
    return math.sqrt(p * (1 - p) / n)


def noise_floor(acc: np.ndarray, n_test: int, q: float = 0.95) -> dict:
    """The spread over sigma_w that noise alone would give, for a table row whose selected
    accuracies are ``acc`` (seeds, sigma_w; fractions) measured on ``n_test`` images.
    Returns sd (per run), its source, the expected floor and its q-quantile (for the mean
    spread over the seeds: the range quantile shrinks as 1/sqrt(seeds) only approximately, so
    the quantile is given for one seed, the conservative case)."""
    acc = np.atleast_2d(np.asarray(acc, dtype=float))
    n_seeds, k = acc.shape
    if n_seeds >= 2:
        sd, source = pooled_seed_sd(acc), "seeds"
    else:
        sd, source = binomial_sd(float(acc.mean()), n_test), "test sampling"
    return {"sd": sd, "source": source, "expected": sd * expected_range(k),
            "upper": sd * range_quantile(k, q)}


def _accuracies(correct: np.ndarray, seeds: np.ndarray, images: np.ndarray) -> np.ndarray:
    """Resampled accuracies, (batch, seeds, sigma_w), from per-image correctness
    ``correct`` (seeds, sigma_w, images) and index resamples (batch, n_seeds) and
    (batch, n_images), as the image counts times correctness (a matrix product). The counts
    are one bincount over (resample, image) pairs (np.add.at gave the same integers, 1.3x
    slower on one thread; a BLAS product instead of the einsum is faster alone and 2x slower
    beside a training sweep, so einsum)."""
    n_img = correct.shape[-1]
    batch = len(images)
    flat = (np.arange(batch)[:, None] * n_img + images).ravel()
    counts = np.bincount(flat, minlength=batch * n_img).reshape(batch, n_img).astype(float)
    acc = np.einsum("ski,bi->bsk", correct.astype(float), counts) / images.shape[-1]
    return acc[np.arange(len(seeds))[:, None], seeds]


def spread_interval(correct: np.ndarray, confidence: float = 0.95, n_resamples: int = 2000,
                    seed: int = 0) -> tuple[float, float]:
    """95% interval of the (mean over seeds) spread from per-image correctness ``correct``
    of shape (seeds, sigma_w, test images): scipy.stats.bootstrap, percentile method,
    resampling test images (paired across runs) and, with >= 2 seeds, seeds."""
    return difference_interval(correct, None, confidence, n_resamples, seed)


def difference_interval(correct_a: np.ndarray, correct_b: np.ndarray | None,
                        confidence: float = 0.95, n_resamples: int = 2000,
                        seed: int = 0) -> tuple[float, float]:
    """95% interval of spread(a) - spread(b) (or of spread(a) when b is None): the test
    images are one sample shared by both (the same test set), the seeds of a and of b are
    resampled independently (different runs)."""
    groups = [correct_a] + ([correct_b] if correct_b is not None else [])
    combine = (lambda s: s[0] - s[1]) if correct_b is not None else (lambda s: s[0])  # noqa: E731
    return bootstrap_spreads(groups, combine, confidence, n_resamples, seed)


def slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope of y on x; y may be a stack (..., len(x)): one slope per row."""
    x = np.asarray(x, dtype=float)
    xc = x - x.mean()
    y = np.asarray(y, dtype=float)
    return (y - y.mean(axis=-1, keepdims=True)) @ xc / (xc @ xc)


def trend_interval(groups: list[np.ndarray], x, confidence: float = 0.95, n_resamples: int = 2000,
                   seed: int = 0) -> tuple[float, float, float]:
    """The least-squares slope of the spread against ``x`` (one x per group), and its 95%
    interval: the same bootstrap as :func:`difference_interval` (test images shared by every
    group, each group's seeds resampled on their own), the statistic being the slope of the
    resampled spreads. Returns (slope, low, high)."""
    x = np.asarray(x, dtype=float)
    point = float(slope(x, np.array([spread(np.asarray(g, dtype=float).mean(axis=-1)) for g in groups])))
    lo, hi = bootstrap_spreads(groups, lambda s: slope(x, np.stack(s, axis=-1)), confidence,
                               n_resamples, seed)
    return point, lo, hi


def bootstrap_spreads(groups: list[np.ndarray], combine, confidence: float = 0.95,
                      n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% interval (scipy.stats.bootstrap, percentile) of ``combine([spread of each group])``
    from per-image correctness, one (seeds, sigma_w, test images) array per group: the test
    images are resampled once for all groups (the same test set: paired), the seeds of each
    group with >= 2 seeds independently (different runs)."""
    groups = [np.asarray(g, dtype=bool) for g in groups]
    n_img = groups[0].shape[-1]
    assert all(g.shape[-1] == n_img for g in groups), "one test set for every run"
    samples = [np.arange(g.shape[0]) for g in groups if g.shape[0] >= 2] + [np.arange(n_img)]
    resample_seeds = [g.shape[0] >= 2 for g in groups]

    def statistic(*idx, axis=-1):
        images = np.atleast_2d(idx[-1])
        seed_idx, j, values = list(idx[:-1]), 0, []
        for g, resampled in zip(groups, resample_seeds):
            if resampled:
                s = np.atleast_2d(seed_idx[j])
                j += 1
            else:
                s = np.zeros((len(images), 1), dtype=int)
            values.append(np.atleast_1d(spread(_accuracies(g, s.astype(int), images.astype(int)))))
        out = np.asarray(combine(values))
        return out if np.ndim(idx[-1]) > 1 else out[0]

    res = stats.bootstrap(tuple(samples), statistic, n_resamples=n_resamples, vectorized=True,
                          paired=False, confidence_level=confidence, method="percentile",
                          random_state=np.random.default_rng(seed), batch=50)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def normal_interval(estimate: float, sd: float, confidence: float = 0.95) -> tuple[float, float]:
    """estimate -/+ z * sd, z the normal quantile (1.96 for 95%)."""
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    return estimate - z * sd, estimate + z * sd


def spread_change_sd(p: float, n: int) -> float:
    """The sd, from test sampling alone, of the change of a spread between two horizons of the
    same runs, each accuracy measured on ``n`` test images at accuracy about ``p``: a spread is
    one accuracy minus another (sd sqrt(2) * binomial), and the two horizons are taken as
    independent (their selected epochs differ; the correlation through the shared test images
    is ignored, which widens the interval: a conservative choice for detecting a change)."""
    return 2.0 * binomial_sd(p, n)


def _spearman(a, b) -> float:
    """Spearman's rho (scipy.stats.spearmanr); 0 (no trend) where a or b are all tied."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        r = stats.spearmanr(a, b).statistic
    return float(r) if np.isfinite(r) else 0.0


def _spearman_rows(a, b) -> np.ndarray:
    """Spearman's rho of each pair of rows of ``a`` and ``b`` (shape (..., n)): Pearson's r of
    their average ranks (scipy.stats.rankdata and pearsonr along the last axis), which is how
    scipy.stats.spearmanr defines it, one call for a whole batch of bootstrap resamples
    instead of one spearmanr call each (06's intervals: 2,000 resamples a rho). 0 (no trend)
    where a row is all tied, as :func:`_spearman`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant rows: r is nan, counted as 0 below
        r = stats.pearsonr(stats.rankdata(a, axis=-1), stats.rankdata(b, axis=-1), axis=-1).statistic
    return np.where(np.isfinite(r), r, 0.0)


def cluster_interval(statistic, clusters, confidence: float = 0.95, n_resamples: int = 2000,
                     seed: int = 0, rows: bool = False) -> tuple[float, float, float]:
    """A statistic of a set of points and its 95% interval from scipy.stats.bootstrap
    resampling whole *clusters* of points (percentile): points that share runs (the horizons
    of one pipeline) are not independent, so they are drawn together. ``statistic(index)``
    takes the (repeated) indices of the points of one resample; with ``rows``, a batch of them,
    an (m, n) array of m resamples of n points each, and returns m values (resamples of one
    size go in one call). With one cluster the interval is the point itself: nothing varies
    that could be resampled."""
    clusters = np.asarray(clusters)
    members = [np.flatnonzero(clusters == c) for c in dict.fromkeys(clusters.tolist())]
    everything = np.arange(len(clusters))
    value = float(statistic(everything[None])[0]) if rows else statistic(everything)
    if len(members) < 2:
        return value, value, value

    def of_clusters(picked, axis=-1):
        index = [np.concatenate([members[i] for i in row]) for row in np.atleast_2d(picked).astype(int)]
        if not rows:
            out = np.array([statistic(i) for i in index], dtype=float)
        else:
            out, sizes = np.empty(len(index)), np.array([len(i) for i in index])
            for n in np.unique(sizes):
                at = np.flatnonzero(sizes == n)
                out[at] = statistic(np.stack([index[k] for k in at]))
        return out if np.ndim(picked) > 1 else out[0]

    res = stats.bootstrap((np.arange(len(members)),), of_clusters, vectorized=True,
                          n_resamples=n_resamples, confidence_level=confidence, method="percentile",
                          random_state=np.random.default_rng(seed))
    return value, float(res.confidence_interval.low), float(res.confidence_interval.high)


def rho_interval(x, y, clusters=None, confidence: float = 0.95, n_resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float, float]:
    """Spearman's rho of (x, y) (scipy.stats.spearmanr) and its 95% interval from
    scipy.stats.bootstrap resampling the points in pairs (percentile), or whole clusters of
    them where ``clusters`` labels the points (:func:`cluster_interval`). A resample whose x or
    y are all tied has no ranks to correlate: it counts as rho 0 (no trend), not as missing."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if clusters is not None:
        return cluster_interval(lambda i: _spearman_rows(x[i], y[i]), clusters, confidence, n_resamples, seed,
                                rows=True)
    res = stats.bootstrap((x, y), _spearman, paired=True, vectorized=False, n_resamples=n_resamples,
                          confidence_level=confidence, method="percentile",
                          random_state=np.random.default_rng(seed))
    return _spearman(x, y), float(res.confidence_interval.low), float(res.confidence_interval.high)


def rho_difference_interval(x, z, y, clusters, confidence: float = 0.95, n_resamples: int = 2000,
                            seed: int = 0) -> tuple[float, float, float]:
    """rho(x, y) - rho(z, y) (Spearman) with its 95% cluster-bootstrap interval: whether x
    orders y better (more negatively) than z does, on the same resampled points."""
    x, z, y = (np.asarray(v, dtype=float) for v in (x, z, y))
    return cluster_interval(lambda i: _spearman_rows(x[i], y[i]) - _spearman_rows(z[i], y[i]), clusters,
                            confidence, n_resamples, seed, rows=True)
