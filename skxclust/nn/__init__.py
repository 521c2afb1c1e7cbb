"""Pure-torch building blocks of skxclust (no scikit-learn import).

The package exports what a user composes with: the k-means layers and their explanation,
and the few warp functions that align images on their own. Everything else stays importable
from the submodule that holds it:

- :mod:`skxclust.nn.neuralized`: distance, neuralized and soft-assignment layers
  (``competitor_index`` and the rest of the layer algebra).
- :mod:`skxclust.nn.lrp`: the NEON relevance rules (``root_point_relevance`` for a
  neuralized layer behind an affine map, ``auto_beta``); :mod:`skxclust.nn.reference_rule`:
  NEON with root points from a reference input (``neon_reference_relevance``).
- :mod:`skxclust.nn.propagation` and :mod:`skxclust.nn.rules`: LRP through a feature
  extractor and its rules as objects (write your own with one ``propagate`` method).
- :mod:`skxclust.nn.canonizers`: the zennit-style canonizer.
- :mod:`skxclust.nn.tps`: thin-plate-spline and affine bases (``tps_kernel_matrix``,
  ``tps_system_matrix``, ``control_points``, ``pixel_grid``, ``warp_basis``, ...).
- :mod:`skxclust.nn.warps`: warp families and the resampling operators of ST K-means
  (``warp_grids``, ``warp_adjoint``, ``warp_normal``); :mod:`~skxclust.nn.warp_inverse`:
  the inverse warps (``invert_warps``, ``unwarp_images``).
- :mod:`skxclust.nn.warp_solver`: the regularised warp fit of every (sample, centroid) pair
  from the identity (Levenberg–Marquardt), :mod:`~skxclust.nn.warp_refit` (the same fit
  continued from given warps), :mod:`~skxclust.nn.graduated` (the fit from blurred
  centroids to sharp ones), :mod:`~skxclust.nn.pair_batch` (the energy and normal
  equations of a batch of pairs; ``warp_energy``), :mod:`~skxclust.nn.warp_evidence`
  (``warp_log_volume``), :mod:`~skxclust.nn.pyramid` (the coarse level).
- :mod:`skxclust.nn.appearance`: appearance transformations of a warped centroid (gain,
  offset, stroke thickness) fitted per pair next to the warp (``Appearance``).
- :mod:`skxclust.nn.centroid_update`: the ST K-means centroid update for fixed warps
  (``solve_centroids`` and its blockwise pieces).
- :mod:`skxclust.nn.sparse`: dense / sparse CSR row helpers.

Every exported function checks the shapes of its tensor arguments and names the expected
shape when one does not fit.
"""

from .canonizers import NeuralizingCanonizer
from .lrp import midpoint_basis, midpoint_relevance, neon_relevance, softmin_redistribution
from .neuralized import (
    LogMeanExpPool,
    MinPool,
    NeuralizedKMeans,
    PairwiseSquaredDistance,
    SoftKMeans,
    cluster_evidence,
    neuralize,
    neuralized_head,
    squared_distances,
)
from .propagation import lrp_backward, lrp_trace
from .rules import EpsilonRule, GammaRule, ZPlusRule
from .warp_inverse import unwarp_images
from .warp_solver import fit_warps
from .warps import WarpModel, make_warp_model, warp_images

__all__ = [
    # k-means as layers
    "LogMeanExpPool",
    "MinPool",
    "NeuralizedKMeans",
    "NeuralizingCanonizer",
    "PairwiseSquaredDistance",
    "SoftKMeans",
    "cluster_evidence",
    "neuralize",
    "neuralized_head",
    "squared_distances",
    # relevance: NEON for the k-means layers, LRP through a feature extractor
    "EpsilonRule",
    "GammaRule",
    "ZPlusRule",
    "lrp_backward",
    "lrp_trace",
    "midpoint_basis",
    "midpoint_relevance",
    "neon_relevance",
    "softmin_redistribution",
    # warps (ST K-means): align images on their own
    "WarpModel",
    "fit_warps",
    "make_warp_model",
    "unwarp_images",
    "warp_images",
]
