"""k-means math shared by both estimators: the one Lloyd loop and its geometries.

k-means++ seeding lives in :mod:`skxclust._seeding` and empty-cluster relocation in
:mod:`skxclust._relocation` (both re-exported here). Data may be dense or sparse CSR
tensors: row blocks, row norms and member sums go through :mod:`skxclust.nn.sparse`.

Both estimators drive :func:`lloyd` with a *geometry* object that knows how to measure
(sample, centroid) distances and how to re-estimate centroids for fixed assignments:

``geometry.assign(X, centers) -> Assignment``
    labels, distance to the assigned centroid, and any per-sample state the update needs.
``geometry.update(X, centers, assignment, sample_weight) -> (new_centers, cluster_weight)``
``geometry.pairwise(X, centers) -> (n, K)`` squared distances.
``geometry.translation_invariant``
    True when distances do not change if X and the centroids are shifted together
    (then the data are centred for numerical accuracy).
``geometry.lloyd_threads(X, centers) -> int | None`` (optional)
    torch intra-op threads for the loop; None (or no such method) keeps torch's setting.
``geometry.relocates_empty`` (optional, default False)
    True when ``update`` relocates empty clusters itself (scikit-learn's rule for plain
    k-means); otherwise :func:`lloyd` moves them to the farthest samples.
``geometry.batched_restarts`` (optional, default False)
    True when ``assign`` and ``update`` also accept centroids of shape (R, K, D) — R
    independent restarts — returning labels and distances of shape (R, n) and weights of
    shape (R, K). :func:`lloyd` then runs all restarts together, so each pass over X
    serves every restart (in two groups on two threads when the loop is serial, see
    :func:`lloyd`); other geometries run their restarts one after another.

:class:`EuclideanGeometry` is plain k-means; ST K-means plugs in a warping geometry.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import torch

from ._progress import progress
from ._relocation import average_sums, farthest_for_empty, relocate_empty, relocate_in_sums
from ._seeding import kmeans_plusplus, kmeans_plusplus_restarts
from ._threads import LLOYD_SERIAL_MACS, serial_threads, torch_threads
from .nn.neuralized import squared_distances
from .nn.sparse import group_sums, is_sparse, row_block, row_norms, select_rows, take_rows

__all__ = [
    "Assignment",
    "EuclideanGeometry",
    "best_restart",
    "kmeans_plusplus",
    "kmeans_plusplus_restarts",
    "lloyd",
    "lloyd_iterations",
    "relocate_empty",
    "row_norms",
]


class Assignment(NamedTuple):
    """Result of an assignment (E) step; a leading restart axis R when batched."""

    labels: torch.Tensor  # (n,) or (R, n) long
    distances: torch.Tensor  # same shape: squared distance to the assigned centroid
    state: Any = None  # geometry-specific per-sample data for the update step

    def select(self, keep: torch.Tensor) -> Assignment:
        """The restarts where the boolean (R,) ``keep`` is True (``state`` is shared)."""
        keep = keep.to(self.labels.device)
        return Assignment(self.labels[keep], self.distances[keep], self.state)


def _nearest_scores(rows, flat, c_sq, n_clusters):
    """Minimum over each restart's K centroids of ``||mu||^2 - 2 x.mu``, and its index.

    ``flat`` holds the R * K centroids (R * K, D), ``c_sq`` their squared norms; returns
    (values, indices), each of shape (rows, R).
    """
    scores = torch.addmm(c_sq, rows, flat.T, alpha=-2.0)
    return scores.view(rows.shape[0], -1, n_clusters).min(dim=2)


class EuclideanGeometry:
    """Squared Euclidean distance; centroids are weighted means (plain k-means).

    ``assign`` and ``update`` accept centroids of shape (K, D) or (R, K, D): R restarts
    share every pass over X (one matrix product against all R * K centroids). The squared
    row norms of X and whether the sample weights are all one are computed once per data
    tensor and reused by every iteration and restart (the cache is keyed on the tensor
    object and its version counter, so in-place changes invalidate it). A cached value
    depends only on its tensor, so concurrent loops (see :func:`lloyd`) share one geometry.

    Parameters
    ----------
    batch_size : int
        Rows processed at once; memory is O(batch_size * R * K).
    screen : bool, default=False
        For float64 data, find the nearest centroids with float32 products and recompute
        in float64 only the rows whose two best centroids are within the float32 error
        bound of each other: the labels are those of float64 arithmetic at about half the
        cost, the distances have float32 accuracy until :meth:`refine` (which :func:`lloyd`
        calls on its result). Keeps a float32 copy of X.
    """

    translation_invariant = True
    batched_restarts = True

    def __init__(self, batch_size: int = 4096, screen: bool = False):
        self.batch_size = batch_size
        self.screen = screen
        self._cache: dict[str, tuple] = {}

    def lloyd_threads(self, X: torch.Tensor, centers: torch.Tensor) -> int | None:
        """Intra-op threads :func:`lloyd` should use (None: torch's setting)."""
        if is_sparse(X):  # the work is proportional to the stored values
            small = X.values().numel() * centers[..., 0].numel() < LLOYD_SERIAL_MACS
            return 1 if small and X.device.type == "cpu" else None
        return serial_threads(X, centers[..., 0].numel(), LLOYD_SERIAL_MACS)

    def _cached(self, name: str, tensor: torch.Tensor, compute):
        hit = self._cache.get(name)
        if hit is not None and hit[0] is tensor and hit[1] == tensor._version:
            return hit[2]
        value = compute(tensor)
        self._cache[name] = (tensor, tensor._version, value)
        return value

    def _chunks(self, n: int) -> list[slice]:
        return [slice(i, min(i + self.batch_size, n)) for i in range(0, n, self.batch_size)]

    def pairwise(self, X: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
        """Squared distances, shape (n, K), computed in ``batch_size`` row chunks."""
        return torch.cat([squared_distances(row_block(X, sl.start, sl.stop), centers)
                          for sl in self._chunks(X.shape[0])])

    def assign(self, X: torch.Tensor, centers: torch.Tensor) -> Assignment:
        """Nearest centroid of every row, for centroids (K, D) or restarts (R, K, D).

        With ``screen=True`` the distances are exact to float32 accuracy only (the
        labels stay exact); :meth:`refine` makes them exact.
        """
        return self._assign(X, centers, self._screens(X, centers))

    # Below this many multiply-adds per pass the float32 products save less than the
    # extra passes of the screening cost (digits with 10 restarts: 1.2e7).
    screen_min_macs = 2**24

    def _screens(self, X: torch.Tensor, centers: torch.Tensor) -> bool:
        macs = X.shape[0] * centers[..., 0].numel() * X.shape[1]
        return self.screen and X.dtype == torch.float64 and macs >= self.screen_min_macs

    def refine(self, X: torch.Tensor, centers: torch.Tensor, assignment) -> Assignment:
        """The same assignment with distances computed exactly in the dtype of X."""
        if not self._screens(X, centers):
            return assignment
        return self._assign(X, centers, False)

    def _assign(self, X: torch.Tensor, centers: torch.Tensor, screened: bool) -> Assignment:
        if centers.dim() == 2:
            batched = self._assign(X, centers[None], screened)
            return Assignment(batched.labels[0], batched.distances[0])
        n_restarts, n_clusters, n_features = centers.shape
        flat = centers.reshape(n_restarts * n_clusters, -1)
        c_sq = (flat * flat).sum(dim=1)
        x_sq = self._cached("row_norms", X, row_norms)
        screen = None
        if screened:
            c_max = float(c_sq.max().sqrt())
            x_max = float(x_sq.max().sqrt())
            if x_max * c_max < 1e30:  # far from float32 overflow
                # |float32 score - exact score| <= err(x) for every centroid (rounding of
                # the inputs, the length-D dot product and the sum; with a factor 2 margin).
                unit = (n_features + 4) * 2.0**-24 * 2.0
                err = unit * (2.0 * c_max * x_sq.sqrt() + c_max * c_max)
                screen = (self._cached("float32", X, lambda t: t.to(torch.float32)),
                          flat.to(torch.float32), c_sq.to(torch.float32), 2.0 * err)
        n = X.shape[0]
        labels = torch.empty(n_restarts, n, dtype=torch.long, device=X.device)
        dists = torch.empty(n_restarts, n, dtype=X.dtype, device=X.device)
        for sl in self._chunks(n):
            labels[:, sl], dists[:, sl] = (
                t.T for t in self._nearest(X, sl, flat, c_sq, x_sq, n_clusters, screen))
        return Assignment(labels, dists)

    @staticmethod
    def _nearest(X, sl, flat, c_sq, x_sq, n_clusters, screen):
        """Labels and squared distances (rows, R) of the rows ``sl`` of X.

        argmin_k ||x - mu_k||^2 = argmin_k (||mu_k||^2 - 2 x.mu_k): one addmm against all
        R * K centroids, ||x||^2 added to the minimum only. The (rows, R * K) layout keeps
        every score bitwise independent of the chunking (the transposed product is not),
        so batch_size never changes a result. With ``screen``, the scores are computed in
        float32 and only the rows whose best and second-best centroids are closer than
        the float32 error bound are recomputed in float64: the labels equal the float64
        ones, the distances carry float32 rounding.
        """
        block = row_block(X, sl.start, sl.stop)
        if screen is None:
            val, idx = _nearest_scores(block, flat, c_sq, n_clusters)
            return idx, val.add_(x_sq[sl, None]).clamp_min_(0.0)
        X32, flat32, c_sq32, bound = screen
        scores = torch.addmm(c_sq32, row_block(X32, sl.start, sl.stop), flat32.T, alpha=-2.0)
        scores = scores.view(scores.shape[0], -1, n_clusters)
        best, idx = scores.min(dim=2)
        second = scores.scatter_(2, idx[..., None], float("inf")).amin(dim=2)
        unsure = ~((second - best).to(bound.dtype) > bound[sl, None])  # NaN: unsure
        val = best.to(x_sq.dtype)
        rows = torch.nonzero(unsure.any(dim=1)).flatten()
        if rows.numel():
            val[rows], idx[rows] = _nearest_scores(select_rows(block, rows), flat, c_sq,
                                                   n_clusters)
        return idx, val.add_(x_sq[sl, None]).clamp_min_(0.0)

    def partial_sums(self, X, centers, assignment, sample_weight):
        """Weighted sums of the members of each centroid and their total weight.

        Parameters
        ----------
        X : Tensor of shape (n, D), dense or sparse CSR
        centers : Tensor of shape (K, D) or (R, K, D)
            Only its shape is used (the number of centroids).
        assignment : Assignment
            Labels of shape (n,), or (R, n) for restarts.
        sample_weight : Tensor of shape (n,)

        Returns
        -------
        sums : Tensor of shape (K, D), or (R, K, D)
        weight : Tensor of shape (K,), or (R, K)
            Centroids are ``sums / weight``; the sums over disjoint row blocks add up, so
            streaming and blockwise fits reduce them.
        """
        labels = assignment.labels
        batched = labels.dim() == 2
        lab = labels if batched else labels[None]
        n_restarts, n = lab.shape
        n_clusters = centers.shape[-2]
        offsets = torch.arange(n_restarts, device=X.device)[:, None] * n_clusters
        flat_labels = (lab + offsets).reshape(-1)
        weight = torch.zeros(n_restarts * n_clusters, dtype=X.dtype, device=X.device)
        weight.index_add_(0, flat_labels, sample_weight.repeat(n_restarts))
        shape = (n_restarts, n_clusters)
        if is_sparse(X):  # one sparse product per restart
            sums = torch.stack([group_sums(X, lab[r], sample_weight, n_clusters)
                                for r in range(n_restarts)])
            weight = weight.view(shape)
            return (sums, weight) if batched else (sums[0], weight[0])
        sums = X.new_zeros(n_restarts * n_clusters, X.shape[1])
        unit = self._cached("unit_weights", sample_weight, lambda w: bool((w == 1).all()))
        # Scatter-add cache-sized blocks of rows (~2 MB in float64) into every restart's
        # sums before moving on, so X is read from memory once for all restarts.
        step = max(1, min(self.batch_size, 2**18 // max(1, X.shape[1])))
        per_restart = flat_labels.view(n_restarts, n)
        for i in range(0, n, step):
            block = X[i:i + step] if unit else X[i:i + step] * sample_weight[i:i + step, None]
            for r in range(n_restarts):
                sums.index_add_(0, per_restart[r, i:i + step], block)
        sums, weight = sums.view(*shape, -1), weight.view(shape)
        return (sums, weight) if batched else (sums[0], weight[0])

    @staticmethod
    def centers_from_sums(sums, weight, centers):
        """``sums / weight``; centroids without weight keep their value in ``centers``."""
        return torch.where(weight[..., None] > 0,
                           sums / weight.clamp_min(1e-300)[..., None], centers)

    # Empty clusters are relocated by :meth:`update` itself, with scikit-learn's rule (see
    # :mod:`skxclust._relocation`); :func:`lloyd` leaves them alone.
    relocates_empty = True

    def update(self, X, centers, assignment, sample_weight):
        """Weighted means of the members, shape of ``centers``; and the cluster weights.

        An empty cluster receives the sample farthest from its centroid, which leaves its
        own cluster (scikit-learn's relocation, :mod:`skxclust._relocation`).
        """
        batched = centers.dim() == 3
        sums, weight = self.partial_sums(X, centers, assignment, sample_weight)
        if not batched:
            sums, weight = sums[None], weight[None]
        some_empty = not bool((weight > 0).all())
        if some_empty:
            labels = assignment.labels if batched else assignment.labels[None]

            def farthest(r, m):
                d = self._assigned_distances(X, centers[r] if batched else centers,
                                             labels[r])
                far = farthest_for_empty(d, m)
                if far is None:
                    return None
                far = far.to(X.device)
                return take_rows(X, far), sample_weight[far], labels[r][far]

            relocate_in_sums(sums, weight, farthest)
        new = average_sums(sums, weight, some_empty)
        return (new, weight) if batched else (new[0], weight[0])

    def _assigned_distances(self, X, centers, labels):
        """Squared distance (n,) of every row to its centroid ``centers[labels]``, from
        the differences (as scikit-learn computes it for relocation), in row chunks."""
        out = torch.empty(X.shape[0], dtype=X.dtype, device=X.device)
        for sl in self._chunks(X.shape[0]):
            block, lab = row_block(X, sl.start, sl.stop), labels[sl]
            if is_sparse(X):
                dots = torch.mm(block, centers.T).gather(1, lab[:, None])[:, 0]
                c_sq = (centers * centers).sum(dim=1)[lab]
                out[sl] = (row_norms(block) - 2.0 * dots + c_sq).clamp_min_(0.0)
            else:
                out[sl] = ((block - centers[lab]) ** 2).sum(dim=1)
        return out


# -- the Lloyd loop -----------------------------------------------------------------------
class _OneRestart:
    """View a geometry without batched restarts as one with a restart axis of length 1."""

    def __init__(self, geometry):
        self.geometry = geometry

    def assign(self, X, centers):
        a = self.geometry.assign(X, centers[0])
        return Assignment(a.labels[None], a.distances[None], a.state)

    def update(self, X, centers, assignment, sample_weight):
        single = Assignment(assignment.labels[0], assignment.distances[0], assignment.state)
        new, weight = self.geometry.update(X, centers[0], single, sample_weight)
        return new[None], weight[None]


def best_restart(result):
    """The restart of a batched :func:`lloyd` result with the lowest inertia.

    Returns ``(labels (n,), inertia float, centers (K, D), n_iter int)``.
    """
    labels, inertia, centers, n_iter = result
    best = int(torch.argmin(inertia))
    return labels[best], float(inertia[best]), centers[best], int(n_iter[best])


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
):
    """Lloyd iterations with a pluggable geometry (the project's only Lloyd loop).

    Convergence follows scikit-learn: stop when labels do not change (strict) or when the
    total squared centroid shift is ``<= tol`` (``tol`` already scaled by the data variance).
    Empty clusters are relocated to the samples farthest from their centroid.

    Parameters
    ----------
    X : Tensor of shape (n, D)
    centers : Tensor of shape (K, D), or (R, K, D) for R independent restarts
        Initial centroids. Restarts stop one by one as each converges; with a geometry
        that has ``batched_restarts`` the running ones share every pass over X.
    geometry : geometry object (see the module docstring)
    sample_weight : Tensor of shape (n,)
    max_iter : int
    tol : float
    verbose : int, default=0
    history : list, optional
        Receives one dict (iteration, inertia, labels) per iteration; single run only.
    desc : str, default="k-means"
        Label of the progress bar (see :mod:`skxclust._progress`).

    Returns
    -------
    labels : LongTensor (n,) — (R, n) for restarts
    inertia : float — float64 Tensor (R,) for restarts
        Weighted sum of the distances for the returned labels and centroids.
    centers : Tensor (K, D) — (R, K, D) for restarts
    n_iter : int — LongTensor (R,) for restarts; iterations run (>= 1).
    """
    if centers.dim() == 2:
        labels, inertia, out, n_iter = lloyd(X, centers[None], geometry, sample_weight,
                                             max_iter, tol, verbose, history, desc)
        return labels[0], float(inertia[0]), out[0], int(n_iter[0])
    if history is not None and centers.shape[0] != 1:
        raise ValueError("lloyd records a history for a single run only.")
    hint = getattr(geometry, "lloyd_threads", None)
    threads = None if hint is None else hint(X, centers)
    batched = getattr(geometry, "batched_restarts", False)
    if batched and threads == 1 and centers.shape[0] > 1 and X.device.type == "cpu":
        return _lloyd_in_two_groups(X, centers, geometry, sample_weight, max_iter, tol,
                                    verbose)
    with torch_threads(threads):
        if batched:
            return _lloyd(X, centers, geometry, sample_weight, max_iter, tol, verbose, history,
                          desc)
        runs = [_lloyd(X, c[None], _OneRestart(geometry), sample_weight, max_iter, tol,
                       verbose, history, desc) for c in centers]
        return tuple(torch.cat(parts) for parts in zip(*runs))


def _lloyd_in_two_groups(X, centers, geometry, sample_weight, max_iter, tol, verbose):
    """Batched restarts of a serial loop as two groups, on two threads when torch has them.

    A loop too small for torch's intra-op threads (see :mod:`skxclust._threads`) still
    gets a second core this way: each group runs the single-threaded loop on its half of
    the restarts, and torch releases the GIL inside its ops. Digits with 10 restarts on an
    idle 2-core machine: fit 0.88-0.93x scikit-learn's time, against 1.0-1.3x for one
    group. The groups depend only on the number of restarts, never on the threads, so the
    results are the same with one thread (groups run one after the other) or two.
    """
    half = (centers.shape[0] + 1) // 2

    def run(group):
        with torch_threads(1):
            return _lloyd(X, group, geometry, sample_weight, max_iter, tol, verbose, None)

    groups = (centers[:half], centers[half:])
    if torch.get_num_threads() > 1 and not verbose:  # verbose: keep the lines in order
        with ThreadPoolExecutor(2, thread_name_prefix="skxclust-lloyd") as pool:
            runs = list(pool.map(run, groups))
    else:
        runs = [run(group) for group in groups]
    return tuple(torch.cat(parts) for parts in zip(*runs))


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
    """Body of :func:`lloyd` for restarts (R, K, D), run under the geometry's threads."""
    centers = centers.clone()
    first = geometry.assign(X, centers)
    labels, distances = first.labels.clone(), first.distances.clone()

    def step(current, cur, running):
        new_centers, weight = geometry.update(X, current, cur, sample_weight)
        if not getattr(geometry, "relocates_empty", False):
            relocate_empty(new_centers, weight, lambda r, m: X[
                torch.argsort(cur.distances[r], descending=True)[:m]])
        new = geometry.assign(X, new_centers)
        rows = running.to(X.device)
        labels[rows], distances[rows] = new.labels, new.distances
        inertia = None
        if history is not None or verbose:  # only then: it costs a reduction and a sync
            inertia = new.distances @ sample_weight
        if history is not None:
            history.append({"iteration": len(history) + 1, "inertia": float(inertia[0]),
                            "labels": new.labels[0]})
        return new_centers, new, (new.labels == cur.labels).all(dim=1), inertia

    n_iter = lloyd_iterations(centers, first, step, max_iter, tol, verbose, desc)
    refine = getattr(geometry, "refine", None)
    if refine is not None:  # exact distances for the inertia (see EuclideanGeometry.screen)
        distances = refine(X, centers, Assignment(labels, distances)).distances
    inertia = distances.to(torch.float64) @ sample_weight.to(torch.float64)
    return labels, inertia, centers, n_iter
