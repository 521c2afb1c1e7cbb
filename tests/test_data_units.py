"""ST K-means and the units of the data: invariant to their scale (the penalties scale
with the rows' contrast), not to an offset (the warped centroid is padded with zeros, so
what a warp brings in from outside the frame is a background of 0; the docs tell users
to subtract a non-zero background first)."""

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


@pytest.mark.xfail(strict=True, reason="the warped centroid is padded with zeros: an "
                   "offset of the data is not free (77 % of these labels agree at +1000)")
def test_a_fit_is_invariant_to_an_offset_of_the_data(digits_fit):
    # a fitted background (the border's median as the padding value) made this pass
    # (digits + 1000: held-out ACC 0.72 -> 0.85) but lost 0.14 on digits with a level per
    # row, so it was reverted (user guide, "ST K-means"); the shift is the user's
    X, plain = digits_fit
    np.testing.assert_array_equal(fit(X + 1000.0).labels_, plain.labels_)
