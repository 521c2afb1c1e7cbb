"""Device, dtype and input-validation helpers shared by every estimator.

Everything that turns user input (numpy arrays, lists, DataFrames, parameter values)
into validated torch tensors lives here, so that the estimators stay thin and every
refusal uses the same wording.
"""

from __future__ import annotations

import inspect
import math
import numbers
import os
import sys
import warnings
from types import FrameType
from typing import cast

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils import assert_all_finite, check_random_state

from ._array_api import host_values, to_torch
from .nn.rules import check_epsilon, resolve_rule
from .nn.sparse import is_sparse, value_extremes

__all__ = [
    "check_beta",
    "check_explainable_n_clusters",
    "check_init_array",
    "check_lrp_options",
    "check_magnitude",
    "check_n_samples",
    "check_reference",
    "check_sample_weight",
    "check_target",
    "check_top_k",
    "finite_extremes",
    "fitted_tensor",
    "host_tensor",
    "make_generators",
    "refuse_sparse",
    "resolve_device",
    "to_tensor",
    "warn_user",
]


_QUIET_PREFIXES = tuple(
    os.path.dirname(cast(str, module.__file__)) + os.sep  # both are packages on disk
    for module in (sys.modules[__name__.rpartition(".")[0]], sys.modules["sklearn"])
)


def warn_user(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the caller's code: the first frame outside
    skxclust and scikit-learn, however deep in a fit the warning arises (in-memory,
    dask or streaming)."""
    # currentframe() is None only on Pythons without stack frames (not CPython)
    frame, level = cast(FrameType, inspect.currentframe()).f_back, 2
    while frame is not None and frame.f_code.co_filename.startswith(_QUIET_PREFIXES):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def check_n_samples(n_samples: int, n_clusters: int, context: str = "") -> None:
    """Raise the ValueError scikit-learn's ``KMeans`` raises when there are fewer samples
    than clusters (``context`` is appended to the message, e.g. which call seeds)."""
    if n_samples < n_clusters:
        raise ValueError(
            f"n_samples={n_samples} should be >= n_clusters={n_clusters}{context}."
        )


def resolve_device(device: str | torch.device, like=None) -> torch.device:
    """Turn the ``device`` parameter into a :class:`torch.device`.

    Parameters
    ----------
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device
        ``"auto"`` picks CUDA when it is available, else the CPU.
    like : object, default=None
        The validated input: when it is a torch tensor (array API dispatch), ``"auto"``
        is its device.

    Returns
    -------
    torch.device

    Raises
    ------
    ValueError
        If the string is not a device name, or CUDA is asked for but unavailable.
    """
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        if device == "auto":
            if isinstance(like, torch.Tensor):
                return like.device
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError) as exc:
            raise ValueError(
                f"device={device!r} is not a valid device; use 'auto', 'cpu', "
                "'cuda' or 'cuda:N'."
            ) from exc
    else:
        raise TypeError(
            f"device must be a string or torch.device, got {type(device).__name__} "
            f"({device!r})."
        )
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(
            f"device={str(device)!r} is not supported; use 'auto', 'cpu' or 'cuda'."
        )
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={str(device)!r} was requested but CUDA is not available "
                "on this machine; use device='auto' or 'cpu'."
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device={str(device)!r} does not exist: only "
                f"{torch.cuda.device_count()} CUDA device(s) are visible."
            )
    return dev


def host_tensor(arr, dtype=None) -> torch.Tensor:
    """``torch.from_numpy`` of ``arr`` (cast to ``dtype``), copying it first only when
    torch cannot share it: read-only (e.g. memory-mapped), not C-contiguous, misaligned
    or not in native byte order. So no "array is not writable" warning, and no copy of an
    array torch can share. Never write into the result: it may be the caller's memory."""
    arr = np.asarray(arr, dtype=dtype)
    flags = arr.flags
    shareable = (flags.c_contiguous and flags.writeable and flags.aligned
                 and arr.dtype.isnative)
    if not shareable:
        arr = np.array(arr, copy=True, order="C", dtype=arr.dtype.newbyteorder("="))
    return torch.from_numpy(arr)


def fitted_tensor(value, device: torch.device, dtype: torch.dtype | None = None, *,
                  copy: bool = False) -> torch.Tensor:
    """A fitted array (numpy, or of the fit's array-API namespace) as a tensor on
    ``device``; ``copy``: never sharing the attribute's memory."""
    tensor = host_tensor(value) if isinstance(value, np.ndarray) else to_torch(value)
    tensor = tensor.to(device, dtype)
    return tensor.clone() if copy else tensor


def _sparse_to_tensor(X, device: torch.device) -> torch.Tensor:
    """A scipy CSR matrix as a torch CSR tensor sharing its index and value arrays."""
    if not X.has_canonical_format:  # duplicates summed, column indices sorted (a copy)
        X = X.copy()
        X.sum_duplicates()
    index_dtype = np.result_type(X.indptr.dtype, X.indices.dtype)
    crow, col = host_tensor(X.indptr, index_dtype), host_tensor(X.indices, index_dtype)
    with warnings.catch_warnings():  # torch's one-time "CSR support is in beta" notice
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support")
        tensor = torch.sparse_csr_tensor(crow, col, host_tensor(X.data), size=X.shape,
                                         check_invariants=False)
    return tensor.to(device)


def to_tensor(X, device: torch.device) -> torch.Tensor:
    """A validated float array as a contiguous tensor on ``device``, without a needless copy.

    A writeable, C-contiguous, aligned, native-byte-order array is shared with the tensor
    (``torch.from_numpy``: no copy on the CPU, one transfer to a GPU); anything else
    (read-only or memory-mapped arrays, views with strides) is copied first. The returned
    tensor may therefore share the caller's memory: callers must never write into it.
    A scipy sparse CSR matrix becomes a ``torch.sparse_csr`` tensor sharing its index and
    value arrays the same way (never densified).

    Parameters
    ----------
    X : ndarray or scipy CSR matrix of shape (n_samples, n_features)
        Float array, as returned by ``validate_data``.
    device : torch.device

    Returns
    -------
    Tensor of shape (n_samples, n_features)
    """
    if sp.issparse(X):
        return _sparse_to_tensor(X.tocsr(), device)
    if isinstance(X, torch.Tensor):  # validated under array API dispatch
        return X.to(device).contiguous()
    return host_tensor(X).to(device)


def refuse_sparse(X, estimator_name: str, reason: str) -> None:
    """Raise a TypeError naming the estimator and ``reason`` when X is a sparse matrix."""
    if sp.issparse(X):
        raise TypeError(
            f"{estimator_name} does not accept sparse input ({reason}); got a "
            f"{type(X).__name__}. Densify it with X.toarray()."
        )


def make_generators(random_state, n: int) -> list[torch.Generator]:
    """Derive ``n`` independent CPU :class:`torch.Generator` from ``random_state``.

    A local generator is used so that the global torch seed is never touched.
    CPU generators are used on every device: random numbers are drawn on the CPU and
    moved, which keeps results identical between CPU and CUDA runs.
    """
    rng = check_random_state(random_state)
    seeds = rng.randint(np.iinfo(np.int32).max, size=n)
    gens = []
    for seed in seeds:
        g = torch.Generator(device="cpu")
        g.manual_seed(int(seed))
        gens.append(g)
    return gens


def check_sample_weight(sample_weight, n_samples: int, dtype) -> np.ndarray:
    """Validate ``sample_weight``: 1-D, length ``n_samples``, finite, >= 0, not all 0.

    The weights must also sum to within ``[sqrt(finfo.tiny), sqrt(finfo.max)]`` of
    ``dtype`` (about [1.5e-154, 1.3e154] in float64, [1.1e-19, 1.8e19] in float32), so
    that weighted sums of squared distances and products of cluster weights neither
    overflow nor underflow; k-means labels and centroids do not change when all weights
    are multiplied by a constant.
    """
    if sample_weight is None:
        return np.ones(n_samples, dtype=dtype)
    sw = np.asarray(host_values(sample_weight))
    if sw.dtype.kind not in "biuf":
        raise ValueError(
            f"sample_weight must be numeric, got an array of dtype {sw.dtype}."
        )
    if sw.ndim == 0:
        sw = np.full(n_samples, sw, dtype=np.result_type(sw, np.float64))
    if sw.ndim != 1 or sw.shape[0] != n_samples:
        raise ValueError(
            f"sample_weight.shape == {sw.shape}, expected ({n_samples},)."
        )
    if not np.all(np.isfinite(sw)):
        raise ValueError("sample_weight contains NaN or infinity.")
    if np.any(sw < 0):
        raise ValueError("sample_weight must be non-negative; got negative values.")
    if not np.any(sw > 0):
        raise ValueError("sample_weight must not be all zero.")
    with np.errstate(over="ignore"):
        total = float(np.sum(sw, dtype=np.float64))
    finfo = np.finfo(dtype)
    low, high = float(np.sqrt(finfo.tiny)), float(np.sqrt(finfo.max))
    if not low <= total <= high:
        raise ValueError(
            f"sample_weight sums to {total:.3g}, outside what {np.dtype(dtype)} "
            f"arithmetic can take ([{low:.3g}, {high:.3g}]); multiply all weights by "
            "a constant (labels and centroids do not change)."
        )
    return sw.astype(dtype)


def check_target(target, n_samples: int, n_clusters: int,
                 default: np.ndarray | None) -> np.ndarray:
    """Resolve the ``target`` argument of ``explain`` to one cluster index per row.

    Parameters
    ----------
    target : None, int or array-like of shape (n_samples,)
        None means the assigned cluster (``default``).
    n_samples, n_clusters : int
    default : ndarray of shape (n_samples,) or None
        The assigned labels, used when ``target`` is None.
    """
    if target is None:
        return np.asarray(default, dtype=np.int64)
    if isinstance(target, (numbers.Integral, np.integer)) and not isinstance(target, bool):
        t = np.full(n_samples, int(target), dtype=np.int64)
    else:
        arr = np.asarray(host_values(target))
        if arr.ndim != 1 or arr.shape[0] != n_samples:
            raise ValueError(
                f"target must be None, an int or one int per row; got shape "
                f"{arr.shape} for {n_samples} rows."
            )
        if arr.dtype.kind not in "iu":
            if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
                arr = arr.astype(np.int64)
            else:
                raise TypeError(f"target must contain integers, got dtype {arr.dtype}.")
        t = arr.astype(np.int64)
    bad = (t < 0) | (t >= n_clusters)
    if np.any(bad):
        raise ValueError(
            f"target={t[bad][0]} is out of range: it must be in [0, {n_clusters - 1}] "
            f"(n_clusters={n_clusters})."
        )
    return t


def check_beta(beta, name: str = "beta") -> float:
    """Validate a soft-min stiffness: a real number in ``[0, inf]``."""
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
        raise TypeError(f"{name} must be a non-negative number, got {beta!r}.")
    beta = float(beta)
    if np.isnan(beta) or beta < 0:
        raise ValueError(f"{name} must be >= 0 (0 spreads evenly, inf = hard min); got {beta!r}.")
    return beta


def check_reference(reference, n_features: int) -> np.ndarray | None:
    """Validate the ``reference`` of ``explain``: None or ``n_features`` finite numbers."""
    if reference is None:
        return None
    arr = np.asarray(host_values(reference))
    problem = None
    if arr.shape != (n_features,):
        problem = f"an array of shape {arr.shape}"
    elif arr.dtype.kind not in "biuf":
        problem = f"an array of dtype {arr.dtype}"
    elif not np.isfinite(arr).all():
        problem = "NaN or infinity"
    if problem is not None:
        raise ValueError(f"reference must be None or {n_features} finite values (one per "
                         f"feature), got {problem}.")
    return arr.astype(np.float64)


def finite_extremes(X: torch.Tensor, estimator_name: str,
                    input_name: str = "X") -> tuple[torch.Tensor, torch.Tensor]:
    """Smallest and largest value of X in one pass, refusing NaN and infinity.

    Stands in for the finiteness check of ``validate_data`` (called with
    ``ensure_all_finite=False``) at the cost of one ``aminmax`` pass that
    :func:`check_magnitude` reuses, instead of two passes over the input. NaN propagates
    through ``aminmax``, so non-finite extremes are the only case to look into; then
    scikit-learn's own check raises its usual message.
    """
    low, high = value_extremes(X)
    if not (math.isfinite(float(low)) and math.isfinite(float(high))):
        values = X.values() if is_sparse(X) else X
        assert_all_finite(values.cpu().numpy(), estimator_name=estimator_name,
                          input_name=input_name)
    return low, high


def check_magnitude(X: torch.Tensor, name: str = "X", shift: torch.Tensor | None = None,
                    extremes: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
    """Refuse data whose squared distances would overflow the float type.

    Called on data already centred (or otherwise framed) for the computation, or on
    uncentred data with the ``shift`` of shape (n_features,) that centres them (then the
    check bounds ``|X - shift|`` by the extremes of X and of the shift: one pass over X,
    no copy of it). ``extremes``: ``(min, max)`` of X when already known (e.g. from
    :func:`finite_extremes`), which saves the pass.
    """
    if X.shape[0] * X.shape[1] == 0:
        return
    finfo = torch.finfo(X.dtype)
    low, high = value_extremes(X) if extremes is None else extremes  # one pass
    bound = "="
    if shift is not None:  # |x_ij - s_j| <= max(high - min s, max s - low): an upper bound
        s_low, s_high = torch.aminmax(shift)
        low, high, bound = low - s_high, high - s_low, "<="
    peak = float(torch.maximum(high.abs(), low.abs()))
    if not math.isfinite(peak):  # e.g. a centring shift that overflowed
        raise ValueError(
            f"{name} overflowed to {peak} in {X.dtype} while being centred; rescale it, "
            "e.g. with StandardScaler."
        )
    if 4.0 * X.shape[1] * peak * peak > finfo.max / 16:
        raise ValueError(
            f"{name} has values too large for squared distances in {X.dtype} (max |value| "
            f"after centring {bound} {peak:.3g}); rescale it, e.g. with StandardScaler."
        )


def check_explainable_n_clusters(n_clusters: int) -> None:
    """Explanations compare a cluster with its competitors: refuse ``n_clusters < 2``."""
    if n_clusters < 2:
        raise ValueError(f"explain needs n_clusters >= 2 (there is no competitor to explain "
                         f"against); got n_clusters={n_clusters}.")


def check_init_array(init, n_clusters: int, n_features: int, dtype) -> np.ndarray:
    """Validate explicit initial centroids: real numbers, shape (n_clusters, n_features),
    finite; returned as a new array of ``dtype`` (the caller's array is never kept)."""
    try:
        arr = np.asarray(host_values(init))
    except (TypeError, ValueError) as exc:  # ragged nested lists
        raise ValueError(f"init array could not be read as an array: {exc}") from exc
    if arr.dtype.kind not in "biuf":
        raise ValueError(
            f"init array must contain real numbers, got an array of dtype {arr.dtype}."
        )
    if arr.shape != (n_clusters, n_features):
        message = (f"init array must have shape (n_clusters, n_features) = "
                   f"({n_clusters}, {n_features}), got {arr.shape}.")
        if arr.ndim == 2:  # scikit-learn's wording too
            what = (f"number of clusters {n_clusters}" if arr.shape[0] != n_clusters
                    else f"number of features of the data {n_features}")
            message += f" The shape of the initial centers {arr.shape} does not match the {what}."
        raise ValueError(message)
    if not np.all(np.isfinite(arr)):
        raise ValueError("init array contains NaN or infinity.")
    return np.array(arr, dtype=dtype, copy=True)


def check_lrp_options(rule, epsilon) -> None:
    """Validate ``rule`` and ``epsilon`` of an LRP pass by the rules' own checks
    (:func:`skxclust.nn.rules.resolve_rule`, :func:`skxclust.nn.rules.check_epsilon`)."""
    resolve_rule(rule)
    check_epsilon(epsilon)


def check_top_k(top_k, n_features: int) -> int | None:
    """Validate the ``top_k`` argument of ``explain``: None or an int in [1, n_features]."""
    if top_k is None:
        return None
    if isinstance(top_k, bool) or not isinstance(top_k, (numbers.Integral, np.integer)):
        raise TypeError(f"top_k must be None or an int, got {top_k!r}.")
    if not 1 <= int(top_k) <= n_features:
        raise ValueError(
            f"top_k={top_k} is out of range: it must be in [1, n_features={n_features}]."
        )
    return int(top_k)
