"""The numbers of skxclust.nn's k-means layers: distances that keep their digits next to a
centroid and never below zero, +inf evidence without a competitor, the layers' own copies
of their parameters, a zero stiffness or temperature refused, an infinite beta as the hard
minimum, and the canonizer's beta, nested layers and bookkeeping."""

import math

import pytest
import torch
from conftest import to_csr

from skxclust.nn import (
    LogMeanExpPool,
    NeuralizedKMeans,
    NeuralizingCanonizer,
    PairwiseSquaredDistance,
    SoftKMeans,
    cluster_evidence,
    neuralize,
    neuralized_head,
    squared_distances,
)

GEN = torch.Generator().manual_seed(3)
CENTERS = torch.randn(5, 7, generator=GEN, dtype=torch.float64) + 30.0  # far from 0


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_squared_distances_next_to_a_centroid_keep_their_digits(dtype):
    # the expansion ||x||^2 - 2 x.mu + ||mu||^2 loses the digits of a distance below
    # sqrt(eps) (||x||^2 + ||mu||^2); such entries come from the differences instead
    mu = CENTERS.to(dtype)
    direction = torch.randn(mu.shape, generator=GEN, dtype=dtype)
    direction /= direction.norm(dim=1, keepdim=True)
    sq = (mu * mu).sum(dim=1)
    # squared offsets at 3/4 of the documented bound: above sqrt(eps) ||mu||^2 alone
    offset = (0.75 * math.sqrt(torch.finfo(dtype).eps) * 2.0 * sq).sqrt()
    x = mu + direction * offset[:, None]
    near = squared_distances(x, mu).diagonal()
    exact = ((x - mu) ** 2).sum(dim=1)
    torch.testing.assert_close(near, exact, rtol=1e-12 if dtype == torch.float64 else 1e-5,
                               atol=0)
    assert squared_distances(mu, mu).diagonal().tolist() == [0.0] * 5


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_squared_distances_of_sparse_rows_at_the_centroids_are_not_negative(dtype):
    # no recomputation for a CSR x: the rounding of the expansion is clamped at 0 instead
    mu = CENTERS.to(dtype)
    d = squared_distances(to_csr(mu), mu)
    assert (d >= 0).all()
    assert float(d.diagonal().max()) <= 8 * torch.finfo(dtype).eps * float((mu * mu).sum(1).max())


def test_cluster_evidence_with_one_cluster_is_plus_infinity():
    f = cluster_evidence(torch.ones(3, 1, dtype=torch.float64))
    assert f.tolist() == [[math.inf]] * 3


def test_the_layers_keep_their_own_copy_of_their_parameters():
    centers = CENTERS.clone()
    weight, bias = neuralize(centers)
    distance, neuralized = PairwiseSquaredDistance(centers), NeuralizedKMeans(weight, bias)
    x = torch.randn(4, 7, generator=GEN, dtype=torch.float64) + 30.0
    before = distance(x), neuralized(x)
    centers.add_(1.0), weight.mul_(2.0), bias.add_(1.0)
    assert torch.equal(distance(x), before[0])
    assert torch.equal(neuralized(x), before[1])


@pytest.mark.parametrize("make, message", [
    (lambda: LogMeanExpPool(0.0), "beta must be > 0"),
    (lambda: SoftKMeans(CENTERS, temperature=0.0), "temperature must be > 0"),
], ids=["pool_beta", "soft_temperature"])
def test_a_zero_pool_stiffness_or_temperature_is_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_neuralized_head_with_an_infinite_beta_is_the_hard_minimum():
    x = torch.randn(6, 7, generator=GEN, dtype=torch.float64) + 30.0
    f = neuralized_head(CENTERS, beta=math.inf)(x)
    torch.testing.assert_close(f, cluster_evidence(squared_distances(x, CENTERS)),
                               rtol=1e-9, atol=1e-9)


def _chained_distances():
    """Two distance layers, one nested: (N, 7) -> distances (N, 5) -> distances (N, 3)."""
    second = torch.randn(3, 5, generator=GEN, dtype=torch.float64)
    inner = torch.nn.Sequential(torch.nn.Identity(), PairwiseSquaredDistance(CENTERS))
    return torch.nn.Sequential(inner, PairwiseSquaredDistance(second)), second


@pytest.mark.parametrize("beta", [None, 0.5])
def test_canonizer_neuralizes_every_distance_layer_with_its_beta_and_restores_them_all(beta):
    model, second = _chained_distances()
    x = torch.randn(6, 7, generator=GEN, dtype=torch.float64) + 30.0
    before = model(x)
    with NeuralizingCanonizer(beta=beta).applied(model) as applied:
        assert applied is model
        f = model(x)
    first = neuralized_head(CENTERS, beta)(x)
    torch.testing.assert_close(f, neuralized_head(second, beta)(first), rtol=1e-12, atol=1e-12)
    assert torch.equal(model(x), before)
    assert not any(hasattr(m, "neuralized") for m in model.modules())


def test_canonizer_remove_is_a_no_op_on_an_unapplied_or_removed_instance():
    model, _ = _chained_distances()
    x = torch.randn(2, 7, generator=GEN, dtype=torch.float64)
    before = model(x)
    NeuralizingCanonizer().remove()
    instances = NeuralizingCanonizer().apply(model)
    assert len(instances) == 2
    for instance in instances + instances:
        instance.remove()
    assert torch.equal(model(x), before)
