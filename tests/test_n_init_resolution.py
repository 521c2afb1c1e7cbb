"""How many restarts a fit runs, and how it seeds them: ``n_init`` as scikit-learn's KMeans
resolves it (an explicit value is kept, "auto" is 1 for k-means++ and 10 otherwise, an
explicit ``init`` array runs once and warns only when ``n_init`` was set), and
``init="random"`` drawing distinct rows of positive weight."""

import re
import warnings

import numpy as np
import pytest
import torch

from skxclust import ExplainableKMeans
from skxclust._validation import make_generators

X = np.random.default_rng(0).normal(size=(30, 3))


def restarts(capsys, **params) -> int:
    ExplainableKMeans(3, random_state=0, verbose=1, **params).fit(X)
    out = capsys.readouterr().out
    return int(re.search(r"Initialization complete: (\d+) restart", out).group(1))


@pytest.mark.parametrize("params, expected", [
    ({"n_init": 3}, 3), ({"n_init": 3, "init": "random"}, 3),
    ({"n_init": "auto"}, 1), ({"n_init": "auto", "init": "random"}, 10),
])
def test_n_init_is_kept_when_given_and_resolved_like_sklearn_when_auto(capsys, params,
                                                                        expected):
    assert restarts(capsys, **params) == expected


@pytest.mark.parametrize("n_init", [2, 10])
def test_an_init_array_runs_once_and_warns_when_n_init_was_set(capsys, n_init):
    with pytest.warns(RuntimeWarning, match=f"instead of n_init={n_init}"):
        assert restarts(capsys, init=X[:3], n_init=n_init) == 1


def test_an_init_array_with_n_init_auto_runs_once_without_a_warning(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert restarts(capsys, init=X[:3], n_init="auto") == 1


def test_random_init_draws_distinct_rows_of_positive_weight():
    # every restart seeds n_clusters different rows (no row twice), never one of weight 0
    est = ExplainableKMeans(5, init="random")
    rows = torch.arange(6.0)[:, None].repeat(1, 2)
    weight = torch.tensor([1.0, 1.0, 0.0, 1.0, 5.0, 1.0])
    centers = est._init_centroids(rows, weight, make_generators(0, 200), None, 0.0)
    seeded = centers[..., 0].long()  # (200, 5) row indices
    assert all(len(set(r)) == 5 for r in seeded.tolist())
    assert not (seeded == 2).any()
