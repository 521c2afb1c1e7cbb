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

from ._threads import Work

__all__ = ["Assignment", "Geometry"]


class Assignment(NamedTuple):
    """Result of an assignment (E) step; a leading restart axis R when batched."""

    labels: torch.Tensor  # (n,) or (R, n) long
    distances: torch.Tensor  # same shape: squared distance to the assigned centroid
    state: Any = None  # geometry-specific per-sample data for the update step

    def select(self, keep: torch.Tensor) -> Assignment:
        """The restarts where the boolean (R,) ``keep`` is True (``state`` is shared)."""
        keep = keep.to(self.labels.device)
        return Assignment(self.labels[keep], self.distances[keep], self.state)


class Geometry:
    """Base class of the k-means geometries: the one contract every fit relies on.

    Subclasses implement :meth:`assign`, :meth:`pairwise`, :meth:`update`,
    :meth:`partial_sums` and :meth:`centers_from_sums`; the other members have defaults.

    Attributes
    ----------
    translation_invariant : bool
        True when distances do not change if X and the centroids are shifted together
        (the fits then centre the data for numerical accuracy).
    relocates_empty : bool
        True when :meth:`update` relocates empty clusters itself; otherwise the Lloyd loop
        moves them to the samples farthest from their centroid.
    batched_restarts : bool
        True when :meth:`assign`, :meth:`update` and :meth:`partial_sums` also accept
        centroids of shape (R, K, D), returning labels and distances (R, n) and weights
        (R, K): the Lloyd loop then runs all restarts in each pass over X.
    least_squares_update : bool
        True when the centroid update solves a least-squares problem through
        :meth:`normal_sums` and :meth:`solve_from_sums` (ST K-means); False when it is the
        closed form :meth:`centers_from_sums`.
    batch_size : int
        Rows processed at once (see :meth:`chunks`).
    """

    translation_invariant = True
    relocates_empty = False
    batched_restarts = False
    least_squares_update = False
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
        """``assignment`` with exact distances where :meth:`assign` approximated them
        (default: unchanged)."""
        return assignment

    # -- centroid update ------------------------------------------------------------
    def update(self, X: torch.Tensor, centers: torch.Tensor, assignment: Assignment,
               sample_weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """New centroids (shape of ``centers``) for the fixed assignment, and the weight of
        every cluster (K,)."""
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

    def normal_sums(self, centers: torch.Tensor, labels: torch.Tensor, state: Any,
                    sample_weight: torch.Tensor) -> torch.Tensor:
        """The normal operator of the least-squares update applied to ``centers``
        (only when :attr:`least_squares_update`)."""
        raise NotImplementedError(f"{type(self).__name__} has a closed-form update.")

    def solve_from_sums(self, sums: torch.Tensor, weight: torch.Tensor,
                        centers: torch.Tensor, normal) -> torch.Tensor:
        """The least-squares centroids from the reduced sums and the normal operator
        ``normal`` (only when :attr:`least_squares_update`)."""
        raise NotImplementedError(f"{type(self).__name__} has a closed-form update.")

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
