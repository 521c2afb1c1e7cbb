"""Every row kernel of skxclust.nn.sparse gives on a CSR matrix what it gives on the same
matrix dense: rows in any order, empty rows, an empty last column, a last empty group;
values of both signs, of one sign, none stored, or no implicit zero at all."""

import warnings

import pytest
import torch
from conftest import to_csr

from skxclust.nn import sparse

GEN = torch.Generator().manual_seed(5)


def _matrix(kind: str) -> torch.Tensor:
    """9 x 6, float64. "mixed": about half zeros, row 3 and the last column empty, values of
    both signs; "positive" and "negative": its absolute value and the opposite of that;
    "zero": nothing stored; "full": no zero at all, every value positive."""
    X = torch.rand(9, 6, generator=GEN, dtype=torch.float64) + 0.5
    if kind == "full":
        return X
    X = X * (torch.rand(9, 6, generator=GEN) < 0.5) - 0.25 * X * (X > 1.2)
    X[3] = 0.0
    X[:, -1] = 0.0
    return {"mixed": X, "positive": X.abs(), "negative": -X.abs(), "zero": 0.0 * X}[kind]


INDEX = torch.tensor([7, 3, 0, 7, 8, 1])  # out of order, repeated, with the empty row 3
GROUPS = torch.tensor([0, 2, 1, 0, 2, 1, 0, 2, 1])  # group 3 of 4 is empty
WEIGHT = torch.linspace(0.5, 2.5, 9, dtype=torch.float64)

KERNELS = {
    "row_norms": sparse.row_norms,
    "value_extremes": lambda X: torch.stack(sparse.value_extremes(X)),
    "column_variance": sparse.column_variance,
    "column_sums": sparse.column_sums,
    "group_sums": lambda X: sparse.group_sums(X, GROUPS, WEIGHT, 4),
    "select_rows": lambda X: sparse.to_dense(sparse.select_rows(X, INDEX)),
    "take_rows": lambda X: sparse.take_rows(X, INDEX),
    "row_block": lambda X: sparse.to_dense(sparse.row_block(X, 2, 6)),
}


@pytest.mark.parametrize("kind", ["mixed", "positive", "negative", "zero", "full"])
@pytest.mark.parametrize("name", list(KERNELS))
def test_csr_kernel_equals_the_dense_kernel(name, kind):
    X = _matrix(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        got = KERNELS[name](to_csr(X))
    expected = KERNELS[name](X)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_dense_kernels_follow_their_definitions():
    X = _matrix("mixed")
    torch.testing.assert_close(sparse.column_variance(X), X.var(dim=0, unbiased=False))
    low, high = sparse.value_extremes(X)
    assert (float(low), float(high)) == (float(X.min()), float(X.max()))
    members = torch.nn.functional.one_hot(GROUPS, 4).to(X.dtype).T * WEIGHT
    torch.testing.assert_close(sparse.group_sums(X, GROUPS, WEIGHT, 4), members @ X)
    torch.testing.assert_close(sparse.column_sums(X, 2), X.sum(dim=0))


@pytest.mark.parametrize("block_rows", [None, 7])
@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_column_sums_of_float32_rows_are_float64_sums(layout, block_rows):
    rows = torch.rand(500, 4, generator=GEN) * 3.0 + 0.1  # float32 sums would round
    data = rows if layout == "dense" else to_csr(rows)
    sums = sparse.column_sums(data, block_rows)
    assert sums.dtype == torch.float64
    torch.testing.assert_close(sums, rows.double().sum(dim=0), rtol=1e-14, atol=0)
