r"""k-means as a neural network: distance, neuralized and soft-assignment layers.

Pure torch; no scikit-learn import. Shapes: ``N`` samples, ``K`` clusters, ``D`` features.

The neuralized form (Kauffmann et al., "From clustering to cluster explanations via
neural networks", TNNLS 2022) rewrites the k-means assignment as

.. math::

    f_c(x) = \min_{k \ne c} h_{ck}(x), \qquad
    h_{ck}(x) = w_{ck}^\top x + b_{ck} = \lVert x-\mu_k\rVert^2 - \lVert x-\mu_c\rVert^2,

with :math:`w_{ck} = 2(\mu_c-\mu_k)` and :math:`b_{ck} = \lVert\mu_k\rVert^2 -
\lVert\mu_c\rVert^2`. :math:`\arg\max_c f_c(x)` is the k-means label and
:math:`f_c(x) > 0` exactly for the assigned cluster (ties aside).

The soft-assignment form is a linear layer and a softmax with temperature ``T``:
:math:`W_k = \mu_k / T`, :math:`b_k = -\lVert\mu_k\rVert^2/(2T)`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_shape
from .sparse import is_sparse, row_norms

__all__ = [
    "squared_distances",
    "competitor_index",
    "neuralize",
    "cluster_evidence",
    "PairwiseSquaredDistance",
    "NeuralizedKMeans",
    "MinPool",
    "LogMeanExpPool",
    "SoftKMeans",
    "neuralized_head",
]


def squared_distances(x: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distances between rows of ``x`` and ``centers``.

    Computed as ``||x||^2 - 2 x.mu + ||mu||^2`` (one matrix product); for dense ``x``,
    the entries that this expansion leaves with less than half their digits (``d <
    sqrt(eps) (||x||^2 + ||mu||^2)``: a row at or next to a centroid) are recomputed from
    the differences, so that the distance of a centroid to itself is exactly 0.

    Parameters
    ----------
    x : Tensor of shape (N, D)
        Dense, or a sparse CSR tensor.
    centers : Tensor of shape (K, D)

    Returns
    -------
    Tensor of shape (N, K)
        ``||x_n - centers_k||^2``, clamped at 0 against rounding.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import squared_distances
    >>> mu = torch.tensor([[0.1, 0.7], [3.0, 4.0]], dtype=torch.float64)
    >>> squared_distances(mu, mu).diagonal().tolist()
    [0.0, 0.0]
    """
    check_shape(x, "x", "(N, D)")
    check_shape(centers, "centers", "(K, D)", D=(x.shape[1], "x.shape[1]"))
    if is_sparse(x):
        x_sq = row_norms(x)[:, None]
    else:
        x_sq = (x * x).sum(dim=1, keepdim=True)
    c_sq = (centers * centers).sum(dim=1)
    d = x_sq - 2.0 * (x @ centers.T) + c_sq
    if not is_sparse(x):
        lost = d < math.sqrt(torch.finfo(d.dtype).eps) * (x_sq + c_sq)
        if bool(lost.any()):
            rows, cols = torch.nonzero(lost, as_tuple=True)
            diff = x[rows] - centers[cols]
            d[rows, cols] = (diff * diff).sum(dim=1)
    return d.clamp_min_(0.0)


def competitor_index(n_clusters: int, device=None) -> torch.Tensor:
    """Indices of the competitors of every cluster.

    Returns
    -------
    LongTensor of shape (K, K-1)
        Row ``c`` lists ``[0, ..., c-1, c+1, ..., K-1]``.

    Examples
    --------
    >>> from skxclust.nn.neuralized import competitor_index
    >>> competitor_index(3).tolist()
    [[1, 2], [0, 2], [0, 1]]
    """
    idx = torch.arange(n_clusters, device=device)
    full = idx.repeat(n_clusters, 1)
    mask = full != idx[:, None]
    return full[mask].reshape(n_clusters, n_clusters - 1)


def neuralize(centers: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights and biases of the neuralized k-means layer.

    Parameters
    ----------
    centers : Tensor of shape (K, D)
        Cluster centroids ``mu``. K must be at least 2.

    Returns
    -------
    weight : Tensor of shape (K, K-1, D)
        ``w_ck = 2 (mu_c - mu_k)`` for the competitors k of c (see :func:`competitor_index`).
    bias : Tensor of shape (K, K-1)
        ``b_ck = ||mu_k||^2 - ||mu_c||^2``.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import neuralize
    >>> weight, bias = neuralize(torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 3.0]]))
    >>> tuple(weight.shape), tuple(bias.shape)
    ((3, 2, 2), (3, 2))
    >>> weight[0, 0].tolist(), bias[0].tolist()  # cluster 0 against cluster 1
    ([-4.0, 0.0], [4.0, 9.0])
    """
    check_shape(centers, "centers", "(K, D)")
    n_clusters = centers.shape[0]
    if n_clusters < 2:
        raise ValueError(f"neuralization needs at least 2 clusters, got {n_clusters}.")
    comp = competitor_index(n_clusters, device=centers.device)
    mu_k = centers[comp]  # (K, K-1, D)
    weight = 2.0 * (centers[:, None, :] - mu_k)
    sq = (centers * centers).sum(dim=1)
    bias = sq[comp] - sq[:, None]
    return weight, bias


def cluster_evidence(distances: torch.Tensor) -> torch.Tensor:
    """Neuralized discriminant ``f`` from squared distances, in O(N K).

    ``f_c = min_{k != c} d_k - d_c``: the nearest other centroid is the overall nearest
    one unless ``c`` itself is nearest, in which case it is the second nearest.

    Parameters
    ----------
    distances : Tensor of shape (N, K)
        Squared distances to the centroids.

    Returns
    -------
    Tensor of shape (N, K)
        Cluster evidence; ``+inf`` everywhere when K == 1 (no competitor).

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import cluster_evidence
    >>> cluster_evidence(torch.tensor([[1.0, 4.0, 6.0]])).tolist()
    [[3.0, -3.0, -5.0]]
    """
    check_shape(distances, "distances", "(N, K)")
    n_clusters = distances.shape[1]
    if n_clusters == 1:
        return torch.full_like(distances, math.inf)
    two = torch.topk(distances, 2, dim=1, largest=False)
    nearest = two.indices[:, :1]
    min_other = two.values[:, :1].expand_as(distances).clone()
    min_other.scatter_(1, nearest, two.values[:, 1:2])
    return min_other - distances


class PairwiseSquaredDistance(nn.Module):
    """Layer mapping inputs to squared distances from fixed centroids.

    Parameters
    ----------
    centers : Tensor of shape (K, D)

    Shape
    -----
    input (N, D) -> output (N, K)

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import PairwiseSquaredDistance
    >>> layer = PairwiseSquaredDistance(torch.tensor([[0.0, 0.0], [3.0, 4.0]]))
    >>> layer(torch.tensor([[0.0, 4.0]])).tolist()
    [[16.0, 9.0]]
    """

    def __init__(self, centers: torch.Tensor):
        super().__init__()
        check_shape(centers, "centers", "(K, D)")
        self.centers = nn.Parameter(centers.detach().clone(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_shape(x, "x", "(N, D)", D=(self.centers.shape[1], "centers.shape[1]"))
        diff = x[:, None, :] - self.centers[None, :, :]
        return (diff * diff).sum(dim=-1)


class NeuralizedKMeans(nn.Module):
    """The linear layer of neuralized k-means: ``h_ck(x) = w_ck^T x + b_ck``.

    Parameters
    ----------
    weight : Tensor of shape (K, K-1, D)
    bias : Tensor of shape (K, K-1)

    Shape
    -----
    input (N, D) -> output (N, K, K-1)

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import NeuralizedKMeans, neuralize
    >>> layer = NeuralizedKMeans(*neuralize(torch.eye(3)))
    >>> layer(torch.zeros(2, 3)).shape
    torch.Size([2, 3, 2])
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        check_shape(weight, "weight", "(K, K-1, D)")
        n_clusters = weight.shape[0]
        check_shape(weight, "weight", "(K, K-1, D)", **{"K-1": n_clusters - 1})
        check_shape(bias, "bias", "(K, K-1)", K=(n_clusters, "weight.shape[0]"),
                    **{"K-1": n_clusters - 1})
        self.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.bias = nn.Parameter(bias.detach().clone(), requires_grad=False)

    @classmethod
    def from_centers(cls, centers: torch.Tensor) -> NeuralizedKMeans:
        """Build the layer from centroids of shape (K, D)."""
        return cls(*neuralize(centers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_shape(x, "x", "(N, D)", D=(self.weight.shape[2], "weight.shape[2]"))
        return torch.einsum("nd,kjd->nkj", x, self.weight) + self.bias


class MinPool(nn.Module):
    """Hard minimum over the last dimension: (N, K, K-1) -> (N, K).

    Shape
    -----
    input (..., M) -> output (...), with M >= 1.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import MinPool
    >>> MinPool()(torch.tensor([[[3.0, 1.0], [2.0, 5.0]]])).tolist()
    [[1.0, 2.0]]
    """

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        check_shape(h, "h", "(..., M)")
        return h.min(dim=-1).values


class LogMeanExpPool(nn.Module):
    r"""Smooth minimum over the last dimension (soft-min pool).

    ``out = -(1/beta) * log(mean_k exp(-beta * h_k))``. ``beta -> inf`` tends to the hard
    minimum; its gradient with respect to ``h`` is the soft-min weighting that NEON uses
    to redistribute relevance, so gradient-based explainers recover the min-pool rule.

    Parameters
    ----------
    beta : float
        Stiffness, > 0.

    Shape
    -----
    input (..., M) -> output (...), e.g. (N, K, K-1) -> (N, K).

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import LogMeanExpPool
    >>> h = torch.tensor([[[3.0, 1.0], [2.0, 5.0]]], dtype=torch.float64)
    >>> LogMeanExpPool(beta=50.0)(h).round(decimals=2).tolist()  # near the hard minimum
    [[1.01, 2.01]]
    """

    def __init__(self, beta: float):
        super().__init__()
        if not beta > 0:
            raise ValueError(f"beta must be > 0 for LogMeanExpPool, got {beta!r}.")
        self.beta = float(beta)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        check_shape(h, "h", "(..., M)")
        n = h.shape[-1]
        return -(torch.logsumexp(-self.beta * h, dim=-1) - math.log(n)) / self.beta


class SoftKMeans(nn.Module):
    r"""Soft k-means assignment as a linear layer followed by a softmax.

    ``p(k | x) = softmax_k(-||x - mu_k||^2 / (2T)) = softmax_k(W x + b)`` with
    ``W_k = mu_k / T`` and ``b_k = -||mu_k||^2 / (2T)`` (the ``||x||^2`` term is common to
    all clusters and cancels). ``T -> 0`` gives hard k-means.

    Parameters
    ----------
    centers : Tensor of shape (K, D)
    temperature : float
        ``T > 0``.

    Shape
    -----
    input (N, D) -> output (N, K), rows summing to one.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import SoftKMeans
    >>> mu = torch.tensor([[0.0, 0.0], [4.0, 0.0]], dtype=torch.float64)
    >>> soft = SoftKMeans(mu, temperature=2.0)  # squared distances 1 and 9 below
    >>> soft(torch.tensor([[1.0, 0.0]], dtype=torch.float64)).round(decimals=4).tolist()
    [[0.8808, 0.1192]]
    """

    def __init__(self, centers: torch.Tensor, temperature: float = 1.0):
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}.")
        check_shape(centers, "centers", "(K, D)")
        n_clusters, n_features = centers.shape
        self.temperature = float(temperature)
        self.linear = nn.Linear(n_features, n_clusters, dtype=centers.dtype, device=centers.device)
        with torch.no_grad():
            self.linear.weight.copy_(centers / temperature)
            self.linear.bias.copy_(-(centers * centers).sum(dim=1) / (2.0 * temperature))
        self.linear.requires_grad_(False)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_shape(x, "x", "(N, D)", D=(self.linear.in_features, "centers.shape[1]"))
        return self.softmax(self.linear(x))


def neuralized_head(centers: torch.Tensor, beta: float | None = None) -> nn.Sequential:
    """Neuralized k-means as a module: :class:`NeuralizedKMeans` + min-pool.

    Parameters
    ----------
    centers : Tensor of shape (K, D)
    beta : float or None
        None gives the exact hard minimum (output equals ``cluster_evidence``); a positive
        value gives the smooth :class:`LogMeanExpPool`, convenient for gradient explainers.

    Returns
    -------
    torch.nn.Sequential mapping (N, D) to the cluster evidence (N, K).

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import cluster_evidence, neuralized_head, squared_distances
    >>> centers = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 3.0]], dtype=torch.float64)
    >>> x = torch.tensor([[0.5, 0.2], [1.8, 0.1]], dtype=torch.float64)
    >>> f = neuralized_head(centers)(x)
    >>> torch.allclose(f, cluster_evidence(squared_distances(x, centers)))
    True
    """
    check_shape(centers, "centers", "(K, D)")
    pool = MinPool() if beta is None or math.isinf(beta) else LogMeanExpPool(beta)
    return nn.Sequential(NeuralizedKMeans.from_centers(centers), pool)
