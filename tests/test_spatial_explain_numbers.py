"""The numbers of ST K-means' statistics and explanations (``skxclust._spatial_explain``),
each against a computation written out here from the public geometry."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from skxclust import SpatialTransformerKMeans
from skxclust._spatial_explain import warp_attributes, warp_statistics_rows, warp_sums
from skxclust.nn import neon_relevance
from skxclust.nn.reference_rule import neon_reference_relevance

X = load_digits().data[:60]
K = 3


@pytest.fixture(scope="module")
def fitted():
    return SpatialTransformerKMeans(K, n_steps=5, n_landmarks=4, max_iter=1,
                                    split_merge_moves=0, random_state=0,
                                    device="cpu").fit(X)


def _fits(est, rows):
    """The warp fits of ``explain`` written out: every row against every centroid."""
    geometry = est._make_geometry(rows.shape[1])
    x, centers = torch.as_tensor(rows), torch.as_tensor(est.cluster_centers_)
    losses, warps = geometry.pair_warps(x, centers)
    return geometry, x, centers, losses, warps


# -- the statistics rows and sums of beta_, noise_variance_ and reference_ ----------------
@pytest.mark.parametrize("n", [1, 2, 7, 511, 512, 513, 700, 10_000])
def test_statistics_rows_are_distinct_evenly_spaced_and_at_most_512(n):
    rows = warp_statistics_rows(n)
    assert rows.dtype == np.int64 and len(rows) == min(n, 512)
    np.testing.assert_array_equal(rows, np.unique(rows))  # sorted, no row counted twice
    assert rows[0] == 0 and rows[-1] == n - 1
    if n <= 512:
        np.testing.assert_array_equal(rows, np.arange(n))
    else:
        gaps = np.diff(rows)
        assert gaps.max() - gaps.min() <= 1


@pytest.mark.parametrize("noise", ["constant", "contrast"])
def test_warp_sums_add_up_the_evidence_and_nearest_energy_of_the_given_distances(noise):
    # distances made up here, far from what an alignment would give: the sums must use
    # the fit's distances when it passes them, not align again
    rows = X[:10]
    d = np.random.default_rng(0).uniform(1.0, 50.0, size=(10, K))
    geometry = SpatialTransformerKMeans(K, noise=noise)._make_geometry(64)
    sums = warp_sums(torch.as_tensor(rows), torch.as_tensor(d.argmin(1)),
                     torch.as_tensor(X[[0, 20, 40]]), geometry, distances=torch.as_tensor(d))
    competitors = np.where(np.eye(K, dtype=bool), np.inf, d[:, None, :]).min(2)  # (n, c)
    nearest = d.min(1)
    if noise == "contrast":  # the energy per unit of the row's contrast ||x - mean x||^2
        nearest = nearest / ((rows - rows.mean(1, keepdims=True)) ** 2).sum(1)
    assert sums["evidence"] == pytest.approx((competitors - d).max(1).sum(), rel=1e-12)
    assert sums["energy"] == pytest.approx(nearest.sum(), rel=1e-12)
    np.testing.assert_allclose(sums["rows"], rows.sum(0), rtol=1e-12)
    assert sums["count"] == 10


@pytest.mark.parametrize("beta, expected_beta", [(0.25, 0.25), (3, 3.0), ("auto", 0.5)])
def test_warp_attributes_are_the_means_of_the_sums(beta, expected_beta):
    stats = {"evidence": 20.0, "energy": 1280.0, "count": 10,
             "rows": 10.0 * np.arange(64), "origin": np.full(64, 0.5)}
    attributes = warp_attributes(None, beta, 64, stats)
    assert attributes["image_shape_"] == (8, 8)
    assert attributes["beta_"] == pytest.approx(expected_beta, rel=1e-12)  # auto: 1 / mean f
    assert attributes["noise_variance_"] == pytest.approx(2.0, rel=1e-12)  # per row and pixel
    np.testing.assert_allclose(attributes["reference_"], 0.5 + np.arange(64), rtol=1e-12)


def test_a_given_beta_is_the_fitted_beta():
    st = SpatialTransformerKMeans(2, beta=0.125, n_steps=1, n_landmarks=4, max_iter=1,
                                  random_state=0, device="cpu").fit(X[:20])
    assert st.beta_ == 0.125


# -- explain: the NEON rules on the effective centroids of the fixed warps ----------------
@pytest.mark.parametrize("reference", [None, "mean"])
@pytest.mark.parametrize("beta", [0.0, 0.05, np.inf])
def test_relevance_is_neon_on_the_effective_centroids_with_the_given_beta(fitted, beta,
                                                                         reference):
    rows = X[:12]
    geometry, x, centers, losses, warps = _fits(fitted, rows)
    effective = geometry.effective_centroids(x, centers, warps)
    offset = losses - ((x[:, None, :] - effective) ** 2).sum(-1)  # the warp penalties
    target = losses.argmin(1)
    if reference is None:
        expected, f = neon_relevance(x, effective, target, beta, offset=offset)
    else:
        z = torch.as_tensor(fitted.reference_)
        expected, f = neon_reference_relevance(x, effective, target, beta, z, offset=offset)
    R = fitted.explain(rows, beta=beta, reference=reference)
    scale = np.abs(expected.numpy()).max()
    np.testing.assert_allclose(R, expected.numpy(), rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(R.sum(1), f.numpy(), rtol=1e-7)


def test_explain_beta_changes_the_maps_but_not_their_sums(fitted):
    rows = X[:12]
    hard, even = fitted.explain(rows, beta=np.inf), fitted.explain(rows, beta=0.0)
    assert not np.allclose(hard, even)
    np.testing.assert_allclose(hard.sum(1), even.sum(1), rtol=1e-7)


@pytest.mark.parametrize("beta", [True, "0.5"])
def test_explain_refuses_a_beta_that_is_not_a_number(fitted, beta):
    with pytest.raises(TypeError, match="beta must be a non-negative number"):
        fitted.explain(X[:3], beta=beta)


@pytest.mark.parametrize("target", [0, 1, 2])
def test_centroid_frame_maps_are_moved_by_the_warp_of_the_target(fitted, target):
    # every row's map is moved by the warp fitted for the target cluster, also for rows
    # assigned elsewhere (the normalised adjoint conserves whichever warp moved it, so
    # the sums alone cannot tell)
    rows = X[:12]
    geometry, x, _, _, warps = _fits(fitted, rows)
    R = fitted.explain(rows, target=target)
    moved = SpatialTransformerKMeans._to_centroid_frame(
        torch.as_tensor(R), geometry.model(x), warps[:, target])
    Rc = fitted.explain(rows, target=target, frame="centroid")
    np.testing.assert_allclose(Rc, moved.numpy(), rtol=0, atol=1e-9 * np.abs(R).max())
    assert (fitted.predict(rows) != target).any()


@pytest.fixture(scope="module")
def far_fitted():
    return SpatialTransformerKMeans(K, n_steps=5, n_landmarks=4, max_iter=1,
                                    split_merge_moves=0, random_state=0,
                                    device="cpu").fit(X + 1e5)


@pytest.mark.parametrize("reference", [None, "mean"])
def test_relevance_of_rows_far_from_zero_is_conserved_to_rounding(far_fitted, reference):
    # data and centroids 1e5 from the origin: ||x||^2 is 1e12 times the evidence, and
    # the rules run in the frame of x itself, so the sums keep all their digits
    # (measured: 5e-15 of the largest evidence; 3e-7 when taken in the input frame)
    rows = X[:12] + 1e5
    f = far_fitted.decision_function(rows).max(1)
    R = far_fitted.explain(rows, reference=reference)
    np.testing.assert_allclose(R.sum(1), f, rtol=0, atol=1e-12 * np.abs(f).max())


@pytest.mark.parametrize("method", ["decision_function", "explain"])
def test_inference_fits_at_most_batch_size_rows_per_centroid_at_once(fitted, method,
                                                                     monkeypatch):
    # memory is O(batch_size * n_clusters * n_features): 5 rows against the 3 centroids
    import copy

    from skxclust import _warp_geometry

    seen = []
    real = _warp_geometry.graduated_fit_warps

    def spy(samples, centroids, *args, **kwargs):
        seen.append(samples.shape[0] * centroids.shape[0])
        return real(samples, centroids, *args, **kwargs)

    monkeypatch.setattr(_warp_geometry, "graduated_fit_warps", spy)
    est = copy.deepcopy(fitted).set_params(batch_size=5)
    getattr(est, method)(X[:20])
    assert len(seen) >= 4 and max(seen) <= 5 * K
