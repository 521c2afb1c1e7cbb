"""LRP rules as objects (skxclust.nn.rules): the built-in ones, GammaRule, a user's own."""

import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from _deep_helpers import feature_relevance
from sklearn.datasets import load_digits
from torch import nn

from skxclust import ExplainableKMeans
from skxclust.nn import EpsilonRule, GammaRule, ZPlusRule, lrp_backward
from skxclust.nn.propagation import supported_layers
from skxclust.nn.rules import gradient_rule, resolve_rule, zero_outputs

X_DIGITS = load_digits().data[:200]


def relu_net(bias: bool = False):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Unflatten(1, (1, 8, 8)),
        torch.nn.Conv2d(1, 4, 3, bias=bias),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(36, 16, bias=bias),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 8, bias=bias),
        torch.nn.ReLU(),
    ).double()


@pytest.mark.parametrize("gamma", [0.0, 0.25, 1.0, 10.0])
def test_gamma_rule_conserves_relevance_through_a_bias_free_relu_net(gamma):
    net = relu_net()
    x = torch.from_numpy(X_DIGITS[:50])
    out = net(x).detach()
    R = lrp_backward(list(net), x, out, rule=GammaRule(gamma, epsilon=1e-12), epsilon=1e-12)
    assert R.shape == x.shape
    torch.testing.assert_close(R.sum(1), out.sum(1), rtol=1e-6, atol=0)


@pytest.mark.parametrize("rule", [EpsilonRule(0.0), ZPlusRule(0.0), GammaRule(0.5, 0.0)])
def test_epsilon_zero_passes_no_relevance_through_an_exactly_zero_output(rule):
    """epsilon=0 is allowed; an output of exactly 0 (here: a zero row into a bias-free
    layer) has no input to pass its relevance to, which must give 0, not NaN."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2, bias=False).double()
    a = torch.tensor([[0.0, 0.0, 0.0], [1.0, 2.0, 0.5]], dtype=torch.float64)
    z = layer(a).detach()
    R = rule.propagate(layer, a, torch.ones(2, 2, dtype=torch.float64))
    assert torch.equal(R[0], torch.zeros(3, dtype=torch.float64))
    if isinstance(rule, EpsilonRule):  # the rest is conserved exactly
        torch.testing.assert_close(R[1].sum(), torch.tensor(2.0, dtype=torch.float64))
        assert bool((z[1] != 0).all())


@pytest.mark.parametrize("name, cls", [("epsilon", EpsilonRule), ("zplus", ZPlusRule)])
def test_rule_names_and_rule_objects_give_identical_relevance(name, cls):
    net = relu_net(bias=True)
    x = torch.from_numpy(X_DIGITS[:20])
    out = net(x).detach()
    by_name = lrp_backward(list(net), x, out, rule=name, epsilon=1e-6)
    by_object = lrp_backward(list(net), x, out, rule=cls(epsilon=1e-6), epsilon=1e-6)
    assert torch.equal(by_name, by_object)


def test_gamma_zero_is_the_epsilon_rule():
    net = relu_net(bias=True)
    x = torch.from_numpy(X_DIGITS[:20])
    out = net(x).detach()
    torch.testing.assert_close(lrp_backward(list(net), x, out, rule=GammaRule(0.0)),
                               lrp_backward(list(net), x, out, rule="epsilon"))


def test_resolve_rule_maps_names_and_passes_objects_through():
    assert isinstance(resolve_rule("epsilon", 1e-3), EpsilonRule)
    assert resolve_rule("zplus", 1e-3).epsilon == 1e-3
    rule = GammaRule(0.5)
    assert resolve_rule(rule) is rule


# the last: a propagate that is not a method
@pytest.mark.parametrize("rule", ["alpha-beta", "Epsilon", None, 3, object(),
                                  SimpleNamespace(propagate=1.0)])
def test_invalid_rule_is_refused_naming_the_parameter_and_value(rule):
    with pytest.raises(ValueError, match=r"rule must be 'epsilon' or 'zplus', or a rule "
                                         r"object") as info:
        resolve_rule(rule)
    assert repr(rule) in str(info.value)


def test_lrp_backward_refuses_an_invalid_rule_object():
    net = relu_net()
    x = torch.from_numpy(X_DIGITS[:2])
    with pytest.raises(ValueError, match="rule must be"):
        lrp_backward(list(net), x, net(x).detach(), rule=lambda layer, a, r: r)


# Every parameter of a rule: finite and >= 0 (ValueError), a real number and not a bool
# or a numeric string (TypeError); the message names the parameter and the value.
BAD_VALUES = [
    pytest.param(float("inf"), ValueError, "must be a finite number >= 0, got inf", id="inf"),
    pytest.param(float("nan"), ValueError, "must be a finite number >= 0, got nan", id="nan"),
    pytest.param(-1, ValueError, "must be a finite number >= 0, got -1", id="-1"),
    pytest.param(True, TypeError, "must be a non-negative number, got True", id="True"),
    pytest.param("0.1", TypeError, "must be a non-negative number, got '0.1'", id="str"),
]
RULE_PARAMETERS = {
    "EpsilonRule(epsilon)": ("epsilon", lambda v: EpsilonRule(v)),
    "ZPlusRule(epsilon)": ("epsilon", lambda v: ZPlusRule(v)),
    "GammaRule(gamma)": ("gamma", lambda v: GammaRule(v)),
    "GammaRule(epsilon)": ("epsilon", lambda v: GammaRule(0.25, epsilon=v)),
    "resolve_rule(epsilon)": ("epsilon", lambda v: resolve_rule("zplus", v)),
    "lrp_backward(epsilon)": ("epsilon", lambda v: lrp_backward(
        [torch.nn.Linear(2, 1).double()], torch.ones(1, 2, dtype=torch.float64),
        torch.ones(1, 1, dtype=torch.float64), epsilon=v)),
    "lrp_backward(zero_tol)": ("zero_tol", lambda v: lrp_backward(
        [torch.nn.Linear(2, 1).double()], torch.ones(1, 2, dtype=torch.float64),
        torch.ones(1, 1, dtype=torch.float64), zero_tol=v)),
}


@pytest.mark.parametrize("value, exc, message", BAD_VALUES)
@pytest.mark.parametrize("where", list(RULE_PARAMETERS))
def test_rule_parameters_refuse_non_finite_negative_bool_and_string(where, value, exc,
                                                                    message):
    name, make = RULE_PARAMETERS[where]
    with pytest.raises(exc, match=re.escape(f"{name} {message}.")):
        make(value)


@pytest.mark.parametrize("value, exc, message", BAD_VALUES)
def test_explain_refuses_a_bad_epsilon_naming_it(deep_model, value, exc, message):
    with pytest.raises(exc, match=re.escape(f"epsilon {message}.")):
        deep_model.explain(X_DIGITS[:5], epsilon=value)


@pytest.mark.parametrize("value", [0, 0.5, np.float64(2.0), np.int64(3)])
def test_rule_parameters_accept_non_negative_real_numbers_as_floats(value):
    rule = GammaRule(value, epsilon=value)
    assert (rule.gamma, rule.epsilon) == (float(value), float(value))
    assert type(rule.gamma) is float and type(EpsilonRule(value).epsilon) is float


class HalfEpsilonRule:
    """A user's rule: the epsilon rule, then half of the relevance (one method)."""

    def __init__(self):
        self.calls = 0

    def propagate(self, layer, a, relevance):
        self.calls += 1
        return 0.5 * gradient_rule(layer, a, relevance, 1e-9)


@pytest.fixture(scope="module")
def deep_model():
    return ExplainableKMeans(n_clusters=4, feature_extractor=relu_net(), random_state=0,
                             device="cpu").fit(X_DIGITS)


def test_a_user_rule_object_works_through_explain(deep_model):
    rule = HalfEpsilonRule()
    R = deep_model.explain(X_DIGITS[:30], rule=rule)
    reference = deep_model.explain(X_DIGITS[:30], rule="epsilon")
    # every weighted layer after the input layer (the Conv2d, epsilon rule, although an
    # Unflatten comes first): both Linear layers, each halving the relevance
    assert rule.calls == 2
    np.testing.assert_allclose(R, 0.25 * reference, rtol=1e-9, atol=1e-12)


# The input layer is the first weighted layer, found by type: whatever comes before it.
EXTRACTORS = {
    "Unflatten first": (lambda: [nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 4, 3), nn.ReLU(),
                                 nn.MaxPool2d(2), nn.Flatten(), nn.Linear(36, 16), nn.ReLU(),
                                 nn.Linear(16, 8)], (64,)),
    "Flatten first": (lambda: [nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 8)],
                      (1, 8, 8)),
    "pool first": (lambda: [nn.AvgPool2d(2), nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(),
                            nn.Linear(16, 8)], (1, 8, 8)),
    "weighted layer first": (lambda: [nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 8)], (64,)),
    "nested, Dropout and Unflatten first": (
        lambda: [nn.Sequential(nn.Dropout(), nn.Sequential(nn.Unflatten(1, (1, 64)))),
                 nn.Conv1d(1, 4, 5), nn.ReLU(), nn.MaxPool1d(2), nn.Flatten(),
                 nn.Sequential(nn.Linear(120, 8), nn.ReLU(), nn.Linear(8, 4))], (64,)),
}


class RecordingRule:
    """The z-plus rule, recording the layers it is called for."""

    def __init__(self):
        self.layers = []

    def propagate(self, layer, a, relevance):
        self.layers.append(layer)
        return ZPlusRule().propagate(layer, a, relevance)


@pytest.mark.parametrize("extractor", list(EXTRACTORS))
def test_chosen_rule_applies_to_every_weighted_layer_but_the_first_whatever_precedes_it(
        extractor):
    make, row_shape = EXTRACTORS[extractor]
    torch.manual_seed(0)
    net = nn.Sequential(*make()).double().eval()
    layers = supported_layers(net)
    names = {id(layer): f"{type(layer).__name__} (layer {i})" for i, layer in enumerate(layers)}
    weighted = [names[id(layer)] for layer in layers
                if isinstance(layer, (nn.Linear, nn.Conv1d, nn.Conv2d))]
    x = torch.from_numpy(X_DIGITS[:10]).reshape(10, *row_shape)
    rule = RecordingRule()
    R = lrp_backward(layers, x, net(x).detach(), rule=rule)
    assert R.shape == x.shape
    # called once for each later weighted layer, from the output down; never for the first
    assert [names[id(layer)] for layer in rule.layers] == weighted[:0:-1]


@pytest.mark.parametrize("rule", ["zplus", ZPlusRule(), GammaRule(1.0), HalfEpsilonRule()],
                         ids=["zplus", "ZPlusRule", "GammaRule", "user rule"])
def test_a_net_whose_only_weighted_layer_is_the_input_layer_is_explained_alike_by_every_rule(
        rule):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 4, 3), nn.ReLU(),
                        nn.AvgPool2d(2), nn.Flatten()).double()
    x = torch.from_numpy(X_DIGITS[:10])
    out = net(x).detach()
    torch.testing.assert_close(lrp_backward(list(net), x, out, rule=rule),
                               lrp_backward(list(net), x, out, rule="epsilon"), rtol=0, atol=0)


def test_gamma_rule_through_explain_conserves_all_but_the_zero_features_share(deep_model):
    R = deep_model.explain(X_DIGITS[:30], rule=GammaRule(0.25))
    features, relevance, f = feature_relevance(deep_model, X_DIGITS[:30])
    on_zero = (relevance * (features == 0)).sum(1).numpy()
    # measured median 1.8e-9: the stabiliser epsilon=1e-9
    assert np.median(np.abs(f - R.sum(1) - on_zero) / np.abs(f)) <= 1e-7


def test_explain_refuses_an_invalid_rule_naming_it(deep_model):
    with pytest.raises(ValueError, match=r"rule must be .*got 'gamma'"):
        deep_model.explain(X_DIGITS[:5], rule="gamma")


def one_output_layer(weight, bias=None):
    layer = nn.Linear(len(weight), 1, bias=bias is not None).double()
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([weight], dtype=torch.float64))
        if bias is not None:
            layer.bias.fill_(bias)
    return layer


# (weight, bias, input, zero?): |z| <= sqrt(eps) (~1.5e-8) * (sum |w a| + |b|) in float64
ZERO_CASES = {
    "bias_counts_within_tolerance": ([1.0], -1.0, [1 + 2e-8], True),
    "beyond_tolerance": ([1.0], -1.0, [1 + 4e-8], False),
    "negative_input_counts_by_its_size": ([1.0, 1.0], None, [-1.0, 1 + 2e-8], True),
    "exactly_zero_from_a_zero_input": ([1.0, -2.0], None, [0.0, 0.0], True),
}


@pytest.mark.parametrize("case", list(ZERO_CASES))
def test_an_output_is_zero_within_sqrt_eps_of_the_sizes_of_its_terms(case):
    weight, bias, a, expected = ZERO_CASES[case]
    layer = one_output_layer(weight, bias)
    a = torch.tensor([a], dtype=torch.float64)
    z = layer(a).detach()
    assert zero_outputs(layer, a, z).tolist() == [[expected]]


def test_a_layer_without_a_weight_has_only_exact_zeros():
    z = torch.tensor([[0.0, 1e-310, -1e-310]], dtype=torch.float64)
    assert zero_outputs(nn.Identity(), z, z).tolist() == [[True, False, False]]


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_epsilon_rule_absorbs_the_stabilisers_share_for_either_sign_of_the_output(sign):
    # z = 3 sign, epsilon = 1.5: the inputs keep z / (z + 1.5 sign) = 2/3 of R, as w a / z
    layer = one_output_layer([1.0, 2.0])
    a = torch.full((1, 2), sign, dtype=torch.float64)
    R = EpsilonRule(1.5).propagate(layer, a, torch.ones(1, 1, dtype=torch.float64))
    torch.testing.assert_close(R, torch.tensor([[2.0, 4.0]], dtype=torch.float64) / 9)


def test_z_plus_rule_drops_the_bias_and_the_negative_weights_but_keeps_its_stabiliser():
    # z+ = 1 + 2 (the -5 and the bias 4 dropped), epsilon = 1.5: R_in = a w+ / 4.5
    layer = one_output_layer([1.0, 2.0, -5.0], bias=4.0)
    a = torch.ones(1, 3, dtype=torch.float64)
    R = ZPlusRule(1.5).propagate(layer, a, torch.ones(1, 1, dtype=torch.float64))
    torch.testing.assert_close(R, torch.tensor([[2.0, 4.0, 0.0]], dtype=torch.float64) / 9)


def test_gamma_rule_favours_a_positive_bias_as_it_favours_positive_weights():
    # gamma = 1: w = [2, -1], b = 2; z = 4 - 1 + 2 = 5 and R_in = a w / z
    layer = one_output_layer([1.0, -1.0], bias=1.0)
    a = torch.tensor([[2.0, 1.0]], dtype=torch.float64)
    R = GammaRule(1.0, epsilon=0.0).propagate(layer, a, torch.ones(1, 1, dtype=torch.float64))
    torch.testing.assert_close(R, torch.tensor([[0.8, -0.2]], dtype=torch.float64))


@pytest.mark.parametrize("make, expected", [
    (EpsilonRule, "EpsilonRule(epsilon=1e-09)"),
    (ZPlusRule, "ZPlusRule(epsilon=1e-09)"),
    (GammaRule, "GammaRule(gamma=0.25, epsilon=1e-09)"),
    (lambda: resolve_rule("epsilon"), "EpsilonRule(epsilon=1e-09)"),
    (lambda: resolve_rule("zplus"), "ZPlusRule(epsilon=1e-09)"),
], ids=["EpsilonRule", "ZPlusRule", "GammaRule", "resolve epsilon", "resolve zplus"])
def test_rules_default_to_the_documented_stabiliser_and_gamma(make, expected):
    assert repr(make()) == expected
