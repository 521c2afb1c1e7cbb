"""Split–merge moves: the escape from the local optima that Lloyd iterations cannot leave.

Lloyd iterations only move samples between neighbouring clusters, so a fit that starts
with two classes in one cluster and another class split over two keeps that mistake.
A *split–merge move* removes one cluster (its members go to their second-nearest
centroid) and splits another in two, keeping the number of clusters:

- the clusters to split are ranked by how much their two-cluster fit (Euclidean 2-means
  seeding, then warped Lloyd steps in the geometry) lowers their members' distortion;
- for each of the :data:`_SPLIT_CANDIDATES` best ranked, ``c``, with its two halves
  ``h1, h2`` in place of ``c``, the distortion of the whole data after removing cluster
  ``a`` is estimated for every ``a`` from the distances to the remaining centroids and to
  the halves (every sample goes to the nearest one left; the halves are aligned to the
  rows near ``c`` only, see :data:`_HALF_ROWS_NEAREST`); the pair ``(c, a)`` of least
  estimate is the move;
- the move is tried when its estimate is less than :data:`_SLACK` (5 %) above the current
  distortion: the estimate is that of the move before any Lloyd iteration, which the
  iterations then lower (on an affine-deformed MNIST fit with two classes in one cluster
  the estimate was 2.1 % above and one iteration already 0.5 % below). The halves replace
  ``c`` and ``a`` and the Lloyd iterations run; when the estimate is above the current
  distortion, one iteration runs first (the *probe*) and the others only if it lowered
  the distortion of the whole fit, so such a move costs one iteration when it does not
  pay off. The move is kept only if the distortion the iterations reach is lower than
  before the move.

Only the fit's own objective decides; no labels are used. Classical in k-means
(e.g. the "jump" moves of Hamerly's and Ding's split–merge k-means variants); here it is
what lets ST K-means recover from an initialisation that merged two digit classes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ._lloyd import LloydFit, best_restart, lloyd
from ._threads import map_jobs

__all__ = ["SplitMerge"]

# A move is tried when its estimated distortion, before any Lloyd iteration, is within this
# fraction above the current one: the Lloyd iterations that follow the move lower it
# further, and only the distortion they reach decides whether the move is kept. With 2 %
# an affine-deformed MNIST-5k fit kept two classes in one cluster: the repairing move was
# estimated 2.1 % above its distortion, one Lloyd iteration after it was 0.5 % below,
# the move's iterations 1.1 % below (held-out ACC 0.791 -> 0.895).
_SLACK = 0.05

# The clusters of largest split gain whose moves are estimated (each with every cluster to
# remove); the move of least estimated distortion is tried.
_SPLIT_CANDIDATES = 3


# The two-cluster fit that estimates a split's gain runs on at most this many members of
# the cluster (a random subset; the gain is scaled back by their share of its weight): it
# only ranks the clusters and seeds the two halves, which the Lloyd iterations after the
# move then fit on every row. On MNIST-5k (5 splits x 3 seeds) 128 instead of 256 rows
# left the held-out ACC unchanged (measured with the 1000-row initialisation).
_SPLIT_ROWS = 128

# The estimate of a move aligns the halves of the split cluster only to the rows that have
# the split centroid among their this many nearest centroids (a third of MNIST-5k's rows
# with K = 10): a half is a sharper version of part of that cluster, so a row for which
# three other centroids are nearer is not counted as moving to it. The estimate is then an
# upper bound of the every-row one: within 0.4 % on digits and 1 % on MNIST-5k, the same
# split, removal and decision in the 5 fits measured, at a quarter of the alignments.
_HALF_ROWS_NEAREST = 3


def _split_gains(X, sample_weight, labels, nearest, geometry, generator, seed_centers):
    """Gain of splitting each cluster in two, and the two centroids of each split.

    The random subsets and the 2-means seeds are drawn cluster after cluster (the
    generator is consumed in a fixed order); the two-cluster warped fits then run as one
    grouped Lloyd run where the geometry has a grouped form (1-D signals, see
    :func:`_grouped_two_means`: their fits are small, and one call for all the clusters
    costs about what one call per cluster costs), else concurrently
    (:func:`skxclust._threads.map_jobs`: one per Python thread of
    ``torch.get_num_threads()`` on the CPU, each fit single-threaded): a fit of
    ``_SPLIT_ROWS`` rows is one chunk, which would otherwise leave all but one core idle.
    Either way the gains do not depend on the thread count.
    """
    n_clusters = int(labels.max()) + 1 if labels.numel() else 0
    gains = torch.full((n_clusters,), -torch.inf, dtype=torch.float64)
    halves = [None] * n_clusters
    jobs = []  # (cluster, members, their rows and weights, share, seeds)
    for c in range(n_clusters):
        members = torch.nonzero(labels == c).flatten()
        if members.numel() < 4:
            continue
        share = 1.0
        if members.numel() > _SPLIT_ROWS:
            total = float(sample_weight[members].to(torch.float64).sum())
            pick = torch.randperm(members.numel(), generator=generator)[:_SPLIT_ROWS]
            members = members[pick.to(members.device).sort().values]
            share = total / float(sample_weight[members].to(torch.float64).sum())
        Xc, wc = X[members], sample_weight[members]
        seeds, _ = seed_centers(Xc, 2, wc, generator)
        jobs.append((c, members, Xc, wc, share, seeds))

    def two_means(job):
        _, _, Xc, wc, _, seeds = job
        two = best_restart(lloyd(Xc, seeds[None], geometry, wc, max_iter=2, tol=0.0))
        return two.inertia, two.centers

    fits = _grouped_two_means(jobs, geometry)
    if fits is None:
        fits = map_jobs(two_means, jobs, X.device, name="skxclust-split")
    for (c, members, _, wc, share, _), (inertia, centers) in zip(jobs, fits):
        before = float((nearest[members].to(torch.float64) * wc.to(torch.float64)).sum())
        gains[c], halves[c] = share * (before - inertia), centers
    return gains, halves


def _two_per_group(geometry, sizes: list[int], device):
    """``(row_groups, grouped)``: the group (n,) of each row of consecutive groups of
    ``sizes`` rows, and the geometry's grouped form for two centroids per group, in group
    order (None where it has none)."""
    row_groups = torch.repeat_interleave(torch.arange(len(sizes), device=device),
                                         torch.tensor(sizes, device=device))
    return row_groups, geometry.grouped(
        row_groups, torch.arange(len(sizes), device=device).repeat_interleave(2))


def _grouped_two_means(jobs, geometry) -> list | None:
    """The two-cluster fits of the split candidates ``jobs`` (of :func:`_split_gains`) as
    one Lloyd run over all their rows in the geometry's grouped form (each candidate's rows
    meet its own two centroids only, see ``WarpGeometry.grouped``): ``(inertia, centers
    (2, D))`` per job, or None where the geometry has no grouped form or one job is all.

    The run stops when no label of any group changes (a group whose labels repeat takes
    the run's other iterations too); each group's inertia is that of its rows in the
    run's final, fresh, assignment, as its own run's would be.
    """
    if len(jobs) < 2:
        return None
    rows = torch.cat([job[2] for job in jobs])
    device = rows.device
    row_groups, grouped = _two_per_group(geometry, [job[2].shape[0] for job in jobs], device)
    if grouped is None:
        return None
    weight = torch.cat([job[3] for job in jobs])
    seeds = torch.cat([job[5] for job in jobs])  # (2 * n_jobs, D), two per group
    pairwise: list = []
    fit = best_restart(lloyd(rows, seeds[None], grouped, weight, max_iter=2, tol=0.0,
                             pairwise=pairwise), pairwise)
    assert fit.distances is not None  # a warp assignment carries its (n, K) distances
    own = fit.distances.gather(1, fit.labels[:, None])[:, 0].to(torch.float64)
    inertia = torch.zeros(len(jobs), dtype=torch.float64, device=device).index_add_(
        0, row_groups, own * weight.to(torch.float64))
    return [(float(inertia[j]), fit.centers[2 * j:2 * j + 2]) for j in range(len(jobs))]


def _to_halves(X, distances, splits: list[int], halves, geometry) -> dict:
    """Distances (n, 2) of the rows to the two halves of each cluster of ``splits``
    (``halves[c]``: (2, D)), computed for the rows that have ``c`` among their
    :data:`_HALF_ROWS_NEAREST` nearest centroids (``distances``, (n, K)); infinite for the
    others, which the estimate then keeps with the centroids they have. ``{c: (n, 2)}``.

    Where the geometry has a grouped form (1-D signals: their small fits cost what a call
    costs), every cluster's rows meet its own halves in one grouped assignment, else one
    :meth:`pairwise` per cluster.
    """
    nearest = distances.topk(min(_HALF_ROWS_NEAREST, distances.shape[1]), dim=1,
                             largest=False).indices
    rows = {c: torch.nonzero((nearest == c).any(dim=1))[:, 0] for c in splits}
    out = {c: distances.new_full((X.shape[0], 2), torch.inf) for c in splits}
    live = [c for c in splits if rows[c].numel()]
    grouped = None
    if len(live) > 1:
        row_groups, grouped = _two_per_group(geometry, [rows[c].numel() for c in live],
                                             X.device)
    if grouped is None:
        for c in live:
            out[c][rows[c]] = geometry.pairwise(X[rows[c]], halves[c])
        return out
    stacked = torch.cat([rows[c] for c in live])
    pairwise = grouped.pairwise(X[stacked], torch.cat([halves[c] for c in live]))
    for j, c in enumerate(live):
        out[c][rows[c]] = pairwise[row_groups == j][:, 2 * j:2 * j + 2]
    return out


def _best_move(X, sample_weight, distances, gains, halves, geometry):
    """The move ``(split, removed, estimated distortion)`` of least estimated distortion
    among the :data:`_SPLIT_CANDIDATES` clusters of largest split gain (``gains`` and
    ``halves`` of :func:`_split_gains`) and every other cluster to remove; None when no
    cluster can be split.

    With the halves in place of the split centroid, removing cluster ``a`` sends each row
    to the nearest centroid left; ``distances`` (n, K) are the rows' to the centroids.
    """
    n_clusters = distances.shape[1]
    w64 = sample_weight.to(torch.float64)
    best = None
    splits = [c for c in torch.argsort(gains, descending=True, stable=True).tolist()
              if halves[c] is not None][:_SPLIT_CANDIDATES]
    to_halves = _to_halves(X, distances, splits, halves, geometry)
    for split in splits:
        options = torch.cat([distances, to_halves[split]], 1)
        options[:, split] = torch.inf
        two = options.topk(2, dim=1, largest=False)
        estimate = torch.full((n_clusters,), float(w64 @ two.values[:, 0].to(torch.float64)),
                              dtype=torch.float64, device=X.device)
        # without cluster a, its samples whose nearest was a fall back to their second
        extra = w64 * (two.values[:, 1] - two.values[:, 0]).to(torch.float64)
        lost = two.indices[:, 0]
        inside = lost < n_clusters
        estimate.index_add_(0, lost[inside], extra[inside])
        estimate[split] = torch.inf
        removed = int(torch.argmin(estimate))
        if best is None or float(estimate[removed]) < best[2]:
            best = (split, removed, float(estimate[removed]))
    return best


@dataclass(frozen=True)
class SplitMerge:
    """Split–merge moves after Lloyd (see module docstring): a refiner of a
    :class:`~skxclust._plan.FitPlan`, holding its settings.

    Parameters
    ----------
    max_moves : int
        Moves tried at most; the first move that does not lower the distortion ends it.
    max_iter : int
        Lloyd iterations after each move.
    seed_centers : callable ``seed_centers(X, k, sample_weight, generator) -> (centers, _)``
        Seeding of the two-cluster fits (e.g. Euclidean k-means).
    verbose : int, default=0
    """

    max_moves: int
    max_iter: int
    seed_centers: Callable[..., tuple]
    verbose: int = 0

    def __call__(self, X: torch.Tensor, sample_weight: torch.Tensor, fit: LloydFit, *,
                 geometry, tol: float, generator: torch.Generator,
                 distances: torch.Tensor | None = None) -> LloydFit:
        """Improve the Lloyd fit ``fit`` of the rows X (n, D) by up to ``max_moves`` moves.

        ``geometry`` is the fit's (of :func:`skxclust._lloyd.lloyd`), ``tol`` its Lloyd
        tolerance (already scaled), ``generator`` seeds the 2-means splits; ``distances``
        (n, K) are those of the rows to the centroids of ``fit`` where the Lloyd loop has
        them (``pairwise`` of :func:`skxclust._lloyd.lloyd`), None: computed here.
        Returns the fit after the kept moves, its ``n_iter`` adding their iterations,
        with its (n, K) ``distances`` (those computed for the moves; None where the
        geometry's assignments do not carry them and no move was estimated).
        """
        n_clusters = fit.centers.shape[0]
        for move in range(self.max_moves):
            if n_clusters < 3:
                break
            if distances is None:
                distances = geometry.pairwise(X, fit.centers)
            nearest = distances.gather(1, fit.labels[:, None])[:, 0]
            gains, halves = _split_gains(X, sample_weight, fit.labels, nearest, geometry,
                                         generator, self.seed_centers)
            move_ = _best_move(X, sample_weight, distances, gains, halves, geometry)
            if move_ is None:
                break
            split, removed, estimate = move_
            if self.verbose:
                print(f"Split-merge move {move + 1}: split cluster {split}, remove cluster "
                      f"{removed}: estimated distortion {estimate:.6g} "
                      f"(now {fit.inertia:.6g})")
            if not estimate < (1.0 + _SLACK) * fit.inertia:
                break
            start = fit.centers.clone()
            start[split], start[removed] = halves[split][0], halves[split][1]
            pairwise: list = []  # the (n, K) distances of the new fit, for the next move
            # a move estimated above the distortion is probed: one Lloyd iteration, and
            # the others only if it already lowers the distortion of the whole fit
            probed = not estimate < fit.inertia and self.max_iter > 1
            moved = best_restart(lloyd(X, start[None], geometry, sample_weight,
                                       1 if probed else self.max_iter, tol,
                                       pairwise=pairwise))
            if probed and moved.inertia < fit.inertia:
                probe, pairwise = moved, []
                moved = best_restart(lloyd(X, probe.centers[None], geometry, sample_weight,
                                           self.max_iter - 1, tol, pairwise=pairwise))
                moved = moved._replace(n_iter=probe.n_iter + moved.n_iter)
            if self.verbose:
                print(f"  distortion {fit.inertia:.6g} -> {moved.inertia:.6g}: "
                      f"{'kept' if moved.inertia < fit.inertia else 'undone'}")
            if not moved.inertia < fit.inertia:
                break
            fit = moved._replace(n_iter=fit.n_iter + moved.n_iter)
            distances = pairwise[0]
        return fit._replace(distances=distances)
