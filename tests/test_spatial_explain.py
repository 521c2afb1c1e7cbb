"""Evidence and relevance maps of SpatialTransformerKMeans (NEON with warped centroids)."""

import numpy as np
import pytest
from scipy.ndimage import binary_dilation
from sklearn.datasets import load_digits

from skxclust import ExplainableKMeans, SpatialTransformerKMeans

X = load_digits().data[:240]


@pytest.fixture(scope="module")
def fitted():
    return SpatialTransformerKMeans(n_clusters=4, n_steps=15, max_iter=2, random_state=0,
                                    device="cpu").fit(X)


def test_evidence_argmax_is_predict_and_assigned_evidence_positive(fitted):
    f = fitted.decision_function(X[:60])
    np.testing.assert_array_equal(f.argmax(1), fitted.predict(X[:60]))
    assert np.all(f.max(1) > 0)


@pytest.mark.parametrize("target", [None, 2, "per_row"])
def test_input_frame_relevance_sums_to_the_warped_evidence(fitted, target):
    rows = X[:60]
    if target == "per_row":
        target = np.arange(60) % 4
    R = fitted.explain(rows, target=target)
    f = fitted.decision_function(rows)
    f_t = f.max(1) if target is None else f[np.arange(60), np.broadcast_to(target, (60,))]
    assert R.shape == rows.shape
    np.testing.assert_allclose(R.sum(1), f_t, rtol=1e-5, atol=1e-9 * np.abs(f).max())


def test_without_warping_relevance_equals_explainable_kmeans():
    init = X[[0, 60, 120, 180]]
    st = SpatialTransformerKMeans(n_clusters=4, n_steps=0, init=init, max_iter=300,
                                  device="cpu").fit(X)
    km = ExplainableKMeans(n_clusters=4, init=init, device="cpu").fit(X)
    assert st.beta_ == pytest.approx(km.beta_, rel=1e-10)
    np.testing.assert_allclose(st.decision_function(X), km.decision_function(X),
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(st.explain(X[:50]), km.explain(X[:50]), rtol=1e-8, atol=1e-8)


def test_relevance_lands_where_sample_or_warped_centroids_have_ink():
    """Warps are fixed resampling operators: empty pixels that no warp brings ink to get
    no relevance, wherever the blobs sit."""
    rng = np.random.default_rng(0)
    images = []
    for i in range(40):
        img = np.zeros((16, 16))
        r, c = (4, 4) if i % 2 else (4, 10)
        dr, dc = rng.integers(-1, 2, size=2)
        img[r + dr:r + dr + 3, c + dc:c + dc + 3] = 1.0
        images.append(img.ravel())
    data = np.array(images)
    st = SpatialTransformerKMeans(n_clusters=2, n_landmarks=9, n_steps=30, random_state=0,
                                  device="cpu").fit(data)
    R = st.explain(data)
    ink = binary_dilation((data.reshape(-1, 16, 16).max(0) > 0)
                          | (st.cluster_centers_.reshape(-1, 16, 16).max(0) > 1e-3),
                          iterations=3).ravel()
    outside = np.abs(R[:, ~ink]).sum(1)
    assert np.all(outside <= 1e-6 * np.abs(R).sum(1))


def test_centroid_frame_maps_are_aligned_and_mostly_conserved(fitted):
    rows = X[:60]
    Rc = fitted.explain(rows, frame="centroid")
    f = fitted.decision_function(rows).max(1)
    assert Rc.shape == rows.shape
    rel_err = np.abs(Rc.sum(1) - f) / np.abs(f)
    assert np.median(rel_err) < 1e-6


def test_explain_refuses_bad_frame_target_and_beta(fitted):
    with pytest.raises(ValueError, match="frame"):
        fitted.explain(X[:5], frame="sample")
    with pytest.raises(ValueError, match="out of range"):
        fitted.explain(X[:5], target=4)
    with pytest.raises(ValueError, match="beta"):
        fitted.explain(X[:5], beta=-1.0)
