"""The geometry contract: what the Lloyd loop, ``partial_fit`` and the dask fit ask of a
distance.

A *geometry* knows how to measure (sample, centroid) distances and how to re-estimate
centroids for fixed assignments. :class:`Geometry` names the contract once; the
estimators plug in :class:`skxclust._euclidean.EuclideanGeometry` (plain k-means) or
:class:`skxclust._warp_geometry.WarpGeometry` (ST K-means), and every fit (the in-memory
Lloyd loop of :mod:`skxclust._lloyd`, the mini-batch steps of :mod:`skxclust._streaming`,
the blockwise passes of :mod:`skxclust._dask_fit`) talks to them only through it.

Shapes: ``n`` rows, ``K`` centroids, ``D`` features, ``R`` restarts.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from ._relocation import relocate_empty
from ._threads import Work

__all__ = ["Assignment", "Farthest", "Geometry"]


class Assignment(NamedTuple):
    """Result of an assignment (E) step; a leading restart axis R when batched."""

    labels: torch.Tensor  # (n,) or (R, n) long
    distances: torch.Tensor  # same shape: squared distance to the assigned centroid
    state: Any = None  # geometry-specific per-sample data for the update step
    # (n, K) or (R, n, K): the distances to every centroid, where the geometry computed
    # them anyway (what its pairwise(X, centers) returns); None otherwise
    pairwise: torch.Tensor | None = None

    def select(self, keep: torch.Tensor) -> Assignment:
        """The restarts where the boolean (R,) ``keep`` is True (``state`` is shared)."""
        keep = keep.to(self.labels.device)
        pairwise = None if self.pairwise is None else self.pairwise[keep]
        return Assignment(self.labels[keep], self.distances[keep], self.state, pairwise)


class Farthest(NamedTuple):
    """The rows farthest from their centroid in each restart of a blockwise pass, farthest
    first (``m`` of them per restart): what relocating empty clusters needs."""

    distances: torch.Tensor  # (R, m) squared distance to the assigned centroid
    rows: torch.Tensor  # (R, m, D)
    weights: torch.Tensor  # (R, m)
    labels: torch.Tensor  # (R, m) long


class Geometry:
    """Base class of the k-means geometries: the one contract every fit relies on.

    Subclasses implement :meth:`assign`, :meth:`pairwise`, :meth:`update`,
    :meth:`partial_sums` and :meth:`centers_from_sums`; the other members have defaults,
    those of a geometry that takes one set of centroids (K, D) at a time, relocates empty
    clusters with the plain rule (:meth:`relocate`) and has the closed-form update
    :meth:`centers_from_sums`. A geometry that does more overrides the method concerned:
    :meth:`restart_runs` and :meth:`restart_sums` to take restarts as a leading axis,
    :meth:`relocate` and :meth:`update_from_sums` for its own relocation rule,
    :meth:`normal_operator`, :meth:`normal_sums` and :meth:`solve_from_sums` for a
    least-squares update.

    Attributes
    ----------
    translation_invariant : bool
        True when distances do not change if X and the centroids are shifted together
        (the fits then centre the data for numerical accuracy). The contract's one flag: a
        property of the distance, not of an implementation.
    batch_size : int
        Rows processed at once (see :meth:`chunks`).
    """

    translation_invariant = True
    batch_size = 4096

    # -- distances ------------------------------------------------------------------
    def assign(self, X: torch.Tensor, centers: torch.Tensor) -> Assignment:
        """Nearest centroid of every row of X (n, D): labels, distances and state."""
        raise NotImplementedError

    def pairwise(self, X: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
        """Squared distances of the rows of X (n, D) to the centroids (K, D): (n, K)."""
        raise NotImplementedError

    def refine(self, X: torch.Tensor, centers: torch.Tensor,
               assignment: Assignment) -> Assignment:
        """The final assignment of a Lloyd run to its final ``centers``, from the run's
        last ``assignment``: exact where the run's passes approximated (the screened
        distances of a Euclidean pass; the warps a ST run continued from pass to pass,
        fitted afresh). Default: unchanged."""
        return assignment

    # -- centroid update ------------------------------------------------------------
    def update(self, X: torch.Tensor, centers: torch.Tensor, assignment: Assignment,
               sample_weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """New centroids (shape of ``centers``) for the fixed assignment, and the weight of
        every cluster (K,). Clusters without weight are given a centroid afterwards by
        :meth:`relocate` (or here, by a geometry whose :meth:`relocate` does nothing)."""
        raise NotImplementedError

    def partial_sums(self, X: torch.Tensor, centers: torch.Tensor, assignment: Assignment,
                     sample_weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sufficient statistics ``(sums, weight)`` of the update; they add up over
        disjoint row blocks, so streaming and blockwise fits reduce them."""
        raise NotImplementedError

    @staticmethod
    def centers_from_sums(sums: torch.Tensor, weight: torch.Tensor,
                          centers: torch.Tensor) -> torch.Tensor:
        """The closed-form centroids of the reduced :meth:`partial_sums`; centroids (or
        pixels) without weight keep their value in ``centers``."""
        raise NotImplementedError

    def relocate(self, X: torch.Tensor, centers: torch.Tensor, weight: torch.Tensor,
                 assignment: Assignment) -> None:
        """Give the empty clusters of an in-memory update a centroid, in place.

        Shapes carry the restart axis: ``centers`` (R, K, D) and ``weight`` (R, K) from
        :meth:`update`, ``assignment`` (labels and distances (R, n)) the one it updated
        from. Default: the plain rule, each empty cluster's centroid becomes one of the
        samples farthest from their centroid (:func:`skxclust._relocation.relocate_empty`).
        """
        relocate_empty(centers, weight, lambda r, m: X[
            torch.argsort(assignment.distances[r], descending=True)[:m]])

    def normal_operator(self, labels: torch.Tensor, state: Any, sample_weight: torch.Tensor):
        """The normal operator ``v -> normal_sums(v, ...)`` of a least-squares update for
        the fixed assignment ``(labels, state)``, or None for a closed-form update
        (:meth:`centers_from_sums`; the default)."""
        return None

    def normal_sums(self, centers: torch.Tensor, labels: torch.Tensor, state: Any,
                    sample_weight: torch.Tensor) -> torch.Tensor:
        """The normal operator of the least-squares update applied to ``centers``
        (only for a geometry whose :meth:`normal_operator` is not None)."""
        raise NotImplementedError(f"{type(self).__name__} has a closed-form update.")

    def solve_from_sums(self, sums: torch.Tensor, weight: torch.Tensor,
                        centers: torch.Tensor, normal) -> torch.Tensor:
        """The centroids from the reduced sums; a least-squares update solves with the
        normal operator ``normal`` (a callable ``v -> A v``), the default is the closed
        form :meth:`centers_from_sums` (``normal`` unused)."""
        return self.centers_from_sums(sums, weight, centers)

    def update_from_sums(self, sums: torch.Tensor, weight: torch.Tensor,
                         centers: torch.Tensor, cluster_weight: torch.Tensor,
                         farthest: Farthest, normal) -> torch.Tensor:
        """The centroids (R, K, D) of a blockwise pass, empty clusters relocated.

        ``sums`` and ``weight`` are the reduced :meth:`partial_sums` of the restarts
        ``centers`` (R, K, D), ``cluster_weight`` (R, K) the weight of every cluster,
        ``farthest`` the rows farthest from their centroid and ``normal`` the blockwise
        normal operator (see :meth:`solve_from_sums`). Default: :meth:`solve_from_sums`,
        then the plain rule of :meth:`relocate`.
        """
        new = self.solve_from_sums(sums, weight, centers, normal)
        relocate_empty(new, cluster_weight, lambda r, m: farthest.rows[r, :m])
        return new

    # -- restarts ---------------------------------------------------------------------
    def for_rows(self, X: torch.Tensor, sample_weight: torch.Tensor) -> Geometry:
        """The geometry to use for the passes over the rows X (n, D) with
        ``sample_weight`` (n,) of one Lloyd run or ``partial_fit`` step, and for no other
        rows: one that computes what every pass reuses (e.g. row norms) once, here.
        Default: this geometry (nothing to reuse)."""
        return self

    def grouped(self, row_groups: torch.Tensor, center_groups: torch.Tensor) -> Geometry | None:
        """This geometry for independent groups: the rows (n,) of group ``g`` are compared
        with the centroids (K,) of group ``g`` only (the others at an infinite distance),
        so one Lloyd run over all the rows is one run per group, sharing every pass; None
        (the default) where the groups are better run one by one."""
        return None

    def restart_runs(self, centers: torch.Tensor) -> list[tuple[Geometry, torch.Tensor]]:
        """How the Lloyd loop runs the restarts ``centers`` (R, K, D): a list of
        ``(geometry, centers (R_i, K, D))``, one loop each, whose geometry takes the
        restart axis and whose restarts share every pass over X.

        Default: one loop per restart, through a view of this geometry that adds a
        restart axis of length 1.
        """
        return [(_OneRestart(self), c[None]) for c in centers]

    def restart_sums(self, X: torch.Tensor, sample_weight: torch.Tensor,
                     centers: torch.Tensor):
        """Assignments and :meth:`partial_sums` of every restart ``centers`` (R, K, D):
        (labels (R, n), distances (R, n), states (list of R), sums, weights), stacked
        along the restart axis. Default: one restart after another."""
        out = []
        for r in range(centers.shape[0]):
            a = self.assign(X, centers[r])
            out.append((a.labels, a.distances, a.state,
                        *self.partial_sums(X, centers[r], a, sample_weight)))
        labels, dists, states, sums, weight = zip(*out)
        return torch.stack(labels), torch.stack(dists), list(states), torch.stack(sums), \
            torch.stack(weight)

    # -- execution --------------------------------------------------------------------
    def chunks(self, n: int) -> list[slice]:
        """The row slices of ``batch_size`` rows that cover ``range(n)``."""
        return [slice(i, min(i + self.batch_size, n)) for i in range(0, n, self.batch_size)]

    def pass_work(self, X: torch.Tensor, centers: torch.Tensor) -> Work | None:
        """The size of one pass over X with ``centers`` (K, D) or (R, K, D), from which
        :mod:`skxclust._threads` sets the threads of a fit's passes (None: unmeasured,
        torch's setting)."""
        return None

    def use_model_cache(self, cache: dict) -> None:
        """Keep derived read-only models (e.g. warp operators) in ``cache``, shared with
        other geometries of the same fit (the dask workers' tasks); default: nothing to
        share."""


class _OneRestart(Geometry):
    """View a geometry that takes one set of centroids (K, D) as one that takes restarts
    (R, K, D), for R = 1 (see :meth:`Geometry.restart_runs`)."""

    def __init__(self, geometry: Geometry):
        self.geometry = geometry

    def for_rows(self, X, sample_weight):
        return _OneRestart(self.geometry.for_rows(X, sample_weight))

    def assign(self, X, centers):
        return self._batched(self.geometry.assign(X, centers[0]))

    def refine(self, X, centers, assignment):
        return self._batched(self.geometry.refine(X, centers[0], self._single(assignment)))

    @staticmethod
    def _single(a: Assignment) -> Assignment:
        """The one restart of a batched assignment, without its restart axis."""
        return Assignment(a.labels[0], a.distances[0], a.state)

    @staticmethod
    def _batched(a: Assignment) -> Assignment:
        """A one-restart assignment with its restart axis."""
        return Assignment(a.labels[None], a.distances[None], a.state,
                          None if a.pairwise is None else a.pairwise[None])

    def update(self, X, centers, assignment, sample_weight):
        new, weight = self.geometry.update(X, centers[0], self._single(assignment),
                                           sample_weight)
        return new[None], weight[None]

    def relocate(self, X, centers, weight, assignment):
        self.geometry.relocate(X, centers, weight, assignment)
