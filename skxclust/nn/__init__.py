"""Pure-torch building blocks of skxclust (no scikit-learn import).

Layers (:mod:`skxclust.nn.neuralized`) and the relevance rules that explain them
(:mod:`skxclust.nn.lrp`) are usable on their own, e.g. with zennit or captum.
Thin-plate-spline and affine warps (:mod:`skxclust.nn.tps`, :mod:`skxclust.nn.warps`) and
the batched warp optimisation of ST K-means (:mod:`skxclust.nn.align`) likewise.
"""

from .align import optimize_pairs, optimize_warps, pair_losses, solve_centroids
from .canonizers import NeuralizingCanonizer
from .lrp import (
    midpoint_basis,
    midpoint_relevance,
    neon_relevance,
    root_point_relevance,
    softmin_redistribution,
)
from .neuralized import (
    LogMeanExpPool,
    MinPool,
    NeuralizedKMeans,
    PairwiseSquaredDistance,
    SoftKMeans,
    cluster_evidence,
    competitor_index,
    neuralize,
    neuralized_head,
    squared_distances,
)
from .propagation import lrp_backward, supported_layers
from .tps import (
    affine_basis,
    control_points,
    pixel_grid,
    tps_bending_energy_matrix,
    tps_interpolation_matrix,
    tps_kernel_matrix,
    tps_system_matrix,
    warp_basis,
    warp_grid,
)
from .warps import (
    WarpModel,
    invert_warps,
    make_warp_model,
    unwarp_images,
    warp_adjoint,
    warp_grids,
    warp_images,
    warp_normal,
)

__all__ = [
    "LogMeanExpPool",
    "MinPool",
    "NeuralizedKMeans",
    "NeuralizingCanonizer",
    "PairwiseSquaredDistance",
    "SoftKMeans",
    "cluster_evidence",
    "competitor_index",
    "midpoint_basis",
    "midpoint_relevance",
    "neon_relevance",
    "neuralize",
    "neuralized_head",
    "lrp_backward",
    "root_point_relevance",
    "supported_layers",
    "softmin_redistribution",
    "squared_distances",
    # spatial transformers (ST K-means)
    "WarpModel",
    "affine_basis",
    "control_points",
    "invert_warps",
    "make_warp_model",
    "optimize_pairs",
    "optimize_warps",
    "pair_losses",
    "pixel_grid",
    "solve_centroids",
    "tps_bending_energy_matrix",
    "tps_interpolation_matrix",
    "tps_kernel_matrix",
    "tps_system_matrix",
    "unwarp_images",
    "warp_adjoint",
    "warp_basis",
    "warp_grid",
    "warp_grids",
    "warp_images",
    "warp_normal",
]
