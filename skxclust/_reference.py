"""The root-point reference of ``explain``: None, an input, or the fitted training mean.

Both estimators take ``reference`` in :meth:`explain` with the same meaning (see
:mod:`skxclust.nn.reference_rule`); this module turns it into a tensor once, for either.
"""

from __future__ import annotations

import torch

from ._validation import check_reference, fitted_tensor

__all__ = ["reference_tensor"]


def reference_tensor(reference, fitted, n_features: int, device: torch.device,
                     dtype: torch.dtype) -> torch.Tensor | None:
    """The ``reference`` of ``explain`` as a (n_features,) tensor, or None (the midpoint
    rule).

    Parameters
    ----------
    reference : None, "mean" or array-like of shape (n_features,)
        None; "mean": ``fitted``; an input (validated: finite, one value per feature).
    fitted : array of shape (n_features,) or None
        The estimator's fitted mean ``reference_`` (numpy or of the fit's array-API
        namespace); None where the estimator has none.
    n_features : int
    device, dtype : where and in which dtype the tensor is returned.

    Raises
    ------
    ValueError
        For another string, or a malformed input (naming ``reference``).
    AttributeError
        For "mean" without a fitted mean (a model pickled by an older version).
    """
    if not isinstance(reference, str):
        ref = check_reference(reference, n_features)
        return None if ref is None else torch.as_tensor(ref, dtype=dtype, device=device)
    if reference != "mean":
        raise ValueError(f'reference must be "mean", None or one value per feature, '
                         f"got {reference!r}.")
    if fitted is None:  # pickled by a version without it
        raise AttributeError('reference="mean" needs the fitted attribute reference_, '
                             "which this estimator lacks (fitted by an older version): "
                             "refit it, or pass reference=None or an input.")
    return fitted_tensor(fitted, device, dtype)
