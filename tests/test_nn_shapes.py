"""The public face of skxclust.nn: its names, their documentation, and the shape checks
whose messages name the shape a tensor argument must have."""

import inspect
import re
import sys
from pathlib import Path

import pytest
import torch

import skxclust.nn as nn_pkg
from skxclust.nn import (
    LogMeanExpPool,
    MinPool,
    NeuralizedKMeans,
    PairwiseSquaredDistance,
    SoftKMeans,
    cluster_evidence,
    fit_warps,
    lrp_backward,
    make_warp_model,
    midpoint_basis,
    midpoint_relevance,
    neon_relevance,
    neuralize,
    neuralized_head,
    softmin_redistribution,
    squared_distances,
    unwarp_images,
    warp_images,
)
from skxclust.nn.centroid_update import (
    adjoint_sums,
    normal_sums,
    solve_centroids,
    solve_normal_equations,
)
from skxclust.nn.lrp import auto_beta, root_point_relevance
from skxclust.nn.pair_batch import warp_energy
from skxclust.nn.pyramid import downsample_images
from skxclust.nn.warp_evidence import warp_log_volume
from skxclust.nn.warp_refit import refit_warps
from skxclust.nn.warps import warp_adjoint, warp_grids, warp_normal

PUBLIC = [
    "EpsilonRule", "GammaRule", "LogMeanExpPool", "MinPool", "NeuralizedKMeans",
    "NeuralizingCanonizer", "PairwiseSquaredDistance", "SoftKMeans", "WarpModel",
    "ZPlusRule", "cluster_evidence", "fit_warps", "lrp_backward", "lrp_trace",
    "make_warp_model",
    "midpoint_basis", "midpoint_relevance", "neon_relevance", "neuralize", "neuralized_head",
    "softmin_redistribution", "squared_distances", "unwarp_images", "warp_images",
]


def test_nn_exports_the_names_a_user_composes_with():
    assert sorted(nn_pkg.__all__) == PUBLIC


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_nn_name_is_importable_and_documented_with_an_example(name):
    obj = getattr(nn_pkg, name)
    doc = inspect.getdoc(obj) or ""
    assert doc.splitlines()[0], f"{name} has no summary line"
    assert "Examples\n--------" in doc and ">>>" in doc, f"{name} has no Examples section"


def test_every_public_nn_name_is_listed_in_the_api_reference():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "doc"))
    try:
        from _generate import api_sections
    finally:
        sys.path.pop(0)
    listed = set(re.findall(r"^   (\w+)$", api_sections(), flags=re.MULTILINE))
    assert set(PUBLIC) <= listed


def test_internals_stay_importable_from_their_submodule():
    from skxclust.nn.centroid_update import solve_centroids  # noqa: F401
    from skxclust.nn.neuralized import competitor_index  # noqa: F401
    from skxclust.nn.propagation import supported_layers  # noqa: F401
    from skxclust.nn.tps import tps_kernel_matrix, tps_system_matrix  # noqa: F401
    from skxclust.nn.warp_inverse import invert_warps  # noqa: F401

    for name in ("competitor_index", "tps_kernel_matrix", "solve_centroids", "warp_adjoint"):
        assert not hasattr(nn_pkg, name) or name not in nn_pkg.__all__


# --------------------------------------------------------------------------- shape checks
F64 = torch.float64
X = torch.zeros(5, 4, dtype=F64)
MU = torch.rand(3, 4, dtype=F64)
MU_WIDE = torch.rand(3, 10, dtype=F64)
TARGET = torch.zeros(5, dtype=torch.long)
H = torch.rand(5, 3, dtype=F64)
MODEL = make_warp_model((1, 6), n_landmarks=4, transform="affine", dtype=F64)
SIGNALS = torch.rand(5, 6, dtype=F64)
PARAMS = torch.zeros(5, 2, 1, dtype=F64)
LABELS = torch.zeros(5, dtype=torch.long)
W, B = neuralize(MU)
ROOT = torch.zeros(3, 2, 4, dtype=F64)

# (test id: the behaviour, call, the message must contain)
CASES = [
    ("squared_distances_rejects_centers_of_wrong_width",
     lambda: squared_distances(X, MU_WIDE),
     "centers must have shape (K, D) with D == x.shape[1] == 4, got (3, 10)"),
    ("squared_distances_rejects_a_vector_x",
     lambda: squared_distances(X[0], MU), "x must have shape (N, D), got (4,)"),
    ("neuralize_rejects_a_vector_of_centers",
     lambda: neuralize(MU[0]), "centers must have shape (K, D), got (4,)"),
    ("cluster_evidence_rejects_3d_distances",
     lambda: cluster_evidence(H[None]), "distances must have shape (N, K), got (1, 5, 3)"),
    ("distance_layer_rejects_inputs_of_wrong_width",
     lambda: PairwiseSquaredDistance(MU)(MU_WIDE),
     "x must have shape (N, D) with D == centers.shape[1] == 4, got (3, 10)"),
    ("neuralized_layer_rejects_inputs_of_wrong_width",
     lambda: NeuralizedKMeans(W, B)(MU_WIDE),
     "x must have shape (N, D) with D == weight.shape[2] == 4, got (3, 10)"),
    ("neuralized_layer_rejects_bias_of_wrong_shape",
     lambda: NeuralizedKMeans(W, B[:, :1]),
     "bias must have shape (K, K-1) with K == weight.shape[0] == 3 and K-1 == 2, got (3, 1)"),
    ("min_pool_rejects_a_scalar",
     lambda: MinPool()(torch.tensor(1.0)), "h must have shape (..., M), got ()"),
    ("log_mean_exp_pool_rejects_a_scalar",
     lambda: LogMeanExpPool(1.0)(torch.tensor(1.0)), "h must have shape (..., M), got ()"),
    ("soft_kmeans_rejects_inputs_of_wrong_width",
     lambda: SoftKMeans(MU)(MU_WIDE),
     "x must have shape (N, D) with D == centers.shape[1] == 4, got (3, 10)"),
    ("neuralized_head_rejects_a_vector_of_centers",
     lambda: neuralized_head(MU[0]), "centers must have shape (K, D), got (4,)"),
    ("neon_relevance_rejects_centers_of_wrong_width",
     lambda: neon_relevance(X, MU_WIDE, None, beta=1.0),
     "centers must have shape (K, D) or (B, K, D) with B == x.shape[0] == 5 and "
     "D == x.shape[1] == 4, got (3, 10)"),
    ("neon_relevance_rejects_per_row_centers_of_another_batch",
     lambda: neon_relevance(X, MU[None].expand(2, -1, -1), None, beta=1.0),
     "got (2, 3, 4)"),
    ("neon_relevance_rejects_a_target_per_wrong_row_count",
     lambda: neon_relevance(X, MU, TARGET[:2], beta=1.0),
     "target must have shape (B,) with B == x.shape[0] == 5, got (2,)"),
    ("neon_relevance_rejects_an_offset_per_wrong_cluster_count",
     lambda: neon_relevance(X, MU, None, beta=1.0, offset=H[:, :2]),
     "offset must have shape (B, K) with B == x.shape[0] == 5 and "
     "K == centers.shape[-2] == 3, got (5, 2)"),
    ("neon_relevance_rejects_a_basis_of_wrong_width",
     lambda: neon_relevance(X, MU, None, beta=1.0, basis=MU),
     "basis must have shape (K, 2D) with K == centers.shape[-2] == 3 and "
     "2D == 2 * x.shape[1] == 8, got (3, 4)"),
    ("neon_relevance_rejects_a_workspace_of_wrong_shape",
     lambda: neon_relevance(X, MU, None, beta=1.0, workspace=X),
     "workspace must have shape (B, 2D)"),
    ("neon_relevance_rejects_an_out_of_wrong_shape",
     lambda: neon_relevance(X, MU, None, beta=1.0, out=X[:2]),
     "out must have shape (B, D) with B == x.shape[0] == 5 and D == x.shape[1] == 4"),
    ("midpoint_relevance_rejects_h_per_wrong_cluster_count",
     lambda: midpoint_relevance(X, MU, TARGET, H[:, :2], H),
     "h must have shape (B, K) with B == x.shape[0] == 5 and K == centers.shape[-2] == 3"),
    ("midpoint_relevance_rejects_competitor_relevance_per_wrong_row_count",
     lambda: midpoint_relevance(X, MU, TARGET, H, H[:2]),
     "competitor_relevance must have shape (B, K)"),
    ("softmin_redistribution_rejects_a_target_per_wrong_row_count",
     lambda: softmin_redistribution(H, TARGET[:2], 1.0),
     "target must have shape (B,) with B == h.shape[0] == 5, got (2,)"),
    ("midpoint_basis_rejects_a_vector_of_centers",
     lambda: midpoint_basis(MU[0]), "centers must have shape (K, D), got (4,)"),
    ("root_point_relevance_rejects_roots_of_wrong_width",
     lambda: root_point_relevance(X, W, B, ROOT[..., :2], TARGET, 1.0),
     "root must have shape (K, K-1, D) with K == weight.shape[0] == 3 and "
     "D == x.shape[1] == 4 and K-1 == weight.shape[1] == 2, got (3, 2, 2)"),
    ("auto_beta_rejects_a_matrix_of_evidence",
     lambda: auto_beta(H), "evidence must have shape (N,) or (N, 1), got (5, 3)"),
    ("lrp_backward_rejects_relevance_per_wrong_row_count",
     lambda: lrp_backward([torch.nn.Linear(4, 2).double()], X, torch.ones(3, 2, dtype=F64)),
     "relevance must have shape (B, ...) with B == x.shape[0] == 5, got (3, 2)"),
    ("lrp_backward_rejects_relevance_of_wrong_width",
     lambda: lrp_backward([torch.nn.Linear(4, 2).double()], X, torch.ones(5, 3, dtype=F64)),
     "relevance must have shape (B, F) with B == x.shape[0] == 5 and F == outputs per row "
     "of the layers == 2, got (5, 3)"),
    ("warp_images_rejects_images_of_wrong_pixel_count",
     lambda: warp_images(SIGNALS[:, :5], MODEL, PARAMS[None]),
     "images must have shape (K, P) with P == H * W of model.shape (1, 6) == 6, got (5, 5)"),
    ("warp_images_rejects_params_of_another_warp_family",
     lambda: warp_images(SIGNALS[:1], MODEL, torch.zeros(1, 5, 3, 1, dtype=F64)),
     "params must have shape (K, B, n_basis, D) with n_basis == model.n_basis == 2 and "
     "D == model.ndim == 1 and K == images.shape[0] == 1, got (1, 5, 3, 1)"),
    ("unwarp_images_rejects_params_per_wrong_row_count",
     lambda: unwarp_images(SIGNALS, MODEL, PARAMS[:2]),
     "params must have shape (B, n_basis, D) with n_basis == model.n_basis == 2 and "
     "D == model.ndim == 1 and B == images.shape[0] == 5, got (2, 2, 1)"),
    ("warp_grids_rejects_params_of_another_warp_family",
     lambda: warp_grids(MODEL, torch.zeros(5, 4, 2, dtype=F64)),
     "params must have shape (N, n_basis, D)"),
    ("warp_adjoint_rejects_labels_per_wrong_row_count",
     lambda: warp_adjoint(SIGNALS, MODEL, PARAMS, LABELS[:2], 1),
     "labels must have shape (B,) with B == values.shape[0] == 5, got (2,)"),
    ("warp_normal_rejects_weights_per_wrong_row_count",
     lambda: warp_normal(SIGNALS[:1], MODEL, PARAMS, LABELS, LABELS[:2].double()),
     "weights must have shape (B,) with B == params.shape[0] == 5, got (2,)"),
    ("fit_warps_rejects_centroids_of_wrong_pixel_count",
     lambda: fit_warps(SIGNALS, SIGNALS[:2, :5], MODEL, penalty=1.0),
     "centroids must have shape (K, P) with P == H * W of model.shape (1, 6) == 6, got (2, 5)"),
    ("fit_warps_rejects_a_penalty_per_wrong_row_count",
     lambda: fit_warps(SIGNALS, SIGNALS[:2], MODEL, penalty=torch.ones(2, dtype=F64)),
     "penalty must have shape () or (B,) with B == samples.shape[0] == 5, got (2,)"),
    ("refit_warps_rejects_centroids_of_wrong_pixel_count",
     lambda: refit_warps(SIGNALS, SIGNALS[:2, :5], MODEL, torch.zeros(5, 2, 2, 1, dtype=F64),
                         penalty=1.0),
     "centroids must have shape (K, P) with P == H * W of model.shape (1, 6) == 6, got (2, 5)"),
    ("refit_warps_rejects_a_penalty_per_wrong_row_count",
     lambda: refit_warps(SIGNALS, SIGNALS[:2], MODEL, torch.zeros(5, 2, 2, 1, dtype=F64),
                         penalty=torch.ones(2, dtype=F64)),
     "penalty must have shape () or (B,) with B == samples.shape[0] == 5, got (2,)"),
    ("downsample_images_rejects_images_of_wrong_pixel_count",
     lambda: downsample_images(torch.zeros(2, 35, dtype=F64), (6, 6), (3, 3)),
     "images must have shape (N, P) with P == H * W == 36, got (2, 35)"),
    ("warp_energy_rejects_params_per_wrong_cluster_count",
     lambda: warp_energy(SIGNALS, SIGNALS[:2], MODEL, torch.zeros(5, 3, 2, 1, dtype=F64), 1.0),
     "params must have shape (B, K, n_basis, D)"),
    ("warp_log_volume_rejects_images_per_wrong_row_count",
     lambda: warp_log_volume(SIGNALS, SIGNALS[:2], MODEL, PARAMS, 1.0),
     "images must have shape (B, P) with P == H * W of model.shape (1, 6) == 6 and "
     "B == samples.shape[0] == 5, got (2, 6)"),
    ("adjoint_sums_rejects_params_per_wrong_row_count",
     lambda: adjoint_sums(SIGNALS, MODEL, PARAMS[:2], LABELS, 1),
     "X must have shape (B, P) with P == H * W of model.shape (1, 6) == 6 and "
     "B == params.shape[0] == 2, got (5, 6)"),
    ("normal_sums_rejects_centroids_of_wrong_pixel_count",
     lambda: normal_sums(SIGNALS[:1, :5], MODEL, PARAMS, LABELS),
     "centroids must have shape (K, P)"),
    ("solve_normal_equations_rejects_a_start_of_wrong_shape",
     lambda: solve_normal_equations(SIGNALS[:1], SIGNALS[:1], SIGNALS[:2], lambda v: v),
     "start must have shape (K, P) with K == rhs.shape[0] == 1 and P == rhs.shape[1] == 6, "
     "got (2, 6)"),
    ("solve_centroids_rejects_a_start_of_wrong_pixel_count",
     lambda: solve_centroids(SIGNALS, MODEL, PARAMS, LABELS, SIGNALS[:1, :5]),
     "start must have shape (K, P) with P == H * W of model.shape (1, 6) == 6, got (1, 5)"),
]


@pytest.mark.parametrize("call, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_shape_check(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert message in str(info.value)


@pytest.mark.parametrize("call", [
    lambda: squared_distances(X, MU),
    lambda: neon_relevance(X, MU, None, beta=1.0),
    lambda: neon_relevance(X, MU[None].expand(5, -1, -1), TARGET, beta=1.0,
                           offset=torch.zeros(5, 3, dtype=F64)),
    lambda: neon_relevance(X, MU, None, beta=1.0, basis=midpoint_basis(MU),
                           workspace=torch.empty(5, 8, dtype=F64),
                           out=torch.empty(5, 4, dtype=F64)),
    lambda: MinPool()(torch.ones(3)),
    lambda: auto_beta(H[:, :1]),
    lambda: fit_warps(SIGNALS, SIGNALS[:2], MODEL, penalty=torch.ones(5, dtype=F64),
                      n_steps=1, affine_steps=0),
], ids=["squared_distances", "neon_shared", "neon_per_row_with_offset", "neon_buffers",
        "min_pool_vector", "auto_beta_column", "fit_warps_penalty_per_row"])
def test_well_shaped_calls_pass_the_checks(call):
    call()
