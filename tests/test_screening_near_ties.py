"""Float32 screening of the nearest-centroid pass (``EuclideanGeometry(screen=True)``): it
engages on float64 data from ``screen_min_macs`` multiply-adds on, and hands every row
within its float32 error bound back to float64, in every restart."""

import pytest
import torch

from skxclust._euclidean import EuclideanGeometry

N, D = 2000, 48


def _near_ties():
    """Rows near the origin within 1e-2 of the bisector of two centroids far from it (one
    restart), and two centroids no row is close to tie (a second restart)."""
    gen = torch.Generator().manual_seed(0)
    c = torch.randn(2, D, generator=gen, dtype=torch.float64) * 30
    c[1] = -1.003 * c[0] + 0.1 * torch.randn(D, generator=gen, dtype=torch.float64)
    w, b = 2 * (c[0] - c[1]), c[1] @ c[1] - c[0] @ c[0]
    x = torch.randn(N, D, generator=gen, dtype=torch.float64)
    margin = torch.rand(N, generator=gen, dtype=torch.float64) * 2e-2 - 1e-2
    x -= ((x @ w + b - margin) / (w @ w))[:, None] * w  # now w.x + b = margin
    clear = torch.randn(2, D, generator=gen, dtype=torch.float64) * 30 + 200
    return x, c, clear


def _at_the_origin():
    """Rows within 1e-5 of the origin, and two centroids far from it whose squared norms
    differ by less than their float32 rounding: so do the rows' gaps."""
    gen = torch.Generator().manual_seed(1)
    c = torch.randn(D, generator=gen, dtype=torch.float64) * 30
    c = torch.stack([c, c[torch.randperm(D, generator=gen)] * (1 + 1e-8)])
    x = torch.randn(N, D, generator=gen, dtype=torch.float64) * 1e-6
    clear = torch.randn(2, D, generator=gen, dtype=torch.float64) * 30 + 200
    return x, c, clear


def _screening(min_macs=0):
    geometry = EuclideanGeometry(screen=True)
    geometry.screen_min_macs = min_macs
    return geometry


@pytest.mark.parametrize("restarts", [1, 2])
@pytest.mark.parametrize("data", [_near_ties, _at_the_origin], ids=["bisector", "origin"])
def test_screening_hands_near_ties_back_to_float64(data, restarts):
    x, centers, clear = data()
    centers = centers if restarts == 1 else torch.stack([centers, clear])
    exact = EuclideanGeometry().assign(x, centers)
    flat = centers.reshape(-1, D).float()
    scores = (flat * flat).sum(1) - 2 * x.float() @ flat.T
    float32_labels = scores.view(N, -1, 2).argmin(2).T.reshape(exact.labels.shape)
    assert (float32_labels != exact.labels).sum() > 20  # float32 alone gets these wrong
    assert torch.equal(_screening().assign(x, centers).labels, exact.labels)


def test_screening_engages_on_float64_data_from_screen_min_macs():
    x, _, centers = _near_ties()  # no row is close to a tie: none is recomputed
    exact = EuclideanGeometry().assign(x, centers)
    macs = N * 2 * D
    screened = _screening(macs).assign(x, centers)
    assert torch.equal(screened.labels, exact.labels)
    # float32 products: the distances carry float32 rounding until refine
    assert not torch.equal(screened.distances, exact.distances)
    torch.testing.assert_close(screened.distances, exact.distances, rtol=1e-5, atol=0)
    assert torch.equal(_screening(macs).refine(x, centers, screened).distances,
                       exact.distances)
    # the geometry of one data set's passes keeps the threshold
    on_rows = _screening(macs).for_rows(x, torch.ones(N, dtype=x.dtype))
    assert torch.equal(on_rows.assign(x, centers).distances, screened.distances)
    below = _screening(macs + 1).assign(x, centers)
    assert torch.equal(below.distances, exact.distances)
    x32, centers32 = x.float(), centers.float()  # float32 data: nothing to screen
    assert torch.equal(_screening().assign(x32, centers32).distances,
                       EuclideanGeometry().assign(x32, centers32).distances)
