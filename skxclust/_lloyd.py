"""The one Lloyd loop of the project, for every geometry and restart layout.

:func:`lloyd` runs Lloyd iterations of an in-memory fit with any
:class:`skxclust._geometry.Geometry`; :func:`lloyd_iterations` holds the iteration,
convergence and restart bookkeeping shared with the blockwise dask fit
(:mod:`skxclust._dask_fit`). The geometry says how the restarts run
(:meth:`~skxclust._geometry.Geometry.restart_runs`): all in one loop sharing every pass
over X (in two groups on two threads when the loop is serial), or one after another.
After each update the geometry relocates empty clusters
(:meth:`~skxclust._geometry.Geometry.relocate`).
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import torch

from ._geometry import Assignment, Geometry
from ._progress import progress
from ._threads import intra_op_threads, map_jobs, pass_threads, torch_threads
from ._validation import check_magnitude
from .nn.sparse import is_sparse

__all__ = ["FitResult", "LloydFit", "Restarts", "assign_every_row", "best_index", "best_refined",
           "best_restart", "into_fit_frame", "lloyd", "lloyd_iterations", "restart_fit",
           "scaled_tol"]


def into_fit_frame(X: torch.Tensor, sample_weight: torch.Tensor, geometry: Geometry,
                   shift: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Move the rows X (n, D) into the frame a fit computes in: ``(X - shift, shift)``.

    A translation-invariant geometry on dense rows works on data centred by ``shift``
    (default: the weighted mean of X; a new tensor), for numerical accuracy. Otherwise
    ``shift`` is zero and X is returned as it is: it may share the caller's memory, and
    nothing writes into it; sparse rows stay uncentred (as in scikit-learn: centring
    would densify them). Either way the magnitude of the rows is checked.
    """
    if geometry.translation_invariant and not is_sparse(X):
        if shift is None:
            shift = weighted_mean(X, sample_weight)
        X = X - shift
    else:
        shift = torch.zeros(X.shape[1], dtype=X.dtype, device=X.device)
    check_magnitude(X)
    return X, shift


def weighted_mean(X: torch.Tensor, sample_weight: torch.Tensor) -> torch.Tensor:
    """``sample_weight @ X / sum(sample_weight)``, shape (D,), on one CPU thread: a
    matrix-vector product split over threads adds in another order (the last bits
    differ), and a fit must not depend on the thread count."""
    with torch_threads(1 if X.device.type == "cpu" else None):
        return (sample_weight @ X) / sample_weight.sum()


class FitResult(NamedTuple):
    """What a fit hands to the estimator's finish step: numpy values in the input frame.

    ``n_iter`` is None for a ``partial_fit`` step; ``stats`` are the summed ``sums`` of
    the fit plan's :class:`~skxclust._plan.FitStatistics`, taken on rows in the fit's
    frame, whose origin in the input frame is ``origin`` (the shift of
    :func:`into_fit_frame`).
    """

    centers: np.ndarray  # (K, D) in the input frame
    labels: np.ndarray  # (n,) int64
    inertia: float
    n_iter: int | None
    stats: dict
    origin: np.ndarray  # (D,)


class LloydFit(NamedTuple):
    """One fit in the making: tensors in the fit's frame (see :func:`into_fit_frame`).

    The kept restart of :func:`lloyd` (:func:`best_restart`), a plan's refiner (e.g.
    split-merge moves) and the in-memory fit pass this on; :meth:`as_fit_result` makes
    it the estimator's :class:`FitResult`.
    """

    labels: torch.Tensor  # (n,) int64
    inertia: float  # weighted sum of the distances for these labels and centroids
    centers: torch.Tensor  # (K, D)
    n_iter: int  # Lloyd iterations run (>= 1)
    # (n, K): the distances of the rows to ``centers`` where the fit's final assignment
    # computed them (``Assignment.pairwise``, what ``geometry.pairwise`` would return),
    # else None
    distances: torch.Tensor | None = None

    def as_fit_result(self, shift: torch.Tensor, stats: dict) -> FitResult:
        """The :class:`FitResult`: the centroids moved back to the input frame by
        ``shift`` (D,), centroids and labels copied to the host as numpy arrays;
        ``stats`` are the plan's summed statistics."""
        return FitResult((self.centers + shift).cpu().numpy(), self.labels.cpu().numpy(),
                         self.inertia, self.n_iter, stats, shift.cpu().numpy())


class Restarts(NamedTuple):
    """What :func:`lloyd` returns: every restart's result along a leading axis of R."""

    labels: torch.Tensor  # (R, n) int64
    inertia: torch.Tensor  # (R,) float64
    centers: torch.Tensor  # (R, K, D)
    n_iter: torch.Tensor  # (R,) int64


def scaled_tol(tol: float, n_samples: int, column_variance) -> float:
    """The shift tolerance of :func:`lloyd_iterations` for a relative ``tol``.

    As scikit-learn's ``_tolerance``: ``tol`` times the mean over the columns of their
    (biased) variance, 0 for a single sample. ``column_variance`` is a callable returning
    that variance (D,), called only when ``n_samples > 1``. Every fit (in-memory, dask,
    ST K-means' Euclidean seeding) scales its tolerance here.
    """
    return float(column_variance().mean()) * tol if n_samples > 1 else 0.0


# -- the Lloyd loop -----------------------------------------------------------------------
# Restarts whose inertia is within this relative distance of the lowest are ties: summing
# the same distances in another order (row blocks of a dask fit, threads) moves the
# inertia by a few ulps, which must not decide between two equally good restarts.
_TIE_RTOL = 1e-9


def best_index(inertia: torch.Tensor) -> int:
    """Index of the kept restart: the first whose inertia (R,) ties with the lowest.

    As in scikit-learn, where a later restart replaces the kept one only if it is strictly
    better, the first of equally good restarts wins; "equally" allows the rounding of the
    inertia's sum (relative ``1e-9``), so an in-memory and a blockwise fit of the same
    restarts keep the same one.
    """
    inertia = inertia.to(torch.float64).cpu()
    lowest = float(inertia.min())
    ties = inertia <= lowest + _TIE_RTOL * abs(lowest)
    return int(torch.nonzero(ties)[0, 0])


def restart_fit(runs: Restarts, index: int, pairwise: list | None = None) -> LloydFit:
    """Restart ``index`` of a :func:`lloyd` result; with ``pairwise`` (what :func:`lloyd`
    put there), its (n, K) distances too."""
    return LloydFit(runs.labels[index], float(runs.inertia[index]), runs.centers[index],
                    int(runs.n_iter[index]), None if pairwise is None else pairwise[index])


def best_restart(runs: Restarts, pairwise: list | None = None) -> LloydFit:
    """The restart of a :func:`lloyd` result with the lowest inertia (the first of ties,
    see :func:`best_index`; the only one of a single run), as :func:`restart_fit`."""
    return restart_fit(runs, best_index(runs.inertia), pairwise)


def best_refined(runs: Restarts, pairwise: list, refine, generators: list,
                 verbose: int = 0) -> LloydFit:
    """Every restart of a :func:`lloyd` result refined, and the refined fit of lowest
    inertia (the first of ties, see :func:`best_index`).

    ``refine(fit, generator=..., distances=...)`` is a plan's refiner (e.g. the
    split-merge moves) with its other arguments bound; restart ``r`` is refined with
    ``generators[r]``, the generator that seeded it, so a single restart is refined as
    before. Choosing the restart before refining it, as a fit did until then, could end
    at a higher distortion with more restarts: the moves change a restart's distortion by
    more than the restarts differ (Trace, 5 restarts against the first alone: higher in 4
    of 5 seeds, 408 -> 446 in one).
    """
    fits = []
    for index, generator in enumerate(generators):
        if verbose and len(generators) > 1:
            print(f"Refining restart {index + 1} of {len(generators)}")
        fit = restart_fit(runs, index, pairwise)
        fits.append(refine(fit, generator=generator, distances=fit.distances))
    return fits[best_index(torch.tensor([fit.inertia for fit in fits], dtype=torch.float64))]


def assign_every_row(X: torch.Tensor, fit: LloydFit, geometry: Geometry,
                     sample_weight: torch.Tensor) -> LloydFit:
    """``fit`` with its centroids (K, D) kept and every row of X (n, D) assigned to them
    afresh, outside a Lloyd run: the labels and distances ``predict`` gives.

    What a fit on a subset of the rows ends with (its ``n_iter`` is kept: no centroid
    moves here). The pass runs under the threads of a fit's pass.
    """
    with pass_threads(geometry.pass_work(X, fit.centers)):
        final = geometry.assign(X, fit.centers)
    inertia = final.distances.to(torch.float64) @ sample_weight.to(torch.float64)
    return LloydFit(final.labels, float(inertia), fit.centers, fit.n_iter, final.pairwise)


def lloyd(
    X: torch.Tensor,
    centers: torch.Tensor,
    geometry,
    sample_weight: torch.Tensor,
    max_iter: int,
    tol: float,
    verbose: int = 0,
    history: list | None = None,
    desc: str = "k-means",
    pairwise: list | None = None,
) -> Restarts:
    """Lloyd iterations with a pluggable geometry (the project's only Lloyd loop).

    Convergence follows scikit-learn: stop when labels do not change (strict) or when the
    total squared centroid shift is ``<= tol`` (``tol`` already scaled by the data variance).
    Empty clusters are relocated by the geometry (``relocate``).

    Parameters
    ----------
    X : Tensor of shape (n, D)
    centers : Tensor of shape (R, K, D)
        Initial centroids of R independent restarts (one run: ``centers[None]``).
        Restarts stop one by one as each converges; with a geometry that takes them as
        one run (``restart_runs``) the running ones share every pass over X.
    geometry : Geometry
    sample_weight : Tensor of shape (n,)
    max_iter : int
    tol : float
    verbose : int, default=0
    history : list, optional
        Receives one dict (iteration, inertia, labels) per iteration; single run only.
    desc : str, default="k-means"
        Label of the progress bar (see :mod:`skxclust._progress`).
    pairwise : list, optional
        Receives, restart after restart, the (n, K) distances of every row to the final
        centroids where the geometry's assignment carries them (``Assignment.pairwise``),
        else None: what ``geometry.pairwise(X, centers)`` would compute again.

    Returns
    -------
    Restarts
        Every restart's result along the restart axis (:func:`best_restart` keeps one):
        labels (R, n), inertia (R,) float64 (the weighted sum of the distances for the
        returned labels and centroids), centers (R, K, D) and n_iter (R,), the
        iterations run (>= 1).
    """
    if centers.dim() != 3:
        raise ValueError(f"lloyd takes centroids of shape (R, K, D), got {tuple(centers.shape)}.")
    if history is not None and centers.shape[0] != 1:
        raise ValueError("lloyd records a history for a single run only.")
    work = geometry.pass_work(X, centers)
    # each run's passes reuse what its geometry prepares for X once (e.g. row norms)
    runs = [(g.for_rows(X, sample_weight), c) for g, c in geometry.restart_runs(centers)]
    if len(runs) == 1 and runs[0][1].shape[0] > 1 and intra_op_threads(work) == 1:
        return _joined(_lloyd_in_two_groups(X, runs[0][1], runs[0][0], sample_weight,
                                            max_iter, tol, verbose), pairwise)
    with pass_threads(work):
        return _joined([_lloyd(X, c, g, sample_weight, max_iter, tol, verbose, history, desc)
                        for g, c in runs], pairwise)


def _joined(results, pairwise) -> Restarts:
    """The :class:`Restarts` of the runs of :func:`_lloyd`, joined along the restart axis;
    their final (n, K) distances (or None) appended to ``pairwise`` (when given)."""
    if pairwise is not None:
        pairwise.extend(d for _, distances in results for d in distances)
    return Restarts(*(torch.cat(parts) for parts in zip(*(runs for runs, _ in results))))


def _lloyd_in_two_groups(X, centers, geometry, sample_weight, max_iter, tol, verbose):
    """Batched restarts of a serial loop as two groups, on two threads when torch has them.

    A loop too small for torch's intra-op threads (see :mod:`skxclust._threads`) still
    gets a second core this way: each group runs the single-threaded loop on its half of
    the restarts, and torch releases the GIL inside its ops. The groups depend only on the
    number of restarts, never on the threads, so the results are the same with one thread
    (groups run one after the other) or two.
    """
    half = (centers.shape[0] + 1) // 2
    return map_jobs(
        lambda group: _lloyd(X, group, geometry, sample_weight, max_iter, tol, verbose, None),
        (centers[:half], centers[half:]), X.device, name="skxclust-lloyd",
        max_workers=1 if verbose else 2)  # verbose: keep the lines in order


def lloyd_iterations(centers, state, step, max_iter: int, tol: float, verbose: int = 0,
                     desc: str = "k-means"):
    """The Lloyd iterations of independent restarts, for in-memory and blockwise fits.

    Each iteration calls ``step`` on the restarts still running; a restart stops when its
    labels no longer change (strict convergence) or its total squared centroid shift is
    ``<= tol``, as in scikit-learn.

    Parameters
    ----------
    centers : Tensor of shape (R, K, D)
        Initial centroids; overwritten with each restart's latest centroids.
    state : object
        What ``step`` needs of the current assignment of the running restarts; its
        ``select(keep)`` gives the state of the restarts where the (A,) mask is True.
    step : callable ``step(current, state, running) -> (new, state, stable, inertia)``
        One centroid update (with empty-cluster relocation) and assignment of the running
        restarts (``running``: their indices, ``current``: their centroids (A, K, D));
        ``stable`` (A,) is True where no label changed, ``inertia`` (A,) is optional
        (None), used for ``verbose`` output only.
        ``n_iter`` counts as scikit-learn does: a restart stopped by the shift after ``it``
        updates ran ``it`` iterations, one stopped by unchanged labels ``it + 1`` (at
        most ``max_iter``).
    max_iter : int
    tol : float
    verbose : int, default=0
    desc : str, default="k-means"
        Label of the progress bar (one unit per iteration, see :mod:`skxclust._progress`).

    Returns
    -------
    n_iter : LongTensor of shape (R,)
        Iterations run by each restart (>= 1).
    """
    with progress(max_iter, desc=desc, unit="iteration", verbose=verbose) as bar:
        return _iterate(centers, state, step, max_iter, tol, verbose, bar)


def _iterate(centers, state, step, max_iter, tol, verbose, bar):
    """Body of :func:`lloyd_iterations`, one ``bar`` step per iteration."""
    t0 = time.perf_counter()
    n_restarts = centers.shape[0]
    n_iter = torch.ones(n_restarts, dtype=torch.long)
    running = torch.arange(n_restarts)
    for it in range(1, max_iter + 1):
        current = centers[running.to(centers.device)]
        with bar.step():
            new, state, stable, inertia = step(current, state, running)
        shift = ((new - current) ** 2).sum(dim=(1, 2))
        centers[running.to(centers.device)] = new
        n_iter[running] = it
        within_tol = shift <= tol
        done = (stable | within_tol).cpu()
        if bool(done.any()):
            # scikit-learn counts one more iteration for a strict convergence: it runs the
            # update of the assignment that repeated the previous one, then compares them.
            strict = (stable & ~within_tol).cpu()
            n_iter[running[strict]] = min(it + 1, max_iter)
        bar.note(f"iteration {int(n_iter[running].max())}/{max_iter}")
        if verbose:
            runs = "" if n_restarts == 1 else f" ({running.numel()} restarts running)"
            best = "" if inertia is None else f"inertia {float(inertia.min()):.6g}, "
            print(f"Iteration {it}{runs}: {best}centre shift {float(shift.max()):.3g}, "
                  f"{time.perf_counter() - t0:.1f}s")
            if bool(done.all()):
                why = ("strict convergence" if bool(strict.all()) else
                       f"center shift {float(shift.max()):.3g} within tolerance {tol:.3g}")
                print(f"Converged at iteration {it}: {why}.")
        if bool(done.all()):
            break
        if not bool(done.any()):
            continue
        running, state = running[~done], state.select(~done)
    return n_iter


def _lloyd(X, centers, geometry, sample_weight, max_iter, tol, verbose, history,
           desc="k-means"):
    """Body of :func:`lloyd` for restarts (R, K, D), run under the geometry's threads;
    ``geometry`` takes the restart axis (a run of ``restart_runs``). Returns labels,
    inertia, centers, n_iter and the list of each restart's final (n, K) distances (or
    None, see ``pairwise`` in :func:`lloyd`)."""
    centers = centers.clone()
    first = geometry.assign(X, centers)
    labels, distances = first.labels.clone(), first.distances.clone()
    pairwise = [None] * centers.shape[0] if first.pairwise is None else list(first.pairwise)

    def step(current, cur, running):
        new_centers, weight = geometry.update(X, current, cur, sample_weight)
        geometry.relocate(X, new_centers, weight, cur)
        new = geometry.assign(X, new_centers)
        rows = running.to(X.device)
        labels[rows], distances[rows] = new.labels, new.distances
        if new.pairwise is not None:
            for i, r in enumerate(running.tolist()):
                pairwise[r] = new.pairwise[i]
        inertia = None
        if history is not None or verbose:  # only then: it costs a reduction and a sync
            inertia = new.distances @ sample_weight
            if history is not None:
                history.append({"iteration": len(history) + 1, "inertia": float(inertia[0]),
                                "labels": new.labels[0]})
        return new_centers, new, (new.labels == cur.labels).all(dim=1), inertia

    n_iter = lloyd_iterations(centers, first, step, max_iter, tol, verbose, desc)
    # the run's final assignment, exact where its passes approximated (Geometry.refine):
    # its labels and distances are what the estimator's predict gives
    final = geometry.refine(X, centers, Assignment(labels, distances))
    labels, distances = final.labels, final.distances
    if final.pairwise is not None:
        pairwise = list(final.pairwise)
    inertia = distances.to(torch.float64) @ sample_weight.to(torch.float64)
    return Restarts(labels, inertia, centers, n_iter), pairwise
