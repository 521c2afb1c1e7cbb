r"""Row-block kernels for dense and sparse (CSR) data matrices.

Pure torch; no scikit-learn import. Every function takes a data matrix ``X`` of shape
``(N, D)`` that is either a dense tensor or a ``torch.sparse_csr`` tensor, so that the
k-means code runs unchanged on both; a sparse matrix is never densified as a whole (at
most a block of rows at a time). Torch's CSR kernels run on the CPU and on CUDA.

With a sparse ``X``, the nearest-centroid scores ``||mu||^2 - 2 X mu^T`` are one
sparse-dense product (:func:`torch.addmm` takes a CSR first operand), the squared row
norms a segment sum over the stored values, and the per-cluster sums of the members a
sparse-sparse product of a one-hot ``(groups, N)`` matrix with ``X``: memory and time
scale with the number of stored values, not with ``N * D``.
"""

from __future__ import annotations

import torch

__all__ = [
    "is_sparse",
    "row_block",
    "select_rows",
    "take_rows",
    "to_dense",
    "row_norms",
    "group_sums",
    "value_extremes",
    "column_variance",
    "column_sums",
]


def is_sparse(X: torch.Tensor) -> bool:
    """True when ``X`` is a CSR tensor (the only sparse layout used here)."""
    return X.layout == torch.sparse_csr


def _csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, shape) -> torch.Tensor:
    return torch.sparse_csr_tensor(crow, col, values, size=tuple(shape), check_invariants=False)


def row_block(X: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """Rows ``start:stop`` of ``X``: a view for a dense ``X``, a CSR tensor (sharing the
    column indices and values of ``X``) for a sparse one.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.sparse import row_block
    >>> X = torch.tensor([[0.0, 1.0], [2.0, 0.0], [0.0, 0.0]]).to_sparse_csr()
    >>> row_block(X, 1, 3).to_dense().tolist()
    [[2.0, 0.0], [0.0, 0.0]]
    """
    if not is_sparse(X):
        return X[start:stop]
    crow = X.crow_indices()
    first, last = int(crow[start]), int(crow[stop])
    return _csr(crow[start:stop + 1] - first, X.col_indices()[first:last],
                X.values()[first:last], (stop - start, X.shape[1]))


def to_dense(X: torch.Tensor) -> torch.Tensor:
    """``X`` as a dense tensor (use on blocks of rows only)."""
    return X.to_dense() if is_sparse(X) else X


def _gathered(X: torch.Tensor, index: torch.Tensor):
    """For the rows ``index`` of a CSR ``X``: their lengths and the positions of their
    stored values in ``X.values()``, row after row."""
    crow = X.crow_indices().to(torch.long)
    starts = crow[index]
    lengths = crow[index + 1] - starts
    total = int(lengths.sum())
    rows = torch.repeat_interleave(torch.arange(index.numel(), device=X.device), lengths,
                                   output_size=total)
    offsets = torch.cumsum(lengths, 0) - lengths  # start of every row in the output
    positions = starts[rows] + torch.arange(total, device=X.device) - offsets[rows]
    return lengths, rows, positions


def select_rows(X: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The rows ``index`` of ``X`` in the layout of ``X`` (CSR stays CSR)."""
    if not is_sparse(X):
        return X[index]
    index = index.to(X.device).reshape(-1)
    lengths, _, positions = _gathered(X, index)
    crow = torch.zeros(index.numel() + 1, dtype=torch.long, device=X.device)
    crow[1:] = torch.cumsum(lengths, 0)
    index_dtype = X.crow_indices().dtype
    return _csr(crow.to(index_dtype), X.col_indices()[positions], X.values()[positions],
                (index.numel(), X.shape[1]))


def take_rows(X: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The rows ``index`` of ``X`` as a dense tensor of shape ``(len(index), D)`` (for a
    few rows: seeds, relocated samples)."""
    if not is_sparse(X):
        return X[index]
    index = index.to(X.device).reshape(-1)
    _, rows, positions = _gathered(X, index)
    out = X.values().new_zeros(index.numel(), X.shape[1])
    out[rows, X.col_indices()[positions].to(torch.long)] = X.values()[positions]
    return out


def row_norms(X: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean norm of every row, shape (N,), without an (N, D) temporary."""
    if not is_sparse(X):
        return torch.einsum("nd,nd->n", X, X)
    values = X.values()
    return torch.segment_reduce(values * values, "sum",
                                offsets=X.crow_indices().to(torch.long))


def group_sums(X: torch.Tensor, groups: torch.Tensor, weight: torch.Tensor,
               n_groups: int) -> torch.Tensor:
    """``sums[g] = sum_{i: groups_i = g} weight_i X_i``, shape (n_groups, D), dense.

    For a sparse ``X``: one sparse-sparse product of the weighted one-hot matrix
    ``(n_groups, N)`` with ``X`` (cost proportional to the stored values of X).

    Parameters
    ----------
    X : Tensor of shape (N, D), dense or CSR
    groups : LongTensor of shape (N,)
        Group of every row, in ``[0, n_groups)``.
    weight : Tensor of shape (N,)
    n_groups : int
    """
    if not is_sparse(X):
        return X.new_zeros(n_groups, X.shape[1]).index_add_(0, groups, X * weight[:, None])
    order = torch.argsort(groups, stable=True)
    counts = torch.bincount(groups, minlength=n_groups)
    crow = torch.zeros(n_groups + 1, dtype=torch.long, device=X.device)
    crow[1:] = torch.cumsum(counts, 0)
    index_dtype = X.crow_indices().dtype
    onehot = _csr(crow.to(index_dtype), order.to(index_dtype),
                  weight[order].to(X.dtype), (n_groups, X.shape[0]))
    return (onehot @ X).to_dense()


def value_extremes(X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Smallest and largest entry of ``X`` (for a sparse ``X``, the implicit zeros count
    when a row is not full)."""
    if not is_sparse(X):
        return torch.aminmax(X)
    values = X.values()
    if values.numel() == 0:
        zero = values.new_zeros(())
        return zero, zero
    low, high = torch.aminmax(values)
    if values.numel() < X.shape[0] * X.shape[1]:  # some entries are implicit zeros
        low, high = low.clamp_max(0.0), high.clamp_min(0.0)
    return low, high


def column_variance(X: torch.Tensor) -> torch.Tensor:
    """Variance of every column over the rows (biased), shape (D,): float64 for a sparse
    X, the dtype of X for a dense one."""
    if not is_sparse(X):
        return X.var(dim=0, unbiased=False)
    n = X.shape[0]
    values = X.values().to(torch.float64)
    col = X.col_indices().to(torch.long)
    mean = torch.zeros(X.shape[1], dtype=torch.float64, device=values.device)
    mean.index_add_(0, col, values).div_(n)
    # sum over stored values of (v - mean)^2, plus the implicit zeros' mean^2 each
    stored = torch.bincount(col, minlength=X.shape[1]).to(torch.float64)
    m2 = torch.zeros_like(mean).index_add_(0, col, (values - mean[col]) ** 2)
    return (m2 + (n - stored) * mean * mean) / n


def column_sums(X: torch.Tensor, block_rows: int | None = None) -> torch.Tensor:
    """Sum of every column over the rows, shape (D,), in float64.

    A dense ``X`` is summed ``block_rows`` rows at a time (None: at once), each block cast
    to float64 on its own (``sum(dtype=float64)`` copies its input whole); a sparse ``X``
    over its stored values (never densified)."""
    if is_sparse(X):
        sums = torch.zeros(X.shape[1], dtype=torch.float64, device=X.device)
        return sums.index_add_(0, X.col_indices().to(torch.long), X.values().to(torch.float64))
    step = X.shape[0] if block_rows is None else max(1, block_rows)
    sums = X[:step].sum(dim=0, dtype=torch.float64)
    for start in range(step, X.shape[0], step):
        sums += X[start:start + step].sum(dim=0, dtype=torch.float64)
    return sums
