"""The plan of a fit: what an estimator fits with, built in one place.

An estimator states its fit once, in ``_fit_plan(n_features)``: the geometries, the
embedding, the seeder, an optional refiner and the
statistics it keeps. ``BaseTorchKMeans`` runs that plan for the in-memory
fit and ``partial_fit``; the dask fit takes its geometry, embedding, seeder and statistics
but no refiner or subset (so no split-merge moves).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from ._geometry import Geometry
from ._lloyd import FitResult, LloydFit
from ._threads import ROW_SUM_BLOCK_VALUES, block_rows
from .nn.lrp import auto_beta
from .nn.neuralized import cluster_evidence
from .nn.sparse import column_sums

__all__ = ["FitPlan", "FitStatistics", "all_rows", "evidence_sums", "fitted_beta", "mean_row",
           "neon_statistics", "no_attributes", "no_sums", "row_sums"]


def fitted_beta(beta, stats: dict) -> float:
    """``beta_`` of an explaining estimator: ``beta`` itself, or for "auto" ``1 / mean f``
    of the assigned evidence, from the sums ``stats["evidence"]`` and ``stats["count"]``
    of the plan's statistics (f is +inf with one cluster, so ``beta_`` is then 0)."""
    if beta != "auto":
        return float(beta)
    return auto_beta(torch.tensor([stats["evidence"] / stats["count"]], dtype=torch.float64))


def evidence_sums(X, labels, centers, geometry, distances=None) -> dict:
    """Sum and count of the assigned evidence f_c(x) of the rows X (for beta="auto";
    ``distances`` (n, K): ``geometry.pairwise(X, centers)`` where the fit has them)."""
    if distances is None:
        distances = geometry.pairwise(X, centers)
    f = cluster_evidence(distances).gather(1, labels[:, None])
    return {"evidence": float(f.to(torch.float64).sum()), "count": int(f.shape[0])}


def row_sums(X: torch.Tensor) -> dict:
    """Sum (D,) (float64, in blocks of about :data:`ROW_SUM_BLOCK_VALUES` values; a sparse
    X over its stored values) and count of the rows X."""
    step = block_rows(ROW_SUM_BLOCK_VALUES, X.shape[1], max(1, X.shape[0]))
    return {"rows": column_sums(X, step).cpu().numpy(), "count": int(X.shape[0])}


def mean_row(stats: dict) -> np.ndarray:
    """The unweighted mean (D,) of the rows :func:`row_sums` summed, in the input frame
    (``stats["origin"]`` added back: the sums were taken in the fit's frame)."""
    return stats["origin"] + np.asarray(stats["rows"], dtype=np.float64) / stats["count"]


def no_sums(X: torch.Tensor, labels: torch.Tensor, centers: torch.Tensor,
            geometry: Geometry, distances: torch.Tensor | None = None) -> dict:
    """The sums of an estimator that keeps no statistics: ``{}``."""
    return {}


def all_rows(n_samples: int) -> np.ndarray | None:
    """Statistics on every training row (None)."""
    return None


def no_attributes(stats: dict) -> dict:
    """No extra fitted attributes."""
    return {}


@dataclass(frozen=True)
class FitStatistics:
    """The statistics a fit keeps for the estimator's extra fitted attributes.

    Parameters
    ----------
    sums : callable ``(X, labels, centers, geometry, distances=None) -> dict``, \
default=no_sums
        Sums over the rows of X (in the fit's frame, with their labels) that
        ``attributes`` needs; they add up over row blocks (the dask fit reduces them), so
        sums and counts, not means. ``distances`` (n, K), where the fit has them, are
        ``geometry.pairwise(X, centers)`` already computed (None: compute them).
    rows : callable ``n_samples -> ndarray or None``, default=all_rows
        The training rows ``sums`` reads after a fit (None: all rows).
    attributes : callable ``dict -> dict``, default=no_attributes
        The extra fitted attributes (``beta_``, ...), by name, from the summed statistics
        and, under the key "origin", the origin (D,) of the fit's frame in the input
        frame (``sums`` see rows in the fit's frame: a translation-invariant fit centres
        dense rows).
    """

    sums: Callable[..., dict] = no_sums
    rows: Callable[[int], np.ndarray | None] = all_rows
    attributes: Callable[[dict], dict] = no_attributes

    def attributes_of(self, result: FitResult) -> dict:
        """The fitted attributes of a fit's ``result``: :attr:`attributes` of its summed
        statistics and its frame's origin."""
        return self.attributes({**result.stats, "origin": result.origin})


@dataclass(frozen=True)
class FitPlan:
    """How an estimator fits rows of ``n_features`` columns.

    Parameters
    ----------
    geometry : Geometry
        The geometry of ``partial_fit`` (and of inference; the dask fit builds its own
        from the estimator's ``_make_geometry`` on each worker).
    embed : callable ``Tensor (n, n_features) -> Tensor (n, D)``
        Maps validated rows to the clustered space (e.g. a feature extractor).
    fit_geometry : Geometry or None, default=None
        The geometry :meth:`fit` runs Lloyd with; None: ``geometry``.
    seeder : callable ``(X, sample_weight, generators, init_array, shift) -> Tensor`` \
or None, default=None
        Initial centroids (R, K, D) of every restart, in the frame of X (see
        :class:`~skxclust._seeding.Seeding`); None: the estimator's ``init`` of
        scikit-learn ("k-means++", "random" or an array).
    auto_n_init : int or None, default=None
        The restarts of ``n_init="auto"``; None: scikit-learn's rule (1 for "k-means++",
        else 10).
    refine : callable ``(X, sample_weight, fit, *, geometry, tol, generator, distances) \
-> LloydFit`` or None, default=None
        Improves each restart ``fit`` (a :class:`~skxclust._lloyd.LloydFit`) of an
        in-memory fit, holding its own settings (e.g.
        :class:`~skxclust._split_merge.SplitMerge`); it is given the fit's geometry, its
        scaled ``tol``, the generator that seeded that restart and the (n, K)
        ``distances`` of the rows to the centroids of ``fit`` where the Lloyd loop has
        them (see ``pairwise`` in :func:`skxclust._lloyd.lloyd`), else None; the refined
        restart of lowest inertia is kept (:func:`skxclust._lloyd.best_refined`). None
        keeps the best restart.
    subsample : int or None, default=None
        Above this many rows, the in-memory fit runs its restarts on a random subset of
        them, then assigns every row to their centroids; None: on every row.
    statistics : FitStatistics, default=FitStatistics()
        What the fit sums, on which rows, and the fitted attributes made of the sums.
    choose : callable ``(X, sample_weight) -> FitPlan`` or None, default=None
        A choice a first fit (``fit``, the first ``partial_fit``) makes from its validated
        rows before it runs (e.g. ``affine_penalty="auto"``): the plan to run instead.
    resolved : dict, default={}
        Parameters the plan was made with where the estimator's are "auto" (name ->
        value): the fit sets them as the fitted attributes ``name_``, and a dask fit's
        workers build their geometry from an unfitted clone with them.
    row_weights : callable ``(X, sample_weight, scale) -> (weights, scale)`` or None, \
default=None
        The objective's weight of every validated row, ``sample_weight`` times the row's
        own (e.g. :func:`skxclust._noise.contrast_weights`), relative to ``scale`` (None:
        chosen on these rows; the estimator keeps it for its later ``partial_fit``
        calls); None: ``sample_weight``.
    """

    geometry: Geometry
    embed: Callable[[torch.Tensor], torch.Tensor]
    fit_geometry: Geometry | None = None
    seeder: Callable[..., torch.Tensor] | None = None
    auto_n_init: int | None = None
    refine: Callable[..., LloydFit] | None = None
    subsample: int | None = None
    statistics: FitStatistics = FitStatistics()
    choose: Callable[..., FitPlan] | None = None
    resolved: dict = field(default_factory=dict)
    row_weights: Callable[..., tuple] | None = None

    @property
    def lloyd_geometry(self) -> Geometry:
        """The geometry of the in-memory fit."""
        return self.geometry if self.fit_geometry is None else self.fit_geometry

    def statistics_of(self, X: torch.Tensor, fit: LloydFit, geometry: Geometry) -> dict:
        """The sums of the plan's statistics on the rows they name, for the centroids
        and labels of ``fit``. When they name every row, the fit's (n, K) distances are
        passed on (where it has them: no pass over the rows again); a subset of the rows
        is aligned on its own (its chunks differ from the fit's, and so would the
        rounding of float32 warp fits)."""
        rows = self.statistics.rows(X.shape[0])
        labels, distances = fit.labels, fit.distances
        if rows is not None and len(rows) < X.shape[0]:
            index = torch.from_numpy(rows).to(X.device)
            X, labels, distances = X[index], labels[index], None
        return self.statistics.sums(X, labels, fit.centers, geometry, distances=distances)


def _neon_sums(evidence: bool, rows: bool, X, labels, centers, geometry,
               distances=None) -> dict:
    sums = evidence_sums(X, labels, centers, geometry, distances) if evidence else {}
    return {**sums, **row_sums(X)} if rows else sums


def _neon_attributes(beta, stats: dict) -> dict:
    return {"beta_": fitted_beta(beta, stats),
            **({"reference_": mean_row(stats)} if "rows" in stats else {})}


def neon_statistics(beta, rows: bool) -> FitStatistics:
    """The statistics of :class:`~skxclust.ExplainableKMeans`: ``beta_`` (``beta``, or for
    "auto" from the sums of the assigned evidence) and, with ``rows`` (inputs that are
    not embedded by a feature extractor), ``reference_``: the unweighted mean of the
    training rows (:func:`row_sums`, :func:`mean_row`), all of them summed."""
    return FitStatistics(functools.partial(_neon_sums, beta == "auto", rows),
                         attributes=functools.partial(_neon_attributes, beta))
