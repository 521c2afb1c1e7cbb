"""Reference warp energy and Laplace log-volume of one (sample, centroid) pair, for tests.

Built independently of the warp solver's own normal equations: the warped centroid from the
public :func:`skxclust.nn.warp_images`, its Jacobian by ``torch.autograd.functional.jacobian``,
and the penalty from the landmark displacements and Bookstein's matrices
(:func:`skxclust.nn.tps.tps_penalty_matrices`), its Hessian by autograd too.
"""

import torch

from skxclust.nn.tps import control_points, tps_penalty_matrices
from skxclust.nn.warps import warp_images


def penalty_size(model, params, bending_weight, affine_weight):
    """``bending_weight trace(d^T B d) + affine_weight trace(d^T A d)`` of the landmark
    displacements ``d`` of warps ``params`` (..., n_basis, D)."""
    grid = round(model.landmark_basis.shape[0] ** (1 / model.ndim))  # g x g, or g knots
    centers = control_points(grid, model.ndim, params.dtype)
    bending, affine, _ = tps_penalty_matrices(centers)
    disp = model.landmark_basis @ params
    return (bending_weight * (disp * (bending @ disp)).sum((-1, -2))
            + affine_weight * (disp * (affine @ disp)).sum((-1, -2)))


def _warped(centroid, model):
    shape = (model.n_basis, model.ndim)
    return lambda v: warp_images(centroid[None], model, v.reshape(1, 1, *shape))[0, 0]


def pair_energy(sample, centroid, model, params, penalty, bending_weight, affine_weight):
    """``||x - S(v) mu||^2 + penalty * size(v)`` of one pair; ``params`` (n_basis, D)."""
    residual = _warped(centroid, model)(params.reshape(-1)) - sample
    return (residual * residual).sum() + penalty * penalty_size(
        model, params, bending_weight, affine_weight)


def pair_log_volume(sample, centroid, model, params, penalty, bending_weight, affine_weight):
    """``log det(J^T J + penalty G) - log det(penalty G)`` of one pair: ``J`` the Jacobian of
    the warped centroid in the warp parameters at ``params`` (n_basis, D), ``G`` half the
    Hessian of the penalty size (it is quadratic).

    Both determinants are taken on the range of ``G``: a redundant parametrisation
    ("affine+tps": an affine displacement is both an affine row and a set of knot offsets)
    has directions that move neither the warp nor the penalty, and they are not parameters
    of the model (its evidence is the same with or without them).
    """
    shape = (model.n_basis, model.ndim)
    flat = params.reshape(-1)
    jac = torch.autograd.functional.jacobian(_warped(centroid, model), flat)  # (P, n)
    gram = 0.5 * torch.autograd.functional.hessian(
        lambda v: penalty_size(model, v.reshape(shape), bending_weight, affine_weight), flat)
    eig, vectors = torch.linalg.eigh(gram)
    rows = vectors[:, eig > 1e-9 * eig.max()]  # an orthonormal basis of the range of G
    prior = rows.T @ (penalty * gram) @ rows
    return torch.logdet(rows.T @ (jac.T @ jac) @ rows + prior) - torch.logdet(prior)
