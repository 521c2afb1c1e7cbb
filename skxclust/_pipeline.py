r"""Explain a k-means that sits behind affine preprocessing (scalers, PCA, SVD, ...).

If the steps before the final :class:`ExplainableKMeans` map the input affinely,
``z = x A + t``, the neuralized layer composed with them is still linear in ``x``:

.. math::  h_{ck}(x) = w_{ck}^\top (xA + t) + b_{ck} = \hat w_{ck}^\top x + \hat b_{ck},
   \quad \hat w_{ck} = A w_{ck},\ \hat b_{ck} = w_{ck}^\top t + b_{ck}.

Relevance is propagated with root points ``r_ck`` on each decision hyperplane: the
least-squares preimage of the midpoint ``(mu_c + mu_k)/2`` projected onto
``{x : h_ck(x) = 0}``. Then ``R_i = sum_k R_k (x_i - r_cki) w_hat_cki / h_ck`` sums to
``f_c(x)`` exactly, and reduces to the plain midpoint rule when the map is the identity.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_array, check_is_fitted

from ._array_api import array_space
from ._explainable import ExplainableKMeans
from ._validation import check_beta, check_explainable_n_clusters, check_target, host_tensor
from .nn.lrp import root_point_relevance
from .nn.neuralized import competitor_index, neuralize

__all__ = ["explain_pipeline", "affine_map_of"]


def _dense(a) -> np.ndarray:
    return np.asarray(a.toarray() if sp.issparse(a) else a, dtype=np.float64)


def affine_map_of(step, name: str, n_features: int, X_check: np.ndarray):
    """Recover ``(A, t)`` with ``step.transform(x) == x @ A + t``, or raise.

    The map is probed at the origin and at ``s e_j`` along each feature, ``s`` the largest
    absolute value in ``X_check`` (1 where it is all zeros): a step on the data's scale, so
    the rounding of ``A`` stays relative to the data however large its values or offset (a
    unit step carries rounding of the step's offset, which grows with the data's values).
    The pair is then verified on ``X_check`` to a relative tolerance of 1e-8 of the
    magnitude of the terms of ``x @ A + t``, so any fitted affine transformer is accepted
    and any non-affine one is refused.

    Returns
    -------
    A : ndarray of shape (n_features, n_out)
    t : ndarray of shape (n_out,)
    """
    if not hasattr(step, "transform"):
        raise TypeError(f"pipeline step {name!r} ({type(step).__name__}) has no transform.")
    size = float(np.abs(X_check).max()) or 1.0
    probe = np.vstack([np.zeros((1, n_features)), size * np.eye(n_features)])
    out = _dense(step.transform(probe))
    t = out[0]
    A = (out[1:] - t) / size
    expected = X_check @ A + t
    actual = _dense(step.transform(X_check))
    magnitude = np.abs(X_check) @ np.abs(A) + np.abs(t)  # of the terms of x @ A + t
    scale = max(np.abs(actual).max(), magnitude.max(), 1.0)
    if actual.shape != expected.shape or not np.allclose(actual, expected, rtol=0,
                                                         atol=1e-8 * scale):
        raise ValueError(
            f"pipeline step {name!r} ({type(step).__name__}) is not an affine map of its "
            "input, so relevance cannot be propagated through it exactly. Supported steps: "
            "StandardScaler, MinMaxScaler, MaxAbsScaler, PCA, TruncatedSVD, or any fitted "
            "linear/affine transformer."
        )
    return A, t


def explain_pipeline(pipeline: Pipeline, X, target=None, beta=None) -> np.ndarray:
    """Relevance of the *input* features of a pipeline ending in ExplainableKMeans.

    Parameters
    ----------
    pipeline : sklearn.pipeline.Pipeline
        Fitted; its last step is an :class:`ExplainableKMeans` (without
        ``feature_extractor``) and every other step is an affine transformer.
    X : array-like of shape (n_samples, n_features)
        Input of the pipeline.
    target : None, int or array-like of shape (n_samples,), default=None
        Cluster to explain; None means the predicted one.
    beta : float, default=None
        Soft-min stiffness; None uses the final estimator's ``beta_``.

    Returns
    -------
    relevance : ndarray of shape (n_samples, n_features)
        Rows sum to ``pipeline.decision_function(X)[i, target_i]`` (exactly, up to
        rounding).

    Raises
    ------
    TypeError
        Under scikit-learn's array API dispatch, for X or a fitted model in another
        namespace than numpy (the composition runs on numpy).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skxclust import ExplainableKMeans, explain_pipeline
    >>> X = np.random.default_rng(0).normal(size=(50, 3)) * [1., 10., 100.]
    >>> pipe = make_pipeline(StandardScaler(), ExplainableKMeans(3, random_state=0)).fit(X)
    >>> R = explain_pipeline(pipe, X)
    >>> bool(np.allclose(R.sum(1), pipe.decision_function(X).max(1)))
    True
    """
    if not isinstance(pipeline, Pipeline):
        raise TypeError(f"pipeline must be a sklearn Pipeline, got {type(pipeline).__name__}.")
    km = pipeline.steps[-1][1]
    if not isinstance(km, ExplainableKMeans):
        raise TypeError(
            f"the last pipeline step must be an ExplainableKMeans, got {type(km).__name__}."
        )
    check_is_fitted(km)
    if km.feature_extractor is not None:
        raise ValueError("explain_pipeline does not support an ExplainableKMeans with a "
                         "feature_extractor; call its explain() on the transformed data.")
    check_explainable_n_clusters(km.n_clusters)
    space, fitted = array_space(X, "explain_pipeline"), array_space(km.cluster_centers_)
    if space.kind != "numpy" or fitted.kind != "numpy":
        raise TypeError(
            "explain_pipeline composes the pipeline's steps on numpy arrays; under array API "
            f"dispatch it got X as {space.describe()} and a model fitted on "
            f"{fitted.describe()}. Call it on numpy input with a pipeline fitted on numpy, "
            "or explain the last step in its input space on the device: "
            "pipeline[-1].explain(pipeline[:-1].transform(X))."
        )
    X_in = check_array(X, dtype=np.float64, ensure_all_finite=True)
    n_samples, n_features = X_in.shape
    check_rows = X_in[: min(n_samples, 64)]

    A = np.eye(n_features)
    t = np.zeros(n_features)
    current = check_rows
    for name, step in pipeline.steps[:-1]:
        if step is None or step == "passthrough":
            continue
        A_step, t_step = affine_map_of(step, name, current.shape[1], current)
        A, t = A @ A_step, t @ A_step + t_step
        current = current @ A_step + t_step

    mu = host_tensor(km.cluster_centers_, np.float64)
    w, b = neuralize(mu)  # (K, K-1, Dz), (K, K-1)
    A_t, t_t = torch.from_numpy(A), torch.from_numpy(t)
    w_hat = w @ A_t.T  # (K, K-1, D)
    b_hat = w @ t_t + b
    # root: least-squares preimage of the midpoint, projected on the hyperplane h = 0
    midpoint = 0.5 * (mu[:, None, :] + mu[competitor_index(km.n_clusters)])
    root0 = (midpoint - t_t) @ torch.linalg.pinv(A_t)
    offset = (root0 * w_hat).sum(-1) + b_hat
    norm2 = (w_hat * w_hat).sum(-1).clamp_min(torch.finfo(torch.float64).tiny)
    root = root0 - (offset / norm2)[..., None] * w_hat

    beta = km.beta_ if beta is None else check_beta(beta)
    xt = host_tensor(X_in)
    labels = pipeline.predict(X_in) if target is None else None
    tgt = torch.from_numpy(check_target(target, n_samples, km.n_clusters, labels))
    out = np.empty_like(X_in)
    for i in range(0, n_samples, km.batch_size):
        sl = slice(i, i + km.batch_size)
        out[sl] = root_point_relevance(xt[sl], w_hat, b_hat, root, tgt[sl], beta)[0].numpy()
    return out
