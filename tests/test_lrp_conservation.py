"""What LRP through a feature extractor conserves, and what it absorbs (issue 21).

Relevance on an activation that is zero (a ReLU output of exactly 0, a Linear / Conv output
zero to rounding) goes nowhere; pools route relevance in proportion to the activations; so
on the deep-clusters example's network the pixel relevance plus the share NEON gives to
zero features is the cluster evidence, and no pixel is blown up by a division by about
epsilon.
"""

import numpy as np
import pytest
import torch
from _deep_helpers import example_network, feature_relevance
from torch import nn

from skxclust import ExplainableKMeans
from skxclust.datasets import load_digits_images
from skxclust.nn import EpsilonRule, GammaRule, ZPlusRule, lrp_backward
from skxclust.nn.propagation import lrp_trace, supported_layers

F64 = torch.float64
X_DIGITS, _, IMAGE_SHAPE = load_digits_images(scale=True)


# --------------------------------------------------------------------------- ReLU
@pytest.mark.parametrize("shape", [(4, 6), (3, 2, 4, 4)], ids=["rows", "images"])
def test_relu_passes_no_relevance_from_an_output_that_is_zero(shape):
    torch.manual_seed(0)
    a = torch.randn(shape, dtype=F64)
    a.view(-1)[::5] = 0.0  # exact zeros as well as negative inputs
    relevance = torch.randn(shape, dtype=F64)
    R = lrp_backward([nn.ReLU()], a, relevance.reshape(shape[0], -1))
    torch.testing.assert_close(R, torch.where(a > 0, relevance, 0.0), rtol=0, atol=0)
    trace = lrp_trace([nn.ReLU()], a, relevance.reshape(shape[0], -1))
    torch.testing.assert_close(trace.absorbed_at_zero[:, 0],
                               torch.where(a > 0, 0.0, relevance).flatten(1).sum(1))


@pytest.mark.parametrize("rule", ["epsilon", "zplus", GammaRule(0.25)],
                         ids=["epsilon", "zplus", "gamma"])
def test_relevance_on_zero_relu_outputs_reaches_no_input(rule):
    """Relevance given only to the outputs that the ReLU sets to 0 (as NEON gives some to
    zero features) reaches no input: before, a negative pre-activation passed it on with
    its sign turned."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 8, bias=False), nn.ReLU(), nn.Linear(8, 6, bias=False),
                        nn.ReLU()).double()
    x = torch.rand(20, 5, dtype=F64)
    out = net(x).detach()
    assert (out == 0).any() and (out > 0).any()
    R = lrp_backward(list(net), x, torch.where(out == 0, 1.0, 0.0), rule=rule)
    assert torch.equal(R, torch.zeros_like(x))


# --------------------------------------------------------------------------- pools
def _windows(a, kernel):
    """(B, C, L) or (B, C, H, W) -> windows along trailing axes of size ``kernel``."""
    if a.dim() == 3:
        return a.reshape(*a.shape[:2], -1, kernel)
    b, c, h, w = a.shape
    return a.reshape(b, c, h // kernel, kernel, w // kernel, kernel).permute(0, 1, 2, 4, 3, 5)


POOLS = {
    "AvgPool1d(2)": (lambda: nn.AvgPool1d(2), (3, 2, 8), 2),
    "AvgPool2d(2)": (lambda: nn.AvgPool2d(2), (3, 2, 4, 4), 2),
    "AdaptiveAvgPool2d(2) on 6x6": (lambda: nn.AdaptiveAvgPool2d(2), (3, 2, 6, 6), 3),
}


@pytest.mark.parametrize("pool", list(POOLS))
def test_average_pool_routes_relevance_in_proportion_to_the_activations(pool):
    make, shape, kernel = POOLS[pool]
    torch.manual_seed(0)
    a = torch.rand(shape, dtype=F64)
    a[a < 0.3] = 0.0  # zero activations, as after a ReLU
    windows = _windows(a, kernel)
    windows[0, 0, 0] = 0.0  # one window of zeros: routed evenly
    layer = make()
    out_shape = layer(a).shape
    relevance = torch.randn(out_shape, dtype=F64)
    R = lrp_backward([layer], a, relevance.reshape(shape[0], -1))
    sums = windows.sum(dim=(-1,) if a.dim() == 3 else (-2, -1), keepdim=True)
    share = torch.where(sums > 0, windows / torch.where(sums > 0, sums, 1.0),
                        1.0 / kernel ** (a.dim() - 2))
    expected = share * relevance.reshape(*out_shape, *([1] * (a.dim() - 2)))
    torch.testing.assert_close(_windows(R, kernel), expected, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(R.flatten(1).sum(1), relevance.flatten(1).sum(1))


@pytest.mark.parametrize("layer", [nn.MaxPool2d(2), nn.AdaptiveMaxPool2d(2)],
                         ids=["MaxPool2d", "AdaptiveMaxPool2d"])
def test_max_pool_gives_a_window_relevance_to_its_winner(layer):
    torch.manual_seed(0)
    a = torch.rand(3, 2, 4, 4, dtype=F64)
    a[0, 0, :2, :2] = 0.0  # a window of zeros: to the pooling's (first) index
    relevance = torch.randn(3, 8, dtype=F64)
    z = a.detach().requires_grad_(True)
    (routed,) = torch.autograd.grad(layer(z), z, relevance.reshape(3, 2, 2, 2))
    torch.testing.assert_close(lrp_backward([layer], a, relevance), routed, rtol=1e-14, atol=0)


def test_average_pool_routes_a_window_that_cancels_to_rounding_evenly():
    a = torch.tensor([[[0.1, 0.2, -0.3]]], dtype=F64)  # the mean is 1.9e-17, not 0
    assert nn.AvgPool1d(3)(a).item() != 0
    R = lrp_backward([nn.AvgPool1d(3)], a, torch.ones(1, 1, dtype=F64))
    torch.testing.assert_close(R, torch.full_like(a, 1 / 3), rtol=1e-15, atol=0)


# ---------------------------------------------------------------- zero to rounding
def _zero_sum_net(kind):
    """An exact identity layer, then a layer of zero-sum filters: over a flat input its
    outputs are 0 but for rounding (about 1e-17), and it is not the input layer, so the
    chosen rule explains it."""
    if kind == "Linear":
        first, second = nn.Linear(3, 3, bias=False), nn.Linear(3, 2, bias=False)
        weight = torch.tensor([[0.1, 0.2, -0.3], [-0.2, -0.5, 0.7]], dtype=F64)
        x = torch.tensor([[0.7, 0.7, 0.7], [0.9, 0.9, 0.9], [0.1, 0.1, 0.1]], dtype=F64)
    else:
        first = nn.Conv2d(1, 1, 1, bias=False)
        second = nn.Conv2d(1, 2, 3, bias=False)
        weight = torch.tensor([[0.1, 0.2, -0.3], [0.1, 0.7, -0.8]], dtype=F64)
        weight = torch.stack([torch.outer(w, torch.tensor([1.0, 1, 1], dtype=F64)) / 3
                              for w in weight])[:, None]
        x = torch.tensor([0.7, 0.9, 0.1], dtype=F64)[:, None, None, None].expand(3, 1, 5, 5)
    net = nn.Sequential(first, second).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.eye(3, dtype=F64) if kind == "Linear" else torch.ones(1, 1, 1, 1))
        net[1].weight.copy_(weight)
    return net, x.clone()


@pytest.mark.parametrize("rule", ["epsilon", "zplus", GammaRule(0.25), EpsilonRule(0.0)],
                         ids=["epsilon", "zplus", "gamma", "epsilon=0"])
@pytest.mark.parametrize("kind", ["Linear", "Conv2d"])
def test_outputs_zero_to_rounding_pass_no_relevance_on(kind, rule):
    net, x = _zero_sum_net(kind)
    z = net(x).detach()
    assert (z != 0).any() and float(z.abs().max()) < 1e-15  # zero, but for rounding
    relevance = torch.ones(x.shape[0], z[0].numel(), dtype=F64)
    trace = lrp_trace(list(net), x, relevance, rule=rule)
    # before: the epsilon rule divided by epsilon (pixels ~1e8 times the relevance), the
    # z-plus rule passed the relevance of these zero activations on to the input
    assert torch.equal(trace.relevance, torch.zeros_like(x))
    torch.testing.assert_close(trace.absorbed_at_zero.sum(1), relevance.sum(1))


@pytest.mark.parametrize("rule", [EpsilonRule(1e-9), EpsilonRule(0.0), GammaRule(0.0)],
                         ids=["epsilon", "epsilon=0", "gamma=0"])
def test_rule_objects_do_not_divide_by_outputs_zero_to_rounding(rule):
    """The rules on their own (called outside lrp_backward) absorb the outputs of the layer
    they explain that are zero to rounding (gamma > 0 explains a layer of other weights,
    whose outputs are not zero here)."""
    net, x = _zero_sum_net("Linear")
    R = rule.propagate(net[1], x, torch.ones(3, 2, dtype=F64))
    assert torch.equal(R, torch.zeros_like(x))


# ------------------------------------------------- the deep-clusters example's network
@pytest.fixture(scope="module")
def example_model():
    return ExplainableKMeans(n_clusters=10, feature_extractor=example_network(IMAGE_SHAPE),
                             n_init=1, random_state=0, device="cpu").fit(X_DIGITS)


def _zero_feature_share(features, relevance):
    """NEON's share on the features that are zero (or zero to rounding)."""
    return (relevance * (features.abs() <= 1e-12)).sum(1).numpy()


# (rule, bound on max|R_pixel| / sum|R_feature|); measured maxima over the 1797 digits:
# epsilon 15.1, z-plus 0.19, gamma 0.52 (before: 3.1e15, 1.4e7 and 4.2e15). The epsilon rule
# on the contrast layer (weights of both signs) divides by outputs that are small but not
# zero (1/384 from contributions whose magnitudes sum to 0.85).
BOUNDS = [("epsilon", 25.0), ("zplus", 0.5), (GammaRule(0.25), 2.0)]


@pytest.mark.parametrize("rule, bound", BOUNDS, ids=["epsilon", "zplus", "gamma"])
def test_example_network_keeps_every_pixel_relevance_within_a_multiple_of_the_features(
        example_model, rule, bound):
    """No division by about epsilon: on every digit, no pixel holds more than a modest
    multiple of the relevance NEON gives the features, and on the median row the largest
    pixel holds less than f (before: 4.8e6 times f with the epsilon rule)."""
    _, relevance, f = feature_relevance(example_model, X_DIGITS)
    R = example_model.explain(X_DIGITS, rule=rule)
    largest = np.abs(R).max(axis=1)
    assert np.all(largest <= bound * relevance.abs().sum(1).numpy())
    assert np.median(largest / np.abs(f)) <= 1.0


@pytest.mark.parametrize("rule", [ZPlusRule(0.0), EpsilonRule(1e-12), GammaRule(0.25, 1e-12)],
                         ids=["zplus", "epsilon", "gamma"])
def test_example_network_pixels_hold_the_evidence_but_the_zero_features_share(
        example_model, rule):
    """Bias-free, a tiny stabiliser: f_c(x) = sum of the pixel relevance + NEON's share on
    the zero features, on every digit (measured max 1e-9 relative; before: 28 % off on the
    median row)."""
    features, relevance, f = feature_relevance(example_model, X_DIGITS)
    R = example_model.explain(X_DIGITS, rule=rule, epsilon=1e-12)
    gap = f - R.sum(axis=1) - _zero_feature_share(features, relevance)
    assert np.max(np.abs(gap) / np.abs(f)) <= 1e-6


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_example_network_accounts_for_all_the_evidence(example_model, dtype):
    """lrp_trace: pixels + absorbed at zero activations + absorbed by the rules = f, with
    the absorbed at zero activations the zero features' share; explain gives the same
    pixels. float32 uses its own zero tolerance (sqrt(eps))."""
    features, relevance, f = feature_relevance(example_model, X_DIGITS)
    layers = supported_layers(example_model.feature_extractor.to(dtype))
    try:
        trace = lrp_trace(layers, torch.as_tensor(X_DIGITS, dtype=dtype), relevance.to(dtype))
    finally:
        example_model.feature_extractor.double()
    total = (trace.relevance.sum(1) + trace.absorbed_at_zero.sum(1)
             + trace.absorbed_by_rule.sum(1)).double().numpy()
    tol = 1e-12 if dtype == torch.float64 else 1e-4
    assert np.max(np.abs(total - f) / np.abs(f)) <= tol
    np.testing.assert_allclose(trace.absorbed_at_zero.sum(1).double().numpy(),
                               _zero_feature_share(features, relevance), rtol=0,
                               atol=tol * np.abs(f).max())
    if dtype == torch.float64:
        np.testing.assert_allclose(example_model.explain(X_DIGITS), trace.relevance.numpy(),
                                   rtol=1e-9, atol=1e-12)
    else:
        assert np.all(trace.relevance.abs().amax(1).numpy()
                      <= 25 * relevance.abs().sum(1).numpy())


# ------------------------------------------------------------------ any network
def random_net(bias):
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 4, 3, bias=bias), nn.ReLU(), nn.AvgPool2d(2),
        nn.Conv2d(4, 6, 1, bias=bias), nn.ReLU(), nn.MaxPool2d(3), nn.Flatten(),
        nn.Linear(6, 5, bias=bias), nn.ReLU()).double()


@pytest.mark.parametrize("rule", ["epsilon", "zplus", GammaRule(0.5)],
                         ids=["epsilon", "zplus", "gamma"])
@pytest.mark.parametrize("bias", [False, True], ids=["bias-free", "biases"])
def test_lrp_trace_accounts_for_every_share_of_relevance(rule, bias):
    net = random_net(bias)
    x = torch.as_tensor(X_DIGITS[:100]) - 0.3  # raw input of both signs
    relevance = torch.randn(100, 5, dtype=F64)  # also on outputs that are 0
    trace = lrp_trace(list(net), x, relevance, rule=rule, epsilon=1e-6)
    total = trace.relevance.sum(1) + trace.absorbed_at_zero.sum(1) + trace.absorbed_by_rule.sum(1)
    torch.testing.assert_close(total, relevance.sum(1), rtol=1e-12, atol=1e-12)
    assert torch.equal(trace.relevance, lrp_backward(list(net), x, relevance, rule=rule,
                                                     epsilon=1e-6))
    kinds = [type(layer) for layer in net]
    for i, kind in enumerate(kinds):
        if kind not in (nn.Conv2d, nn.Linear):
            assert torch.equal(trace.absorbed_by_rule[:, i], torch.zeros(100, dtype=F64))
        if kind not in (nn.Conv2d, nn.Linear, nn.ReLU):
            assert torch.equal(trace.absorbed_at_zero[:, i], torch.zeros(100, dtype=F64))
    if not bias:  # without stabiliser nor bias, the rules absorb nothing
        exact = GammaRule(rule.gamma, epsilon=0.0) if isinstance(rule, GammaRule) else rule
        by_rule = lrp_trace(list(net), x, relevance, rule=exact, epsilon=0.0).absorbed_by_rule
        assert float(by_rule.abs().max()) <= 1e-12 * float(relevance.abs().sum(1).min())


class Stack(nn.Sequential):
    """A user's subclass of nn.Sequential."""


def test_subclasses_of_sequential_are_flattened_like_sequential():
    inner = Stack(nn.ReLU(), nn.Linear(3, 2))
    net = Stack(nn.Linear(4, 3), inner)
    assert supported_layers(net) == [net[0], inner[0], inner[1]]


def _cancelling_pair(kind):
    """A layer and an input of sizes 1 and 0.8 whose one output cancels to 1 - 0.8 = 0.2
    (halved by the pool)."""
    if kind == "AvgPool1d":
        return nn.AvgPool1d(2), torch.tensor([[[1.0, -0.8]]], dtype=F64)
    layer = nn.Linear(2, 1, bias=False).double()
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, -1.0]], dtype=F64))
    return layer, torch.tensor([[1.0, 0.8]], dtype=F64)


@pytest.mark.parametrize("kind", ["Linear", "AvgPool1d"])
@pytest.mark.parametrize("zero_tol, is_zero", [(0.5, True), (0.01, False)])
def test_the_given_zero_tol_decides_which_outputs_count_as_zero(kind, zero_tol, is_zero):
    # 0.2 is zero within 0.5 of 1.8, not within 0.01: a zero Linear output passes nothing
    # on, a zero pool routes evenly; otherwise both give x_i / 0.2
    layer, x = _cancelling_pair(kind)
    trace = lrp_trace([layer], x, torch.ones(1, 1, dtype=F64), epsilon=0.0, zero_tol=zero_tol)
    pool = kind == "AvgPool1d"
    expected = ([0.5, 0.5] if pool else [0.0, 0.0]) if is_zero else [5.0, -4.0]
    torch.testing.assert_close(trace.relevance, torch.tensor(expected, dtype=F64).view_as(x))
    assert trace.absorbed_at_zero.tolist() == [[1.0 if is_zero and not pool else 0.0]]
