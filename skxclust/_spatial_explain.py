r"""Cluster evidence and NEON relevance maps for SpatialTransformerKMeans.

With the optimal warps fixed, centroid ``k`` warped onto sample ``x`` is an *effective
centroid* :math:`a_k = S_k \mu_k`, and the deformation-invariant distance is
:math:`d_k(x) = \lVert x - a_k\rVert^2 + o_k` with the warp penalty
:math:`o_k = \lambda(x)\lVert\delta_k\rVert^2` held fixed. The evidence

.. math::  f_c(x) = \min_{k\ne c} d_k(x) - d_c(x)
   = \min_{k\ne c}\; 2(a_c - a_k)^\top x + \lVert a_k\rVert^2 - \lVert a_c\rVert^2 + o_k - o_c

is exactly the neuralized k-means form with per-sample centroids ``a`` and a constant per
competitor. NEON applies unchanged: soft-min over competitors, then a root point on each
decision hyperplane. By default that is ``reference_`` (the mean of up to 512 training
rows) projected onto
it (the reference rule, :func:`skxclust.nn.reference_rule.neon_reference_relevance`);
``reference=None`` takes the midpoint, ``r_ck = m_ck - (o_k - o_c) w_ck / ||w_ck||^2``
(:func:`skxclust.nn.neon_relevance` with ``offset``). Relevance sums to ``f_c(x)``
exactly either way, lands on the input pixels the warps actually compare, and equals
ExplainableKMeans' relevance with the same root points when the warps are the identity
(``n_steps=0``).

``frame="centroid"`` transports each map into the target centroid's frame by the
normalised adjoint of that warp, ``S_c^T (R / S_c 1)``: every input pixel's relevance is
split over the centroid pixels it was interpolated from. It is conserved except for pixels
whose warped position falls outside the centroid image (they have no source).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ._dask import blockwise
from ._plan import FitStatistics, fitted_beta, mean_row, row_sums
from ._reference import reference_tensor
from ._shapes import resolve_warp_shape
from ._validation import check_beta, check_explainable_n_clusters, check_target
from .nn.lrp import neon_relevance
from .nn.neuralized import cluster_evidence
from .nn.reference_rule import neon_reference_relevance
from .nn.warp_evidence import pixel_noise_variance
from .nn.warps import warp_adjoint, warp_images

__all__ = ["WarpExplanationMixin", "warp_attributes", "warp_statistics", "warp_statistics_rows",
           "warp_sums"]

_BETA_SAMPLE = 512  # training rows of the statistics: beta="auto", noise, reference_


def warp_statistics_rows(n_samples: int) -> np.ndarray:
    """The training rows ``beta_``, ``noise_variance_`` and ``reference_`` are estimated
    on: up to 512, evenly spaced (each needs a full alignment pass)."""
    return np.unique(np.linspace(0, n_samples - 1, _BETA_SAMPLE).astype(np.int64))


def warp_sums(X, labels, centers, geometry, distances=None) -> dict:
    """Sums over the rows of their assigned evidence ``f_c(x)``, their nearest warped
    energy (relative to the row's noise scale, see
    :meth:`~skxclust._warp_geometry.WarpGeometry.noise_scale`) and their pixels, from the
    same warp fits as ``predict`` (``distances`` (n, K): those fits' distances where the
    fit has them, else aligned here). A warping geometry is not translation invariant, so
    X is in the input frame (no shift)."""
    losses = geometry.pairwise(X, centers) if distances is None else distances
    nearest = losses.min(dim=1).values.to(torch.float64)
    scale = geometry.noise_scale(X, centers)
    nearest = nearest if scale is None else nearest / scale
    evidence = cluster_evidence(losses).max(dim=1).values.to(torch.float64)
    return {"evidence": float(evidence.sum()), "energy": float(nearest.sum()), **row_sums(X)}


def warp_statistics(image_shape, beta, n_features: int) -> FitStatistics:
    """The statistics of a warping k-means: :func:`warp_sums` on the rows of
    :func:`warp_statistics_rows`, giving :func:`warp_attributes`."""
    return FitStatistics(warp_sums, warp_statistics_rows,
                         functools.partial(warp_attributes, image_shape, beta, n_features))


def warp_attributes(image_shape, beta, n_features: int, stats: dict) -> dict:
    """``image_shape_``, ``beta_`` (``1 / mean f_c(x)`` for "auto"), ``noise_variance_``
    (the mean nearest energy per pixel) and ``reference_`` (the mean row, the default
    root-point reference of ``explain``) from :func:`warp_sums`."""
    return {"image_shape_": resolve_warp_shape(image_shape, n_features),
            "beta_": fitted_beta(beta, stats),
            "noise_variance_": pixel_noise_variance(stats["energy"], stats["count"], n_features),
            "reference_": mean_row(stats)}


class WarpExplanationMixin:
    """``decision_function``, ``explain`` and ``align`` of a warping k-means (its fitted
    statistics ``beta_``, ``noise_variance_``, ``image_shape_``: :func:`warp_statistics`);
    the warps come from the geometry's public
    :meth:`~skxclust._warp_geometry.WarpGeometry.pair_warps`."""

    # of the estimator this is mixed into (annotations for type checkers, no attributes)
    image_shape: Any
    beta: Any
    beta_: float
    reference_: np.ndarray
    _prepare: Callable[..., Any]  # X, method -> (X, centers, geometry, ArraySpace)
    _validated_tensor: Callable[..., Any]  # X, method -> (raw, extremes, ArraySpace)
    _inference_frame: Callable[..., Any]  # raw, extremes -> (X, centers, geometry, shift)
    _framed_chunks: Callable[..., Any]  # X, shift -> iterator of (rows, chunk)

    def _each_warped_chunk(self, Xt, centers, geometry, fn) -> None:
        """Call ``fn(rows, losses (B, K), warps (B, K, n_basis, D))`` for every chunk of
        rows (in threads, see :meth:`~skxclust._warp_geometry.WarpGeometry.map_chunks`).

        Uses the same optimisation as ``predict`` (candidate screening and threads
        included), so the arg-max of the evidence is the predicted label.
        """
        geometry.map_chunks(lambda rows: fn(rows, *geometry.pair_warps(Xt[rows], centers)),
                            Xt, desc=type(self).__name__, n_centers=centers.shape[0])

    @blockwise("clusters")
    def decision_function(self, X):
        """Deformation-invariant cluster evidence ``f_c(x) = min_{k != c} d_k - d_c``.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            A dask array gives a dask array, computed block by block.

        Returns
        -------
        ndarray of shape (n_samples, n_clusters)
            ``argmax`` along axis 1 equals :meth:`predict`; ``+inf`` when n_clusters == 1.
        """
        Xt, centers, geometry, space = self._prepare(X, "decision_function")
        out = space.empty(Xt.shape[0], centers.shape[0], dtype=Xt.dtype)

        def chunk(rows, losses, _):
            out[rows] = cluster_evidence(losses)

        self._each_warped_chunk(Xt, centers, geometry, chunk)
        return space.output(out)

    @blockwise("features", row_args=("target",))
    def explain(self, X, target=None, beta=None, frame="input", reference="mean"):
        """Relevance maps of the warped-distance cluster assignment (NEON).

        The optimal warps are treated as fixed linear resampling operators: centroid ``k``
        warped onto the sample, ``a_k = S_k mu_k``, is an effective centroid, and the
        penalty of each warp a constant. The evidence ``f_c(x)`` then has the neuralized
        k-means form and is explained by the soft-min of :class:`ExplainableKMeans`, then
        by the reference rule (:mod:`skxclust.nn.reference_rule`) with the training mean
        ``reference_`` as the reference (default), or, with ``reference=None``, by the
        midpoint rule (root points shifted by the penalty difference). Either way the
        relevance of a row sums to ``f_target(x)``.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            A dask array gives a dask array, computed block by block.
        target : None, int or array-like of shape (n_samples,), default=None
            Cluster to explain: the assigned one (None), one for all rows, or one per row.
        beta : float, default=None
            Soft-min stiffness in ``[0, inf]``; None uses ``beta_``.
        frame : {"input", "centroid"}, default="input"
            "input": maps on the sample's pixels; rows sum to ``f_target(x)`` exactly.
            "centroid": maps moved into the target centroid's frame by the normalised
            adjoint of its warp (aligned with ``cluster_centers_``); conserved except for
            relevance on pixels that the warp samples from outside the centroid image.
        reference : "mean", None or array-like of shape (n_features,), default="mean"
            An input ``z``: each root point is ``z`` projected onto the pair's decision
            hyperplane, so a pixel's relevance is what setting it to ``z`` would take from
            the evidence (gradient times ``x - z``), plus its share of the evidence ``z``
            itself keeps. "mean": ``z = reference_``, the mean of up to 512 evenly spaced
            training rows. None: the
            midpoint rule (root points between the two centroids of each competing pair;
            the former default). In pixel flipping to the training mean the default
            removes the evidence faster than single-pixel occlusion (user guide: ST
            K-means, "Explaining the assignments").

        Returns
        -------
        relevance : ndarray of shape (n_samples, n_features)
            Same dtype as X.
        """
        if frame not in ("input", "centroid"):
            raise ValueError(f"frame must be 'input' or 'centroid', got {frame!r}.")
        Xt, centers, geometry, space = self._prepare(X, "explain")
        n_clusters = centers.shape[0]
        check_explainable_n_clusters(n_clusters)
        beta = self.beta_ if beta is None else check_beta(beta)
        tgt_np = None if target is None else check_target(target, Xt.shape[0], n_clusters, None)
        ref_t = reference_tensor(reference, getattr(self, "reference_", None), Xt.shape[1],
                                 Xt.device, Xt.dtype)
        model = geometry.model(Xt)
        out = space.empty(*Xt.shape, dtype=Xt.dtype)

        def chunk(sl, losses, warps):
            x = Xt[sl]
            rows = torch.arange(x.shape[0], device=x.device)
            tgt = losses.argmin(dim=1) if tgt_np is None else \
                torch.from_numpy(tgt_np[sl]).to(x.device)
            effective = geometry.effective_centroids(x, centers, warps)
            offset = losses - ((x[:, None, :] - effective) ** 2).sum(-1)
            # NEON is shift invariant: in the frame of x itself, h_ck is a difference of
            # squared distances, with no ||x||^2-sized cancellation (data far from 0)
            if ref_t is None:
                relevance, _ = neon_relevance(torch.zeros_like(x), effective - x[:, None, :],
                                              tgt, beta, offset=offset)
            else:
                relevance, _ = neon_reference_relevance(
                    torch.zeros_like(x), effective - x[:, None, :], tgt, beta, ref_t - x,
                    offset=offset)
            if frame == "centroid":
                relevance = self._to_centroid_frame(relevance, model, warps[rows, tgt])
            out[sl] = relevance

        self._each_warped_chunk(Xt, centers, geometry, chunk)
        return space.output(out)

    @staticmethod
    def _to_centroid_frame(relevance, model, params):
        """``S^T (R / S 1)`` per row: input-frame maps split onto their source pixels."""
        n = relevance.shape[0]
        ones = torch.ones(1, relevance.shape[1], dtype=relevance.dtype, device=relevance.device)
        coverage = warp_images(ones, model, params[None])[0]  # (B, P): S 1
        share = torch.where(coverage > 1e-12, relevance / coverage.clamp_min(1e-12), 0.0)
        rows = torch.arange(n, device=relevance.device)
        splat, _ = warp_adjoint(share, model, params, rows, n)
        return splat

    # -- inspection ----------------------------------------------------------------------
    @blockwise("features")
    def align(self, X):
        """Each sample warped into the frame of its cluster's centroid.

        The optimal warp of the centroid onto the sample is inverted (fixed-point
        iteration) and the sample resampled through it, so aligned members of a cluster
        overlay its centroid; useful for inspection or t-SNE of the residual variation.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            A dask array gives a dask array, computed block by block.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            Same float dtype as X; 0 where the inverse warp leaves the sample.
        """
        raw, extremes, space = self._validated_tensor(X, "align")
        Xt, centers, geometry, shift = self._inference_frame(raw, extremes)
        out = space.empty(*Xt.shape, dtype=Xt.dtype)
        for rows, x in self._framed_chunks(Xt, shift):
            out[rows] = geometry.aligned(x, centers, geometry.assign(x, centers))
        return space.output(out)
