"""Evidence and relevance maps of SpatialTransformerKMeans (NEON with warped centroids)."""

import numpy as np
import pytest
import torch
from scipy.ndimage import binary_dilation
from sklearn.datasets import load_digits

from skxclust import ExplainableKMeans, SpatialTransformerKMeans
from skxclust.nn import neon_relevance

X = load_digits().data[:240]


@pytest.fixture(scope="module")
def fitted():
    return SpatialTransformerKMeans(n_clusters=4, n_steps=15, max_iter=2, random_state=0,
                                    device="cpu").fit(X)


def test_evidence_argmax_is_predict_and_assigned_evidence_positive(fitted):
    f = fitted.decision_function(X[:60])
    np.testing.assert_array_equal(f.argmax(1), fitted.predict(X[:60]))
    assert np.all(f.max(1) > 0)


def test_evidence_is_the_margin_of_the_public_distances(fitted):
    # the reference of every conservation test below, rebuilt from transform alone:
    # f_c = min_{k != c} d_k - d_c with d = transform(X) ** 2 (4 clusters: screening on)
    rows = X[:60]
    d = fitted.transform(rows) ** 2
    competitors = np.where(np.eye(4, dtype=bool), np.inf, d[:, None, :])  # (n, c, k)
    expected = competitors.min(axis=2) - d
    f = fitted.decision_function(rows)
    # measured: 1.1e-12 at most, 6e-16 of the largest squared distance
    np.testing.assert_allclose(f, expected, rtol=0, atol=1e-13 * d.max())


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
                                  appearance="none", device="cpu").fit(X)
    km = ExplainableKMeans(n_clusters=4, init=init, device="cpu").fit(X)
    assert st.beta_ == pytest.approx(km.beta_, rel=1e-10)
    np.testing.assert_allclose(st.decision_function(X), km.decision_function(X),
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(st.explain(X[:50], reference=None), km.explain(X[:50]),
                               rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(st.explain(X[:50]), km.explain(X[:50], reference=X.mean(0)),
                               rtol=1e-8, atol=1e-8)


def test_relevance_lands_where_sample_or_warped_centroids_have_ink():
    """Warps are fixed resampling operators: empty pixels that no warp brings ink to get
    no relevance, wherever the blobs sit (without an appearance transformation: its
    offset lifts every pixel of the effective centroid)."""
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
                                  appearance="none", device="cpu").fit(data)
    R = st.explain(data)
    ink = binary_dilation((data.reshape(-1, 16, 16).max(0) > 0)
                          | (st.cluster_centers_.reshape(-1, 16, 16).max(0) > 1e-3),
                          iterations=3).ravel()
    outside = np.abs(R[:, ~ink]).sum(1)
    assert np.all(outside <= 1e-6 * np.abs(R).sum(1))


def test_centroid_frame_maps_are_mostly_conserved(fitted):
    rows = X[:60]
    Rc = fitted.explain(rows, frame="centroid")
    f = fitted.decision_function(rows).max(1)
    assert Rc.shape == rows.shape
    rel_err = np.abs(Rc.sum(1) - f) / np.abs(f)
    assert np.median(rel_err) < 1e-6


def test_without_warping_the_centroid_frame_is_the_input_frame():
    st = SpatialTransformerKMeans(n_clusters=4, n_steps=0, max_iter=2, random_state=0,
                                  device="cpu").fit(X)
    np.testing.assert_array_equal(st.explain(X[:60], frame="centroid"), st.explain(X[:60]))


def _two_blobs(side, dr=0, dc=0):
    """Two round blobs of different sizes: no affine map but the identity maps the pair
    onto itself, so the warp matching a moved copy is the translation."""
    yy, xx = np.mgrid[0:side, 0:side]
    blob = [np.exp(-((yy - r - dr) ** 2 + (xx - c - dc) ** 2) / (2 * w**2))
            for r, c, w in ((6.5, 6.0, 1.5), (9.5, 10.0, 1.05))]
    return (blob[0] + 0.6 * blob[1]).ravel()


@pytest.mark.parametrize("shift", [(2, -3), (-1, 2), (1, 1)])
def test_the_centroid_frame_undoes_a_known_translation(shift):
    # Centroids: the two blobs and a ring. The row is the blobs moved by whole pixels,
    # which a free affine warp matches exactly; its centroid-frame map must be its
    # input-frame map moved back by the same pixels: Rc(q) = R(q + shift).
    side, (dr, dc) = 16, shift
    yy, xx = np.mgrid[0:side, 0:side]
    ring = np.exp(-((np.hypot(yy - 7.5, xx - 7.5) - 4) ** 2)).ravel()
    templates = np.stack([_two_blobs(side), ring])
    # float64 warp fits: the exact self-match keeps each centroid its template to 1e-12
    st = SpatialTransformerKMeans(2, init=templates, n_init=1, max_iter=1, warp="affine",
                                  affine_penalty=0.0, n_candidates=None, screen_ratio=None,
                                  warp_dtype="float64", device="cpu").fit(templates)
    np.testing.assert_allclose(st.cluster_centers_, templates, atol=1e-12)
    row = _two_blobs(side, dr, dc)[None]
    # the warp is recovered (measured: at most 3e-10 of the unwarped energy)
    assert st.transform(row)[0, 0] ** 2 < 1e-7 * ((row - templates[0]) ** 2).sum()
    R = st.explain(row)[0].reshape(side, side)
    Rc = st.explain(row, frame="centroid")[0].reshape(side, side)
    moved_back = np.zeros_like(R)
    moved_back[max(0, -dr):side - max(0, dr), max(0, -dc):side - max(0, dc)] = \
        R[max(0, dr):side - max(0, -dr), max(0, dc):side - max(0, -dc)]
    # measured: 1e-7 of the largest relevance at most; a map left in the input frame is
    # off by more than half of it
    np.testing.assert_allclose(Rc, moved_back, rtol=0, atol=1e-4 * np.abs(R).max())
    assert np.abs(Rc - R).max() > 0.5 * np.abs(R).max()


@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_relevance_is_conserved_when_two_centroids_are_warped_to_the_same_image(beta):
    # Found by the property tests (a 1 x 2 signal of contrast 0.06, warp_penalty=0): the
    # warps moved centroids 0 and 2 wholly out of the image, so both effective centroids
    # are 0 and f_0 = min(h_01, h_02) with h_02 = o_2 - o_0 = -0.057, a constant. The
    # soft-min gives h_02 a share of f_0 that the midpoint rule cannot put on any pixel
    # (the row summed to -1.517 (beta=0) or -2.888 (beta=1) instead of -3.035); that
    # share is now spread evenly over the pixels.
    x = torch.tensor([[1.304, 0.947]], dtype=torch.float64)
    effective = torch.tensor([[[0.0, 0.0], [1.2025, 0.8987], [0.0, 0.0]]], dtype=torch.float64)
    offset = torch.tensor([[0.4576, 0.0076, 0.4006]], dtype=torch.float64)
    R, f = neon_relevance(torch.zeros_like(x), effective - x[:, None, :], torch.tensor([0]),
                          beta, offset=offset)
    torch.testing.assert_close(R.sum(1), f)


def test_explain_refuses_bad_frame_target_and_beta(fitted):
    with pytest.raises(ValueError, match="frame"):
        fitted.explain(X[:5], frame="sample")
    with pytest.raises(ValueError, match="out of range"):
        fitted.explain(X[:5], target=4)
    with pytest.raises(ValueError, match="beta"):
        fitted.explain(X[:5], beta=-1.0)


@pytest.mark.parametrize("shift_px", [0.5, 0.95])
def test_centroid_frame_conserves_the_relevance_of_pixels_sampled_mostly_outside(shift_px):
    # S^T (R / S 1) sums to R's total wherever S 1 > 0: a shift by a fraction of a pixel
    # leaves one border column sampling 1 - shift_px of the image (0.05 at 0.95)
    from skxclust.nn.warps import make_warp_model

    model = make_warp_model((5, 5), 4, "affine", torch.float64)
    params = torch.zeros(1, model.n_basis, model.ndim, dtype=torch.float64)
    params[0, 2, 0] = 2 * shift_px / 4  # the constant basis row: a shift along x
    relevance = torch.rand(1, 25, generator=torch.Generator().manual_seed(0),
                           dtype=torch.float64)
    splat = SpatialTransformerKMeans._to_centroid_frame(relevance, model, params)
    torch.testing.assert_close(splat.sum(), relevance.sum(), rtol=1e-12, atol=0)
