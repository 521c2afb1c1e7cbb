"""``affine_penalty="auto"``: the weight of the warps' affine prior chosen by the evidence.

The affine penalty of :class:`~skxclust.SpatialTransformerKMeans` is the precision of a
Gaussian prior on the affine part of every warp (shifts, rotations, scalings, shears),
relative to the sample's contrast. How much affine motion the data have is a property of
the data: scikit-learn's 8 x 8 digits are centred and upright, and a weak prior lets a
"1" turn into a "7" (held-out ACC 0.959 at 0.5, 0.937 at 0.05; 5 splits); MNIST digits
moved by random affine maps (rotations up to 25 degrees) need a weak one (0.874 at 0.5,
0.908 at 0.05). The model's Laplace log-evidence (what :meth:`score` reports) tells them
apart: fitted at both values, it is higher at 0.5 on digits and at 0.05 on the deformed
MNIST.

So the fit chooses first (:func:`select_affine_penalty`): on a random subset of the
training rows, Euclidean k-means places ``2 K`` centroids, and every candidate of
:data:`AUTO_AFFINE_PENALTIES` is scored by the summed log-evidence of the subset under
them (the warps fitted with that penalty, the noise variance its maximum-likelihood value
for those fits). The largest wins, and the fit runs with it (``affine_penalty_``). The
choice on the Euclidean centroids agreed with the choice between fully fitted models on
digits, MNIST-5k and its affine-deformed version.

Every candidate is fitted afresh, from the identity, as the fit then fits with it.
Continuing each from the warps of the next stronger prior (0.5 first) costs less than
half (OSULeaf 1.3 s -> 0.65 s, digits 4.3 s -> 1.9 s, MNIST-5k 16 s -> 7 s) and reaches
lower energies on signals (Trace: the rows' nearest-centroid energy at 0.05 7 % lower),
but it scores the weaker priors by fits that the fit itself does not reach: the choice
moved on 7 of 40 signal fits (5 seeds of the 7 UCR sets and BasicMotions; none of the 45
digits and MNIST ones), BasicMotions took 0.15 instead of 0.5 on 3 of 5 seeds and fell
from 0.95-0.975 held out to 0.625-0.675 on two of them, so it was not kept (measured
twice, with the same outcome; the candidates' evidence must come from the fits the model
will use).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch

from ._dask import is_dask_array
from ._lloyd import into_fit_frame
from ._merge_init import euclidean_kmeans
from ._validation import make_generators, resolve_device, to_tensor

__all__ = ["AUTO_AFFINE_PENALTIES", "AffinePriorMixin", "select_affine_penalty"]

# The candidates of affine_penalty="auto": 0.5 (the default before "auto") down to a
# tenth of it.
AUTO_AFFINE_PENALTIES = (0.05, 0.15, 0.5)

# Rows the choice is made on (a random subset of the training rows when there are more).
_SELECTION_ROWS = 500


def select_affine_penalty(X: torch.Tensor, sample_weight: torch.Tensor, n_clusters: int,
                          make_geometry: Callable[[float], Any],
                          generator: torch.Generator,
                          candidates: tuple[float, ...] = AUTO_AFFINE_PENALTIES) -> float:
    """The candidate affine penalty of highest Laplace log-evidence on the rows X.

    Parameters
    ----------
    X : Tensor of shape (n, D)
        Rows to score (the estimator passes up to ``_SELECTION_ROWS`` random training
        rows), in the frame the fit clusters.
    sample_weight : Tensor of shape (n,)
    n_clusters : int
        ``K``: the evidence is taken under ``2 K`` Euclidean k-means centroids.
    make_geometry : callable ``make_geometry(affine_penalty) -> WarpGeometry``
    generator : torch.Generator
        Seeds the k-means runs.
    candidates : tuple of float, default=AUTO_AFFINE_PENALTIES

    Returns
    -------
    float
        The chosen candidate (the first of equal ones; the last where no score is
        finite).
    """
    centers, _ = euclidean_kmeans(X, min(2 * n_clusters, X.shape[0]), sample_weight,
                                  generator, n_runs=3)
    weight = sample_weight.to(torch.float64)
    scores = [float(weight @ make_geometry(value).log_evidence(X, centers))
              for value in candidates]
    # rows the centroids fit exactly (constant data) score nothing: the last candidate
    scores = [score if math.isfinite(score) else -math.inf for score in scores]
    if max(scores) == -math.inf:
        return candidates[-1]
    return candidates[max(range(len(candidates)), key=scores.__getitem__)]


class AffinePriorMixin:
    """``affine_penalty`` ("auto" or a float) of an estimator with warps: its fit plan
    is made with :meth:`_affine_penalty_value` and, for "auto", chooses by
    :meth:`_affine_choice` (the plan's ``choose``); the plan's ``resolved`` value becomes
    ``affine_penalty_``."""

    # of the estimator this is mixed into (annotations for type checkers, no attributes)
    affine_penalty: Any
    random_state: Any
    device: Any
    n_clusters: int
    _make_geometry: Callable[..., Any]  # n_features, affine_penalty=None -> WarpGeometry
    _embed: Callable[[torch.Tensor], torch.Tensor]
    _fit_plan: Callable[..., Any]  # n_features, affine_penalty=None -> FitPlan

    def _affine_penalty_value(self) -> float:
        """``affine_penalty``; for "auto" the fitted choice (before a first fit: the
        largest candidate, for the plan that the fit's choice replaces)."""
        if self.affine_penalty != "auto":
            return float(self.affine_penalty)
        return getattr(self, "affine_penalty_", AUTO_AFFINE_PENALTIES[-1])

    def _affine_choice(self, n_features: int):
        """The plan's ``choose`` (``(X, sample_weight) -> FitPlan``) for "auto", else None:
        :func:`select_affine_penalty` on up to ``_SELECTION_ROWS`` random rows of the
        validated X (numpy, torch or dask), then the plan with that value."""
        if self.affine_penalty != "auto":
            return None

        def choose(X, sw_np):
            generator = make_generators(self.random_state, 3)[2]  # [0], [1]: the fit's
            rows = torch.randperm(X.shape[0], generator=generator)[:_SELECTION_ROWS]
            index = rows.sort().values.numpy()
            X, sw_np = X[index], sw_np[index]
            X = X.compute() if is_dask_array(X) else X
            device = resolve_device(self.device, like=X)
            sw = torch.from_numpy(sw_np).to(device)
            make_geometry = functools.partial(self._make_geometry, n_features)
            # in the frame the fit computes in, its magnitude checked as the fit's
            Xt, _ = into_fit_frame(self._embed(to_tensor(X, device)), sw, make_geometry())
            value = select_affine_penalty(Xt, sw, self.n_clusters, make_geometry, generator)
            return self._fit_plan(n_features, value)

        return choose
