"""Inference of the torch k-means estimators: chunked ``predict``, ``transform``, ``score``.

:class:`KMeansInferenceMixin` validates rows for inference, moves them into the frame of
the fitted centroids ``batch_size`` rows at a time and asks the estimator's geometry
(:class:`skxclust._geometry.Geometry`) for labels or distances; outputs are written into
preallocated tensors of the input's :class:`~skxclust._array_api.ArraySpace`: on the host
for numpy input (no device-side copy of a whole result is ever held), on the input's
device for an array-API input under scikit-learn's array API dispatch.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import TransformerMixin
from sklearn.utils._set_output import ADAPTERS_MANAGER, _get_output_config
from sklearn.utils.validation import check_is_fitted

from ._array_api import ArraySpace, array_space, check_fitted_space
from ._dask import blockwise
from ._progress import track
from ._threads import Work, pass_threads
from ._validation import (
    check_magnitude,
    check_sample_weight,
    finite_extremes,
    fitted_tensor,
    resolve_device,
    to_tensor,
)
from .nn.sparse import is_sparse, row_block

__all__ = ["BLOCK_CHUNKS", "KMeansInferenceMixin", "frame_like_transform", "inference_threads"]

# Blocks of rows that need no copy hold this many chunks of ``batch_size`` rows per torch
# thread: enough for the threads of a geometry that runs its chunks in parallel to share
# them evenly (ST K-means' screening makes some chunks slower), while the work per block
# stays bounded (score and align hold per-block intermediates of the block's size).
# (1,000 MNIST rows, 16 landmarks, 2 threads: predict, score and transform 1.8x faster
# than with one chunk per block.)
BLOCK_CHUNKS = 8


def inference_threads(X: torch.Tensor, n_clusters: int):
    """Thread setting for one inference pass of X against the centroids (see _threads)."""
    return pass_threads(Work("inference", X.shape[0] * X.shape[1] * n_clusters, X.device))


def frame_like_transform(estimator, data: np.ndarray, original_input, columns):
    """``data`` in the container ``transform`` is set to return (``set_output`` or
    scikit-learn's ``transform_output`` config): unchanged by default, else a pandas or
    polars DataFrame with ``columns`` (and the index of a pandas ``original_input``)."""
    config = _get_output_config("transform", estimator)["dense"]
    if config == "default":
        return data
    return ADAPTERS_MANAGER.adapters[config].create_container(data, original_input,
                                                              columns=columns)


class KMeansInferenceMixin(TransformerMixin):
    """``predict``, ``transform`` and ``score`` of a fitted torch k-means estimator.

    A ``TransformerMixin``, so that scikit-learn wraps the ``transform`` defined here for
    ``set_output``. Needs the estimator's ``cluster_centers_``, ``batch_size``, ``n_clusters``,
    ``device``, ``verbose``, ``_check_X``, ``_embed`` and ``_make_geometry``.
    """

    def _validated_tensor(self, X, method: str) -> tuple[torch.Tensor, tuple, ArraySpace]:
        """Check fitted, validate X for inference by ``method`` and put it on the device.

        Returns the tensor, its ``(min, max)`` and the :class:`ArraySpace` the outputs go
        to (under array API dispatch, X must be in the fit's namespace and on its device).
        On the CPU the tensor shares the memory of a writeable C-contiguous float array
        (:func:`~skxclust._validation.to_tensor`): never write into it. Finiteness is
        checked by :func:`~skxclust._validation.finite_extremes` (the same refusal as
        ``validate_data``) in the one pass whose extremes :meth:`_inference_frame` reuses
        for the magnitude check.
        """
        check_is_fitted(self)
        space = array_space(X, type(self).__name__)
        check_fitted_space(self, space, method)
        X = self._check_X(X, reset=False, ensure_all_finite=False)
        raw = to_tensor(X, resolve_device(self.device, like=X))
        return raw, finite_extremes(raw, type(self).__name__), space

    def _inference_frame(self, raw: torch.Tensor, extremes: tuple):
        """Embed validated rows for chunked inference; return (X, centers, geometry, shift).

        ``raw`` and ``extremes`` come from :meth:`_validated_tensor`.

        ``X`` is the embedded input, *not* shifted (no copy of the input when the embedding
        is the identity); ``centers`` are already in the frame where the geometry is
        numerically accurate: shifted by ``shift`` (the mean centroid) when the geometry is
        translation invariant, else ``shift`` is None. Iterate over the rows with
        :meth:`_framed_chunks`, which shifts ``batch_size`` rows at a time, so that the memory
        used beyond the output is O(batch_size * n_features).
        """
        Xt = self._embed(raw)
        centers = fitted_tensor(self.cluster_centers_, raw.device, Xt.dtype)
        geometry = self._make_geometry(raw.shape[1])
        shift = None
        if geometry.translation_invariant and not is_sparse(Xt):
            shift = centers.mean(dim=0)
            centers = centers - shift
        check_magnitude(Xt, shift=shift, extremes=extremes if Xt is raw else None)
        return Xt, centers, geometry, shift

    def _framed_chunks(self, X: torch.Tensor, shift: torch.Tensor | None,
                       step: int | None = None):
        """Yield ``(rows, X[rows] in the frame of the centers)``, ``step`` rows at a time.

        The default ``step`` is ``batch_size``; for dense rows without a ``shift`` (views
        of X, nothing copied) :data:`BLOCK_CHUNKS` times ``batch_size`` rows per torch
        thread, which the geometry splits into chunks of ``batch_size`` rows (ST K-means
        runs them in threads, as in a fit, with the fit's chunk boundaries).

        The shifted rows are written into one buffer reused by every block: use each
        block before asking for the next. With more than one block, the pass has a
        progress bar counting rows (see :mod:`skxclust._progress`).
        """
        if step is None:
            step = self.batch_size
            if shift is None and not is_sparse(X):
                step *= BLOCK_CHUNKS * max(1, torch.get_num_threads())
        buffer = None if shift is None else X.new_empty(min(step, X.shape[0]), X.shape[1])
        starts = range(0, X.shape[0], step)
        sizes = [min(step, X.shape[0] - start) for start in starts]
        for start in track(starts, desc=type(self).__name__, unit="rows", sizes=sizes,
                           verbose=self.verbose):
            rows = slice(start, min(start + step, X.shape[0]))
            if shift is None or buffer is None:  # both None, or neither
                yield rows, row_block(X, rows.start, rows.stop)
            else:
                yield rows, torch.sub(X[rows], shift, out=buffer[: rows.stop - start])

    def _map_pairwise(self, X, fn, method: str):
        """``fn`` of the squared distances to the centroids, shape (n_samples, n_clusters),
        computed ``batch_size`` rows at a time into a preallocated output (numpy, or of
        the input's namespace under array API dispatch)."""
        raw, extremes, space = self._validated_tensor(X, method)
        with inference_threads(raw, self.n_clusters):
            Xt, centers, geometry, shift = self._inference_frame(raw, extremes)
            out = space.empty(Xt.shape[0], centers.shape[0], dtype=Xt.dtype)
            for rows, x in self._framed_chunks(Xt, shift):
                out[rows] = fn(geometry.pairwise(x, centers))
            return space.output(out)

    def _frame(self, raw: torch.Tensor, extremes: tuple):
        """Embed validated rows; return (X, centers, geometry), shifted together into a
        frame where the geometry is numerically accurate when it is shift invariant.

        Holds the whole shifted X (a copy of the input when shifted): prefer
        :meth:`_inference_frame` with :meth:`_framed_chunks` for large inputs.
        """
        Xt, centers, geometry, shift = self._inference_frame(raw, extremes)
        return (Xt if shift is None else Xt - shift), centers, geometry

    def _prepare(self, X, method: str):
        """Validate X for inference by ``method``; return (X tensor, centers tensor,
        geometry, the :class:`ArraySpace` of the outputs)."""
        raw, extremes, space = self._validated_tensor(X, method)
        return (*self._frame(raw, extremes), space)

    @blockwise("labels")
    def predict(self, X):
        """Index of the closest cluster for each sample.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            A dask array, computed block by block, when X is one; under array API
            dispatch, an int64 array of X's namespace on X's device.
        """
        raw, extremes, space = self._validated_tensor(X, "predict")
        with inference_threads(raw, self.n_clusters):
            Xt, centers, geometry, shift = self._inference_frame(raw, extremes)
            labels = space.empty(Xt.shape[0], dtype=torch.int64)
            for rows, x in self._framed_chunks(Xt, shift):
                labels[rows] = geometry.assign(x, centers).labels
            return space.output(labels)

    @blockwise("clusters")
    def transform(self, X):
        """Distances to every centroid (not squared, like :class:`sklearn.cluster.KMeans`).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_clusters), same float dtype as X.
            A dask array, computed block by block, when X is one; under array API
            dispatch, an array of X's namespace on X's device.
        """
        # a squared distance is >= 0; a geometry's rounding may give -1e-10 (a warp penalty
        # v^T G v with G only positive semi-definite, in float32), which sqrt turns into NaN
        return self._map_pairwise(X, lambda d: torch.sqrt(d.clamp_min(0.0)), "transform")

    @blockwise("sum", row_args=("sample_weight",))
    def score(self, X, y=None, sample_weight=None):
        """Opposite of the distortion (inertia) of X: higher is better.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            A dask array is scored block by block (computed at once).
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        float
        """
        raw, extremes, space = self._validated_tensor(X, "score")
        sw = check_sample_weight(sample_weight, raw.shape[0], np.float64)
        with inference_threads(raw, self.n_clusters):
            Xt, centers, geometry, shift = self._inference_frame(raw, extremes)
            d = space.empty(Xt.shape[0], dtype=torch.float64)
            for rows, x in self._framed_chunks(Xt, shift):
                d[rows] = self._row_scores(geometry, x, centers).to(torch.float64)
        return float(d @ torch.from_numpy(sw).to(d.device))

    def _row_scores(self, geometry, X: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
        """What :meth:`score` sums per row (with the sample weights): minus the distance
        to the nearest centroid."""
        return -geometry.assign(X, centers).distances

