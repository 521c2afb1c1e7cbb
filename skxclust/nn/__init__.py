"""Pure-torch building blocks of skxclust (no scikit-learn import).

Layers (:mod:`skxclust.nn.neuralized`) and the relevance rules that explain them
(:mod:`skxclust.nn.lrp`) are usable on their own, e.g. with zennit or captum.
Thin-plate-spline and affine warps (:mod:`skxclust.nn.tps`, :mod:`skxclust.nn.warps`), the
regularised warp fit of ST K-means for all (sample, centroid) pairs at once
(:mod:`skxclust.nn.warp_solver`, Levenberg–Marquardt) and its centroid update for fixed warps
(:mod:`skxclust.nn.align`) likewise.
"""

from .align import solve_centroids
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
    tps_penalty_matrices,
    tps_system_matrix,
    warp_basis,
    warp_grid,
)
from .warp_solver import fit_warps, warp_energy, warp_log_volume
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
    "fit_warps",
    "invert_warps",
    "make_warp_model",
    "pixel_grid",
    "solve_centroids",
    "tps_bending_energy_matrix",
    "tps_interpolation_matrix",
    "tps_kernel_matrix",
    "tps_penalty_matrices",
    "tps_system_matrix",
    "unwarp_images",
    "warp_adjoint",
    "warp_basis",
    "warp_energy",
    "warp_grid",
    "warp_grids",
    "warp_images",
    "warp_log_volume",
    "warp_normal",
]
