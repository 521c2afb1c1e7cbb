"""PairFit, the per-row fits of a warp assignment: sliced by rows and joined from row
chunks with every field (warp, appearance coefficients, offset) kept row by row."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from skxclust import SpatialTransformerKMeans
from skxclust._pair_fit import PairFit

FIELDS = ("warps", "coef", "offset")


def _fit(n, start=0, appearance=True):
    """Fits whose every value names its row: row i has warp i, coef (i, -i), offset 100 + i."""
    row = torch.arange(start, start + n, dtype=torch.float64)
    warps = row[:, None, None] * torch.ones(n, 4, 2, dtype=torch.float64)
    if not appearance:
        return PairFit(warps)
    return PairFit(warps, row[:, None] * torch.tensor([1.0, -1.0], dtype=torch.float64),
                   100.0 + row)


def _assert_same(fit, expected):
    for name in FIELDS:
        got, want = getattr(fit, name), getattr(expected, name)
        if want is None:
            assert got is None, name
        else:
            torch.testing.assert_close(got, want, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("appearance", [True, False])
@pytest.mark.parametrize("sizes", [[5], [3, 4], [2, 1, 3], [1, 1, 1, 1]])
def test_concat_joins_every_chunk_in_order(sizes, appearance):
    starts = np.cumsum([0, *sizes[:-1]])
    chunks = [_fit(n, int(s), appearance) for n, s in zip(sizes, starts)]
    _assert_same(PairFit.concat(chunks), _fit(sum(sizes), 0, appearance))


@pytest.mark.parametrize("appearance", [True, False])
@pytest.mark.parametrize("rows", [slice(1, 4), [4, 0, 2],
                                  [True, False, True, False, True, True]],
                         ids=["slice", "index", "mask"])
def test_indexing_takes_the_same_rows_of_every_field(rows, appearance):
    whole = _fit(6, 0, appearance)
    picked = torch.arange(6)[torch.as_tensor(rows) if isinstance(rows, list) else rows]
    index = torch.as_tensor(rows) if isinstance(rows, list) else rows
    expected = PairFit(*(None if getattr(whole, name) is None
                         else getattr(whole, name)[picked] for name in FIELDS))
    _assert_same(whole[index], expected)


@pytest.mark.parametrize("appearance", ["intensity", "none"])
def test_an_assignment_aligned_in_chunks_keeps_the_fit_of_every_row(appearance):
    # 4-row chunks against 3 centroids: the fits of the 12 rows come in three chunks and
    # must be those of one 12-row chunk, row by row (float64 fits: the same to 1e-15)
    X = torch.as_tensor(load_digits().data[:12])
    centers = X[[0, 5, 9]]

    def state(batch_size):
        est = SpatialTransformerKMeans(3, n_steps=2, n_landmarks=4, batch_size=batch_size,
                                       appearance=appearance, warp_dtype="float64",
                                       device="cpu")
        return est._make_geometry(64).assign(X, centers).state

    chunked, whole = state(4), state(64)
    assert chunked.warps.shape[0] == 12
    assert (chunked.coef is None) == (appearance == "none")
    for name in FIELDS:
        if getattr(whole, name) is not None:
            torch.testing.assert_close(getattr(chunked, name), getattr(whole, name),
                                       rtol=1e-9, atol=1e-12, msg=name)
