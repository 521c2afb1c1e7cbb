"""ExplainableKMeans: k-means whose assignments explain themselves (NEON)."""

from __future__ import annotations

import copy
from numbers import Real

import numpy as np
import torch
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_feature_names_in, check_is_fitted

from ._array_api import HOST, ArraySpace
from ._base import BaseTorchKMeans
from ._dask import blockwise
from ._euclidean import EuclideanGeometry
from ._inference import frame_like_transform, inference_threads
from ._plan import FitPlan, neon_statistics
from ._reference import reference_tensor
from ._threads import EXPLAIN_BLOCK_VALUES, block_rows
from ._validation import (
    check_beta,
    check_explainable_n_clusters,
    check_lrp_options,
    check_target,
    check_top_k,
    fitted_tensor,
    resolve_device,
)
from .nn.lrp import midpoint_basis, neon_relevance
from .nn.neuralized import (
    PairwiseSquaredDistance,
    SoftKMeans,
    cluster_evidence,
    neuralized_head,
)
from .nn.propagation import lrp_backward, supported_layers
from .nn.reference_rule import neon_reference_relevance
from .nn.sparse import to_dense

__all__ = ["ExplainableKMeans"]


class ExplainableKMeans(BaseTorchKMeans):
    r"""K-means on a PyTorch backend whose assignments are explained exactly (NEON).

    The assignment is rewritten as a small neural network ("neuralization"): the evidence
    for cluster ``c`` is

    .. math::  f_c(x) = \min_{k\ne c}\; \lVert x-\mu_k\rVert^2 - \lVert x-\mu_c\rVert^2
               = \min_{k\ne c}\; w_{ck}^\top x + b_{ck},

    with :math:`w_{ck} = 2(\mu_c-\mu_k)`, :math:`b_{ck} = \lVert\mu_k\rVert^2 -
    \lVert\mu_c\rVert^2`. ``argmax_c f_c(x)`` is the k-means label and ``f_c > 0`` for the
    assigned cluster. :meth:`explain` splits ``f_c(x)`` over the input features by
    layer-wise relevance propagation (soft-min over competitors, then the midpoint rule);
    the relevances of a sample sum to ``f_c(x)`` exactly (with a ``feature_extractor``,
    but for what the propagation through it absorbs: see :meth:`explain`).

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters.
    init : {"k-means++", "random"} or array-like, default="k-means++"
        Seeding method, or initial centroids of shape (n_clusters, n_features) (then a
        single init is run).
    n_init : "auto" or int, default="auto"
        Number of seedings; the run with the lowest inertia is kept. "auto" is 1 for
        k-means++ and 10 otherwise (as in scikit-learn). The restarts run together:
        every pass over X (one matrix product against all restarts' centroids, and the
        centroid sums) serves all restarts still iterating, so ``n_init=10`` costs far
        less than ten fits. Each restart converges on its own, with the seeding and
        stopping rule it would have alone. On the CPU, a fit too small for torch's
        intra-op threads runs its restarts in two groups on two Python threads (one torch
        thread each) when torch has two threads or more; the result does not depend on it.
    max_iter : int, default=300
        Maximum number of Lloyd iterations per init.
    tol : float, default=1e-4
        Relative tolerance on the centroid shift (scaled by the mean feature variance,
        as in scikit-learn).
    beta : "auto" or float, default="auto"
        Soft-min stiffness used by :meth:`explain` to share the evidence between
        competing clusters: 0 spreads it evenly, ``inf`` gives it all to the nearest
        competitor. "auto" uses ``1 / mean f_c(x)`` over the training data (scale free).
    temperature : float, default=1.0
        Temperature ``T > 0`` of :meth:`predict_proba`, ``softmax(-||x-mu||^2 / 2T)``.
        Distances scale with the data, so choose ``T`` on that scale; ``T -> 0`` gives the
        hard labels.
    feature_extractor : torch.nn.Module or None, default=None
        *Deep clusters*: when given, k-means runs on ``phi(X)`` (outputs flattened per
        row) and :meth:`explain` propagates the NEON relevance of ``phi(x)`` back to the raw
        input by LRP (see :func:`skxclust.nn.lrp_backward`). It must be an
        ``nn.Sequential`` (nesting allowed) of Linear, Conv1d/2d, ReLU, average/max pools,
        Flatten/Unflatten, Identity, Dropout; other layers are refused when fitting. The
        module is used frozen in evaluation mode on a copy, never modified; inputs are cast
        to its parameters' dtype. ``cluster_centers_`` then live in feature space.
    batch_size : int, default=4096
        Rows processed at once by every method; bounds memory. Results do not depend on
        it. For float64 data, ``fit`` finds nearest centroids with float32 products and
        redoes in float64 only the rows whose two nearest centroids are within the float32
        error bound: labels, centroids and ``inertia_`` are those of float64 arithmetic
        (the float32 copy of X it keeps is half the size of X).
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="auto"
        Where the computation runs; "auto" uses CUDA when available, and under
        scikit-learn's array API dispatch the device of a torch input (results always
        come back in X's namespace, on X's device; see the user guide).
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation (through a local ``torch.Generator``).
    verbose : int, default=0
        Print progress per Lloyd iteration when > 0.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
    labels_ : ndarray of shape (n_samples,)
    inertia_ : float
        Weighted sum of squared distances of samples to their centroid.
    n_iter_ : int
        Lloyd iterations of the kept run.
    beta_ : float
        The resolved soft-min stiffness used by :meth:`explain`.
    reference_ : ndarray of shape (n_features,)
        Unweighted mean of the training rows (of the last chunk after
        :meth:`partial_fit`): :meth:`explain`'s ``reference="mean"``. Not with a
        ``feature_extractor``.
    n_steps_ : int
        :meth:`partial_fit` steps since the last :meth:`fit` (0 after ``fit``).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when X has string feature names.

    See Also
    --------
    sklearn.cluster.KMeans : the reference implementation of the same objective.
    SpatialTransformerKMeans : deformation-invariant k-means for images and signals.

    Notes
    -----
    :meth:`partial_fit` updates the model chunk by chunk with the semantics of
    :class:`sklearn.cluster.MiniBatchKMeans` (the first chunk is seeded by the ``init`` method; each
    step moves a centroid towards its members with learning rate ``weight / (count +
    weight)``); it works with ``dask_ml.wrappers.Incremental``. A dask array passed to
    :meth:`fit` is fitted by blockwise Lloyd passes on the active dask scheduler (same
    result as in memory for the same initial centroids), and the inference methods return
    dask arrays for dask input; see the user guide, "Scaling out".

    Every method takes scipy sparse matrices (e.g. TF-IDF text features) without
    densifying them, with results equal to the dense ones up to rounding;
    ``explain(X, top_k=k)`` keeps only the ``k`` most relevant features per row. The
    ``transform`` columns are named ``explainablekmeans0, ...`` (``get_feature_names_out``),
    so ``set_output(transform="pandas" | "polars")`` works, and ``explain`` then returns a
    DataFrame named by the input's features. With the same initial centroids, a fit equals
    :class:`sklearn.cluster.KMeans`'s (centres, labels, inertia, ``n_iter_``, relocation of
    empty clusters); see the user guide, "A drop-in for scikit-learn's KMeans".

    Examples
    --------
    >>> import numpy as np
    >>> from skxclust import ExplainableKMeans
    >>> X = np.array([[0., 0.], [0., 1.], [5., 5.], [5., 6.]])
    >>> km = ExplainableKMeans(n_clusters=2, random_state=0).fit(X)
    >>> R = km.explain(X)
    >>> bool(np.allclose(R.sum(axis=1), km.decision_function(X).max(axis=1)))
    True
    """

    _parameter_constraints: dict = {
        **BaseTorchKMeans._parameter_constraints,
        "beta": [StrOptions({"auto"}), Interval(Real, 0, np.inf, closed="both")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "feature_extractor": [None, torch.nn.Module],
    }

    def __init__(
        self,
        n_clusters=8,
        *,
        init="k-means++",
        n_init="auto",
        max_iter=300,
        tol=1e-4,
        beta="auto",
        temperature=1.0,
        feature_extractor=None,
        batch_size=4096,
        device="auto",
        random_state=None,
        verbose=0,
    ):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.beta = beta
        self.temperature = temperature
        self.feature_extractor = feature_extractor
        self.batch_size = batch_size
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _sparse_refusal(self) -> str | None:
        if self.feature_extractor is not None:
            return "a feature_extractor takes dense rows"
        return None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self.feature_extractor is None
        return tags

    def _extractor(self, device: torch.device) -> tuple[torch.nn.Module, torch.dtype]:
        """A frozen evaluation-mode copy of the feature extractor on ``device``."""
        module = copy.deepcopy(self.feature_extractor).to(device).eval().requires_grad_(False)
        param = next(module.parameters(), None)
        return module, (param.dtype if param is not None else torch.get_default_dtype())

    def _embed(self, X: torch.Tensor) -> torch.Tensor:
        if self.feature_extractor is None:
            return X
        module, dtype = self._extractor(X.device)
        try:
            with torch.no_grad():
                parts = [module(X[i : i + self.batch_size].to(dtype)).flatten(1)
                         for i in range(0, X.shape[0], self.batch_size)]
        except torch.OutOfMemoryError:
            raise
        except RuntimeError as exc:  # e.g. X does not have the extractor's input size
            raise ValueError(
                f"feature_extractor cannot be applied to X of shape {tuple(X.shape)}: {exc}"
            ) from exc
        return torch.cat(parts).to(X.dtype)

    def _make_geometry(self, n_features: int) -> EuclideanGeometry:
        return EuclideanGeometry(self.batch_size)

    def _fit_plan(self, n_features: int) -> FitPlan:
        """Lloyd with candidate screening; for beta="auto", the sums of the assigned
        evidence that ``beta_`` is fitted from. Checks the feature extractor's layers."""
        if self.feature_extractor is not None:
            supported_layers(self.feature_extractor)
        return FitPlan(
            self._make_geometry(n_features), self._embed,
            fit_geometry=EuclideanGeometry(self.batch_size, screen=True),
            statistics=neon_statistics(self.beta, rows=self.feature_extractor is None))

    @blockwise("clusters")
    def decision_function(self, X):
        """Cluster evidence ``f_c(x) = min_{k != c} ||x-mu_k||^2 - ||x-mu_c||^2``.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            A dask array gives a dask array, computed block by block.

        Returns
        -------
        ndarray of shape (n_samples, n_clusters)
            ``argmax`` along axis 1 equals :meth:`predict`; the assigned cluster's value is
            positive (ties aside). With a single cluster every entry is ``+inf``.
        """
        return self._map_pairwise(X, cluster_evidence, "decision_function")

    @blockwise("clusters")
    def predict_proba(self, X):
        """Soft assignments ``softmax_k(-||x - mu_k||^2 / (2 T))``, T = ``temperature``.

        This is the linear layer + softmax of :class:`skxclust.nn.SoftKMeans`.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            A dask array gives a dask array, computed block by block.

        Returns
        -------
        ndarray of shape (n_samples, n_clusters)
            Rows sum to one; as ``T -> 0`` they tend to the one-hot hard labels.
        """
        scale = 2.0 * self.temperature
        return self._map_pairwise(X, lambda d: torch.softmax(-d / scale, dim=1),
                                  "predict_proba")

    @blockwise("features", row_args=("target",), in_memory_only=("top_k",))
    def explain(self, X, target=None, beta=None, *, top_k=None, rule="epsilon",
                epsilon=1e-9, reference=None):
        """Relevance of every input feature for a cluster assignment (NEON / LRP).

        For each row, the evidence ``f_c(x)`` is first split over the competitors ``k`` by
        a soft-min, ``R_k = softmin_k(beta * h_ck) f_c``, then each ``R_k`` is propagated
        onto the features by the midpoint rule ``R_i = sum_k R_k (x_i - m_cki) w_cki / h_ck``
        with ``m_ck = (mu_c + mu_k) / 2`` (or, with a ``reference``, by the reference rule of
        :mod:`skxclust.nn.reference_rule`). The relevances of a row sum to ``f_c(x)``.

        Parameters
        ----------
        X : {array-like, sparse matrix} or dask array of shape (n_samples, n_features)
            A sparse matrix is explained in blocks of at most ``batch_size`` rows (of
            about 2**19 values, so fewer rows for wide matrices; each block densified on
            its own, never the whole matrix); a dask array gives a dask array, computed
            block by block.
        target : None, int or array-like of shape (n_samples,), default=None
            Cluster to explain: the assigned one (None), one for all rows, or one per row.
        beta : float, default=None
            Soft-min stiffness in ``[0, inf]``; None uses the fitted ``beta_``.
        top_k : int, default=None
            Return only the ``top_k`` most relevant features of each row (largest
            relevance first) instead of the full ``(n_samples, n_features)`` map: for wide
            inputs such as a TF-IDF vocabulary, memory is then ``O(n_samples * top_k)``.
            Not for dask arrays.
        rule : {"epsilon", "zplus"} or rule object, default="epsilon"
            Only with a ``feature_extractor``: LRP rule for its Linear/Conv layers after
            the first one. The first Linear/Conv layer sees the raw input and always uses
            the epsilon rule, whatever reshapes (such as ``nn.Unflatten``) or pools come
            before it. "zplus" suits ReLU networks. A rule object is accepted too, e.g.
            ``skxclust.nn.GammaRule(0.25)`` or your own object with a
            ``propagate(layer, a, relevance)`` method (see :mod:`skxclust.nn.rules`).
        epsilon : float, default=1e-9
            Only with a ``feature_extractor``: stabiliser of the epsilon rule (of the first
            Linear/Conv layer, and of the rule given by name). An output that is zero to
            rounding (``|z| <= sqrt(eps) * sum |w a|``) passes no relevance on, whatever
            ``epsilon``.
        reference : None, "mean" or array-like of shape (n_features,), default=None
            None: the midpoint rule. An input ``z`` (e.g. the training mean): root points
            are ``z`` projected onto each decision hyperplane, relevance is gradient times
            ``x - z`` plus a share of the evidence ``z`` keeps, rows still sum to ``f_c(x)``
            (:mod:`skxclust.nn.reference_rule`). "mean": ``z = reference_``, the mean
            training row (the default of :meth:`SpatialTransformerKMeans.explain`). Not
            with a ``feature_extractor``.

        Returns
        -------
        relevance : ndarray or DataFrame of shape (n_samples, n_features)
            Same dtype as X. Positive values speak for cluster ``target``, negative
            values against it. Without a feature extractor, rows sum to ``f_target(x)``
            exactly. With one, a row sums to ``f_target(x)`` minus what the LRP pass
            absorbs (see :mod:`skxclust.nn.propagation`; :func:`skxclust.nn.lrp_trace`
            returns it): the relevance that reaches zero activations (ReLU outputs equal
            to 0, Linear/Conv outputs zero to rounding), which holds NEON's share on
            zero features (a third of ``f`` on the median row of the deep-clusters
            example), and the share of ``epsilon`` and of the biases at each Linear/Conv
            layer (at most about ``epsilon * sum_j |R_j| / |z_j|`` without biases).
            When the estimator's output is
            set to pandas or polars (``set_output(transform=...)`` or scikit-learn's
            ``transform_output`` config), a DataFrame whose columns are the input's
            feature names (``feature_names_in_``, else ``x0, x1, ...``), with the
            index of a pandas input.
        (features, relevance) : tuple of ndarrays of shape (n_samples, top_k)
            With ``top_k``: the column indices of the ``top_k`` largest relevances of
            each row, in decreasing order, and those relevances (map indices to names
            with ``feature_names_in_[features]`` or a vectorizer's vocabulary).

        Examples
        --------
        >>> import numpy as np
        >>> from scipy.sparse import csr_matrix
        >>> from skxclust import ExplainableKMeans
        >>> X = csr_matrix(np.array([[1., 0, 0], [.9, .1, 0], [0, 0, 1], [0, .2, .8]]))
        >>> km = ExplainableKMeans(n_clusters=2, random_state=0).fit(X)
        >>> features, relevance = km.explain(X, top_k=1)
        >>> km.labels_.tolist()
        [0, 0, 1, 1]
        >>> features[:, 0].tolist()  # a feature's absence from the rival cluster counts too
        [0, 2, 2, 0]
        """
        raw, extremes, space = self._validated_tensor(X, "explain")
        check_explainable_n_clusters(self.n_clusters)
        check_lrp_options(rule, epsilon)
        top_k = check_top_k(top_k, raw.shape[1])
        beta = self.beta_ if beta is None else check_beta(beta)
        if reference is not None and self.feature_extractor is not None:
            raise ValueError("reference is not supported with a feature_extractor: root "
                             "points live in the embedding, not in the input; got "
                             f"feature_extractor={self.feature_extractor!r}.")
        reference = reference_tensor(reference, getattr(self, "reference_", None),
                                     raw.shape[1], raw.device, torch.float64)
        backward = None
        if self.feature_extractor is not None:
            layers_module, dtype = self._extractor(raw.device)
            layers = supported_layers(layers_module)

            def backward(rows, relevance):
                return lrp_backward(layers, raw[rows].to(dtype), relevance.to(dtype),
                                    rule=rule, epsilon=epsilon).reshape(relevance.shape[0], -1)
        out = self._explain_rows(raw, extremes, target, beta, backward, top_k, space,
                                 reference)
        if top_k is not None:
            return out
        return frame_like_transform(self, out, X, _check_feature_names_in(self))

    def _explain_rows(self, raw: torch.Tensor, extremes: tuple, target, beta: float,
                      backward=None, top_k: int | None = None, space: ArraySpace = HOST,
                      reference: torch.Tensor | None = None):
        """NEON in row blocks of the (embedded) input; returns the relevance (numpy, or
        of the input's namespace: ``space``).

        Each block is centred (the frame of :meth:`_inference_frame`; sparse blocks are
        densified instead, uncentred), its label taken from the same product that gives
        ``h`` (no separate assignment pass) and, without a feature extractor or
        ``top_k``, its relevance written straight into the output: X is read once and the
        output written once. ``backward(rows, relevance)`` carries the relevance of the
        embedding back to the input (LRP through the feature extractor). With ``top_k``,
        returns the (features, relevance) of the ``top_k`` largest relevances per row.
        ``reference``: the reference rule's input (None: the midpoint rule).
        """
        n, n_features = raw.shape
        if target is not None:
            target = torch.from_numpy(
                check_target(target, n, self.n_clusters, None)).to(raw.device)
        with inference_threads(raw, self.n_clusters):
            Xt, centers, _, shift = self._inference_frame(raw, extremes)
            # cache-sized blocks (see _threads); with a feature extractor, batch_size rows
            # bound LRP's memory
            step = self.batch_size if backward is not None else \
                block_rows(EXPLAIN_BLOCK_VALUES, Xt.shape[1], self.batch_size)
            if top_k is None:
                out = space.empty(n, n_features, dtype=raw.dtype)
            else:
                top = (space.empty(n, top_k, dtype=torch.int64),
                       space.empty(n, top_k, dtype=raw.dtype))
            direct = (backward is None and top_k is None and reference is None
                      and out.device == raw.device)
            relevance = out if direct else None
            # computed once, and one (rows, 2D) product buffer for every block
            basis = midpoint_basis(centers)
            workspace = torch.empty(min(step, n), basis.shape[1], dtype=centers.dtype,
                                    device=centers.device)
            if reference is not None:
                ref = reference.to(centers.dtype)
                ref = ref if shift is None else ref - shift
            for rows, block in self._framed_chunks(Xt, shift, step):
                if reference is not None:
                    part, _ = neon_reference_relevance(
                        to_dense(block), centers,
                        None if target is None else target[rows], beta, ref)
                else:
                    part, _ = neon_relevance(
                        to_dense(block), centers, None if target is None else target[rows],
                        beta, out=None if relevance is None else relevance[rows],
                        basis=basis, workspace=workspace[: block.shape[0]])
                if backward is not None:
                    part = backward(rows, part)
                if top_k is not None:
                    values, features = torch.topk(part, top_k, dim=1)
                    top[0][rows] = features
                    top[1][rows] = values.to(raw.dtype)
                elif not direct:
                    out[rows] = part.to(raw.dtype)
        return space.output(out) if top_k is None else tuple(map(space.output, top))

    def as_module(self, kind="neuralized", beta=None):
        """The fitted model as a ``torch.nn.Module`` (for zennit, captum, deep pipelines).

        Parameters
        ----------
        kind : {"neuralized", "soft", "distance"}, default="neuralized"
            - "neuralized": :class:`~skxclust.nn.NeuralizedKMeans` (weights ``(K, K-1, D)``)
              followed by a min-pool, mapping ``(N, D)`` to the evidence ``f`` ``(N, K)``,
              equal to :meth:`decision_function`.
            - "soft": :class:`~skxclust.nn.SoftKMeans`, linear layer ``W = mu/T``,
              ``b = -||mu||^2/2T`` and softmax, equal to :meth:`predict_proba`.
            - "distance": :class:`~skxclust.nn.PairwiseSquaredDistance`, squared distances.
        beta : float, default=None
            Only for "neuralized": None for the exact hard min-pool, a positive value for
            the smooth :class:`~skxclust.nn.LogMeanExpPool` (continuous gradients).

        Returns
        -------
        torch.nn.Module
            On the estimator's device, in the dtype of ``cluster_centers_``.
        """
        check_is_fitted(self)
        if kind not in ("neuralized", "soft", "distance"):
            raise ValueError(
                f"kind must be 'neuralized', 'soft' or 'distance', got {kind!r}."
            )
        device = resolve_device(self.device, like=self.cluster_centers_)
        centers = fitted_tensor(self.cluster_centers_, device, copy=True)
        if kind == "distance":
            return PairwiseSquaredDistance(centers)
        if kind == "soft":
            return SoftKMeans(centers, self.temperature)
        if self.n_clusters < 2:
            raise ValueError(
                f"kind='neuralized' needs n_clusters >= 2, got n_clusters={self.n_clusters}."
            )
        if beta is not None:
            beta = check_beta(beta)
            if beta == 0:
                raise ValueError("beta must be > 0 for the LogMeanExp pool, got 0.")
        return neuralized_head(centers, beta)
