"""The images' background: ST K-means computes in the frame ``X - background_`` (the
weighted median of the training rows' border pixels), so what a warp brings in from
outside the image is the background and an offset of the data changes no output."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from skxclust import SpatialTransformerKMeans
from skxclust.nn.background import background_level, border_pixels, weighted_median

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OFFSET = 1024.0  # exact in float32 and float64 next to the digits' integers


def make(**params):
    return SpatialTransformerKMeans(4, **{"n_landmarks": 4, "max_iter": 3, "random_state": 0,
                                          **params})


@pytest.fixture(scope="module")
def digits():
    data = load_digits().data
    return data[:120], data[120:150]


@pytest.fixture(scope="module")
def pair(digits):
    """The same fit on the digits and on the digits plus :data:`OFFSET`."""
    X, _ = digits
    return make().fit(X), make().fit(X + OFFSET)


# -- the nn functions ------------------------------------------------------------------
@pytest.mark.parametrize("shape, expected", [
    ((3, 3), [0, 1, 2, 3, 5, 6, 7, 8]),
    ((2, 4), list(range(8))),  # two rows: all border
    ((2, 3, 3), [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17]),
])
def test_border_pixels_are_the_outer_ring_of_every_channel(shape, expected):
    assert border_pixels(shape).tolist() == expected


def test_weighted_median_with_integer_weights_equals_repeated_rows():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 5, (7, 3)).astype(float)
    weights = rng.integers(0, 4, 7)
    repeated = np.repeat(values, weights, axis=0)
    expected = weighted_median(torch.from_numpy(repeated), torch.ones(len(repeated)))
    got = weighted_median(torch.from_numpy(values), torch.from_numpy(weights.astype(float)))
    assert got == expected == float(np.sort(repeated.ravel())[(repeated.size - 1) // 2])


@pytest.mark.parametrize("weights, expected", [
    ([1.0, 1.0], 1.0),  # 0, 1, 5, 5: the lower of the two middle values
    ([1.0, 3.0], 5.0),
    ([0.0, 1.0], 5.0),  # a row without weight counts for nothing
    ([1.0, 0.0], 0.0),
])
def test_weighted_median_is_the_lower_weighted_median(weights, expected):
    values = torch.tensor([[0.0, 1.0], [5.0, 5.0]])
    assert weighted_median(values, torch.tensor(weights)) == expected


def test_background_level_ignores_ink_on_less_than_half_the_border():
    X = torch.full((4, 25), 3.0)
    X[:, :4] = 200.0  # ink on 4 of the 16 border pixels of every 5 x 5 image
    X[:, 12] = -50.0  # and in the middle
    assert background_level(X, torch.ones(4), border_pixels((5, 5))) == 3.0


def test_weighted_median_names_a_bad_shape():
    with pytest.raises(ValueError, match="weights"):
        weighted_median(torch.zeros(3, 2), torch.ones(2))


# -- the estimator ---------------------------------------------------------------------
def test_digits_have_a_zero_background(pair):
    # their border is blank: the fit computes in the input frame, as before the background
    assert pair[0].background_ == 0.0


def test_the_background_of_inverted_images_is_their_blank_value(digits):
    X, _ = digits
    assert make(max_iter=1, split_merge_moves=0).fit(16.0 - X).background_ == 16.0


@pytest.mark.parametrize("method", ["predict", "transform", "score", "decision_function",
                                    "explain", "explain_midpoint", "explain_centroid_frame",
                                    "align"])
def test_every_method_is_invariant_to_an_offset_of_the_data(pair, digits, method):
    plain, shifted = pair
    _, X_new = digits

    def call(est, X):
        if method == "explain_midpoint":
            return est.explain(X, reference=None)
        if method == "explain_centroid_frame":
            return est.explain(X, frame="centroid")
        return getattr(est, method)(X)

    expected, got = call(plain, X_new), call(shifted, X_new + OFFSET)
    if method == "align":  # the aligned rows are images: offset like the input
        got = got - OFFSET
    if method == "predict":
        np.testing.assert_array_equal(got, expected)
    else:
        scale = max(1.0, float(np.abs(expected).max()))
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9 * scale)


def test_reference_and_centroids_are_in_the_input_frame(pair):
    plain, shifted = pair
    np.testing.assert_allclose(shifted.reference_, plain.reference_ + OFFSET, atol=1e-9)
    np.testing.assert_allclose(shifted.cluster_centers_, plain.cluster_centers_ + OFFSET,
                               atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_labels_are_what_predict_gives_with_a_background(digits, dtype):
    X, _ = digits
    est = make().fit((X + OFFSET).astype(dtype))
    np.testing.assert_array_equal(est.predict((X + OFFSET).astype(dtype)), est.labels_)
    assert est.background_ == OFFSET


def test_partial_fit_keeps_the_background_of_its_first_chunk(digits):
    X, X_new = digits
    plain, shifted = make(), make()
    for chunk in (X[:60], X[60:], X_new):
        plain.partial_fit(chunk)
        shifted.partial_fit(chunk + OFFSET)
        assert shifted.background_ == OFFSET
        np.testing.assert_allclose(shifted.cluster_centers_ - OFFSET, plain.cluster_centers_,
                                   atol=1e-9)
        np.testing.assert_array_equal(shifted.labels_, plain.labels_)


def test_a_refit_finds_the_background_of_its_own_data(pair, digits):
    X, _ = digits
    est = pickle.loads(pickle.dumps(pair[1]))
    assert est.fit(X).background_ == 0.0
    np.testing.assert_array_equal(est.labels_, pair[0].labels_)


def test_a_model_pickled_before_the_background_predicts_in_the_input_frame(pair, digits):
    est = pickle.loads(pickle.dumps(pair[0]))
    del est.background_  # what an older version's pickle holds
    np.testing.assert_array_equal(est.predict(digits[1]), pair[0].predict(digits[1]))


def test_signals_keep_a_zero_background():
    # a signal's ends are not a background (each series is centred by the user; border
    # padding measured lower on the time-series benchmark)
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 40)
    X = np.sin(2 * np.pi * (t[None] * rng.uniform(1, 3, (30, 1)))) + 5.0
    est = SpatialTransformerKMeans(2, image_shape=(1, 40), n_landmarks=4, max_iter=2,
                                   random_state=0).fit(X)
    assert est.background_ == 0.0


@pytest.mark.parametrize("offset", [0.0, OFFSET])
def test_a_fit_with_a_background_takes_its_labels_from_predict(monkeypatch, digits, offset):
    # predict moves the rounded centroids back into the fit's frame, where a near tie can
    # flip; labels_ then follow predict. Stand-in for such a tie: a predict that moves
    # row 0 to the next cluster. Without a background (nothing rounded) it is not asked.
    X, _ = digits
    real = SpatialTransformerKMeans.predict

    def predict(self, X):
        labels = real(self, X)
        labels[0] = (labels[0] + 1) % self.n_clusters
        return labels

    monkeypatch.setattr(SpatialTransformerKMeans, "predict", predict)
    params = dict(max_iter=1, split_merge_moves=0)
    est = make(**params).fit(X + offset)
    monkeypatch.setattr(SpatialTransformerKMeans, "predict", real)
    fitted = est.predict(X + offset)
    assert (est.labels_[0] != fitted[0]) == bool(offset)
    np.testing.assert_array_equal(est.labels_[1:], fitted[1:])
