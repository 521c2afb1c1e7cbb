"""ST K-means and the units of the data: invariant to their scale (the penalties scale
with the rows' contrast) and to an offset (the warped centroid is padded with zeros, and
the fit computes in the frame of the images' background, so what a warp brings in from
outside the frame is that background)."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

from skxclust import SpatialTransformerKMeans


def fit(X):
    return SpatialTransformerKMeans(4, n_landmarks=4, max_iter=3, random_state=0).fit(X)


@pytest.fixture(scope="module")
def digits_fit():
    X = load_digits().data[:120]
    return X, fit(X)


def test_a_fit_is_invariant_to_the_scale_of_the_data(digits_fit):
    # exactly for a power of two (no rounding moves); other factors change the float32
    # solver's rounding (x 3 moved centroid entries by up to 3.5e-3 of values up to 48,
    # labels unchanged)
    X, plain = digits_fit
    scaled = fit(4.0 * X)
    np.testing.assert_array_equal(scaled.labels_, plain.labels_)
    np.testing.assert_array_equal(scaled.cluster_centers_, 4.0 * plain.cluster_centers_)


def test_a_fit_is_invariant_to_an_offset_of_the_data(digits_fit):
    # every method computes in the frame of the images' fitted background (the border's
    # median), so an offset moves background_ and the centroids only (before: 77 % of
    # these labels agreed at +1000, held-out ACC 0.72 against 0.85)
    X, plain = digits_fit
    shifted = fit(X + 1024.0)
    assert (plain.background_, shifted.background_) == (0.0, 1024.0)
    np.testing.assert_array_equal(shifted.labels_, plain.labels_)
    np.testing.assert_allclose(shifted.cluster_centers_ - 1024.0, plain.cluster_centers_,
                               atol=1e-9)
    assert shifted.inertia_ == pytest.approx(plain.inertia_, rel=1e-12)
