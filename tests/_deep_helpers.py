"""Deep-cluster helpers for tests: the deep-clusters example's network and the relevance
of a fitted model's features, computed apart from ``explain``."""

import numpy as np
import torch
from torch import nn

from skxclust.nn import neon_relevance


def example_network(image_shape=(8, 8)) -> nn.Sequential:
    """The bias-free edge-filter network of ``examples/plot_deep_clusters.py`` (float64):
    zero-sum 3x3 edge filters and their negatives, ReLU, 2x2 average pool, a 1x1 layer
    contrasting the orientations (weights 1 and -1/3), ReLU."""
    edges = torch.tensor([
        [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]],
        [[-1, -2, -1], [0, 0, 0], [1, 2, 1]],
        [[-2, -1, 0], [-1, 0, 1], [0, 1, 2]],
        [[0, -1, -2], [1, 0, -1], [2, 1, 0]],
    ], dtype=torch.float64) / 4
    conv = nn.Conv2d(1, 8, kernel_size=3, padding=1, bias=False, dtype=torch.float64)
    own = torch.eye(4, dtype=torch.float64).repeat(1, 2)
    contrast = nn.Conv2d(8, 4, kernel_size=1, bias=False, dtype=torch.float64)
    with torch.no_grad():
        conv.weight.copy_(torch.cat([edges, -edges])[:, None])
        contrast.weight.copy_((own - (1 - own) / 3)[:, :, None, None])
    return nn.Sequential(nn.Unflatten(1, (1, *image_shape)), conv, nn.ReLU(), nn.AvgPool2d(2),
                         contrast, nn.ReLU(), nn.Flatten())


def feature_relevance(km, X: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """``(phi(X), NEON relevance of phi(X), f)`` of a model fitted with a float64
    ``feature_extractor``: what ``explain`` hands to the LRP pass."""
    net = km.feature_extractor.eval()
    with torch.no_grad():
        features = net(torch.as_tensor(X)).flatten(1)
    relevance, f = neon_relevance(features, torch.as_tensor(km.cluster_centers_), None,
                                  km.beta_)
    return features, relevance, f.numpy()
