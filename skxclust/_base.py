"""The sklearn shell shared by the torch k-means estimators: parameters, ``fit``, inference.

The math (seeding, the Lloyd loop, geometries) lives in :mod:`skxclust._lloyd`;
``partial_fit`` steps in :mod:`skxclust._streaming`; dask arrays in :mod:`skxclust._dask`.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils._set_output import ADAPTERS_MANAGER, _get_output_config
from sklearn.utils.validation import check_is_fitted, validate_data

from ._dask import blockwise, is_dask_array, partial_fit_blocks
from ._dask import fit as fit_blockwise
from ._lloyd import best_restart, kmeans_plusplus_restarts, lloyd
from ._progress import track
from ._streaming import init_stream_state
from ._streaming import partial_fit as partial_fit_step
from ._threads import serial_threads, torch_threads
from ._validation import (
    check_init_array,
    check_magnitude,
    check_sample_weight,
    finite_extremes,
    host_tensor,
    make_generators,
    refuse_sparse,
    resolve_device,
    to_tensor,
)
from .nn.sparse import column_variance, is_sparse, row_block, take_rows

__all__ = ["BaseTorchKMeans", "empty_output", "frame_like_transform", "inference_threads",
           "restore_on_error"]


def inference_threads(X: torch.Tensor, n_clusters: int):
    """Thread setting for one inference pass of X against the centroids (see _threads)."""
    return torch_threads(serial_threads(X, n_clusters))


def empty_output(X: torch.Tensor, *shape: int) -> np.ndarray:
    """An uninitialised host array of ``shape`` in the numpy dtype of ``X``.

    Inference writes its results into it chunk by chunk, so that no device-side copy of
    the whole output (and no concatenation) is ever held.
    """
    return np.empty(shape, dtype=torch.empty(0, dtype=X.dtype).numpy().dtype)


def frame_like_transform(estimator, data: np.ndarray, original_input, columns):
    """``data`` in the container ``transform`` is set to return (``set_output`` or
    scikit-learn's ``transform_output`` config): unchanged by default, else a pandas or
    polars DataFrame with ``columns`` (and the index of a pandas ``original_input``)."""
    config = _get_output_config("transform", estimator)["dense"]
    if config == "default":
        return data
    return ADAPTERS_MANAGER.adapters[config].create_container(data, original_input,
                                                              columns=columns)


def _on_cpu(value):
    """``value``, or a CPU copy of it when it is a torch module or tensor on another device."""
    if isinstance(value, torch.Tensor) and value.device.type != "cpu":
        return value.detach().cpu().requires_grad_(value.requires_grad)
    if isinstance(value, torch.nn.Module):
        tensors = [*value.parameters(), *value.buffers()]
        if any(t.device.type != "cpu" for t in tensors):
            return copy.deepcopy(value).cpu()
    return value


@contextlib.contextmanager
def restore_on_error(estimator):
    """Put ``estimator.__dict__`` back as it was if the body raises."""
    saved = copy.copy(estimator.__dict__)
    try:
        yield
    except BaseException:
        estimator.__dict__.clear()
        estimator.__dict__.update(saved)
        raise


class BaseTorchKMeans(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin,
                      BaseEstimator):
    """Common parameters, ``fit`` and inference of the torch k-means estimators.

    Subclasses provide ``_make_geometry(n_features, X)`` and may extend ``_after_fit``.
    ``get_feature_names_out`` gives scikit-learn's names for the ``transform`` columns
    (lower-cased class name and cluster index, e.g. ``explainablekmeans0``), so that
    ``set_output(transform="pandas" | "polars")``, ``Pipeline``, ``ColumnTransformer``
    and ``FeatureUnion`` work as with :class:`sklearn.cluster.KMeans`.
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"k-means++", "random"}), "array-like"],
        "n_init": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    @property
    def _n_features_out(self) -> int:
        """Columns of ``transform``: one per cluster (for ``get_feature_names_out``)."""
        return self.cluster_centers_.shape[0]

    # -- hooks -----------------------------------------------------------------------
    def _make_geometry(self, n_features: int):  # pragma: no cover - abstract
        raise NotImplementedError

    def _sparse_refusal(self) -> str | None:
        """Why sparse input is refused (None: scipy sparse matrices are accepted)."""
        return "it works on dense images and signals"

    def _check_X(self, X, *, reset: bool, **kwargs):
        """``validate_data`` of X: float32 or float64, C order; a scipy sparse matrix
        becomes CSR where the estimator takes sparse input, and is refused with a
        TypeError naming the estimator otherwise."""
        reason = self._sparse_refusal()
        if reason is not None:
            refuse_sparse(X, type(self).__name__, reason)
        return validate_data(self, X, dtype=[np.float64, np.float32], order="C", reset=reset,
                             accept_sparse="csr" if reason is None else False, **kwargs)

    def _make_fit_geometry(self, n_features: int):
        """The geometry :meth:`fit` runs Lloyd with (default: the inference geometry)."""
        return self._make_geometry(n_features)

    def _check_input_geometry(self, n_features: int) -> None:
        """Raise if the data shape does not suit the estimator (e.g. image_shape)."""

    def _after_fit(self, X: torch.Tensor, labels: torch.Tensor, centers: torch.Tensor) -> None:
        """Compute extra fitted attributes; X and centers are in the fit's frame.

        A fit on a dask array calls it on the rows :meth:`_after_fit_rows` names, or, when
        that is None, forms it from :meth:`_after_fit_stats` summed over row blocks:
        override this method with ``_after_fit_rows``, or the two ``_after_fit_stats``
        hooks.
        """
        self._after_fit_from_stats(self._after_fit_stats(X, labels, centers))

    def _after_fit_rows(self, n_samples: int) -> np.ndarray | None:
        """Rows :meth:`_after_fit` reads (None: all, through ``_after_fit_stats``)."""
        return None

    def _after_fit_stats(self, X, labels, centers) -> dict:
        """Sums over the rows of X that :meth:`_after_fit_from_stats` needs (additive)."""
        return {}

    def _after_fit_from_stats(self, stats: dict) -> None:
        """Set the extra fitted attributes from the (summed) ``_after_fit_stats``."""

    def _after_partial_fit(self, X, centers, geometry):
        """After a ``partial_fit`` step: the chunk's Assignment to the new centroids; also
        sets the extra fitted attributes (by :meth:`_after_fit` on the chunk)."""
        assignment = geometry.assign(X, centers)
        self._after_fit(X, assignment.labels, centers)
        return assignment

    def _refine_fit(self, X, sample_weight, geometry, tol, generator, fit):
        """Improve the kept restart ``fit = (labels, inertia, centers, n_iter)`` of an
        in-memory fit; the default keeps it as it is."""
        return fit

    def _embed(self, X: torch.Tensor) -> torch.Tensor:
        """Map validated input rows to the space that is clustered (identity here)."""
        return X

    # -- fit -------------------------------------------------------------------------
    def _resolved_n_init(self) -> int:
        if self.n_init == "auto":
            return 1 if (isinstance(self.init, str) and self.init == "k-means++") else 10
        return int(self.n_init)

    def _checked_n_init(self, init_array) -> int:
        """Restarts to run: 1 with an explicit init array (warning if n_init was set)."""
        n_init = self._resolved_n_init()
        if init_array is not None and n_init != 1:
            if self.n_init != "auto":
                warnings.warn(
                    "Explicit initial center position passed: performing only one init in "
                    f"{type(self).__name__} instead of n_init={self.n_init}.",
                    RuntimeWarning, stacklevel=4,
                )
            n_init = 1
        return n_init

    def _warn_distinct(self, n_distinct: int) -> None:
        if n_distinct < self.n_clusters:
            warnings.warn(
                f"Number of distinct clusters ({n_distinct}) found smaller than "
                f"n_clusters ({self.n_clusters}). Possibly due to duplicate points in X.",
                ConvergenceWarning, stacklevel=4,
            )

    def _validate_init_array(self, n_features: int, dtype) -> np.ndarray | None:
        if isinstance(self.init, str):
            return None
        return check_init_array(self.init, self.n_clusters, n_features, dtype)

    def _init_centroids(self, X, sample_weight, generators, init_array, shift):
        """Initial centroids of every restart, shape (len(generators), K, D)."""
        if init_array is not None:
            return (torch.as_tensor(init_array, dtype=X.dtype, device=X.device) - shift)[None]
        if self.init == "k-means++":
            return kmeans_plusplus_restarts(X, self.n_clusters, sample_weight, generators)
        sw = sample_weight.detach().to("cpu", torch.float64)
        idx = torch.stack([
            torch.multinomial(sw / sw.sum(), self.n_clusters, replacement=False, generator=g)
            for g in generators
        ])
        return take_rows(X, idx.to(X.device).reshape(-1)).view(*idx.shape, -1)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Compute the clustering.

        Parameters
        ----------
        X : {array-like, sparse matrix} or dask array of shape (n_samples, n_features)
            Training data; int data are converted to float64. Sparse matrices (any scipy
            format, used as CSR and never densified) where the estimator accepts them
            (:class:`ExplainableKMeans` without a feature extractor), else refused.
            A dask array is fitted block by block (see the user guide, "Scaling out").
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights (not all zero).

        Returns
        -------
        self : object
            Fitted estimator.
        """
        with restore_on_error(self):
            if is_dask_array(X):
                return fit_blockwise(self, X, sample_weight)
            X = self._check_X(X, reset=True)
            n_samples, n_features = X.shape
            if n_samples < self.n_clusters:
                raise ValueError(
                    f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}."
                )
            self._check_input_geometry(n_features)
            device = resolve_device(self.device)
            sw_np = check_sample_weight(sample_weight, n_samples, X.dtype)
            Xt = self._embed(to_tensor(X, device))
            init_array = self._validate_init_array(Xt.shape[1], X.dtype)
            n_init = self._checked_n_init(init_array)

            sw = torch.from_numpy(sw_np).to(device)
            geometry = self._make_fit_geometry(n_features)
            # Centred data for shift-invariant geometries (a new tensor); otherwise Xt may
            # share the caller's memory: nothing below writes into it. Sparse data stay
            # uncentred (as in scikit-learn): centring would densify them.
            shift = torch.zeros(Xt.shape[1], dtype=Xt.dtype, device=device)
            if geometry.translation_invariant and not is_sparse(Xt):
                shift = (sw @ Xt) / sw.sum()
                Xt = Xt - shift
            check_magnitude(Xt)
            tol = float(column_variance(Xt).mean()) * self.tol if n_samples > 1 else 0.0

            generators = make_generators(self.random_state, n_init)
            centers = self._init_centroids(Xt, sw, generators, init_array, shift)
            if self.verbose:
                print(f"Initialization complete: {n_init} restart(s)")
            labels, inertia, centers, n_iter = self._refine_fit(
                Xt, sw, geometry, tol, generators[0], best_restart(
                    lloyd(Xt, centers, geometry, sw, self.max_iter, tol, self.verbose,
                          desc=f"{type(self).__name__}.fit")))

            self._warn_distinct(int(torch.unique(labels).numel()))
            self.cluster_centers_ = (centers + shift).cpu().numpy()
            self.labels_ = labels.cpu().numpy()
            self.inertia_ = float(inertia)
            self.n_iter_ = int(n_iter)
            self._after_fit(Xt, labels, centers)
            init_stream_state(self, labels, sw)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None, sample_weight=None):
        """Update the clustering with one chunk of rows (a mini-batch k-means step).

        The first call seeds the centroids on its chunk with the estimator's ``init`` (one
        seeding); every call then assigns the chunk to the current centroids and moves each
        centroid towards its members with learning rate ``weight / (count + weight)``,
        ``count`` being the weight it has absorbed so far (scikit-learn's
        ``MiniBatchKMeans`` update; for ST K-means per pixel, see the user guide). After
        :meth:`fit`, it continues from the fitted centroids. Works with
        ``dask_ml.wrappers.Incremental``; a dask array takes one step per row block.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            A chunk; the first needs ``n_samples >= n_clusters``. Later chunks are cast to
            the dtype of the first.
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : object
            With ``n_steps_`` incremented; ``labels_`` and ``inertia_`` describe this chunk
            for the updated centroids.
        """
        with restore_on_error(self):
            if is_dask_array(X):
                return partial_fit_blocks(self, X, sample_weight)
            return partial_fit_step(self, X, sample_weight)

    # -- inference -------------------------------------------------------------------
    def _validated_tensor(self, X) -> tuple[torch.Tensor, tuple]:
        """Check fitted, validate X for inference and put it on the device.

        Returns the tensor and its ``(min, max)``. On the CPU the tensor shares the memory
        of a writeable C-contiguous float array (:func:`~skxclust._validation.to_tensor`):
        never write into it. Finiteness is checked by
        :func:`~skxclust._validation.finite_extremes` (the same refusal as
        ``validate_data``) in the one pass whose extremes :meth:`_inference_frame` reuses
        for the magnitude check.
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False, ensure_all_finite=False)
        raw = to_tensor(X, resolve_device(self.device))
        return raw, finite_extremes(raw, type(self).__name__)

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
        centers = host_tensor(self.cluster_centers_).to(raw.device, Xt.dtype)
        geometry = self._make_geometry(raw.shape[1])
        shift = None
        if geometry.translation_invariant and not is_sparse(Xt):
            shift = centers.mean(dim=0)
            centers = centers - shift
        check_magnitude(Xt, shift=shift, extremes=extremes if Xt is raw else None)
        return Xt, centers, geometry, shift

    def _framed_chunks(self, X: torch.Tensor, shift: torch.Tensor | None,
                       step: int | None = None):
        """Yield ``(rows, X[rows] in the frame of the centers)``, ``step`` (default
        ``batch_size``) rows at a time.

        The shifted rows are written into one buffer reused by every block: use each
        block before asking for the next. With more than one block, the pass has a
        progress bar counting rows (see :mod:`skxclust._progress`).
        """
        step = self.batch_size if step is None else step
        buffer = None if shift is None else X.new_empty(min(step, X.shape[0]), X.shape[1])
        starts = range(0, X.shape[0], step)
        sizes = [min(step, X.shape[0] - start) for start in starts]
        for start in track(starts, desc=type(self).__name__, unit="rows", sizes=sizes,
                           verbose=self.verbose):
            rows = slice(start, min(start + step, X.shape[0]))
            if shift is None:
                yield rows, row_block(X, rows.start, rows.stop)
            else:
                yield rows, torch.sub(X[rows], shift, out=buffer[: rows.stop - start])

    def _map_pairwise(self, X, fn) -> np.ndarray:
        """``fn`` of the squared distances to the centroids, shape (n_samples, n_clusters),
        computed ``batch_size`` rows at a time into a preallocated numpy output."""
        raw, extremes = self._validated_tensor(X)
        with inference_threads(raw, self.n_clusters):
            Xt, centers, geometry, shift = self._inference_frame(raw, extremes)
            out = empty_output(Xt, Xt.shape[0], centers.shape[0])
            for rows, x in self._framed_chunks(Xt, shift):
                out[rows] = fn(geometry.pairwise(x, centers)).cpu().numpy()
            return out

    def _frame(self, raw: torch.Tensor, extremes: tuple):
        """Embed validated rows; return (X, centers, geometry), shifted together into a
        frame where the geometry is numerically accurate when it is shift invariant.

        Holds the whole shifted X (a copy of the input when shifted): prefer
        :meth:`_inference_frame` with :meth:`_framed_chunks` for large inputs.
        """
        Xt, centers, geometry, shift = self._inference_frame(raw, extremes)
        return (Xt if shift is None else Xt - shift), centers, geometry

    def _prepare(self, X):
        """Validate X for inference; return (X tensor, centers tensor, geometry)."""
        return self._frame(*self._validated_tensor(X))

    @blockwise("labels")
    def predict(self, X):
        """Index of the closest cluster for each sample.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            A dask array, computed block by block, when X is one.
        """
        raw, extremes = self._validated_tensor(X)
        with inference_threads(raw, self.n_clusters):
            Xt, centers, geometry, shift = self._inference_frame(raw, extremes)
            labels = np.empty(Xt.shape[0], dtype=np.int64)
            for rows, x in self._framed_chunks(Xt, shift):
                labels[rows] = geometry.assign(x, centers).labels.cpu().numpy()
            return labels

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit and return ``labels_``. See :meth:`fit`."""
        return self.fit(X, sample_weight=sample_weight).labels_

    @blockwise("clusters")
    def transform(self, X):
        """Distances to every centroid (not squared, like :class:`sklearn.cluster.KMeans`).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_clusters), same float dtype as X.
            A dask array, computed block by block, when X is one.
        """
        return self._map_pairwise(X, torch.sqrt)

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fit, then return :meth:`transform` of X."""
        return self.fit(X, sample_weight=sample_weight).transform(X)

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
        raw, extremes = self._validated_tensor(X)
        sw = check_sample_weight(sample_weight, raw.shape[0], np.float64)
        with inference_threads(raw, self.n_clusters):
            Xt, centers, geometry, shift = self._inference_frame(raw, extremes)
            d = np.empty(Xt.shape[0], dtype=np.float64)
            for rows, x in self._framed_chunks(Xt, shift):
                d[rows] = self._row_scores(geometry, x, centers).cpu().to(torch.float64).numpy()
        return float(torch.from_numpy(d) @ torch.from_numpy(sw))

    def _row_scores(self, geometry, X: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
        """What :meth:`score` sums per row (with the sample weights): minus the distance
        to the nearest centroid."""
        return -geometry.assign(X, centers).distances

    def __getstate__(self):
        """Pickled state with every torch module or tensor moved to the CPU.

        Fitted attributes are numpy arrays already; this covers torch objects among the
        parameters (e.g. ``feature_extractor`` given on a GPU), so that a model fitted on a
        GPU unpickles on a machine without one. The estimator itself is left unchanged.
        """
        return {name: _on_cpu(value) for name, value in super().__getstate__().items()}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
