"""Plain k-means as a geometry: squared Euclidean distances, weighted-mean centroids.

:class:`EuclideanGeometry` implements :class:`skxclust._geometry.Geometry` for dense and
sparse CSR tensors (row blocks, row norms and member sums go through
:mod:`skxclust.nn.sparse`); empty clusters are relocated with scikit-learn's rule
(:mod:`skxclust._relocation`).
"""

from __future__ import annotations

import threading

import torch

from ._geometry import Assignment, Farthest, Geometry
from ._relocation import average_sums, farthest_for_empty, relocate_in_sums
from ._threads import SCREEN_MIN_MACS, SUM_BLOCK_VALUES, Work, block_rows
from .nn.neuralized import squared_distances
from .nn.sparse import group_sums, is_sparse, row_block, row_norms, select_rows, take_rows

__all__ = ["EuclideanGeometry", "PreparedRows"]


class PreparedRows:
    """What every pass of :class:`EuclideanGeometry` over one data set reuses, computed
    once for the rows ``X`` (n, D) and weights ``sample_weight`` (n,) it was made for
    (:meth:`EuclideanGeometry.prepare`): the squared row norms, whether all weights are
    one and (only when a screened pass first needs it) a float32 copy of X.

    The owner of the data passes it along with that same X; nothing checks that it does.
    """

    def __init__(self, X: torch.Tensor, sample_weight: torch.Tensor | None):
        self.X = X
        self.row_norms = row_norms(X)
        self.unit_weights = None if sample_weight is None or is_sparse(X) else \
            bool((sample_weight == 1).all())
        self._float32: torch.Tensor | None = None
        self._lock = threading.Lock()  # concurrent loops (see lloyd) share one

    def float32(self) -> torch.Tensor:
        """X in float32, made on the first call."""
        with self._lock:
            if self._float32 is None:
                self._float32 = self.X.to(torch.float32)
            return self._float32

def _nearest_scores(rows, flat, c_sq, n_clusters):
    """Minimum over each restart's K centroids of ``||mu||^2 - 2 x.mu``, and its index.

    ``flat`` holds the R * K centroids (R * K, D), ``c_sq`` their squared norms; returns
    (values, indices), each of shape (rows, R).
    """
    scores = torch.addmm(c_sq, rows, flat.T, alpha=-2.0)
    return scores.view(rows.shape[0], -1, n_clusters).min(dim=2)


class EuclideanGeometry(Geometry):
    """Squared Euclidean distance; centroids are weighted means (plain k-means).

    ``assign`` and ``update`` accept centroids of shape (K, D) or (R, K, D): R restarts
    share every pass over X (one matrix product against all R * K centroids). The squared
    row norms of X and whether the sample weights are all one are computed once per data
    set (:meth:`prepare`) and passed to every pass as ``rows``; :meth:`for_rows` gives the
    geometry that passes them itself, which the Lloyd loop uses for all its iterations and
    restarts (concurrent loops, see :func:`lloyd`, share it).

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

    def __init__(self, batch_size: int = 4096, screen: bool = False):
        self.batch_size = batch_size
        self.screen = screen

    def pass_work(self, X: torch.Tensor, centers: torch.Tensor) -> Work:
        """Multiply-adds of one pass against all R * K centroids (sparse X: proportional
        to the stored values)."""
        values = X.values().numel() if is_sparse(X) else X.shape[0] * X.shape[1]
        return Work("fit", values * centers[..., 0].numel(), X.device)

    @staticmethod
    def prepare(X: torch.Tensor, sample_weight: torch.Tensor | None = None) -> PreparedRows:
        """The values every pass over the rows X (and weights) reuses: pass them as the
        ``rows`` of :meth:`assign`, :meth:`refine`, :meth:`update` and
        :meth:`partial_sums` with this same X and ``sample_weight``."""
        return PreparedRows(X, sample_weight)

    def for_rows(self, X: torch.Tensor, sample_weight: torch.Tensor) -> Geometry:
        """This geometry for passes over X and ``sample_weight`` only: it passes their
        :meth:`prepare` (computed here, once) to every call."""
        return _OnRows(self, self.prepare(X, sample_weight))

    def pairwise(self, X: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
        """Squared distances, shape (n, K), computed in ``batch_size`` row chunks."""
        return torch.cat([squared_distances(row_block(X, sl.start, sl.stop), centers)
                          for sl in self.chunks(X.shape[0])])

    def assign(self, X: torch.Tensor, centers: torch.Tensor,
               rows: PreparedRows | None = None) -> Assignment:
        """Nearest centroid of every row, for centroids (K, D) or restarts (R, K, D).

        With ``screen=True`` the distances are exact to float32 accuracy only (the
        labels stay exact); :meth:`refine` makes them exact. ``rows``: :meth:`prepare`
        of X (None: computed here).
        """
        rows = self.prepare(X) if rows is None else rows
        return self._assign(X, centers, self._screens(X, centers), rows)

    screen_min_macs = SCREEN_MIN_MACS  # screen from this many multiply-adds per pass

    def _screens(self, X: torch.Tensor, centers: torch.Tensor) -> bool:
        macs = X.shape[0] * centers[..., 0].numel() * X.shape[1]
        return self.screen and X.dtype == torch.float64 and macs >= self.screen_min_macs

    def refine(self, X: torch.Tensor, centers: torch.Tensor, assignment,
               rows: PreparedRows | None = None) -> Assignment:
        """The same assignment with distances computed exactly in the dtype of X."""
        if not self._screens(X, centers):
            return assignment
        return self._assign(X, centers, False, self.prepare(X) if rows is None else rows)

    def _assign(self, X: torch.Tensor, centers: torch.Tensor, screened: bool,
                rows: PreparedRows) -> Assignment:
        if centers.dim() == 2:
            batched = self._assign(X, centers[None], screened, rows)
            return Assignment(batched.labels[0], batched.distances[0])
        n_restarts, n_clusters, n_features = centers.shape
        flat = centers.reshape(n_restarts * n_clusters, -1)
        c_sq = (flat * flat).sum(dim=1)
        x_sq = rows.row_norms
        screen = None
        if screened:
            c_max = float(c_sq.max().sqrt())
            x_max = float(x_sq.max().sqrt())
            if x_max * c_max < 1e30:  # far from float32 overflow
                # |float32 score - exact score| <= err(x) for every centroid (rounding of
                # the inputs, the length-D dot product and the sum; with a factor 2 margin).
                unit = (n_features + 4) * 2.0**-24 * 2.0
                err = unit * (2.0 * c_max * x_sq.sqrt() + c_max * c_max)
                screen = (rows.float32(),
                          flat.to(torch.float32), c_sq.to(torch.float32), 2.0 * err)
        n = X.shape[0]
        labels = torch.empty(n_restarts, n, dtype=torch.long, device=X.device)
        dists = torch.empty(n_restarts, n, dtype=X.dtype, device=X.device)
        for sl in self.chunks(n):
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

    def partial_sums(self, X, centers, assignment, sample_weight, rows=None):
        """Weighted sums of the members of each centroid and their total weight.

        Parameters
        ----------
        X : Tensor of shape (n, D), dense or sparse CSR
        centers : Tensor of shape (K, D) or (R, K, D)
            Only its shape is used (the number of centroids).
        assignment : Assignment
            Labels of shape (n,), or (R, n) for restarts.
        sample_weight : Tensor of shape (n,)
        rows : PreparedRows, optional
            :meth:`prepare` of X and ``sample_weight`` (None: computed here).

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
        unit = rows.unit_weights if rows is not None else None
        unit = bool((sample_weight == 1).all()) if unit is None else unit
        # Scatter-add cache-sized blocks of rows into every restart's sums before moving
        # on, so X is read from memory once for all restarts.
        step = block_rows(SUM_BLOCK_VALUES, X.shape[1], self.batch_size)
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

    def restart_runs(self, centers: torch.Tensor) -> list[tuple[Geometry, torch.Tensor]]:
        """All restarts in one loop: :meth:`assign` and :meth:`update` take (R, K, D)."""
        return [(self, centers)]

    def restart_sums(self, X: torch.Tensor, sample_weight: torch.Tensor,
                     centers: torch.Tensor):
        """Assignments and partial sums of all restarts (R, K, D) in one pass over X."""
        rows = self.prepare(X, sample_weight)
        a = self.assign(X, centers, rows)
        sums, weight = self.partial_sums(X, centers, a, sample_weight, rows)
        return a.labels, a.distances, [None] * centers.shape[0], sums, weight

    def relocate(self, X, centers, weight, assignment) -> None:
        """Nothing: :meth:`update` relocates empty clusters itself, with scikit-learn's
        rule (see :mod:`skxclust._relocation`)."""

    def update_from_sums(self, sums: torch.Tensor, weight: torch.Tensor,
                         centers: torch.Tensor, cluster_weight: torch.Tensor,
                         farthest: Farthest, normal) -> torch.Tensor:
        """scikit-learn's rule in the reduced sums: each empty cluster receives one of the
        ``farthest`` rows (none when every distance is zero), then ``sums / weight``."""

        def moved(r, m):
            if not float(farthest.distances[r, 0]) > 0:
                return None
            return farthest.rows[r, :m], farthest.weights[r, :m], farthest.labels[r, :m]

        relocate_in_sums(sums, weight, moved)
        return average_sums(sums, weight)

    def update(self, X, centers, assignment, sample_weight, rows=None):
        """Weighted means of the members, shape of ``centers``; and the cluster weights.

        An empty cluster receives the sample farthest from its centroid, which leaves its
        own cluster (scikit-learn's relocation, :mod:`skxclust._relocation`). ``rows``:
        :meth:`prepare` of X and ``sample_weight`` (None: computed here).
        """
        batched = centers.dim() == 3
        sums, weight = self.partial_sums(X, centers, assignment, sample_weight, rows)
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
        for sl in self.chunks(X.shape[0]):
            block, lab = row_block(X, sl.start, sl.stop), labels[sl]
            if is_sparse(X):
                dots = torch.mm(block, centers.T).gather(1, lab[:, None])[:, 0]
                c_sq = (centers * centers).sum(dim=1)[lab]
                out[sl] = (row_norms(block) - 2.0 * dots + c_sq).clamp_min_(0.0)
            else:
                out[sl] = ((block - centers[lab]) ** 2).sum(dim=1)
        return out


class _OnRows(EuclideanGeometry):
    """A :class:`EuclideanGeometry` for passes over one data set (see
    :meth:`EuclideanGeometry.for_rows`): every pass receives its prepared ``rows``."""

    def __init__(self, geometry: EuclideanGeometry, rows: PreparedRows):
        super().__init__(geometry.batch_size, geometry.screen)
        self.screen_min_macs = geometry.screen_min_macs
        self.rows = rows

    def for_rows(self, X, sample_weight):
        return self

    def assign(self, X, centers, rows=None):
        return super().assign(X, centers, self.rows if rows is None else rows)

    def refine(self, X, centers, assignment, rows=None):
        return super().refine(X, centers, assignment, self.rows if rows is None else rows)

    def partial_sums(self, X, centers, assignment, sample_weight, rows=None):
        return super().partial_sums(X, centers, assignment, sample_weight,
                                    self.rows if rows is None else rows)

    def update(self, X, centers, assignment, sample_weight, rows=None):
        return super().update(X, centers, assignment, sample_weight,
                              self.rows if rows is None else rows)
