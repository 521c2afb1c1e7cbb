"""The pure-torch layers and rules of skxclust.nn, alone and with zennit / captum."""

import numpy as np
import pytest
import torch
from conftest import import_zennit

from skxclust import ExplainableKMeans
from skxclust.nn import (
    LogMeanExpPool,
    NeuralizedKMeans,
    NeuralizingCanonizer,
    PairwiseSquaredDistance,
    SoftKMeans,
    cluster_evidence,
    midpoint_basis,
    neon_relevance,
    neuralize,
    neuralized_head,
    softmin_redistribution,
    squared_distances,
)
from skxclust.nn.lrp import auto_beta, relevance_per_unit_h
from skxclust.nn.neuralized import competitor_index

GEN = torch.Generator().manual_seed(0)
CENTERS = torch.randn(4, 5, generator=GEN, dtype=torch.float64)
X = torch.randn(30, 5, generator=GEN, dtype=torch.float64) * 2


def test_competitor_index_lists_every_other_cluster():
    idx = competitor_index(4)
    assert idx.tolist() == [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]


def test_neuralized_layer_computes_distance_differences():
    h = NeuralizedKMeans(*neuralize(CENTERS))(X)  # (N, K, K-1)
    d = squared_distances(X, CENTERS)
    comp = competitor_index(4)
    expected = d[:, comp] - d[:, :, None]
    torch.testing.assert_close(h, expected, rtol=1e-10, atol=1e-10)


def test_neuralized_head_equals_cluster_evidence_and_argmax_is_nearest_centroid():
    f = neuralized_head(CENTERS)(X)
    d = squared_distances(X, CENTERS)
    torch.testing.assert_close(f, cluster_evidence(d), rtol=1e-10, atol=1e-10)
    assert torch.equal(f.argmax(1), d.argmin(1))


def test_cluster_evidence_with_one_cluster_is_infinite():
    assert torch.isinf(cluster_evidence(torch.ones(3, 1, dtype=torch.float64))).all()


def test_neuralize_refuses_a_single_centroid():
    with pytest.raises(ValueError, match="at least 2"):
        neuralize(CENTERS[:1])


def test_soft_kmeans_is_softmax_of_negative_half_distances():
    T = 0.7
    p = SoftKMeans(CENTERS, temperature=T)(X)
    expected = torch.softmax(-squared_distances(X, CENTERS) / (2 * T), dim=1)
    torch.testing.assert_close(p, expected, rtol=1e-9, atol=1e-12)
    assert torch.allclose(SoftKMeans(CENTERS).linear.weight, CENTERS)


def test_log_mean_exp_gradient_is_the_softmin_weighting():
    beta = 0.8
    h = torch.randn(6, 4, 3, generator=GEN, dtype=torch.float64, requires_grad=True)
    LogMeanExpPool(beta)(h).sum().backward()
    expected = torch.softmax(-beta * h.detach(), dim=-1)
    torch.testing.assert_close(h.grad, expected)


def test_softmin_redistribution_conserves_and_ignores_target():
    h = torch.randn(8, 4, generator=GEN, dtype=torch.float64)
    target = torch.arange(8) % 4
    R, f = softmin_redistribution(h, target, beta=2.0)
    torch.testing.assert_close(R.sum(1), f)
    assert torch.all(R[torch.arange(8), target] == 0)


@pytest.mark.parametrize("beta", [0.0, 1.0, float("inf")])
def test_neon_with_per_sample_centroids_equals_shared_centroids(beta):
    target = torch.arange(30) % 4
    shared, f1 = neon_relevance(X, CENTERS, target, beta)
    per_sample, f2 = neon_relevance(X, CENTERS.expand(30, -1, -1), target, beta)
    torch.testing.assert_close(shared, per_sample)
    torch.testing.assert_close(f1, f2)
    torch.testing.assert_close(shared.sum(1), f1, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("beta", [0.0, 1.0, float("inf")])
def test_neon_with_precomputed_basis_and_workspace_is_bitwise_the_same(beta):
    target = torch.arange(30) % 4
    plain, f1 = neon_relevance(X, CENTERS, target, beta)
    workspace = torch.full((30, 10), float("nan"), dtype=torch.float64)
    reused, f2 = neon_relevance(X, CENTERS, target, beta, basis=midpoint_basis(CENTERS),
                                workspace=workspace)
    assert torch.equal(plain, reused) and torch.equal(f1, f2)
    assert not workspace.isnan().any()  # the product went into the buffer


@pytest.mark.parametrize("beta", [0.0, 1e-3, 1.0, 50.0, float("inf")])
def test_neon_for_the_nearest_cluster_equals_neon_for_the_argmax_target(beta):
    # rows 0-1 sit on a tie between two centroids (f = 0), row 2 on a centroid
    x = torch.cat([((CENTERS[0] + CENTERS[1]) / 2).expand(2, -1), CENTERS[2:3], X])
    g = 2.0 * x @ CENTERS.T - (CENTERS * CENTERS).sum(1)
    R_none, f_none = neon_relevance(x, CENTERS, None, beta)
    R_target, f_target = neon_relevance(x, CENTERS, g.argmax(1), beta)
    torch.testing.assert_close(R_none, R_target, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(f_none, f_target, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(R_none.sum(1), f_none, rtol=1e-10, atol=1e-10)
    assert torch.all(f_none >= 0) and torch.isfinite(R_none).all()


def test_distance_layer_gives_squared_distances():
    torch.testing.assert_close(PairwiseSquaredDistance(CENTERS)(X), squared_distances(X, CENTERS))


def test_canonizer_swaps_distance_for_evidence_and_restores_it():
    model = torch.nn.Sequential(torch.nn.Identity(), PairwiseSquaredDistance(CENTERS))
    before = model(X)
    with NeuralizingCanonizer().applied(model):
        f = model(X)
    torch.testing.assert_close(f, cluster_evidence(before))
    torch.testing.assert_close(model(X), before)
    assert not hasattr(model[1], "neuralized")


@pytest.fixture(scope="module")
def digits_model():
    from sklearn.datasets import load_digits

    Xd = load_digits().data[:300]
    return ExplainableKMeans(n_clusters=5, random_state=0, device="cpu").fit(Xd), Xd


def test_captum_input_x_gradient_runs_on_the_log_mean_exp_head(digits_model):
    captum_attr = pytest.importorskip("captum.attr")
    km, Xd = digits_model
    head = km.as_module("neuralized", beta=km.beta_)
    x = torch.from_numpy(Xd[:16]).requires_grad_(True)
    target = km.predict(Xd[:16]).tolist()
    attributions = captum_attr.InputXGradient(head).attribute(x, target=target)
    assert attributions.shape == x.shape
    assert torch.isfinite(attributions).all()


def test_captum_gradient_of_log_mean_exp_head_is_the_soft_min_weighted_direction(digits_model):
    """Gradient of the smooth head = sum_k softmin_k w_ck: the soft-min rule in gradient form."""
    captum_attr = pytest.importorskip("captum.attr")
    km, Xd = digits_model
    beta = km.beta_
    head = km.as_module("neuralized", beta=beta)
    x = torch.from_numpy(Xd[:4])
    c = km.predict(Xd[:4])
    grads = captum_attr.Saliency(head).attribute(
        x.clone().requires_grad_(True), target=c.tolist(), abs=False
    )
    mu = torch.from_numpy(km.cluster_centers_)
    for i in range(4):
        comps = [k for k in range(5) if k != c[i]]
        d = ((x[i] - mu) ** 2).sum(1)
        h = d[comps] - d[c[i]]
        p = torch.softmax(-beta * h, 0)
        expected = sum(p[j] * 2 * (mu[c[i]] - mu[k]) for j, k in enumerate(comps))
        torch.testing.assert_close(grads[i], expected, rtol=1e-8, atol=1e-8)


def test_zennit_attributes_through_the_canonized_distance_model(digits_model):
    zennit = import_zennit()
    from zennit.attribution import Gradient
    from zennit.composites import EpsilonPlus

    km, Xd = digits_model
    torch.manual_seed(0)
    extractor = torch.nn.Sequential(torch.nn.Linear(64, 64, dtype=torch.float64), torch.nn.ReLU())
    with torch.no_grad():  # an identity feature extractor keeps the fitted centroids valid
        extractor[0].weight.copy_(torch.eye(64))
        extractor[0].bias.zero_()
    model = torch.nn.Sequential(extractor, km.as_module("distance"))
    x = torch.from_numpy(Xd[:8])
    distances = model(x).detach()
    composite = EpsilonPlus(canonizers=[NeuralizingCanonizer(beta=km.beta_)])
    c = km.predict(Xd[:8])
    with Gradient(model=model, composite=composite) as attributor:
        out, relevance = attributor(x, torch.nn.functional.one_hot(torch.from_numpy(c), 5))
    assert relevance.shape == x.shape
    assert torch.isfinite(relevance).all()
    assert torch.equal(out.argmax(1), distances.argmin(1))  # evidence while canonized
    torch.testing.assert_close(model(x), distances)  # restored afterwards
    assert zennit.__name__ == "zennit"
    np.testing.assert_array_equal(out.argmax(1).numpy(), c)


@pytest.mark.parametrize("per_sample", [False, True])
def test_neon_with_distance_offsets_uses_root_points_on_the_shifted_hyperplane(per_sample):
    """d_k = ||x - mu_k||^2 + o_k: relevance matches the root-point rule and conserves."""
    gen = torch.Generator().manual_seed(1)
    centers = torch.randn(30, 4, 5, generator=gen, dtype=torch.float64) if per_sample \
        else CENTERS
    offset = torch.rand(30, 4, generator=gen, dtype=torch.float64) * 3
    target = torch.arange(30) % 4
    R, f = neon_relevance(X, centers, target, beta=0.7, offset=offset)
    torch.testing.assert_close(R.sum(1), f, rtol=1e-10, atol=1e-10)
    for i in range(30):
        mu = centers[i] if per_sample else centers
        c = int(target[i])
        comps = [k for k in range(4) if k != c]
        d = ((X[i] - mu) ** 2).sum(1) + offset[i]
        h = d[comps] - d[c]
        p = torch.softmax(-0.7 * h, 0) * h.min()
        expected = torch.zeros(5, dtype=torch.float64)
        for j, k in enumerate(comps):
            w = 2 * (mu[c] - mu[k])
            root = 0.5 * (mu[c] + mu[k]) - (offset[i, k] - offset[i, c]) * w / (w @ w)
            expected += p[j] * (X[i] - root) * w / h[j]
        torch.testing.assert_close(R[i], expected, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("per_sample", [False, True])
def test_neon_shares_a_competitor_equal_to_the_target_evenly_and_conserves(per_sample):
    """A competitor centroid equal to the target's (w_ck = 0, e.g. two centroids warped off
    the image) makes h_ck the offset difference alone: its share goes evenly to the
    features, and the relevance still sums to the evidence."""
    gen = torch.Generator().manual_seed(2)
    base = torch.randn(4, 5, generator=gen, dtype=torch.float64)
    base[3] = base[2]  # centroids 2 and 3 coincide
    centers = base.expand(30, 4, 5).clone() if per_sample else base
    offset = torch.rand(30, 4, generator=gen, dtype=torch.float64) * 3
    target = torch.full((30,), 2)
    R, f = neon_relevance(X, centers, target, beta=0.7, offset=offset)
    torch.testing.assert_close(R.sum(1), f, rtol=1e-10, atol=1e-10)
    # the equal competitor's share, with the others removed, is spread evenly
    alone = neon_relevance(X, centers[..., 2:, :], torch.zeros(30, dtype=torch.long),
                           beta=0.7, offset=offset[:, 2:])[0]
    torch.testing.assert_close(alone, alone[:, :1].expand(30, 5), rtol=1e-12, atol=0)


@pytest.mark.parametrize("evidence", [[0.0, 0.0], [-1.0, 0.5], [-2.0]])
def test_auto_beta_is_a_hard_min_when_the_mean_evidence_is_not_positive(evidence):
    assert auto_beta(torch.tensor(evidence, dtype=torch.float64)) == float("inf")


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_relevance_per_unit_h_floors_a_small_h_keeping_its_sign(sign):
    # floor = 0.25 * max |h| = 0.5: the first |h| = 0.1 is raised to it, with h's sign
    h = torch.tensor([[sign * 0.1, 1.0, -2.0]], dtype=torch.float64)
    a = relevance_per_unit_h(torch.ones(1, 3, dtype=torch.float64), h, eps=0.25)
    assert a.tolist() == [[sign * 2.0, 1.0, -0.5]]


@pytest.mark.parametrize("beta", [0.0, 1.0, float("inf")])
@pytest.mark.parametrize("target", [None, 0])
def test_neon_of_a_row_equidistant_from_every_centroid_is_zero_not_nan(beta, target):
    # every h_ck is 0: the guard's floor must not fall to 0 (0 / 0)
    centers = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    x = torch.zeros(2, 2, dtype=torch.float64)
    target = None if target is None else torch.full((2,), target)
    R, f = neon_relevance(x, centers, target, beta)
    assert torch.equal(R, torch.zeros_like(x)) and torch.equal(f, torch.zeros_like(x[:, 0]))


@pytest.mark.parametrize("beta", [1e-3, 1.0, 50.0])
def test_neon_for_the_nearest_cluster_applies_the_relative_guard_of_a_given_target(beta):
    # eps = 0.5 floors every h_ck below half the row's largest: both paths alike
    g = 2.0 * X @ CENTERS.T - (CENTERS * CENTERS).sum(1)
    R_none, f_none = neon_relevance(X, CENTERS, None, beta, eps=0.5)
    R_target, f_target = neon_relevance(X, CENTERS, g.argmax(1), beta, eps=0.5)
    torch.testing.assert_close(R_none, R_target, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(f_none, f_target, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(R_none.sum(1), f_none)  # the guard did absorb relevance
