"""EuclideanGeometry's sufficient statistics, checked against their definition: the
weighted member sums with or without prepared rows, dense or CSR, the centroids from the
sums (fractional weights, a centroid without weight kept), the relocation of empty clusters
and the distances of rows at their centroid."""

import pytest
import torch
from conftest import to_csr

from skxclust._euclidean import EuclideanGeometry
from skxclust._geometry import Assignment, Farthest

GEN = torch.Generator().manual_seed(7)
X = torch.randn(40, 6, generator=GEN, dtype=torch.float64) * (torch.rand(40, 6, generator=GEN)
                                                               < 0.6)
LABELS = torch.arange(40) % 3
WEIGHT = torch.rand(40, generator=GEN, dtype=torch.float64) * 2.0 + 0.1


@pytest.mark.parametrize("prepared", [False, True])
@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_partial_sums_are_the_weighted_member_sums(layout, prepared):
    geometry = EuclideanGeometry(batch_size=16)
    data = X if layout == "dense" else to_csr(X)
    rows = geometry.prepare(data, WEIGHT) if prepared else None
    centers = torch.zeros(4, 6, dtype=torch.float64)  # cluster 3 has no member
    sums, weight = geometry.partial_sums(data, centers, Assignment(LABELS, None), WEIGHT, rows)
    members = torch.nn.functional.one_hot(LABELS, 4).to(X.dtype).T * WEIGHT
    torch.testing.assert_close(sums, members @ X, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weight, members.sum(dim=1), rtol=1e-12, atol=0)


def test_centers_from_sums_divide_by_any_weight_and_keep_a_centroid_without_weight():
    sums = torch.tensor([[0.3, 0.6], [5.0, -5.0], [0.0, 0.0]], dtype=torch.float64)
    weight = torch.tensor([0.25, 2.5, 0.0], dtype=torch.float64)
    centers = torch.tensor([[9.0, 9.0], [9.0, 9.0], [1.5, -2.5]], dtype=torch.float64)
    new = EuclideanGeometry.centers_from_sums(sums, weight, centers)
    expected = torch.tensor([[1.2, 2.4], [2.0, -2.0], [1.5, -2.5]], dtype=torch.float64)
    torch.testing.assert_close(new, expected, rtol=1e-15, atol=0)


def test_update_from_sums_relocates_nothing_when_every_distance_is_zero():
    # rows a, a, a, b in clusters 0 and 1, cluster 2 empty: more clusters than distinct
    # rows, so the empty cluster takes the heaviest cluster's centroid and b stays put
    a, b = [1.0, 2.0], [-3.0, 0.5]
    sums = torch.tensor([[3 * a[0], 3 * a[1]], b, [0.0, 0.0]], dtype=torch.float64)[None]
    weight = torch.tensor([[3.0, 1.0, 0.0]], dtype=torch.float64)
    farthest = Farthest(torch.zeros(1, 1, dtype=torch.float64),
                        torch.tensor([[b]], dtype=torch.float64),
                        torch.ones(1, 1, dtype=torch.float64), torch.tensor([[1]]))
    new = EuclideanGeometry().update_from_sums(sums, weight, sums.clone(), weight.clone(),
                                               farthest, None)
    torch.testing.assert_close(new[0], torch.tensor([a, b, a], dtype=torch.float64))


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_batched_update_relocates_each_restart_like_its_own_update(layout):
    # restart 0 leaves cluster 3 empty, restart 1 clusters 1 and 3: each is given the rows
    # farthest from their own restart's centroids
    data = X if layout == "dense" else to_csr(X)
    labels = torch.stack([LABELS, torch.where(LABELS == 1, 2, LABELS)])
    centers = torch.randn(2, 4, 6, generator=GEN, dtype=torch.float64)
    geometry = EuclideanGeometry(batch_size=16)
    new, weight = geometry.update(data, centers, Assignment(labels, None), WEIGHT)
    for r in range(2):
        alone = geometry.update(data, centers[r], Assignment(labels[r], None), WEIGHT)
        torch.testing.assert_close(new[r], alone[0], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(weight[r], alone[1], rtol=1e-12, atol=0)
        assert (weight[r] > 0).all()


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_pass_work_counts_the_multiply_adds_against_every_restarts_centroids(layout):
    data = X if layout == "dense" else to_csr(X)
    values = 40 * 6 if layout == "dense" else int((X != 0).sum())
    centers = torch.zeros(3, 4, 6, dtype=torch.float64)
    assert EuclideanGeometry().pass_work(data, centers).size == values * 3 * 4


def test_an_empty_cluster_takes_the_farthest_row_with_its_weight():
    # cluster 3 is empty: the row farthest from its centroid moves there, weight and all,
    # as if it had been assigned to cluster 3 in the first place
    centers = torch.randn(4, 6, generator=GEN, dtype=torch.float64)
    far = int(((X - centers[LABELS]) ** 2).sum(dim=1).argmax())
    moved = LABELS.clone()
    moved[far] = 3
    members = torch.nn.functional.one_hot(moved, 4).to(X.dtype).T * WEIGHT
    new, weight = EuclideanGeometry().update(X, centers, Assignment(LABELS, None), WEIGHT)
    torch.testing.assert_close(weight, members.sum(dim=1), rtol=1e-12, atol=0)
    torch.testing.assert_close(new, (members @ X) / weight[:, None], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_assigned_distances_of_rows_at_their_centroid_are_not_negative(dtype):
    # ||mu||^2 - 2 x.mu + ||x||^2 rounds below zero at a centroid far from the origin
    centers = torch.randn(6, 5, generator=GEN, dtype=dtype) + 30.0
    a = EuclideanGeometry().assign(centers.repeat(10, 1), centers)
    assert torch.equal(a.labels, torch.arange(6).repeat(10))
    assert (a.distances >= 0).all()
    largest = float((centers ** 2).sum(dim=1).max())
    assert float(a.distances.max()) <= 8 * torch.finfo(dtype).eps * largest
