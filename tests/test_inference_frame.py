"""Inference outputs against their float64 closed form: frame, distances, weights."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.datasets import make_blobs

from skxclust import ExplainableKMeans
from skxclust._euclidean import EuclideanGeometry

# tiny problems run faster on one thread (see conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def fitted(offset=0.0, dtype=np.float64):
    X, _ = make_blobs(200, 8, centers=3, cluster_std=1.0, random_state=0)
    X = (X + offset).astype(dtype)
    return X, ExplainableKMeans(3, random_state=0).fit(X)


def test_float32_inference_far_from_the_origin_is_as_exact_as_near_it():
    # rows and centroids are shifted by the mean centroid before the distances are taken:
    # ||x||^2 - 2 x.c + ||c||^2 at an offset of 1e4 would cancel away every float32 digit
    X, est = fitted(offset=1e4, dtype=np.float32)
    exact = cdist(X.astype(np.float64), est.cluster_centers_.astype(np.float64))
    np.testing.assert_allclose(est.transform(X), exact, rtol=1e-3, atol=1e-3)
    np.testing.assert_array_equal(est.predict(X), exact.argmin(1))
    assert est.score(X) == pytest.approx(-(exact.min(1) ** 2).sum(), rel=1e-4)


def test_transform_is_zero_at_the_centroids():
    # squared distances are clamped at 0 against rounding, not at any positive floor
    X, est = fitted()
    np.testing.assert_allclose(np.diag(est.transform(est.cluster_centers_)), 0.0, atol=1e-6)


@pytest.mark.parametrize("weighted", [False, True])
def test_score_is_minus_the_weighted_distortion(weighted):
    # sum_i w_i min_k ||x_i - c_k||^2, with the sample weights (None: all 1)
    X, est = fitted()
    w = np.random.default_rng(0).uniform(0.0, 3.0, len(X)) if weighted else None
    nearest = cdist(X, est.cluster_centers_, "sqeuclidean").min(1)
    expected = -(nearest if w is None else w * nearest).sum()
    assert est.score(X, sample_weight=w) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("method", ["predict", "transform", "score"])
def test_shifted_inference_hands_the_geometry_batch_size_rows_at_a_time(method, monkeypatch):
    # rows are shifted into the centroids' frame in blocks of batch_size rows (the memory
    # beyond the output stays O(batch_size * n_features)); every row is seen once
    X, est = fitted()
    est.set_params(batch_size=16)
    seen = []
    for name in ("assign", "pairwise"):
        original = getattr(EuclideanGeometry, name)

        def record(self, x, centers, *args, _original=original, **kwargs):
            seen.append(x.shape[0])
            return _original(self, x, centers, *args, **kwargs)

        monkeypatch.setattr(EuclideanGeometry, name, record)
    getattr(est, method)(X[:100])
    assert max(seen) == 16 and sum(seen) == 100


def test_labels_are_what_predict_gives_when_the_fit_frame_rounds_a_row_the_other_way():
    # float32 rows near 1000 with a spread of 0.1: for this draw one row is nearer to
    # another centroid in predict's frame than in the fit's; labels_ and the cluster
    # weights partial_fit continues from follow predict
    X = (1000 + 0.1 * np.random.default_rng(71).normal(size=(200, 3))).astype(np.float32)
    est = ExplainableKMeans(4, random_state=0, n_init=1).fit(X)
    np.testing.assert_array_equal(est.labels_, est.predict(X))
    np.testing.assert_array_equal(est._counts, np.bincount(est.labels_, minlength=4))
