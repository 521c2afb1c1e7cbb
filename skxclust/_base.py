"""The sklearn shell shared by the torch k-means estimators: parameters and the one fit
lifecycle.

``fit``, ``partial_fit`` and the dask fit share one set-up (validation, seeding, the fit's
frame) and one finish (the fitted attributes); in between, the fit proper takes tensors
and a geometry: the Lloyd loop (:mod:`skxclust._lloyd`), the mini-batch step
(:mod:`skxclust._streaming`) or the blockwise passes (:mod:`skxclust._dask_fit`).
Inference lives in :mod:`skxclust._inference`.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
    clone,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import validate_data

from ._array_api import (
    HOST,
    ArraySpace,
    array_space,
    check_fitted_space,
    float_dtype,
    numpy_dtype,
    on_cpu,
    to_torch,
)
from ._dask import check_dask_array, dask_row_blocks, is_dask_array
from ._dask_fit import fit_blockwise
from ._geometry import Geometry
from ._inference import KMeansInferenceMixin
from ._lloyd import (
    FitResult,
    LloydFit,
    assign_every_row,
    best_refined,
    best_restart,
    into_fit_frame,
    lloyd,
    scaled_tol,
)
from ._plan import FitPlan
from ._seeding import Seeding, kmeans_plusplus_restarts
from ._streaming import cluster_counts, keep_unweighted, mini_batch_step
from ._threads import pass_threads
from ._validation import (
    check_init_array,
    check_n_samples,
    check_sample_weight,
    fitted_tensor,
    make_generators,
    refuse_sparse,
    resolve_device,
    to_tensor,
    warn_user,
)
from .nn.sparse import column_variance, take_rows

__all__ = ["BaseTorchKMeans", "restore_on_error"]


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


class BaseTorchKMeans(KMeansInferenceMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                      ClusterMixin, BaseEstimator):
    """Common parameters, ``fit`` and inference of the torch k-means estimators.

    Subclasses provide ``_make_geometry(n_features)`` and state their fit in one
    :class:`~skxclust._plan.FitPlan`, built by ``_fit_plan(n_features)``.
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

    # -- hooks of the subclasses -------------------------------------------------------
    def _make_geometry(self, n_features: int) -> Geometry:  # pragma: no cover - abstract
        """The geometry of inference, ``partial_fit`` and the dask fit."""
        raise NotImplementedError

    def _fit_plan(self, n_features: int) -> FitPlan:
        """The plan of a fit on rows of ``n_features`` columns (see
        :class:`~skxclust._plan.FitPlan`); the default fits in the inference geometry
        and embedding and keeps no statistics.

        Raises ValueError (or TypeError) where the data shape or a parameter does not
        suit the estimator (e.g. ``image_shape``): building the plan checks the input.
        """
        return FitPlan(self._make_geometry(n_features), self._embed)

    def _sparse_refusal(self) -> str | None:
        """Why sparse input is refused (None: scipy sparse matrices are accepted)."""
        return "it works on dense images and signals"

    def _embed(self, X: torch.Tensor) -> torch.Tensor:
        """Map validated input rows to the space that is clustered (identity here)."""
        return X

    def _resolved_n_init(self, plan: FitPlan) -> int:
        """``n_init``, "auto" resolved by the plan (default: scikit-learn's rule)."""
        if self.n_init != "auto":
            return int(self.n_init)
        if plan.auto_n_init is not None:
            return plan.auto_n_init
        return 1 if (isinstance(self.init, str) and self.init == "k-means++") else 10

    def _checked_n_init(self, init_array, plan: FitPlan) -> int:
        """Restarts to run: 1 with an explicit init array (warning if n_init was set)."""
        n_init = self._resolved_n_init(plan)
        if init_array is not None and n_init != 1:
            if self.n_init != "auto":
                warn_user(
                    "Explicit initial center position passed: performing only one init in "
                    f"{type(self).__name__} instead of n_init={self.n_init}.",
                    RuntimeWarning,
                )
            n_init = 1
        return n_init

    def _warn_distinct(self, n_distinct: int) -> None:
        if n_distinct < self.n_clusters:
            warn_user(
                f"Number of distinct clusters ({n_distinct}) found smaller than "
                f"n_clusters ({self.n_clusters}). Possibly due to duplicate points in X.",
                ConvergenceWarning,
            )

    def _validate_init_array(self, n_features: int, dtype) -> np.ndarray | None:
        if isinstance(self.init, str):
            return None
        return check_init_array(self.init, self.n_clusters, n_features, dtype)

    def _init_centroids(self, X, sample_weight, generators, init_array, shift):
        """Initial centroids of every restart, shape (len(generators), K, D): the seeder of
        a plan that names none."""
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

    # -- the fit lifecycle: one set-up and one finish for every way to fit ------------
    def _check_X(self, X, *, reset: bool, **kwargs):
        """``validate_data`` of X: float32 or float64, C order; a scipy sparse matrix
        becomes CSR where the estimator takes sparse input, and is refused with a
        TypeError naming the estimator otherwise (also used by inference). Under array API
        dispatch, an array of another namespace is validated in it and returned as a
        torch tensor on its device."""
        reason = self._sparse_refusal()
        if reason is not None:
            refuse_sparse(X, type(self).__name__, reason)
        space = array_space(X, type(self).__name__)
        if space.kind != "numpy":
            return space.validated(self, X, reset=reset, **kwargs)
        return validate_data(self, X, dtype=[np.float64, np.float32], order="C", reset=reset,
                             accept_sparse="csr" if reason is None else False, **kwargs)

    def _validated_fit_input(self, X, sample_weight, *, reset: bool = True,
                             context: str = "") -> tuple:
        """Validate the rows (``reset``: a first fit, which also checks the number of
        samples), plan the fit (which checks the data shape against the parameters), validate
        the sample weights, and on a first fit let the plan make its choice (``choose``).

        X is a numpy-compatible array or a dask array; returns ``(X, weights, plan)``,
        ``weights`` the sample weights times the plan's ``row_weights`` (a numpy array in
        X's float dtype), ``plan`` the :class:`~skxclust._plan.FitPlan` of
        :meth:`_fit_plan` (or of its choice).
        """
        if is_dask_array(X):
            if sp.issparse(getattr(X, "_meta", None)):
                raise TypeError(
                    f"{type(self).__name__}.fit does not take a dask array of sparse "
                    "blocks; fit on X.compute() (a scipy sparse matrix, never densified) "
                    "or call partial_fit, which takes one sparse block at a time."
                )
            X, dtype = check_dask_array(self, X, reset=reset)
            if is_dask_array(sample_weight):
                sample_weight = sample_weight.compute()
        else:
            X = self._check_X(X, reset=reset)
            dtype = numpy_dtype(X.dtype)
        if reset:
            check_n_samples(X.shape[0], self.n_clusters, context)
        plan = self._fit_plan(X.shape[1])
        sample_weight = weights = check_sample_weight(sample_weight, X.shape[0], dtype)
        if plan.row_weights is not None:  # before the choice: they validate X too
            scale = None if reset else getattr(self, "_row_weight_scale", None)
            weights, self._row_weight_scale = plan.row_weights(X, sample_weight, scale)
        if reset and plan.choose is not None:
            plan = plan.choose(X, sample_weight)
        return X, weights, plan

    def _seeding(self, plan: FitPlan, n_features: int, dtype,
                 n_init: int | None = None) -> Seeding:
        """How this fit seeds: the validated ``init`` array (for ``n_features`` columns of
        the clustered space) or the plan's seeder, with one generator per restart
        (``n_init`` restarts, default: the resolved ``n_init``)."""
        init_array = self._validate_init_array(n_features, dtype)
        if n_init is None:
            n_init = self._checked_n_init(init_array, plan)
        seeder = self._init_centroids if plan.seeder is None else plan.seeder
        return Seeding(seeder, init_array, make_generators(self.random_state, n_init))

    def _finish_fit(self, result: FitResult, plan: FitPlan, *, counts: np.ndarray,
                    n_steps: int, space: ArraySpace = HOST) -> None:
        """Write the fitted attributes of ``result`` (centroids in the input frame; the
        plan's fitted attributes of its statistics, with the fit frame's ``origin``) and
        the streaming state: ``counts`` (weight absorbed per cluster or per pixel) and
        ``n_steps_``; arrays in the namespace and on the device of the input's ``space``."""
        if result.n_iter is not None:
            self._warn_distinct(int(np.unique(result.labels).size))
            self.n_iter_ = int(result.n_iter)
        self.cluster_centers_ = space.fitted(result.centers)
        self.labels_ = space.fitted(result.labels)
        self.inertia_ = float(result.inertia)
        attributes = {f"{name}_": value for name, value in plan.resolved.items()}
        for name, value in {**attributes, **plan.statistics.attributes_of(result)}.items():
            setattr(self, name, space.fitted(value) if isinstance(value, np.ndarray) else value)
        self._counts = space.fitted(counts)
        self.n_steps_ = n_steps

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
            Under array API dispatch, a torch tensor (CPU or CUDA) or another array-API
            array: the fitted arrays are then in its namespace, on its device.
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights (not all zero).

        Returns
        -------
        self : object
            Fitted estimator.
        """
        raw = X  # for the predict pass below: with its feature names, if any
        space = array_space(X, type(self).__name__)
        with restore_on_error(self):
            X, sw_np, plan = self._validated_fit_input(X, sample_weight)
            if is_dask_array(X):
                result = self._fit_dask(X, sw_np, plan)
            else:
                result = self._fit_in_memory(X, sw_np, plan)
            self._finish_fit(result, plan, space=space, n_steps=0, counts=cluster_counts(
                result.labels, sw_np, self.n_clusters))
            if not is_dask_array(X) and not sp.issparse(X):
                self._labels_as_predicted(raw, plan, sw_np, space)
        return self

    def _labels_as_predicted(self, X, plan: FitPlan, sw_np, space: ArraySpace) -> None:
        """Make ``labels_`` what ``predict(X)`` returns after a fit in a shifted frame.

        A translation-invariant fit assigns the rows in the frame of the data's mean;
        ``cluster_centers_`` are its centroids moved back to the input frame and rounded
        to the dtype of X, and ``predict`` assigns to those in the frame of their own mean.
        Two nearly equidistant centroids can swap in between (float32 rows near 1000 with
        a spread of 0.1: distances 0.036394 and 0.036388 to two centroids); such rows take
        the label ``predict`` gives them, and the cluster weights follow.
        """
        if not plan.geometry.translation_invariant:
            return
        predicted = self.predict(X)  # int64, in the space of labels_
        labels = to_torch(predicted)
        if not torch.equal(labels, to_torch(self.labels_)):
            self.labels_ = predicted
            self._counts = space.fitted(cluster_counts(labels.cpu().numpy(), sw_np,
                                                       self.n_clusters))

    def _fit_in_memory(self, X, sw_np, plan: FitPlan) -> FitResult:
        """Lloyd on the validated rows: restarts, then the plan's refiner. Above the plan's
        ``subsample`` rows, restarts and refiner run on a random subset of the rows, then
        every row is assigned to the subset's centroids (predict's pass)."""
        Xt, sw, shift, geometry, tol = self._fit_frame(X, sw_np, plan)
        n_samples, dtype = X.shape[0], numpy_dtype(X.dtype)
        if plan.subsample is None or n_samples <= plan.subsample:
            fit = self._fit_restarts(Xt, sw, shift, geometry, tol, dtype, plan)
        else:
            generator = make_generators(self.random_state, 2)[1]  # [0] seeds the first restart
            rows = torch.randperm(n_samples, generator=generator)[:plan.subsample].sort().values
            rows = rows.to(Xt.device)
            if self.verbose:
                print(f"Fitting on a random subset of {plan.subsample} of {n_samples} rows")
            on_subset = self._fit_restarts(Xt[rows], sw[rows], shift, geometry, tol, dtype,
                                           plan)
            if self.verbose:
                print(f"Assigning all {n_samples} rows to the subset's centroids")
            fit = assign_every_row(Xt, on_subset, geometry, sw)
        stats = plan.statistics_of(Xt, fit, geometry)
        return fit.as_fit_result(shift, stats)

    def _fit_frame(self, X, sw_np, plan: FitPlan):
        """The validated rows as tensors in the fit's frame: ``(Xt, sample_weight, shift,
        geometry, tol)``, ``tol`` scaled by the mean feature variance."""
        device = resolve_device(self.device, like=X)
        sw = torch.from_numpy(sw_np).to(device)
        Xt = plan.embed(to_tensor(X, device))
        geometry = plan.lloyd_geometry
        Xt, shift = into_fit_frame(Xt, sw, geometry)
        tol = scaled_tol(self.tol, X.shape[0], lambda: column_variance(Xt))
        return Xt, sw, shift, geometry, tol

    def _fit_restarts(self, Xt, sw, shift, geometry, tol, dtype, plan: FitPlan) -> LloydFit:
        """Seed, run Lloyd, keep the restart of lowest inertia (with a refiner: after it)."""
        seeding = self._seeding(plan, Xt.shape[1], dtype)
        centers = seeding(Xt, sw, shift)
        if self.verbose:
            print(f"Initialization complete: {len(seeding.generators)} restart(s)")
        pairwise: list = []  # each restart's final (n, K) distances, or None (see lloyd)
        runs = lloyd(Xt, centers, geometry, sw, self.max_iter, tol, self.verbose,
                     desc=f"{type(self).__name__}.fit", pairwise=pairwise)
        if plan.refine is None:
            return best_restart(runs, pairwise)
        refine = functools.partial(plan.refine, Xt, sw, geometry=geometry, tol=tol)
        return best_refined(runs, pairwise, refine, seeding.generators, self.verbose)

    def _fit_dask(self, X, sw_np, plan: FitPlan) -> FitResult:
        """Blockwise Lloyd passes over the validated dask X (:mod:`skxclust._dask_fit`):
        seeded with ``plan`` on the client; the workers get the plan of an unfitted clone."""
        recipe = clone(self).set_params(**plan.resolved)  # no fitted attribute; "auto" chosen
        n_features = X.shape[1]
        shipped = recipe._fit_plan(n_features)
        return fit_blockwise(
            X, sw_np, n_clusters=self.n_clusters, embed=shipped.embed,
            make_geometry=functools.partial(recipe._make_geometry, n_features),
            seeding=functools.partial(self._seeding, plan),
            statistics=shipped.statistics.sums,
            statistics_rows=shipped.statistics.rows(X.shape[0]),
            device=self.device, max_iter=self.max_iter,
            tol=self.tol, verbose=self.verbose)

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
                X, _ = check_dask_array(self, X, reset=not hasattr(self, "cluster_centers_"))
                for block, weights in dask_row_blocks(X, sample_weight):
                    self.partial_fit(block, sample_weight=weights)
                return self
            first = not hasattr(self, "cluster_centers_")
            space = array_space(X, type(self).__name__)
            if not first:
                check_fitted_space(self, space, "partial_fit")
            X, sw_np, plan = self._validated_fit_input(
                X, sample_weight, reset=first,
                context=" in the first call of partial_fit (it seeds the centroids)")
            if not first:  # later chunks take the dtype of the first
                dtype = float_dtype(self.cluster_centers_)
                X = X.to(getattr(torch, dtype.name)) if isinstance(X, torch.Tensor) else \
                    X.astype(dtype, copy=False)
                sw_np = sw_np.astype(dtype, copy=False)
            result, counts = self._partial_fit_chunk(X, sw_np, first, plan)
            self._finish_fit(result, plan, counts=counts, space=space,
                             n_steps=getattr(self, "n_steps_", 0) + 1)
        return self

    def _partial_fit_chunk(self, X, sw_np, first: bool,
                           plan: FitPlan) -> tuple[FitResult, np.ndarray]:
        """One mini-batch step on the validated chunk; (result on the chunk, counts)."""
        device = resolve_device(self.device, like=X)
        sw = torch.from_numpy(sw_np).to(device)
        Xt = plan.embed(to_tensor(X, device))
        geometry = plan.geometry
        if first:  # seed on the chunk, in the frame of its weighted mean
            Xt, shift = into_fit_frame(Xt, sw, geometry)
            seeding = self._seeding(plan, Xt.shape[1], numpy_dtype(X.dtype), n_init=1)
            centers = seeding(Xt, sw, shift)[0]
            original = None if seeding.init_array is None else \
                torch.as_tensor(seeding.init_array, dtype=Xt.dtype, device=device)
            counts = torch.zeros(self.n_clusters, dtype=torch.float64, device=device)
        else:  # continue from the centroids, in the frame of their mean
            centers = original = fitted_tensor(self.cluster_centers_, device, copy=True)
            if centers.shape[1] != Xt.shape[1]:
                raise ValueError(f"X maps to {Xt.shape[1]} features but the centroids have "
                                 f"{centers.shape[1]}.")
            Xt, shift = into_fit_frame(Xt, sw, geometry, shift=centers.mean(dim=0))
            centers = centers - shift
            counts = fitted_tensor(self._counts, device, copy=True)
        with pass_threads(geometry.pass_work(Xt, centers)):
            before = counts
            centers, counts = mini_batch_step(geometry.for_rows(Xt, sw), Xt, centers,
                                              counts, sw)
            # the chunk's labels after the step: an assignment outside any run, as
            # predict's (a ST run continues warps and caps its first pass)
            after = geometry.assign(Xt, centers)
            stats = plan.statistics.sums(Xt, after.labels, centers, geometry,
                                         distances=after.pairwise)
        inertia = float(after.distances.to(torch.float64) @ sw.to(torch.float64))
        fitted = centers + shift
        if original is not None:  # what the chunk gave no weight keeps its value exactly
            fitted = keep_unweighted(fitted, original, before, counts)
        result = FitResult(fitted.cpu().numpy(), after.labels.cpu().numpy(),
                           inertia, None, stats, shift.cpu().numpy())
        return result, counts.cpu().numpy()

    # -- fit shortcuts, pickling, tags -------------------------------------------------
    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit and return ``labels_``. See :meth:`fit`."""
        return self.fit(X, sample_weight=sample_weight).labels_

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fit, then return :meth:`transform` of X."""
        return self.fit(X, sample_weight=sample_weight).transform(X)

    def __getstate__(self):
        """Pickled state with every torch module or tensor moved to the CPU.

        Fitted attributes are numpy arrays already; this covers torch objects among the
        parameters (e.g. a ``feature_extractor`` on a GPU), so that a model fitted on a GPU
        unpickles on a machine without one; the estimator itself is left unchanged.
        """
        return {name: on_cpu(value) for name, value in super().__getstate__().items()}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.array_api_support = True  # see skxclust._array_api
        return tags
