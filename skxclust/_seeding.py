"""Seeding: k-means++ (scikit-learn's greedy variant) for dense and sparse (CSR) data, and
:class:`Seeding`, how one fit seeds its restarts.

The seedings of several restarts run together: each draws from its own generator in the
order a lone run would, and their distance computations share one matrix product per step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ._threads import SEEDING_BLOCK_ENTRIES, Work, pass_threads
from .nn.sparse import is_sparse, row_norms, take_rows

__all__ = ["Seeding", "kmeans_plusplus", "kmeans_plusplus_restarts"]


class Seeding:
    """How one fit seeds its restarts: an ``init`` array or a seeding method, with one
    ``torch.Generator`` per restart.

    Calling it seeds every restart on the rows it is given; the dask fit reads
    :attr:`init_array` (rows need not be sampled for an explicit init) and draws its
    seeding sample with the first generator.

    Parameters
    ----------
    seed_restarts : callable ``(X, sample_weight, generators, init_array, shift) -> Tensor``
        The estimator's seeding: initial centroids (R, K, D) in the frame of X (shifted
        by ``shift`` from the input frame).
    init_array : ndarray of shape (K, D) or None
        Validated initial centroids in the input frame.
    generators : sequence of torch.Generator
        One per restart.
    """

    def __init__(self, seed_restarts: Callable, init_array: np.ndarray | None,
                 generators: Sequence[torch.Generator]):
        self.seed_restarts = seed_restarts
        self.init_array = init_array
        self.generators = list(generators)

    def __call__(self, X: torch.Tensor, sample_weight: torch.Tensor,
                 shift: torch.Tensor) -> torch.Tensor:
        """Initial centroids of every restart, shape (len(generators), K, D)."""
        return self.seed_restarts(X, sample_weight, self.generators, self.init_array, shift)


def kmeans_plusplus(
    X: torch.Tensor,
    n_clusters: int,
    sample_weight: torch.Tensor,
    generator: torch.Generator,
    n_local_trials: int | None = None,
) -> torch.Tensor:
    """Greedy k-means++ seeding (Arthur & Vassilvitskii; sklearn's greedy variant).

    Parameters
    ----------
    X : Tensor of shape (n, D), dense or sparse CSR
    n_clusters : int
    sample_weight : Tensor of shape (n,)
    generator : torch.Generator
        CPU generator; all random draws use it.
    n_local_trials : int, optional
        Candidates tried per centroid; default ``2 + log(n_clusters)``.

    Returns
    -------
    Tensor of shape (n_clusters, D)
    """
    return kmeans_plusplus_restarts(X, n_clusters, sample_weight, [generator], n_local_trials)[0]


def kmeans_plusplus_restarts(
    X: torch.Tensor,
    n_clusters: int,
    sample_weight: torch.Tensor,
    generators: list[torch.Generator],
    n_local_trials: int | None = None,
) -> torch.Tensor:
    """Independent greedy k-means++ seedings, one per generator, computed together.

    Each seeding draws from its own generator in the same order as a lone call of
    :func:`kmeans_plusplus` would (the same generator object may be passed several times:
    it is then consumed restart after restart), so the result equals stacking separate
    calls; the distance computations of all restarts share one matrix product per step.

    Returns
    -------
    Tensor of shape (len(generators), n_clusters, D)
    """
    if n_local_trials is None:
        n_local_trials = 2 + int(math.log(n_clusters))
    # Restarts per group: keep the (group * trials, n) distance block near a fixed size.
    group = max(1, SEEDING_BLOCK_ENTRIES // max(1, n_local_trials * X.shape[0]))
    out = []
    columns = n_local_trials * min(group, len(generators))
    with pass_threads(Work("fit", X.shape[0] * X.shape[1] * columns, X.device)):
        for i in range(0, len(generators), group):
            out.append(_kmeans_plusplus(X, n_clusters, sample_weight,
                                        generators[i:i + group], n_local_trials))
    return torch.cat(out)


def _kmeans_plusplus(X, n_clusters, sample_weight, generators, n_local_trials):
    """Body of :func:`kmeans_plusplus_restarts` for one group of restarts."""
    n, n_restarts = X.shape[0], len(generators)
    sw = sample_weight.detach().to("cpu", torch.float64)
    x_sq = row_norms(X)  # once, not per candidate batch
    # All draws up front, restart by restart: the order a sequential run would use.
    first, rolls = [], []
    for gen in generators:
        first.append(int(torch.multinomial(sw / sw.sum(), 1, generator=gen)))
        rolls.append(torch.rand(n_clusters - 1, n_local_trials, generator=gen,
                                dtype=torch.float64))
    uniforms = torch.stack(rolls, dim=1)  # (K-1, R, T): empty for one cluster

    def dist_to(idx: torch.Tensor) -> torch.Tensor:
        """Squared distances (len(idx), n) from the rows ``idx`` of X to every row."""
        c = take_rows(X, idx.to(X.device))
        if is_sparse(X):  # the sparse operand goes first: (n, len(idx)), transposed
            d = torch.addmm(row_norms(c), X, c.T, alpha=-2.0).T.add_(x_sq)
        else:
            d = torch.addmm(row_norms(c)[:, None], c, X.T, alpha=-2.0).add_(x_sq)
        return d.clamp_min_(0.0).to("cpu", torch.float64)

    rows = torch.arange(n_restarts)
    chosen = torch.empty(n_restarts, n_clusters, dtype=torch.long)
    chosen[:, 0] = torch.tensor(first)
    closest = dist_to(chosen[:, 0])  # (R, n)
    potential = closest @ sw  # (R,)
    for step in range(1, n_clusters):
        cum = torch.cumsum(sw * closest, dim=1)
        draws = uniforms[step - 1] * potential[:, None]  # (R, T)
        cand = torch.searchsorted(cum, draws).clamp_max_(n - 1)
        d_cand = torch.minimum(closest[:, None, :],
                               dist_to(cand.reshape(-1)).view(n_restarts, n_local_trials, n))
        pots = d_cand @ sw  # (R, T)
        best = pots.argmin(dim=1)
        closest, potential = d_cand[rows, best], pots[rows, best]
        chosen[:, step] = cand[rows, best]
    return take_rows(X, chosen.to(X.device).reshape(-1)).view(n_restarts, n_clusters, -1)
