r"""NEON relevance for neuralized k-means: soft-min redistribution and the midpoint rule.

Pure torch; no scikit-learn import. Shapes: ``B`` rows of a batch, ``K`` clusters,
``D`` features. Competitor quantities are kept in a full ``(B, K)`` layout whose target
column is ignored, which avoids any ``(B, K-1, D)`` tensor for shared centroids.

Two steps explain the cluster evidence :math:`f_c(x) = \min_{k\ne c} h_{ck}(x)`:

1. Min-pool (soft-min): :math:`R_k = \frac{\exp(-\beta h_{ck})}{\sum_{k'\ne c}
   \exp(-\beta h_{ck'})}\, f_c`, so :math:`\sum_k R_k = f_c`.
2. Midpoint rule for the linear layer, with :math:`m_{ck} = (\mu_c+\mu_k)/2`:
   :math:`R_i = \sum_{k\ne c} R_k\,(x_i - m_{ck,i})\,w_{ck,i} / h_{ck}`.
   Because :math:`b_{ck} = -w_{ck}^\top m_{ck}`, :math:`\sum_i (x_i-m_{ck,i})w_{ck,i} =
   h_{ck}`, hence :math:`\sum_i R_i = f_c` exactly.

With :math:`w = 2(\mu_c-\mu_k)` the term :math:`m \odot w = \mu_c^2 - \mu_k^2` (elementwise),
so :math:`R = 2x\odot(A\mu_c - \sum_k a_k\mu_k) - (A\mu_c^2 - \sum_k a_k\mu_k^2)` with
:math:`a_k = R_k/h_{ck}`, :math:`A = \sum_k a_k`: two small matrix products per batch.
"""

from __future__ import annotations

import math

import torch

from ._checks import check_shape

__all__ = [
    "midpoint_basis",
    "softmin_redistribution",
    "midpoint_relevance",
    "neon_relevance",
    "root_point_relevance",
    "auto_beta",
]


def auto_beta(evidence: torch.Tensor) -> float:
    """The scale-free soft-min stiffness ``1 / mean f`` of the assigned evidence.

    Parameters
    ----------
    evidence : Tensor of shape (N,) or (N, 1)
        ``f_c(x)`` of each sample for its assigned cluster (``+inf`` when K == 1).

    Returns
    -------
    float
        ``inf`` (hard min) when the mean is not positive; 0 when it is infinite.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.lrp import auto_beta
    >>> auto_beta(torch.tensor([1.0, 3.0]))
    0.5
    """
    check_shape(evidence, "evidence", "(N,)", "(N, 1)")
    mean_f = float(evidence.mean())
    return 1.0 / mean_f if mean_f > 0 else float("inf")


def relevance_per_unit_h(relevance: torch.Tensor, h: torch.Tensor, eps: float) -> torch.Tensor:
    """``R_k / h_ck`` with a sign-aware floor ``eps * max_k |h_ck|`` on ``|h_ck|``."""
    tiny = torch.finfo(h.dtype).tiny
    abs_h = h.abs()
    floor = (eps * abs_h.amax(dim=1, keepdim=True)).clamp_min_(tiny)
    return relevance / torch.where(abs_h < floor, floor.copysign(h), h)


def softmin_redistribution(
    h: torch.Tensor, target: torch.Tensor, beta: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split the min-pool output over the competitors by a soft-min.

    Parameters
    ----------
    h : Tensor of shape (B, K)
        ``h_ck = d_k - d_c`` for target ``c``; the target column is ignored.
    target : LongTensor of shape (B,)
    beta : float
        Stiffness in ``[0, inf]``. 0 spreads evenly, ``inf`` gives everything to the
        nearest competitor.

    Returns
    -------
    relevance : Tensor of shape (B, K)
        ``R_k`` per competitor, 0 in the target column; rows sum to ``f``.
    f : Tensor of shape (B,)
        ``min_{k != c} h_ck``.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import softmin_redistribution
    >>> h = torch.tensor([[0.0, 1.0, 3.0]])  # target 0: its competitors at 1 and 3
    >>> R, f = softmin_redistribution(h, torch.tensor([0]), beta=float("inf"))
    >>> R.tolist(), f.tolist()
    ([[0.0, 1.0, 0.0]], [1.0])
    """
    check_shape(h, "h", "(B, K)")
    check_shape(target, "target", "(B,)", B=(h.shape[0], "h.shape[0]"))
    column = target[:, None]
    h_comp = h.scatter(1, column, math.inf)
    f = h_comp.amin(dim=1)
    if math.isinf(beta):
        weights = torch.zeros_like(h).scatter_(1, h_comp.argmin(dim=1, keepdim=True), 1.0)
    elif beta == 0:
        weights = torch.full_like(h, 1.0 / max(h.shape[1] - 1, 1)).scatter_(1, column, 0.0)
    else:  # softmax of -beta h over the competitors, shifted by its maximum beta f
        weights = torch.exp_((f[:, None] - h_comp).mul_(beta))  # target column: exp(-inf) = 0
        weights /= weights.sum(dim=1, keepdim=True)
    return weights.mul_(f[:, None]), f


def midpoint_basis(centers: torch.Tensor) -> torch.Tensor:
    """``[2 mu, -mu**2]``, shape (K, 2D): the matrix of the midpoint rule's one product.

    For shared centroids of shape (K, D). Compute it once and pass it to
    :func:`neon_relevance` (``basis=``) when explaining many blocks of rows with the same
    centroids.

    Parameters
    ----------
    centers : Tensor of shape (K, D)

    Returns
    -------
    Tensor of shape (K, 2D)

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import midpoint_basis
    >>> midpoint_basis(torch.tensor([[1.0, 2.0]])).tolist()
    [[2.0, 4.0, -1.0, -4.0]]
    """
    check_shape(centers, "centers", "(K, D)")
    return torch.cat([2.0 * centers, -(centers * centers)], dim=1)


def _relevance_from_coefficients(x, centers, coef, basis=None, workspace=None, out=None):
    """``R = 2 x * (coef @ mu) - coef @ mu**2``, shape (B, D): the midpoint rule once the
    coefficients ``coef = a_sum * onehot(c) - a`` (B, K) are known.

    Shared centroids take one product with :func:`midpoint_basis` (into ``workspace``)
    and one pass ``R = x * P1 + P2`` (into ``out``); per-row centroids (B, K, D) take two
    batched contractions.
    """
    if centers.dim() == 3:
        return (2.0 * x * torch.einsum("bk,bkd->bd", coef, centers)
                - torch.einsum("bk,bkd->bd", coef, centers * centers))
    n_features = centers.shape[1]
    if basis is None:
        basis = midpoint_basis(centers)
    products = torch.mm(coef, basis, out=workspace)
    return torch.addcmul(products[:, n_features:], x, products[:, :n_features], out=out)


def _nearest_cluster_coefficients(g: torch.Tensor, beta: float, eps: float):
    """Midpoint coefficients (B, K) and evidence (B,) for the nearest cluster.

    The common case of :func:`neon_relevance` (``target=None``, no offset, ``0 < beta <
    inf``) in fewer passes over (B, K) than :func:`softmin_redistribution` followed by
    the general guard of :func:`midpoint_relevance`, with the same values up to rounding:
    with ``c = argmax_k g_k``, ``h_ck = g_c - g_k >= 0`` and ``f = g_c - g_second``, the
    soft-min weights are ``exp(beta (g_k - g_second))`` (largest 1, 0 for ``c``), and the
    sign-aware floor of ``|h_ck|`` reduces to ``max(h_ck, floor)``.
    """
    column = g.argmax(dim=1, keepdim=True)  # the first maximum, as in predict
    best = g.gather(1, column)
    competitors = g.scatter(1, column, -math.inf)
    second = competitors.amax(dim=1, keepdim=True)
    f = best - second
    relevance = torch.sub(competitors, second).mul_(beta).exp_()  # R_k, target column 0
    relevance.mul_(f / relevance.sum(dim=1, keepdim=True))
    h = best - g
    floor = h.amax(dim=1, keepdim=True).mul_(eps).clamp_min_(torch.finfo(h.dtype).tiny)
    a = relevance.div_(torch.maximum(h, floor))  # R_k / h_ck
    coef = torch.neg(a).scatter_add_(1, column, a.sum(dim=1, keepdim=True))
    return coef, f[:, 0]


def _check_relevance_args(x, centers, out, basis, workspace) -> None:
    """Shapes of the arguments that :func:`neon_relevance` and :func:`midpoint_relevance`
    share."""
    check_shape(x, "x", "(B, D)")
    rows, width = (x.shape[0], "x.shape[0]"), (x.shape[1], "x.shape[1]")
    check_shape(centers, "centers", "(K, D)", "(B, K, D)", B=rows, D=width)
    if out is not None:
        check_shape(out, "out", "(B, D)", B=rows, D=width)
    double = (2 * x.shape[1], "2 * x.shape[1]")
    if basis is not None:
        check_shape(basis, "basis", "(K, 2D)", K=(centers.shape[-2], "centers.shape[-2]"),
                    **{"2D": double})
    if workspace is not None:
        check_shape(workspace, "workspace", "(B, 2D)", B=rows, **{"2D": double})


def midpoint_relevance(
    x: torch.Tensor,
    centers: torch.Tensor,
    target: torch.Tensor,
    h: torch.Tensor,
    competitor_relevance: torch.Tensor,
    eps: float = 1e-12,
    offset: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    basis: torch.Tensor | None = None,
    workspace: torch.Tensor | None = None,
) -> torch.Tensor:
    """Midpoint rule: propagate competitor relevance onto the input features.

    With an ``offset`` (distances ``||x - mu_k||^2 + offset_k``), ``h_ck`` gains the
    constant ``p_k = offset_k - offset_c`` and the root point moves from the midpoint
    ``m_ck`` along ``w_ck`` onto the decision hyperplane, ``r_ck = m_ck - p_k w_ck /
    ||w_ck||^2``; the extra term ``R_k p_k w_ck**2 / (h_ck ||w_ck||^2)`` keeps the sum exact.
    A competitor with ``w_ck = 0`` (the same centroid as the target) has the constant
    ``h_ck = p_k``; its relevance ``R_k`` is shared evenly by the D features.

    Parameters
    ----------
    x : Tensor of shape (B, D)
    centers : Tensor of shape (K, D) or (B, K, D)
        Shared centroids, or per-row "effective" centroids (e.g. centroids warped onto
        each sample by ST K-means).
    target : LongTensor of shape (B,)
    h : Tensor of shape (B, K)
        ``h_ck``; target column ignored.
    competitor_relevance : Tensor of shape (B, K)
        ``R_k``; zero in the target column.
    eps : float
        Relative guard against division by ``h_ck ~ 0`` (sign-aware).
    offset : Tensor of shape (B, K), optional
        Additive term of each squared distance (e.g. a warp penalty).
    out : Tensor of shape (B, D), optional
        Written with the result when the centroids are shared and there is no offset
        (then no other (B, D) temporary than one (B, 2D) product is made).
    basis : Tensor of shape (K, 2D), optional
        :func:`midpoint_basis` of shared ``centers``, when already computed.
    workspace : Tensor of shape (B, 2D), optional
        Receives that (B, 2D) product for shared centroids (no new allocation per call).

    Returns
    -------
    Tensor of shape (B, D)
        Relevance per input feature; rows sum to ``competitor_relevance.sum(1)``.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import midpoint_relevance, softmin_redistribution
    >>> centers = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 3.0]], dtype=torch.float64)
    >>> x = torch.tensor([[0.5, 0.2]], dtype=torch.float64)
    >>> g = 2 * x @ centers.T - (centers ** 2).sum(1)  # ||x||^2 - d_k
    >>> target = torch.tensor([0])
    >>> h = g[:, :1] - g
    >>> R_comp, f = softmin_redistribution(h, target, beta=1.0)
    >>> R = midpoint_relevance(x, centers, target, h, R_comp)
    >>> bool(torch.isclose(R.sum(), f[0]))
    True
    """
    _check_relevance_args(x, centers, out, basis, workspace)
    n_rows, n_clusters = x.shape[0], centers.shape[-2]
    check_shape(target, "target", "(B,)", B=(n_rows, "x.shape[0]"))
    for name, value in (("h", h), ("competitor_relevance", competitor_relevance),
                        ("offset", offset)):
        if value is not None:
            check_shape(value, name, "(B, K)", B=(n_rows, "x.shape[0]"),
                        K=(n_clusters, "centers.shape[-2]"))
    column = target[:, None]
    a = relevance_per_unit_h(competitor_relevance, h, eps).scatter_(1, column, 0.0)
    a_sum = a.sum(dim=1, keepdim=True)
    # sum_k a_k (mu_c - mu_k) = sum_j coef_j mu_j with coef = a_sum * onehot(c) - a: two
    # matrix products and two passes over (B, D), nothing of shape (B, K-1, D).
    coef = torch.neg(a).scatter_add_(1, column, a_sum)
    relevance = _relevance_from_coefficients(x, centers, coef, basis, workspace,
                                             out if offset is None else None)
    if offset is None:
        return relevance
    p = offset - offset.gather(1, target[:, None])
    return relevance + projection_term(x, centers, target, a, p)


def projection_term(x: torch.Tensor, centers: torch.Tensor, target: torch.Tensor,
                    a: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    r"""``sum_k a_k q_k w_ck**2 / ||w_ck||^2`` (B, D), with ``w_ck = 2 (mu_c - mu_k)``.

    The part of a root-point rule that moves a root point along ``w_ck`` by
    ``-q_k w_ck / ||w_ck||^2``: it carries ``a_k q_k`` in total. A competitor with
    ``w_ck = 0`` (the same centroid as the target) has a constant ``h_ck`` no feature
    moves: its ``a_k q_k`` is shared evenly by the features, so sums stay exact.

    Parameters
    ----------
    x : Tensor of shape (B, D)
    centers : Tensor of shape (K, D) or (B, K, D)
    target : LongTensor of shape (B,)
    a, q : Tensor of shape (B, K)
        ``R_k / h_ck`` (0 in the target column) and the shift of each root point.
    """
    if centers.dim() == 2:
        mu_c = centers[target]
        sq = (centers * centers).sum(1)
        w_norm2 = 4.0 * ((mu_c * mu_c).sum(1, keepdim=True) - 2.0 * mu_c @ centers.T + sq)
    else:
        mu_c = centers[torch.arange(x.shape[0], device=x.device), target]
        diff = mu_c[:, None, :] - centers
        w_norm2 = 4.0 * (diff * diff).sum(-1)
    apart = w_norm2 > 0
    g = torch.where(apart, a * q / w_norm2.clamp_min(torch.finfo(x.dtype).tiny), 0.0)
    g_sum = g.sum(dim=1, keepdim=True)
    if centers.dim() == 2:
        g_mu, g_mu_sq = g @ centers, g @ (centers * centers)
    else:
        g_mu = torch.einsum("bk,bkd->bd", g, centers)
        g_mu_sq = torch.einsum("bk,bkd->bd", g, centers * centers)
    even = torch.where(apart, 0.0, a * q).sum(dim=1, keepdim=True) / x.shape[1]
    return 4.0 * (g_sum * mu_c * mu_c - 2.0 * mu_c * g_mu + g_mu_sq) + even


def centroid_scores(x: torch.Tensor, centers: torch.Tensor,
                    offset: torch.Tensor | None = None,
                    sq_norms: torch.Tensor | None = None) -> torch.Tensor:
    """``g_k = 2 x.mu_k - ||mu_k||^2 - offset_k = ||x||^2 - d_k``, shape (B, K).

    ``h_ck = g_c - g_k`` is then the linear form of the neuralized layer itself, so that
    the root-point rules conserve to rounding (no ``||x||^2`` cancellation). ``centers``
    (K, D) or (B, K, D); ``sq_norms``: ``||mu_k||^2`` of shared centroids, when known.
    """
    if centers.dim() == 2:
        if sq_norms is None:
            sq_norms = (centers * centers).sum(dim=1)
        g = torch.addmm(sq_norms, x, centers.T, beta=-1.0, alpha=2.0)
    else:
        g = 2.0 * torch.einsum("bd,bkd->bk", x, centers) - (centers * centers).sum(dim=-1)
    return g if offset is None else g - offset


def neon_relevance(
    x: torch.Tensor,
    centers: torch.Tensor,
    target: torch.Tensor | None,
    beta: float,
    eps: float = 1e-12,
    offset: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    basis: torch.Tensor | None = None,
    workspace: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """NEON explanation of the k-means evidence for ``target``.

    Parameters
    ----------
    x : Tensor of shape (B, D)
    centers : Tensor of shape (K, D) or (B, K, D)
        At least two clusters.
    target : LongTensor of shape (B,) or None
        Cluster explained in each row; None: the nearest one (the k-means label).
    beta : float
        Soft-min stiffness in ``[0, inf]``.
    eps : float
        Guard of :func:`midpoint_relevance`.
    offset : Tensor of shape (B, K), optional
        Additive term of each squared distance, ``d_k = ||x - mu_k||^2 + offset_k``.
    out : Tensor of shape (B, D), optional
        Receives the relevance (see :func:`midpoint_relevance`).
    basis, workspace : Tensor, optional
        For shared centroids: :func:`midpoint_basis` of ``centers`` and a (B, 2D) buffer
        (see :func:`midpoint_relevance`), to reuse over many blocks of rows.

    Returns
    -------
    relevance : Tensor of shape (B, D)
        Sums over features to ``f`` (up to rounding).
    f : Tensor of shape (B,)
        The explained evidence ``f_target(x)``.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import neon_relevance
    >>> centers = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 3.0]], dtype=torch.float64)
    >>> x = torch.tensor([[0.5, 0.2]], dtype=torch.float64)
    >>> R, f = neon_relevance(x, centers, torch.tensor([0]), beta=1.0)
    >>> bool(torch.isclose(R.sum(), f[0]))
    True
    """
    _check_relevance_args(x, centers, out, basis, workspace)
    if target is not None:
        check_shape(target, "target", "(B,)", B=(x.shape[0], "x.shape[0]"))
    if offset is not None:
        check_shape(offset, "offset", "(B, K)", B=(x.shape[0], "x.shape[0]"),
                    K=(centers.shape[-2], "centers.shape[-2]"))
    sq_norms = None if basis is None else -basis[:, centers.shape[1]:].sum(dim=1)
    g = centroid_scores(x, centers, offset, sq_norms)  # h_ck = g_c - g_k
    if target is None and offset is None and 0.0 < beta < math.inf:
        coef, f = _nearest_cluster_coefficients(g, beta, eps)
        return _relevance_from_coefficients(x, centers, coef, basis, workspace, out), f
    if target is None:
        target = g.argmax(dim=1)
    h = g.gather(1, target[:, None]) - g
    r_comp, f = softmin_redistribution(h, target, beta)
    relevance = midpoint_relevance(x, centers, target, h, r_comp, eps=eps, offset=offset,
                                   out=out, basis=basis, workspace=workspace)
    return relevance, f


def root_point_relevance(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    root: torch.Tensor,
    target: torch.Tensor,
    beta: float,
    eps: float = 1e-12,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""NEON for a general neuralized layer ``h_ck(x) = w_ck^T x + b_ck`` with root points.

    Used when the k-means sits behind an affine map (e.g. a scaler and a PCA): composed
    with the map, the neuralized layer is still linear in the raw input but its weights no
    longer have the ``2 (mu_c - mu_k)`` form. Each pair ``(c, k)`` has a root point
    ``r_ck`` on its decision hyperplane (``w_ck^T r_ck + b_ck = 0``), and
    ``R_i = sum_k R_k (x_i - r_cki) w_cki / h_ck`` conserves exactly. With ``w = 2(mu_c -
    mu_k)`` and ``r = (mu_c + mu_k)/2`` this is the midpoint rule.

    Parameters
    ----------
    x : Tensor of shape (B, D)
    weight : Tensor of shape (K, K-1, D)
    bias : Tensor of shape (K, K-1)
    root : Tensor of shape (K, K-1, D)
    target : LongTensor of shape (B,)
    beta : float
        Soft-min stiffness in ``[0, inf]``.
    eps : float
        Relative guard against ``h_ck ~ 0``.

    Returns
    -------
    relevance : Tensor of shape (B, D)
    f : Tensor of shape (B,)
        ``min_k h_ck(x)`` for the target.

    Examples
    --------
    With the weights and midpoints of k-means this is the midpoint rule:

    >>> import torch
    >>> from skxclust.nn import neon_relevance, neuralize
    >>> from skxclust.nn.lrp import root_point_relevance
    >>> from skxclust.nn.neuralized import competitor_index
    >>> centers = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 3.0]], dtype=torch.float64)
    >>> weight, bias = neuralize(centers)
    >>> root = (centers[:, None, :] + centers[competitor_index(3)]) / 2
    >>> x, target = torch.tensor([[0.5, 0.2]], dtype=torch.float64), torch.tensor([0])
    >>> R, f = root_point_relevance(x, weight, bias, root, target, beta=1.0)
    >>> torch.allclose(R, neon_relevance(x, centers, target, beta=1.0)[0])
    True
    """
    check_shape(x, "x", "(B, D)")
    check_shape(weight, "weight", "(K, K-1, D)", D=(x.shape[1], "x.shape[1]"))
    n_clusters = (weight.shape[0], "weight.shape[0]")
    competitors = {"K-1": (weight.shape[1], "weight.shape[1]")}
    check_shape(bias, "bias", "(K, K-1)", K=n_clusters, **competitors)
    check_shape(root, "root", "(K, K-1, D)", K=n_clusters, D=(x.shape[1], "x.shape[1]"),
                **competitors)
    check_shape(target, "target", "(B,)", B=(x.shape[0], "x.shape[0]"))
    relevance = torch.empty_like(x)
    f_out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    for c in torch.unique(target).tolist():
        rows = torch.nonzero(target == c).flatten()
        xc, w, r = x[rows], weight[c], root[c]
        h = xc @ w.T + bias[c]  # (n_c, K-1)
        pseudo_target = torch.full((rows.numel(),), h.shape[1], device=x.device)
        h_full = torch.cat([h, torch.zeros_like(h[:, :1])], dim=1)  # dummy target column
        r_comp, f = softmin_redistribution(h_full, pseudo_target, beta)
        a = relevance_per_unit_h(r_comp[:, :-1], h, eps)
        relevance[rows] = xc * (a @ w) - a @ (r * w)
        f_out[rows] = f
    return relevance, f_out
