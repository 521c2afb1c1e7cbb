r"""NEON with root points taken from a reference input (the "reference rule").

Pure torch; no scikit-learn import. Shapes: ``B`` rows, ``K`` clusters, ``D`` features.

The midpoint rule of :mod:`skxclust.nn.lrp` explains each competitor's linear piece
:math:`h_{ck}(x) = w_{ck}^\top x + b_{ck}` from a root point on its decision hyperplane,
the midpoint :math:`m_{ck}` between the two centroids (moved along :math:`w_{ck}` onto the
hyperplane when the distances carry an offset). Any root point :math:`r` on the
hyperplane conserves, :math:`\sum_i w_{ck,i}(x_i - r_i) = h_{ck}(x)`. The reference rule
takes the orthogonal projection of a reference input :math:`z` onto the hyperplane,

.. math::  r_{ck} = z - h_{ck}(z)\, w_{ck} / \lVert w_{ck}\rVert^2, \qquad
   R_i = \sum_{k\ne c} \frac{R_k}{h_{ck}(x)}\Big[w_{ck,i}(x_i - z_i)
   + h_{ck}(z)\,\frac{w_{ck,i}^2}{\lVert w_{ck}\rVert^2}\Big],

the root point nearest to the reference. The first term is gradient times input measured
from :math:`z` (what replacing each feature by :math:`z_i` changes in :math:`h_{ck}`),
the second shares out the evidence the reference itself keeps. Relevance still sums to
:math:`f_c(x)` exactly. With :math:`z = m_{ck}` it is the midpoint rule.

Use it when the question is "what would setting these features to the reference values
cost the assignment", e.g. a pixel-flipping test that replaces features by their training
mean: the midpoint rule answers for the midpoints between centroids instead.
``SpatialTransformerKMeans.explain`` uses it by default, with the training mean as ``z``.
"""

from __future__ import annotations

import math

import torch

from ._checks import check_shape
from .lrp import centroid_scores, projection_term, relevance_per_unit_h, softmin_redistribution

__all__ = ["reference_relevance", "neon_reference_relevance"]


def _check_reference(reference: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The reference as (B, D) (a (D,) one broadcast to every row)."""
    check_shape(reference, "reference", "(D,)", "(B, D)", B=(x.shape[0], "x.shape[0]"),
                D=(x.shape[1], "x.shape[1]"))
    return reference.expand_as(x) if reference.dim() == 1 else reference


def reference_relevance(
    x: torch.Tensor,
    centers: torch.Tensor,
    target: torch.Tensor,
    h: torch.Tensor,
    competitor_relevance: torch.Tensor,
    reference: torch.Tensor,
    eps: float = 1e-12,
    offset: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reference rule: propagate competitor relevance onto the features (see the module).

    Parameters
    ----------
    x : Tensor of shape (B, D)
    centers : Tensor of shape (K, D) or (B, K, D)
        Shared centroids, or per-row effective centroids.
    target : LongTensor of shape (B,)
    h : Tensor of shape (B, K)
        ``h_ck(x)``; target column ignored.
    competitor_relevance : Tensor of shape (B, K)
        ``R_k``; zero in the target column.
    reference : Tensor of shape (D,) or (B, D)
        The reference input ``z`` (one for all rows, or one per row), in the frame of ``x``.
    eps : float
        Relative guard against division by ``h_ck ~ 0`` (sign-aware).
    offset : Tensor of shape (B, K), optional
        Additive term of each squared distance, ``d_k = ||x - mu_k||^2 + offset_k``.

    Returns
    -------
    Tensor of shape (B, D)
        Rows sum to ``competitor_relevance.sum(1)``.

    Examples
    --------
    With two clusters and a reference on the decision hyperplane, the relevance is
    gradient times input measured from the reference:

    >>> import torch
    >>> from skxclust.nn import softmin_redistribution
    >>> from skxclust.nn.reference_rule import reference_relevance
    >>> centers = torch.tensor([[0.0, 0.0], [2.0, 0.0]], dtype=torch.float64)
    >>> x = torch.tensor([[0.2, 0.7]], dtype=torch.float64)
    >>> z = torch.tensor([1.0, 3.0], dtype=torch.float64)
    >>> h = torch.tensor([[0.0, 3.2]], dtype=torch.float64)  # d_1 - d_0 at x
    >>> R_comp, f = softmin_redistribution(h, torch.tensor([0]), beta=1.0)
    >>> reference_relevance(x, centers, torch.tensor([0]), h, R_comp, z).tolist()
    [[3.2, 0.0]]
    """
    check_shape(x, "x", "(B, D)")
    check_shape(centers, "centers", "(K, D)", "(B, K, D)", B=(x.shape[0], "x.shape[0]"),
                D=(x.shape[1], "x.shape[1]"))
    z = _check_reference(reference, x)
    column = target[:, None]
    a = relevance_per_unit_h(competitor_relevance, h, eps).scatter_(1, column, 0.0)
    coef = torch.neg(a).scatter_add_(1, column, a.sum(dim=1, keepdim=True))
    # sum_k a_k w_ck = 2 sum_j coef_j mu_j
    if centers.dim() == 2:
        gradient = 2.0 * coef @ centers
    else:
        gradient = 2.0 * torch.einsum("bk,bkd->bd", coef, centers)
    g_z = centroid_scores(z, centers, offset)
    h_z = g_z.gather(1, column) - g_z  # h_ck(z)
    return (x - z) * gradient + projection_term(x, centers, target, a, h_z)


def neon_reference_relevance(
    x: torch.Tensor,
    centers: torch.Tensor,
    target: torch.Tensor | None,
    beta: float,
    reference: torch.Tensor,
    eps: float = 1e-12,
    offset: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """NEON of the k-means evidence with the reference rule: soft-min over competitors,
    then :func:`reference_relevance`.

    Parameters
    ----------
    x : Tensor of shape (B, D)
    centers : Tensor of shape (K, D) or (B, K, D)
        At least two clusters.
    target : LongTensor of shape (B,) or None
        Cluster explained in each row; None: the nearest one.
    beta : float
        Soft-min stiffness in ``[0, inf]``.
    reference : Tensor of shape (D,) or (B, D)
        The reference input, in the frame of ``x``.
    eps : float
        Guard of :func:`reference_relevance`.
    offset : Tensor of shape (B, K), optional
        Additive term of each squared distance.

    Returns
    -------
    relevance : Tensor of shape (B, D)
        Sums over features to ``f`` (up to rounding).
    f : Tensor of shape (B,)
        The explained evidence ``f_target(x)``.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.reference_rule import neon_reference_relevance
    >>> centers = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 3.0]], dtype=torch.float64)
    >>> x = torch.tensor([[0.5, 0.2]], dtype=torch.float64)
    >>> R, f = neon_reference_relevance(x, centers, None, 1.0, centers.mean(0))
    >>> bool(torch.isclose(R.sum(), f[0]))
    True
    """
    check_shape(x, "x", "(B, D)")
    if not 0.0 <= beta <= math.inf:
        raise ValueError(f"beta must be in [0, inf], got {beta!r}.")
    g = centroid_scores(x, centers, offset)
    if target is None:
        target = g.argmax(dim=1)
    check_shape(target, "target", "(B,)", B=(x.shape[0], "x.shape[0]"))
    h = g.gather(1, target[:, None]) - g
    r_comp, f = softmin_redistribution(h, target, beta)
    return reference_relevance(x, centers, target, h, r_comp, reference, eps, offset), f
