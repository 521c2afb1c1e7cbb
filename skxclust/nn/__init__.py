"""Pure-torch building blocks of skxclust (no scikit-learn import).

Layers (:mod:`skxclust.nn.neuralized`) and the relevance rules that explain them
(:mod:`skxclust.nn.lrp`) are usable on their own, e.g. with zennit or captum.
"""

from .canonizers import NeuralizingCanonizer
from .lrp import (
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

__all__ = [
    "LogMeanExpPool",
    "MinPool",
    "NeuralizedKMeans",
    "NeuralizingCanonizer",
    "PairwiseSquaredDistance",
    "SoftKMeans",
    "cluster_evidence",
    "competitor_index",
    "midpoint_relevance",
    "neon_relevance",
    "neuralize",
    "neuralized_head",
    "lrp_backward",
    "root_point_relevance",
    "supported_layers",
    "softmin_redistribution",
    "squared_distances",
]
