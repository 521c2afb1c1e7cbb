"""scikit-learn's array API dispatch: where an input lives, and results back there.

With ``sklearn.set_config(array_api_dispatch=True)`` (and ``SCIPY_ARRAY_API=1``), an input
that is not a numpy array is an array of some namespace on some device: a torch tensor
(CPU or CUDA), a CuPy array, an ``array-api-strict`` array. :func:`array_space` says which
(an :class:`ArraySpace`); the estimators validate the input in its namespace, compute on
torch tensors (a torch input as it is, on its device; any other namespace through DLPack,
without a copy where the library allows it) and return their results, and store their
fitted arrays, in that namespace on that device (scikit-learn's convention for array-API
estimators, e.g. ``PCA.components_``). Everything else -- dispatch off, numpy arrays,
lists, DataFrames, scipy sparse matrices, dask arrays -- is :data:`HOST`: numpy, as
without dispatch, bit for bit.
"""

from __future__ import annotations

import copy
import sys
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
import torch
from sklearn import get_config
from sklearn.utils._array_api import get_namespace_and_device
from sklearn.utils.validation import validate_data

__all__ = ["HOST", "ArraySpace", "array_space", "check_fitted_space", "dispatching",
           "float_dtype", "host_values", "numpy_dtype", "on_cpu", "to_torch"]

_DLPACK_CUDA = 2  # DLPack's kDLCUDA device type


def dispatching() -> bool:
    """True under scikit-learn's ``array_api_dispatch`` configuration."""
    return bool(get_config().get("array_api_dispatch", False))


def numpy_dtype(dtype) -> np.dtype:
    """The numpy dtype of a numpy, torch or array-API float dtype (float32 or float64)."""
    if isinstance(dtype, np.dtype):
        return dtype
    if isinstance(dtype, torch.dtype):
        return torch.empty(0, dtype=dtype).numpy().dtype
    return np.dtype(str(dtype).rsplit(".", 1)[-1])  # e.g. array_api_strict.float32


def float_dtype(value) -> np.dtype:
    """The numpy dtype of an array of any namespace (e.g. a fitted attribute)."""
    return numpy_dtype(value.dtype)


def _namespace_name(xp) -> str:
    return xp.__name__.rpartition("array_api_compat.")[2]


def to_torch(X) -> torch.Tensor:
    """An array of any namespace as a torch tensor on the device it lives on.

    A tensor is returned as it is (detached); any other array through DLPack (no copy
    where the library allows it), else through numpy. Never write into the result: it
    may share the caller's memory.
    """
    if isinstance(X, torch.Tensor):
        return X.detach()
    if isinstance(X, np.ndarray):
        return torch.from_numpy(X)
    try:
        return torch.from_dlpack(X)
    except (AttributeError, TypeError, RuntimeError, BufferError, ValueError):
        pass
    try:
        return torch.as_tensor(np.asarray(X))
    except (TypeError, RuntimeError, ValueError) as exc:
        raise TypeError(
            f"an array of type {type(X).__name__} can be passed neither through DLPack "
            "nor through numpy to torch; convert it to a numpy array or a torch tensor "
            "first."
        ) from exc


def host_values(values):
    """``values`` (sample weights, targets, an init array) readable by ``np.asarray``:
    under array API dispatch a tensor or another namespace's array is copied to the host
    (a vector or a small matrix, never X); unchanged otherwise."""
    if values is None or not dispatching() or isinstance(values, np.ndarray) \
            or not (isinstance(values, torch.Tensor) or hasattr(values, "__dlpack__")):
        return values
    return to_torch(values).cpu().numpy()


class ArraySpace(NamedTuple):
    """Where an input lives and where the results of a call go.

    ``kind`` is "numpy" for :data:`HOST` (numpy results, as without dispatch), "torch"
    for a torch tensor, "other" for another array-API namespace; ``xp`` and ``device``
    are that namespace and the input's device in it; ``tensor_device`` is where the
    input is as a torch tensor, which is where outputs are assembled.
    """

    kind: str
    xp: Any
    device: Any
    tensor_device: torch.device

    @property
    def name(self) -> str:
        """The namespace's name, e.g. "torch", "array_api_strict"."""
        return "numpy" if self.xp is None else _namespace_name(self.xp)

    def describe(self) -> str:
        return "numpy arrays" if self.kind == "numpy" else \
            f"{self.name} arrays on device {self.device}"

    def empty(self, *shape: int, dtype: torch.dtype) -> torch.Tensor:
        """An uninitialised output tensor on ``tensor_device`` (the host for numpy):
        results are written into it ``batch_size`` rows at a time."""
        return torch.empty(shape, dtype=dtype, device=self.tensor_device)

    def output(self, values: torch.Tensor):
        """``values`` (made by :meth:`empty`) in the input's namespace on its device."""
        if self.kind == "numpy":
            return values.numpy()
        if self.kind == "torch":
            return values.to(self.device)
        try:
            return self.xp.from_dlpack(values, device=self.device)
        except (AttributeError, TypeError, RuntimeError, BufferError, ValueError):
            return self.xp.asarray(values.cpu().numpy(), device=self.device)

    def fitted(self, value: np.ndarray):
        """A fitted numpy array (centroids, labels, counts) in the input's namespace."""
        if self.kind == "numpy":
            return value
        return self.output(torch.from_numpy(value).to(self.tensor_device))

    def same_as(self, other: ArraySpace) -> bool:
        return self.name == other.name and str(self.device) == str(other.device)

    def validated(self, estimator, X, **kwargs) -> torch.Tensor:
        """``validate_data`` in the input's namespace (float32 or float64), as a tensor.

        Refuses complex values (which a cast to float would drop silently) and arrays
        that reach torch neither through DLPack nor through numpy, naming the namespace.
        """
        if isinstance(X, torch.Tensor):
            X = X.detach()
        if self.xp.isdtype(X.dtype, "complex floating"):
            raise ValueError(
                f"Complex data not supported: {type(estimator).__name__} got a {self.name} "
                f"array of dtype {X.dtype}; pass its real part or its modulus."
            )
        X = validate_data(estimator, X, dtype=[self.xp.float64, self.xp.float32], **kwargs)
        try:
            return to_torch(X)
        except TypeError as exc:
            raise TypeError(
                f"{type(estimator).__name__} computes with torch, and {self.name} arrays "
                "can be passed to torch neither through DLPack nor through numpy; convert "
                "X to a numpy array or a torch tensor first."
            ) from exc


HOST = ArraySpace("numpy", None, None, torch.device("cpu"))


def _is_dask(X) -> bool:
    da = sys.modules.get("dask.array")
    return da is not None and isinstance(X, da.Array)


def _tensor_device(X) -> torch.device:
    """Where DLPack puts X in torch: a CUDA device, else the CPU."""
    try:
        kind, index = X.__dlpack_device__()
    except (AttributeError, TypeError, RuntimeError, BufferError, ValueError):
        return torch.device("cpu")
    return torch.device("cuda", int(index)) if int(kind) == _DLPACK_CUDA else torch.device("cpu")


def array_space(X, estimator_name: str = "the estimator") -> ArraySpace:
    """Where X lives: :data:`HOST` unless dispatch is on and X is an array of another
    namespace than numpy.

    Raises
    ------
    TypeError
        For a sparse torch tensor (use a scipy sparse matrix or a dense tensor).
    ValueError
        For a torch tensor on a device other than the CPU or CUDA.
    """
    if not dispatching() or X is None or isinstance(X, (np.ndarray, list, tuple)) \
            or sp.issparse(X) or _is_dask(X):
        return HOST
    if isinstance(X, torch.Tensor):
        if X.layout != torch.strided:
            raise TypeError(
                f"{estimator_name} does not accept sparse torch tensors ({X.layout}) under "
                "array API dispatch; pass a dense tensor (X.to_dense()) or a scipy sparse "
                "matrix, which is used without densifying."
            )
        if X.device.type not in ("cpu", "cuda"):
            raise ValueError(
                f"{estimator_name} computes on the CPU or on CUDA; got a torch tensor on "
                f"device {X.device}. Move it with X.to('cpu') (or 'cuda')."
            )
        xp, _, device = get_namespace_and_device(X)
        return ArraySpace("torch", xp, device, X.device)
    try:
        xp, is_array_api, device = get_namespace_and_device(X)
    except TypeError:  # no namespace: read by numpy, as without dispatch
        return HOST
    if not is_array_api or _namespace_name(xp) == "numpy":
        return HOST
    return ArraySpace("other", xp, device, _tensor_device(X))


def check_fitted_space(estimator, space: ArraySpace, method: str) -> None:
    """Under dispatch, refuse an input in another namespace or on another device than
    the fitted ``cluster_centers_`` (scikit-learn's rule and wording for array-API
    estimators)."""
    if not dispatching():
        return
    fitted = array_space(estimator.cluster_centers_)
    if fitted.same_as(space):
        return
    name = type(estimator).__name__
    raise ValueError(
        f"Inputs passed to {name}.{method}() must use the same namespace and the same "
        f"device as those passed to fit(): the model was fitted on {fitted.describe()}, "
        f"{method} got {space.describe()}. Pass X like the training data, or move the "
        "model: with sklearn.config_context(array_api_dispatch=True): model = "
        "sklearn.utils._array_api.move_estimator_to(model, xp, device)."
    )


def on_cpu(value):
    """``value``, or a CPU copy of it when it is a torch module or tensor on another device
    (what a pickled estimator holds: it loads on a machine without CUDA)."""
    if isinstance(value, torch.Tensor) and value.device.type != "cpu":
        return value.detach().cpu().requires_grad_(value.requires_grad)
    if isinstance(value, torch.nn.Module):
        tensors = [*value.parameters(), *value.buffers()]
        if any(t.device.type != "cpu" for t in tensors):
            return copy.deepcopy(value).cpu()
    return value
