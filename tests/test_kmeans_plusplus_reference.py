"""Greedy k-means++ against a plain NumPy reference of scikit-learn's algorithm, fed the
same random draws (a generator consumed as the seeding documents it)."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from skxclust._seeding import kmeans_plusplus
from skxclust._validation import to_tensor


def _reference(X, sw, generator, n_clusters, n_local_trials=None):
    """Rows chosen by scikit-learn's greedy k-means++ (``_kmeans_plusplus``): the first
    drawn by weight, then per step the best of ``n_local_trials`` candidates drawn by the
    weighted potential. Draws: one multinomial, then a (K-1, trials) block of uniforms."""
    if n_local_trials is None:
        n_local_trials = 2 + int(math.log(n_clusters))
    sw_t = torch.from_numpy(sw)
    first = int(torch.multinomial(sw_t / sw_t.sum(), 1, generator=generator))
    rolls = torch.rand(n_clusters - 1, n_local_trials, generator=generator,
                       dtype=torch.float64).numpy()

    def dist(i):
        return ((X - X[i]) ** 2).sum(1)

    chosen, closest = [first], dist(first)
    potential = closest @ sw
    for step in range(1, n_clusters):
        cum = np.cumsum(sw * closest)
        cand = np.minimum(np.searchsorted(cum, rolls[step - 1] * potential), X.shape[0] - 1)
        d_cand = np.minimum(closest, np.stack([dist(c) for c in cand]))
        pots = d_cand @ sw
        best = int(np.argmin(pots))
        chosen.append(int(cand[best]))
        closest, potential = d_cand[best], pots[best]
    return chosen


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "far-last-row"])
def data(request):
    # weighted rows; with far-last-row, most of the potential lies on the last row, so
    # draws land there (the end of the cumulative potential)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    if request.param:
        X[-1] += 50.0
    return X, rng.uniform(0.5, 2.0, 40)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("n_clusters, n_local_trials", [(4, None), (8, None), (5, 1)])
def test_kmeans_plusplus_chooses_the_rows_of_sklearns_greedy_algorithm(
        data, sparse, n_clusters, n_local_trials):
    # two seedings in turn from one generator: the second continues where the first stopped
    X, sw = data
    Xt = to_tensor(sp.csr_matrix(X) if sparse else X, torch.device("cpu"))
    generator = torch.Generator().manual_seed(3)
    seeds = [kmeans_plusplus(Xt, n_clusters, torch.from_numpy(sw), generator, n_local_trials)
             for _ in range(2)]
    reference = torch.Generator().manual_seed(3)
    for got in seeds:
        expected = _reference(X, sw, reference, n_clusters, n_local_trials)
        np.testing.assert_array_equal(got.numpy(), X[expected])
