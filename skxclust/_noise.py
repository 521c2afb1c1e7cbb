r"""The pixel-noise models of :class:`~skxclust.SpatialTransformerKMeans` (``noise``).

``"constant"``: every row has the same pixel noise variance :math:`\sigma^2`, so the fit
minimises the summed distortion :math:`\sum_i w_i E_i` and :meth:`score` is the
log-evidence of Gaussian noise of that variance.

``"contrast"``: a row's noise variance is :math:`\sigma^2 c(x)`, proportional to its
contrast :math:`c(x) = \lVert x - \bar x\rVert^2` (a row drawn twice as bold has twice
the amplitude of noise). The warp and appearance penalties are already relative to
:math:`c(x)`, so each row's whole energy counts relative to its contrast: the fit
minimises :math:`\sum_i w_i\, \bar c\, E_i / c(x_i)`, i.e. each row weighs
:math:`\bar c / c(x_i)` on top of its ``sample_weight`` (:func:`contrast_weights`;
:math:`\bar c` the weighted mean contrast of the rows of the first fit, which keeps the
weights near 1), and the score carries the per-row variance
(:meth:`~skxclust._warp_geometry.WarpGeometry.log_evidence`). The assignment of a row does
not change (its energies to every centroid are divided by the same number); the centroids
and the comparisons between restarts and split-merge moves do: high-contrast rows no
longer dominate them. A constant row has no contrast and is refused. A nearly constant
row's noise variance is floored at that of a row with :data:`NOISE_FLOOR` (a tenth) of
the typical contrast, a sensor's noise floor: of the centroids' mean contrast in the score
(:func:`~skxclust.nn.warp_evidence.penalty_scale` with that floor), of ``scale`` in the
weights (set before any centroid), so no row weighs more than 10 typical ones.
"""

from __future__ import annotations

import numpy as np
import torch

from ._dask import dask_row_blocks, is_dask_array
from .nn.warp_evidence import row_contrast

__all__ = ["NOISE_FLOOR", "NOISE_MODELS", "check_contrast", "contrast_weights",
           "input_contrast"]

NOISE_MODELS = ("constant", "contrast")

# Under noise="contrast" a row's noise variance is sigma^2 max(c(x), NOISE_FLOOR * c-bar).
# With 1 % (the penalties' floor, PENALTY_FLOOR, until this floor) 20 nearly constant rows
# (5 + 1e-4 noise) among 400 digits weighed 100 rows each and pulled the centroids toward
# a blank page: held-out ACC 0.837 -> 0.767 over 3 seeds (0.777 / 0.797 / 0.727, 300
# held-out digits, K = 10); with a tenth 0.852 (0.867 / 0.857 / 0.833). No row of the
# digits or of MNIST-5k is near it (their least contrast is 0.65 and 0.23 of the rows'
# mean, 0.85 and 0.47 of the centroids'), so their fits and scores do not move.
NOISE_FLOOR = 0.1

_CHUNK_ROWS = 4096  # rows converted to float64 at a time


def check_contrast(contrast):
    """``contrast`` (n,) (numpy or torch), refused with a ``ValueError`` where a row has
    none (a constant row: its noise variance would be 0)."""
    constant = np.flatnonzero(~(np.asarray(contrast.cpu() if isinstance(
        contrast, torch.Tensor) else contrast) > 0))
    if constant.size:
        raise ValueError(
            "noise='contrast' scales each row's noise variance by its contrast "
            f"||x - mean(x)||^2, and {constant.size} row(s) of X are constant (the first: "
            f"row {constant[0]}); drop them or use noise='constant'.")
    return contrast


def input_contrast(X) -> np.ndarray:
    """:func:`~skxclust.nn.warp_evidence.row_contrast` of validated rows, float64 (n,): X
    a numpy array, a torch tensor or a dask array (one pass over its blocks)."""
    if isinstance(X, torch.Tensor):
        return row_contrast(X.to(torch.float64)).cpu().numpy()
    blocks = ((block for block, _ in dask_row_blocks(X)) if is_dask_array(X) else
              (X[start:start + _CHUNK_ROWS] for start in range(0, X.shape[0], _CHUNK_ROWS)))
    # a float64 copy of one block at a time (also of a read-only array: torch needs it
    # writable)
    return np.concatenate([row_contrast(torch.from_numpy(np.array(block, dtype=np.float64)))
                           .numpy() for block in blocks])


def contrast_weights(X, sample_weight: np.ndarray, scale: float | None = None
                     ) -> tuple[np.ndarray, float]:
    """The objective's row weights ``sample_weight * scale / max(c(x), NOISE_FLOOR *
    scale)`` of the contrast noise model, and ``scale``.

    Parameters
    ----------
    X : ndarray, torch tensor or dask array of shape (n_samples, n_features)
        Validated rows; a constant row is refused (:func:`check_contrast`).
    sample_weight : ndarray of shape (n_samples,)
    scale : float or None, default=None
        The mean contrast the weights are relative to; None: the ``sample_weight``-weighted
        mean contrast of X (a first fit; later ``partial_fit`` calls pass it on).

    Returns
    -------
    weights : ndarray of shape (n_samples,), the dtype of ``sample_weight``
    scale : float

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 1.0], [0.0, 3.0]])  # contrasts 0.5 and 4.5
    >>> weights, scale = contrast_weights(X, np.ones(2))
    >>> weights.tolist(), scale
    ([5.0, 0.5555555555555556], 2.5)
    """
    contrast = check_contrast(input_contrast(X))
    if scale is None:
        scale = float(sample_weight @ contrast / sample_weight.sum())
    # a nearly constant row weighs at most 1 / NOISE_FLOOR (without a floor, a row of
    # contrast 1e-5 c-bar weighed 1e5 rows)
    contrast = np.maximum(contrast, NOISE_FLOOR * scale)
    return (sample_weight * (scale / contrast)).astype(sample_weight.dtype), scale
