"""``n_landmarks="auto"``: a 4 x 4 grid for images, 8 knots along time for signals."""

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

from skxclust import SpatialTransformerKMeans
from skxclust._shapes import AUTO_LANDMARKS, resolve_n_landmarks

FAST = {"n_steps": 3, "affine_steps": 1, "max_iter": 2, "split_merge_moves": 0,
        "random_state": 0}


def rows(n_features: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(12, n_features))


@pytest.mark.parametrize("image_shape, n_features, expected", [
    (None, 64, 16),  # 8 x 8 image
    ((4, 10), 40, 16),  # a non-square image
    ((2, 20), 40, 16),  # two rows are an image, not a signal
    (None, 40, 64),  # 1 x 40 signal
    ((1, 40), 40, 64),
    ((40, 1), 40, 64),  # a column is a signal too
    ((3, 1, 20), 60, 64),  # 3 channels, one time warp
])
def test_auto_landmarks_are_a_grid_for_images_and_8_knots_for_signals(
        image_shape, n_features, expected):
    est = SpatialTransformerKMeans(2, image_shape=image_shape, **FAST)
    assert est.get_params()["n_landmarks"] == "auto"
    geometry = est._make_geometry(n_features)
    assert geometry.n_landmarks == expected
    knots = geometry.model(torch.zeros(1, dtype=torch.float64)).n_basis
    assert knots == (16 if expected == 16 else 8)  # 4 x 4 grid points; 8 knots in time
    est.fit(rows(n_features))
    assert est.n_landmarks_ == expected
    assert est.get_params()["n_landmarks"] == "auto"  # the parameter is not mutated


@pytest.mark.parametrize("image_shape, n_features", [
    (None, 64), ((1, 30), 30), ((2, 1, 15), 30)])
def test_auto_landmarks_fit_is_the_fit_with_the_resolved_value(image_shape, n_features):
    X = rows(n_features, seed=1)
    auto = SpatialTransformerKMeans(2, image_shape=image_shape, **FAST).fit(X)
    explicit = SpatialTransformerKMeans(2, image_shape=image_shape, **FAST,
                                        n_landmarks=auto.n_landmarks_).fit(X)
    np.testing.assert_array_equal(auto.cluster_centers_, explicit.cluster_centers_)
    np.testing.assert_array_equal(auto.predict(X), explicit.predict(X))
    np.testing.assert_array_equal(auto.transform(X), explicit.transform(X))
    assert auto.score(X) == explicit.score(X)
    assert explicit.n_landmarks_ == auto.n_landmarks_
    assert clone(auto).n_landmarks == "auto"


@pytest.mark.parametrize("n_landmarks", [4, 36])
def test_an_int_n_landmarks_is_used_as_given_for_signals_and_images(n_landmarks):
    for n_features in (36, 30):  # a 6 x 6 image, a 1 x 30 signal
        assert resolve_n_landmarks(n_landmarks, (1, n_features)) == n_landmarks
        est = SpatialTransformerKMeans(2, n_landmarks=n_landmarks, **FAST)
        assert est.fit(rows(n_features)).n_landmarks_ == n_landmarks


def test_auto_landmarks_table_is_the_documented_one():
    assert AUTO_LANDMARKS == {"image": 16, "signal": 64}
    assert 'default="auto"' in SpatialTransformerKMeans.__doc__.split("n_landmarks :")[1][:40]


@pytest.mark.parametrize("value", ["Auto", "many", 5, 3])
def test_bad_n_landmarks_is_refused_naming_the_parameter(value):
    est = SpatialTransformerKMeans(2, n_landmarks=value, **FAST)
    with pytest.raises((InvalidParameterError, ValueError), match="n_landmarks"):
        est.fit(rows(30))
