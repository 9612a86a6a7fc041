"""initlib.stats on hand-computed cases."""
import math

import numpy as np
import pytest

from initlib import stats


def test_spread_is_the_mean_over_seeds_of_max_minus_min():
    assert stats.spread([[0.5, 0.7], [0.4, 0.8]]) == pytest.approx((0.2 + 0.4) / 2)
    assert stats.spread([0.3, 0.1, 0.2]) == pytest.approx(0.2)


def test_expected_range_and_quantile_of_normals():
    assert stats.expected_range(2) == pytest.approx(2 / math.sqrt(math.pi), rel=1e-6)  # E|X-Y|
    assert stats.expected_range(5) == pytest.approx(2.326, abs=1e-3)                   # d2 tables
    assert stats.range_quantile(5) == pytest.approx(3.858, abs=1e-3)                    # q(0.95; 5, inf)
    assert stats.range_quantile(2) == pytest.approx(1.95996 * math.sqrt(2), rel=1e-4)   # |X-Y| ~ N(0, 2)
    assert stats.expected_range(1) == 0.0


def test_pooled_seed_sd_and_binomial_sd():
    # column means 0.6 and 0.6; deviations +-0.1 and 0: sum of squares 0.02 over (2-1)*2
    assert stats.pooled_seed_sd([[0.5, 0.6], [0.7, 0.6]]) == pytest.approx(0.1)
    assert math.isnan(stats.pooled_seed_sd([[0.5, 0.6]]))
    assert stats.binomial_sd(0.5, 10000) == pytest.approx(0.005)


def test_noise_floor_from_seeds_or_from_test_sampling():
    f = stats.noise_floor([[0.5] * 5], n_test=10000)
    assert f["source"] == "test sampling" and f["sd"] == pytest.approx(0.005)
    assert f["expected"] == pytest.approx(0.005 * 2.326, rel=1e-3)
    assert f["upper"] == pytest.approx(0.005 * 3.858, rel=1e-3)
    f = stats.noise_floor([[0.5, 0.6], [0.7, 0.6]], n_test=10000)
    assert f["source"] == "seeds" and f["sd"] == pytest.approx(0.1)
    assert f["expected"] == pytest.approx(0.1 * 2 / math.sqrt(math.pi), rel=1e-6)


def band(n=1000, hi=600, lo=400):
    """One seed, two sigma_w: run 0 right on images < hi, run 1 on images < lo."""
    i = np.arange(n)
    return np.stack([i < hi, i < lo])[None]  # (1 seed, 2 sigma_w, n images)


def test_spread_interval_is_the_binomial_interval_of_the_band():
    # the spread is the share of test images in [400, 600): 0.2, sd sqrt(.2 * .8 / 1000)
    lo, hi = stats.spread_interval(band(), n_resamples=4000)
    sd = math.sqrt(0.2 * 0.8 / 1000)
    assert lo == pytest.approx(0.2 - 1.96 * sd, abs=0.004)
    assert hi == pytest.approx(0.2 + 1.96 * sd, abs=0.004)


def test_identical_runs_have_a_zero_spread_and_a_zero_interval():
    same = np.stack([np.arange(500) % 3 == 0] * 4)[None]
    assert stats.spread_interval(same, n_resamples=200) == (0.0, 0.0)
    assert stats.difference_interval(band(), band(), n_resamples=200) == (0.0, 0.0)


def test_seeds_are_resampled_when_there_are_two_or_more():
    # seed 0 spread 0.2, seed 1 spread 0 (identical runs): mean 0.1; resampling the seeds
    # gives 0, 0.1 or 0.2, so the interval reaches both ends
    two = np.concatenate([band(), np.stack([np.arange(1000) < 500] * 2)[None]])
    assert stats.spread(two.mean(axis=2)) == pytest.approx(0.1)
    lo, hi = stats.spread_interval(two, n_resamples=2000)
    assert lo < 0.02 and hi > 0.18


def test_difference_interval_pairs_the_test_images():
    # a: spread 0.2 on images [400, 600); b: spread 0.1 on images [400, 500): nested bands,
    # so the difference is the share in [500, 600): 0.1 with a binomial sd of sqrt(.1*.9/1000)
    lo, hi = stats.difference_interval(band(), band(hi=500), n_resamples=4000)
    sd = math.sqrt(0.1 * 0.9 / 1000)
    assert lo == pytest.approx(0.1 - 1.96 * sd, abs=0.004) and hi == pytest.approx(0.1 + 1.96 * sd, abs=0.004)


def test_normal_interval_and_the_sd_of_a_spread_change():
    assert stats.normal_interval(1.0, 1.0) == pytest.approx((1 - 1.959964, 1 + 1.959964))
    # two horizons, each spread a difference of two accuracies at p = 0.5 on 1,000 images:
    # sqrt(2) * sqrt(2) * sqrt(0.25 / 1000) = 2 * 0.0158
    assert stats.spread_change_sd(0.5, 1000) == pytest.approx(2 * math.sqrt(0.25 / 1000))


def test_trend_interval_follows_a_known_slope():
    # three groups of one seed, two sigma_w, 2,000 images; spreads 0, 10, 20 pp at x = 0, 1, 2
    rng = np.random.default_rng(1)
    n = 2000
    groups = []
    for pp in (0, 10, 20):
        a = rng.permutation(n) < n // 2
        b = rng.permutation(n) < n // 2 + n * pp // 100
        groups.append(np.stack([a, b])[None])
    k, lo, hi = stats.trend_interval(groups, [0, 1, 2], n_resamples=500)
    assert k == pytest.approx(0.10)
    assert lo < 0.10 < hi and lo > 0.05 and hi < 0.15


def test_cluster_bootstrap_draws_whole_clusters():
    """Two clusters of two points (0, 0) and (1, 1): a resample is AA, AB or BB, so the mean is
    0, 0.5 or 1, never 0.25; with one cluster nothing can be resampled: the point itself."""
    from initlib import stats
    values = np.array([0.0, 0.0, 1.0, 1.0])
    seen = []

    def mean(i):
        seen.append(values[i].mean())
        return seen[-1]

    v, lo, hi = stats.cluster_interval(mean, ["a", "a", "b", "b"], n_resamples=200)
    assert v == 0.5 and (lo, hi) == (0.0, 1.0)
    assert set(np.round(seen, 6)) <= {0.0, 0.5, 1.0}
    assert stats.cluster_interval(mean, ["a"] * 4) == (0.5, 0.5, 0.5)
    # rho over clustered points: the clock orders y better than z does
    x, z, y = [1, 2, 3, 4, 5, 6], [3, 1, 2, 6, 4, 5], [6, 5, 4, 3, 2, 1]
    d, d_lo, d_hi = stats.rho_difference_interval(x, z, y, clusters=[0, 1, 2, 3, 4, 5])
    assert d == pytest.approx(-1.0 - stats._spearman(z, y)) and d_lo <= d <= d_hi


def test_spearman_rows_is_spearmanr_row_by_row():
    """The batched rho of the cluster bootstrap equals scipy.stats.spearmanr on each row: ties
    (average ranks), a reversed row (-1), and an all-tied row (0, as _spearman counts it)."""
    import scipy.stats
    from initlib import stats
    a = np.array([[1, 2, 3, 4, 5], [1, 1, 2, 3, 3], [5, 4, 3, 2, 1], [2, 2, 2, 2, 2]], dtype=float)
    b = np.array([[2, 1, 4, 3, 5], [3, 1, 1, 2, 5], [1, 2, 3, 4, 5], [1, 2, 3, 4, 5]], dtype=float)
    got = stats._spearman_rows(a, b)
    assert got[2] == pytest.approx(-1.0) and got[3] == 0.0
    assert got[0] == pytest.approx(0.8)  # rank differences (-1, 1, -1, 1, 0): 1 - 6 * 4 / (5 * 24)
    for r in range(3):
        assert got[r] == pytest.approx(scipy.stats.spearmanr(a[r], b[r]).statistic, abs=1e-12)
        assert got[r] == pytest.approx(stats._spearman(a[r], b[r]), abs=1e-12)
    # batched or one resample at a time, the cluster bootstrap draws the same resamples
    x, y, pipes = np.arange(12.0), np.r_[np.arange(6.0), np.arange(6.0)[::-1]], np.repeat(np.arange(4), 3)
    one = stats.cluster_interval(lambda i: stats._spearman(x[i], y[i]), pipes, n_resamples=300)
    batched = stats.rho_interval(x, y, clusters=pipes, n_resamples=300)
    assert batched == pytest.approx(one, abs=1e-12)


def test_clock_minus_epochs_needs_four_pipelines_to_exclude_zero():
    """Pipelines at lr 1, 2, 4 (, 8), each seen at horizons of 1-4 epochs, clock = lr x epochs,
    and a spread that falls exactly with the clock: the clock orders it perfectly, epochs do
    not. Still, along one pipeline clock and epochs rank alike, so a resample that repeats one
    pipeline has rho(clock) - rho(epochs) = 0: with 3 pipelines 3 of the 27 resamples (11% >
    2.5%), so the 95% interval contains 0 whatever the data; with 4, 4 of 256 (1.6%), so it can
    lie below 0 (analysis.verdict_clocks: only a group of 4 or more pipelines can show it)."""
    def family(n_pipelines):
        lr = np.repeat(2.0 ** np.arange(n_pipelines), 4)
        epochs = np.tile(np.arange(1.0, 5.0), n_pipelines)
        clock = lr * epochs
        return clock, epochs, -np.log(clock), np.repeat(np.arange(n_pipelines), 4)

    d3, lo3, hi3 = stats.rho_difference_interval(*family(3))
    assert d3 < 0 and hi3 == 0.0
    d4, lo4, hi4 = stats.rho_difference_interval(*family(4))
    assert d4 < 0 and hi4 < 0
