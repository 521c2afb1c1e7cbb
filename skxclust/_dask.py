"""dask arrays: row-blockwise inference, and ``fit`` as blockwise Lloyd passes.

dask is optional: this module never imports it at import time, and :func:`is_dask_array`
recognises a dask array without importing dask (where ``dask.array`` was never imported,
no object can be one).

Inference (:func:`blockwise`) maps the NumPy method over the row blocks of X (columns
rechunked to one block), so results are dask arrays computed block by block on whatever
scheduler is active. ``fit`` on a dask array runs blockwise Lloyd passes
(:mod:`skxclust._dask_fit`); ``partial_fit`` takes one step per row block
(:func:`dask_row_blocks`).
"""

from __future__ import annotations

import functools
import inspect
import sys

import numpy as np
from sklearn.utils.validation import _check_feature_names, _check_n_features, check_is_fitted

__all__ = ["blockwise", "check_dask_array", "dask_row_blocks", "is_dask_array"]


def is_dask_array(X) -> bool:
    """True when X is a ``dask.array.Array`` (never imports dask)."""
    da = sys.modules.get("dask.array")
    return da is not None and isinstance(X, da.Array)


# -- input ---------------------------------------------------------------------------------
def _float_dtype(X) -> np.dtype:
    if X.dtype.kind not in "biuf":
        raise ValueError(f"dask array X must hold real numbers, got dtype {X.dtype}.")
    return X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)


def check_dask_array(estimator, X, reset: bool):
    """Shape, dtype and feature checks of a dask X; known row chunks, one column chunk."""
    if X.ndim != 2:
        raise ValueError(f"Expected a 2D dask array, got ndim={X.ndim} (shape {X.shape}).")
    dtype = _float_dtype(X)
    if any(np.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    if X.shape[0] < 1:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}).")
    _check_n_features(estimator, X, reset=reset)
    _check_feature_names(estimator, X, reset=reset)
    return X.rechunk({1: -1}), dtype


def row_array(values, X, name: str):
    """A per-row argument as a dask array (n, 1) with the row chunks of X."""
    import dask.array as da

    if is_dask_array(values):
        values = values.reshape(-1) if values.ndim == 2 and values.shape[1] == 1 else values
        if values.ndim != 1 or values.shape[0] != X.shape[0]:
            raise ValueError(f"{name} must have shape ({X.shape[0]},), got {values.shape}.")
        return values.rechunk((X.chunks[0],))[:, None]
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.shape[0] != X.shape[0]:
        raise ValueError(f"{name} must have shape ({X.shape[0]},), got {arr.shape}.")
    return da.from_array(arr, chunks=(X.chunks[0],))[:, None]


# -- inference -----------------------------------------------------------------------------
def _apply_block(x, *rows, estimator, name, kwargs, row_names, mode, width, out_dtype):
    """The NumPy method ``name`` of ``estimator`` on one row block."""
    call = dict(kwargs)
    call.update({k: r[:, 0] for k, r in zip(row_names, rows)})
    method = getattr(type(estimator), name)
    method = getattr(method, "__wrapped__", method)  # the NumPy method under blockwise
    if mode == "sum":
        weight = call.get("sample_weight")
        if x.shape[0] == 0 or (weight is not None and not np.any(weight)):
            return np.zeros((1, 1))
        return np.array([[method(estimator, x, **call)]])
    if x.shape[0] == 0:
        return np.empty((0,) if width is None else (0, width), dtype=out_dtype)
    return method(estimator, x, **call)


def _map_rows(estimator, name, X, mode, arguments, row_names):
    """``estimator.name(X, **arguments)`` as a dask array (a float for mode "sum")."""
    import dask.array as da

    check_is_fitted(estimator)
    X, dtype = check_dask_array(estimator, X, reset=False)
    rows, names = [], []
    for key in row_names:
        value = arguments.get(key)
        if value is not None and (np.ndim(value) > 0 or is_dask_array(value)):
            rows.append(row_array(arguments.pop(key), X, key))
            names.append(key)
    # mypy resolves type(x).__new__ of an untyped x to type.__new__ (a checker limitation)
    snapshot = type(estimator).__new__(type(estimator))  # type: ignore[call-overload]
    snapshot.__dict__.update(estimator.__dict__)  # a later refit does not change the graph
    width = {"labels": None, "clusters": estimator.n_clusters, "features": X.shape[1],
             "sum": 1}[mode]
    out_dtype = np.dtype(np.int64 if mode == "labels" else
                         np.float64 if mode == "sum" else dtype)
    func = functools.partial(_apply_block, estimator=snapshot, name=name, kwargs=arguments,
                             row_names=names, mode=mode, width=width, out_dtype=out_dtype)
    if mode == "labels":
        return da.map_blocks(func, X, *rows, drop_axis=1, chunks=(X.chunks[0],),
                             dtype=out_dtype, meta=np.empty((0,), out_dtype))
    chunks = ((1,) * X.numblocks[0], (1,)) if mode == "sum" else (X.chunks[0], (width,))
    out = da.map_blocks(func, X, *rows, chunks=chunks, dtype=out_dtype,
                        meta=np.empty((0, 0), out_dtype))
    return float(out.sum().compute()) if mode == "sum" else out


def blockwise(mode: str, row_args: tuple[str, ...] = (), in_memory_only: tuple[str, ...] = ()):
    """Decorator: a method taking X runs block by block when X is a dask array.

    Parameters
    ----------
    mode : {"labels", "clusters", "features", "sum"}
        Output per row: a label, ``n_clusters`` values, ``n_features_in_`` values; "sum"
        adds the block results into one float (``score``).
    row_args : tuple of str
        Arguments that may hold one value per row (``target``, ``sample_weight``); arrays
        passed there are split with the row blocks of X.
    in_memory_only : tuple of str
        Arguments that must keep their default (None) for a dask X: a ValueError names
        them otherwise (e.g. ``top_k``, whose output is not one row of ``mode`` per row).

    Returns
    -------
    callable
        The decorated method; NumPy input goes straight to the method.
    """

    def decorate(method):
        signature = inspect.signature(method)

        @functools.wraps(method)
        def wrapper(self, X, *args, **kwargs):
            if not is_dask_array(X):
                return method(self, X, *args, **kwargs)
            bound = signature.bind(self, X, *args, **kwargs)
            arguments = {k: v for k, v in bound.arguments.items() if k not in ("self", "X")}
            for name in in_memory_only:
                if arguments.get(name) is not None:
                    raise ValueError(
                        f"{name}={arguments[name]!r} is not supported for a dask array X; "
                        f"call {method.__name__} on computed blocks instead."
                    )
            return _map_rows(self, method.__name__, X, mode, arguments, row_args)

        return wrapper

    return decorate


def dask_row_blocks(X, sample_weight=None):
    """Yield ``(rows, weights)`` of every non-empty row block of a dask X in turn, each
    computed when it is reached (``weights`` None without ``sample_weight``)."""
    weights = None if sample_weight is None else row_array(sample_weight, X, "sample_weight")
    for i in range(X.numblocks[0]):
        block = X.blocks[i].compute()
        if block.shape[0]:
            yield block, None if weights is None else weights.blocks[i].compute()[:, 0]
