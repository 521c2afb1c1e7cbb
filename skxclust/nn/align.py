r"""Batched warp optimisation of (sample, centroid) pairs, and the centroid update.

Pure torch; no scikit-learn import. Shapes: ``B`` samples of a chunk, ``K`` centroids,
``P = H * W`` pixels; warps and operators come from :mod:`skxclust.nn.warps`.

The centroid is warped onto the sample (the sample itself is never resampled):

.. math::  d(x, \mu) = \min_\nu\; \lVert x - S_\nu \mu\rVert^2
           + \lambda\,\lVert \delta(\nu)\rVert^2,

with :math:`\delta(\nu)` the displacement of the landmarks. All pairs of a chunk of ``B``
samples with all ``K`` centroids are optimised together by Adam: the loss is a sum of
independent per-pair terms and Adam is element-wise, so every pair follows its own
trajectory. One GEMM builds the sampling grids of all pairs, one ``grid_sampler`` call
warps every centroid, and the gradient is written out by hand (no autograd graph).

Optional screening: after ``screen_steps`` steps only the ``n_candidates`` best centroids
of each sample continue (with their Adam state, so their trajectory is unchanged); the
others keep the loss reached so far, an upper bound of their optimum.

For fixed warps, :func:`solve_centroids` returns the centroids minimising the distortion
(conjugate gradients on the normal equations, started from the adjoint-weighted average
:math:`\sum_i S_i^\top x_i / \sum_i S_i^\top 1`).
"""

from __future__ import annotations

import torch

from .warps import BILINEAR, ZEROS, WarpModel, warp_adjoint, warp_batch, warp_normal

__all__ = [
    "adjoint_sums",
    "covered",
    "normal_sums",
    "optimize_pairs",
    "optimize_warps",
    "pair_losses",
    "solve_centroids",
    "solve_normal_equations",
]


def _penalty_terms(flat_params: torch.Tensor, model: WarpModel):
    """Squared landmark displacement of every warp, and ``G v`` (half its gradient)."""
    gv = flat_params if model.landmark_gram is None else flat_params @ model.landmark_gram
    return (flat_params * gv).sum(-1), gv


def _loss_and_grad(targets, images, model, flat_params, penalty, need_grad):
    """Losses (G, M) of ``G`` images each warped by ``M`` warps against ``targets``
    (broadcastable to (G, M, P)); ``penalty`` is a float or per-warp (G * M,). Returns the
    losses and, if asked, their gradient (G * M, n_params)."""
    warped, grid = warp_batch(images, model, flat_params)
    residual = warped - targets
    loss = (residual * residual).sum(-1)
    penalised = isinstance(penalty, torch.Tensor) or penalty != 0.0
    if penalised:
        size, gv = _penalty_terms(flat_params, model)
        loss = loss + (penalty * size).reshape(loss.shape)
    if not need_grad:
        return loss, None
    grad_out = residual.reshape(images.shape[0], 1, -1, model.shape[1])
    _, grad_grid = torch.ops.aten.grid_sampler_2d_backward(
        grad_out, images, grid, BILINEAR, ZEROS, True, [False, True]
    )
    grad = 2.0 * (grad_grid.reshape(flat_params.shape[0], -1) @ model.flat_basis.T)
    if penalised:
        pen = penalty[:, None] if isinstance(penalty, torch.Tensor) else penalty
        grad = grad + (2.0 * pen) * gv
    return loss, grad


class _PairAdam:
    """Adam state of a set of warps (flat rows), the best loss and params seen per row."""

    def __init__(self, params: torch.Tensor, model: WarpModel, coarse_steps: int):
        self.params = params
        self.m1 = torch.zeros_like(params)
        self.m2 = torch.zeros_like(params)
        self.best_loss = None
        self.best_params = params.clone()
        self.coarse = model.coarse_rows.repeat_interleave(model.ndim).to(params.dtype)
        self.coarse_steps = coarse_steps

    def select(self, rows: torch.Tensor) -> None:
        """Keep only ``rows`` (flat pair indices)."""
        for name in ("params", "m1", "m2", "best_loss", "best_params"):
            setattr(self, name, getattr(self, name)[rows])

    def record(self, loss: torch.Tensor) -> None:
        loss = loss.reshape(-1)
        if self.best_loss is None:
            self.best_loss = loss
            return
        improved = loss < self.best_loss
        self.best_loss = torch.minimum(loss, self.best_loss)
        self.best_params[improved] = self.params[improved]

    def step(self, grad, step, learning_rate, betas=(0.9, 0.999), eps=1e-8) -> None:
        beta1, beta2 = betas
        coarse = self.coarse
        if step < self.coarse_steps:
            grad = grad * coarse
            t_fine = 1.0
        else:
            t_fine = float(step + 1 - self.coarse_steps)
        # Bias correction per row: fine rows count their steps from the end of the coarse phase.
        t = coarse * (step + 1) + (1 - coarse) * t_fine
        self.m1.mul_(beta1).add_(grad, alpha=1 - beta1)
        self.m2.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (self.m2 / (1 - beta2**t)).sqrt_().add_(eps)
        self.params = self.params - learning_rate * (self.m1 / (1 - beta1**t)) / denom

    def run(self, targets, images, model, penalty, steps: range, learning_rate,
            final: bool) -> None:
        """Adam steps ``steps``; with ``final`` the params after the last step are scored."""
        for step in steps:
            loss, grad = _loss_and_grad(targets, images, model, self.params, penalty, True)
            self.record(loss)
            self.step(grad, step, learning_rate)
        if final:
            self.record(_loss_and_grad(targets, images, model, self.params, penalty, False)[0])


def _per_sample(penalty, n_samples: int, like: torch.Tensor):
    """A float, or a per-sample (B,) tensor in the dtype of ``like``."""
    if isinstance(penalty, torch.Tensor):
        return penalty.to(like.dtype).reshape(n_samples)
    return float(penalty)


def pair_losses(
    samples: torch.Tensor,
    centroids: torch.Tensor,
    model: WarpModel,
    params: torch.Tensor,
    penalty: float | torch.Tensor = 0.0,
) -> torch.Tensor:
    """Loss ``||x_b - S(params[b, k]) mu_k||^2 + penalty_b * ||delta||^2`` of every pair.

    Parameters
    ----------
    samples : Tensor of shape (B, P)
    centroids : Tensor of shape (K, P)
    model : WarpModel
    params : Tensor of shape (B, K, n_basis, D)
    penalty : float or Tensor of shape (B,)

    Returns
    -------
    Tensor of shape (B, K)
    """
    n_samples, n_clusters = params.shape[:2]
    images = centroids.reshape(n_clusters, 1, *model.shape)
    flat = params.transpose(0, 1).reshape(n_clusters * n_samples, model.n_params)
    pen = _per_sample(penalty, n_samples, samples)
    if isinstance(pen, torch.Tensor):
        pen = pen.repeat(n_clusters)
    return _loss_and_grad(samples, images, model, flat, pen, need_grad=False)[0].T


def optimize_warps(
    samples: torch.Tensor,
    centroids: torch.Tensor,
    model: WarpModel,
    *,
    n_steps: int = 40,
    learning_rate: float = 0.01,
    penalty: float | torch.Tensor = 0.0,
    coarse_steps: int = 0,
    n_candidates: int | None = None,
    screen_steps: int = 0,
    init: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Optimise the warp of every centroid onto every sample of a chunk, all pairs at once.

    Adam on the summed loss (element-wise, so each pair is optimised independently). The
    best parameters seen for each pair (the start included) are returned, so a pair's loss
    never exceeds its loss at the start. Memory is O(B * K * P).

    Parameters
    ----------
    samples : Tensor of shape (B, P)
    centroids : Tensor of shape (K, P)
        Held fixed.
    model : WarpModel
    n_steps : int
        Adam steps; 0 evaluates the start only.
    learning_rate : float
        Adam step size in normalised coordinates (the image spans ``[-1, 1]``).
    penalty : float or Tensor of shape (B,)
        Weight of the squared landmark displacement (one per sample if a tensor).
    coarse_steps : int
        The first ``coarse_steps`` steps update only ``model.coarse_rows`` (coarse-to-fine).
    n_candidates : int, optional
        With ``screen_steps``: after ``screen_steps`` steps only the ``n_candidates``
        lowest-loss centroids of each sample are optimised further; the others report the
        best loss of the screening (an upper bound of their optimum). None: no screening.
    screen_steps : int
    init : Tensor of shape (B, K, n_basis, D), optional
        Starting parameters (identity when None).

    Returns
    -------
    losses : Tensor of shape (B, K)
    params : Tensor of shape (B, K, n_basis, D)
    """
    samples, centroids = samples.detach(), centroids.detach()
    n_samples, n_clusters = samples.shape[0], centroids.shape[0]
    images = centroids.reshape(n_clusters, 1, *model.shape)
    n_pairs = n_clusters * n_samples
    if init is None:
        params = samples.new_zeros(n_pairs, model.n_params)
    else:
        params = init.detach().transpose(0, 1).reshape(n_pairs, -1).to(samples.dtype).clone()
    pen = _per_sample(penalty, n_samples, samples)
    pen_pairs = pen.repeat(n_clusters) if isinstance(pen, torch.Tensor) else pen
    adam = _PairAdam(params, model, coarse_steps)
    screen = (n_candidates is not None and n_candidates < n_clusters
              and 0 < screen_steps < n_steps)
    if not screen:
        adam.run(samples, images, model, pen_pairs, range(n_steps), learning_rate, final=True)
        losses, best = adam.best_loss, adam.best_params
    else:
        adam.run(samples, images, model, pen_pairs, range(screen_steps), learning_rate,
                 final=False)
        losses, best = adam.best_loss.clone(), adam.best_params.clone()
        top = losses.reshape(n_clusters, n_samples).topk(n_candidates, dim=0, largest=False)
        rows = (top.indices * n_samples
                + torch.arange(n_samples, device=samples.device)).reshape(-1)
        cluster_of, sample_of = rows // n_samples, rows % n_samples
        adam.select(rows)
        pen_kept = pen[sample_of] if isinstance(pen, torch.Tensor) else pen
        adam.run(samples[sample_of][:, None], images[cluster_of], model, pen_kept,
                 range(screen_steps, n_steps), learning_rate, final=True)
        losses[rows] = adam.best_loss
        best[rows] = adam.best_params
    shape = (n_clusters, n_samples, model.n_basis, model.ndim)
    losses = losses.reshape(n_clusters, n_samples).T.contiguous()
    return losses, best.reshape(shape).transpose(0, 1).contiguous()


def optimize_pairs(
    samples: torch.Tensor,
    images: torch.Tensor,
    model: WarpModel,
    *,
    n_steps: int = 40,
    learning_rate: float = 0.01,
    penalty: float | torch.Tensor = 0.0,
    coarse_steps: int = 0,
    init: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Like :func:`optimize_warps` for a list of pairs: ``images[i]`` warped onto ``samples[i]``.

    Parameters
    ----------
    samples : Tensor of shape (N, P)
    images : Tensor of shape (N, P)
        The image warped onto each sample (e.g. ``centroids[labels]``).
    model, n_steps, learning_rate, coarse_steps : see :func:`optimize_warps`.
    penalty : float or Tensor of shape (N,)
    init : Tensor of shape (N, n_basis, D), optional

    Returns
    -------
    losses : Tensor of shape (N,)
    params : Tensor of shape (N, n_basis, D)
    """
    n = samples.shape[0]
    imgs = images.detach().reshape(n, 1, *model.shape)
    if init is None:
        params = samples.new_zeros(n, model.n_params)
    else:
        params = init.detach().reshape(n, -1).to(samples.dtype).clone()
    adam = _PairAdam(params, model, coarse_steps)
    adam.run(samples.detach()[:, None], imgs, model, _per_sample(penalty, n, samples),
             range(n_steps), learning_rate, final=True)
    return adam.best_loss, adam.best_params.reshape(n, model.n_basis, model.ndim)


def adjoint_sums(
    X: torch.Tensor,
    model: WarpModel,
    params: torch.Tensor,
    labels: torch.Tensor,
    n_clusters: int,
    weights: torch.Tensor | None = None,
    *,
    batch_size: int = 256,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sufficient statistics of the centroid update: ``sum_i w_i S_i^T x_i`` and
    ``sum_i w_i S_i^T 1`` per cluster, in chunks of ``batch_size`` rows.

    Both are sums over samples, so the statistics of disjoint row blocks add up (streaming
    and blockwise fits reduce them). Their ratio is the adjoint-weighted average.

    Parameters
    ----------
    X : Tensor of shape (N, P)
    model : WarpModel
    params : Tensor of shape (N, n_basis, D)
    labels : LongTensor of shape (N,)
    n_clusters : int
    weights : Tensor of shape (N,), optional
    batch_size : int

    Returns
    -------
    rhs : Tensor of shape (n_clusters, P)
    cover : Tensor of shape (n_clusters, P)
    """
    rhs = X.new_zeros(n_clusters, X.shape[1])
    cover = X.new_zeros(n_clusters, X.shape[1])
    for i in range(0, X.shape[0], batch_size):
        sl = slice(i, i + batch_size)
        s, c = warp_adjoint(X[sl], model, params[sl], labels[sl], n_clusters,
                            None if weights is None else weights[sl])
        rhs += s
        cover += c
    return rhs, cover


def normal_sums(
    centroids: torch.Tensor,
    model: WarpModel,
    params: torch.Tensor,
    labels: torch.Tensor,
    weights: torch.Tensor | None = None,
    *,
    batch_size: int = 256,
) -> torch.Tensor:
    """``sum_{i in k} w_i S_i^T S_i mu_k`` per cluster (the normal operator), in chunks.

    Parameters
    ----------
    centroids : Tensor of shape (K, P)
    model : WarpModel
    params : Tensor of shape (N, n_basis, D)
    labels : LongTensor of shape (N,)
    weights : Tensor of shape (N,), optional
    batch_size : int

    Returns
    -------
    Tensor of shape (K, P)
    """
    out = torch.zeros_like(centroids)
    for i in range(0, params.shape[0], batch_size):
        sl = slice(i, i + batch_size)
        out += warp_normal(centroids, model, params[sl], labels[sl],
                           None if weights is None else weights[sl])
    return out


def covered(cover: torch.Tensor) -> torch.Tensor:
    """Pixels some member's warp samples: ``cover`` above 1e-6 of its cluster's maximum."""
    return cover > 1e-6 * cover.amax(dim=-1, keepdim=True).clamp_min(1e-300)


def solve_normal_equations(
    rhs: torch.Tensor,
    cover: torch.Tensor,
    start: torch.Tensor,
    normal,
    n_iter: int = 10,
) -> torch.Tensor:
    """Preconditioned CG on ``A mu = rhs`` per row, started from the better of ``start``
    and the average ``rhs / cover``; never worse than ``start`` (see solve_centroids).

    Every operation acts on each row (cluster) separately, so rows of several independent
    problems (e.g. restarts) can be stacked.

    Parameters
    ----------
    rhs, cover : Tensor of shape (K, P)
        From :func:`adjoint_sums`.
    start : Tensor of shape (K, P)
    normal : callable
        ``normal(v)`` applies the normal operator ``A`` (:func:`normal_sums` summed over
        all members) to ``v`` of shape (K, P).
    n_iter : int

    Returns
    -------
    Tensor of shape (K, P)
    """
    seen = covered(cover)
    average = torch.where(seen, rhs / cover.clamp_min(1e-300), start)

    def objective(mu, a_mu):  # distortion up to a constant, per cluster
        return (mu * (a_mu - 2.0 * rhs)).sum(dim=1)

    a_start, a_avg = normal(start), normal(average)
    use_avg = (objective(average, a_avg) <= objective(start, a_start))[:, None]
    mu = torch.where(use_avg, average, start)
    residual = rhs - torch.where(use_avg, a_avg, a_start)
    inv_diag = torch.where(seen, 1.0 / cover.clamp_min(1e-300), torch.zeros_like(cover))
    z = residual * inv_diag
    direction = z
    rz = (residual * z).sum(dim=1, keepdim=True)
    for _ in range(n_iter):
        a_dir = normal(direction)
        curvature = (direction * a_dir).sum(dim=1, keepdim=True)
        alpha = torch.where(curvature > 0, rz / curvature.clamp_min(1e-300), 0.0)
        mu = mu + alpha * direction
        residual = residual - alpha * a_dir
        z = residual * inv_diag
        rz_new = (residual * z).sum(dim=1, keepdim=True)
        beta = torch.where(rz > 0, rz_new / rz.clamp_min(1e-300), 0.0)
        direction = z + beta * direction
        rz = rz_new
    return mu


def solve_centroids(
    X: torch.Tensor,
    model: WarpModel,
    params: torch.Tensor,
    labels: torch.Tensor,
    start: torch.Tensor,
    weights: torch.Tensor | None = None,
    *,
    n_iter: int = 10,
    batch_size: int = 256,
) -> torch.Tensor:
    """Centroids minimising ``sum_i w_i ||x_i - S_i mu_{l_i}||^2`` for fixed warps.

    Preconditioned conjugate gradients on the normal equations
    ``(sum_i w_i S_i^T S_i) mu = sum_i w_i S_i^T x_i``, one independent CG per cluster,
    with the diagonal preconditioner ``1 / sum_i w_i S_i^T 1``. Each cluster starts from
    whichever of ``start`` and the adjoint-weighted average has the lower distortion, and
    CG never increases it, so the result is never worse than ``start``. Pixels that no
    member's warp samples keep their value from ``start``. It is
    :func:`adjoint_sums` followed by :func:`solve_normal_equations` with
    :func:`normal_sums` as the operator.

    Parameters
    ----------
    X : Tensor of shape (N, P)
    model : WarpModel
    params : Tensor of shape (N, n_basis, D)
        Warp of each sample's centroid onto the sample.
    labels : LongTensor of shape (N,)
    start : Tensor of shape (K, P)
        Current centroids.
    weights : Tensor of shape (N,), optional
    n_iter : int
        CG iterations; 0 returns the better of ``start`` and the weighted average.
    batch_size : int
        Samples per operator application chunk (memory O(batch_size * P)).

    Returns
    -------
    Tensor of shape (K, P)
    """
    rhs, cover = adjoint_sums(X, model, params, labels, start.shape[0], weights,
                              batch_size=batch_size)

    def normal(v):
        return normal_sums(v, model, params, labels, weights, batch_size=batch_size)

    return solve_normal_equations(rhs, cover, start, normal, n_iter)
