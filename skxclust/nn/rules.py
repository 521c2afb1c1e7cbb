r"""LRP rules for the weighted layers (Linear, Conv) of a feature extractor, as objects.

Pure torch; no scikit-learn import. A rule is any object with one method,

``propagate(layer, a, relevance) -> Tensor``
    ``layer`` an ``nn.Linear`` / ``nn.Conv1d`` / ``nn.Conv2d``, ``a`` its input (shape
    ``(B, ...)``), ``relevance`` the relevance of its output (the shape of ``layer(a)``);
    returns the relevance of its input (the shape of ``a``).

:func:`~skxclust.nn.lrp_backward` calls it for every weighted layer but the first one (the
input layer, which always gets :class:`EpsilonRule`), so a new rule is one class: no string to
register. The built-in rules share one form, that of zennit's basic rules: for a modified
copy :math:`\tilde z = \tilde W a + \tilde b` of the layer,

.. math:: R_{\mathrm{in}} = a \odot \nabla_a\bigl(\tilde z \cdot s\bigr), \qquad
          s = R_{\mathrm{out}} / (\tilde z + \epsilon\,\mathrm{sign}(\tilde z)),

where an output :math:`\tilde z_j` that is zero to rounding (:func:`zero_outputs`) passes
no relevance on (:math:`s_j = 0`). Summed over the inputs,
:math:`\sum_i R_{\mathrm{in},i} = \sum_j s_j (\tilde z_j - \tilde b_j)`, so what a rule
absorbs is, per output :math:`j`, all of :math:`R_j` where :math:`\tilde z_j` is zero to
rounding and :math:`R_j (\epsilon\,\mathrm{sign}(\tilde z_j) + \tilde b_j) /
(\tilde z_j + \epsilon\,\mathrm{sign}(\tilde z_j))` elsewhere: the stabiliser's and the
(modified) bias's share.

- :class:`EpsilonRule`: the layer itself.
- :class:`ZPlusRule`: weights clamped at 0, no bias (for non-negative inputs).
- :class:`GammaRule`: ``w + gamma * w^+`` and ``b + gamma * b^+`` (favours positive
  contributions; ``gamma = 0`` is the epsilon rule, ``gamma -> inf`` tends to z-plus).

:func:`resolve_rule` maps the names ``"epsilon"`` and ``"zplus"`` to these objects; it is the
one place that knows the names.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable
from typing import Protocol, cast, runtime_checkable

import torch
from torch import nn

__all__ = ["LRPRule", "EpsilonRule", "ZPlusRule", "GammaRule", "RULES", "check_epsilon",
           "check_zero_tol", "resolve_rule", "zero_outputs", "zero_tolerance"]


@runtime_checkable
class LRPRule(Protocol):
    """What :func:`~skxclust.nn.lrp_backward` needs of a rule: one ``propagate`` method."""

    def propagate(self, layer: nn.Module, a: torch.Tensor,
                  relevance: torch.Tensor) -> torch.Tensor:
        """Relevance of the input ``a`` of ``layer`` from that of its output."""
        ...  # pragma: no cover


def zero_tolerance(dtype: torch.dtype) -> float:
    """The default relative tolerance of :func:`zero_outputs`: ``sqrt(eps)`` of ``dtype``.

    About 1.5e-8 in float64 and 3.5e-4 in float32. A dot product of ``n`` terms is exact to
    ``n * eps / 2`` relative to the sum of the terms' magnitudes (Higham); ``sqrt(eps)``
    covers that with a wide margin for the layer sizes of feature extractors and for
    convolution algorithms that round more than a plain dot product (TF32 convolutions on
    CUDA round more still: use float64 there when conservation matters).

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.rules import zero_tolerance
    >>> zero_tolerance(torch.float64) < 2e-8 < zero_tolerance(torch.float32)
    True
    """
    return math.sqrt(torch.finfo(dtype).eps)


def check_zero_tol(zero_tol) -> float | None:
    """``zero_tol`` of an LRP pass: None (:func:`zero_tolerance` of the dtype) or a real
    number, finite and >= 0 (TypeError / ValueError otherwise, naming it)."""
    if zero_tol is None:
        return None
    return _check_finite_non_negative(zero_tol, "zero_tol")


def _absolute_copy(layer: nn.Module) -> nn.Module | None:
    """``layer`` with ``|weight|`` and ``|bias|`` (None for a layer without a weight)."""
    if not isinstance(getattr(layer, "weight", None), torch.Tensor):
        return None
    return _modified_copy(layer, torch.abs, torch.abs)


def zero_outputs(layer: nn.Module, a: torch.Tensor, z: torch.Tensor,
                 zero_tol: float | None = None) -> torch.Tensor:
    """Where the output ``z = layer(a)`` of a Linear / Conv layer is zero to rounding.

    ``|z_j| <= zero_tol * (sum_i |w_ji a_i| + |b_j|)``: below that the sign and size of
    ``z_j`` are rounding noise of contributions that cancel (e.g. a zero-sum filter over a
    flat patch gives about 1e-17 instead of 0), and dividing relevance by it, as the rules
    do, would blow it up. An exactly zero output is always zero here. For a layer without
    a ``weight`` tensor only exact zeros are.

    Parameters
    ----------
    layer : nn.Module
        A Linear / Conv layer (or a modified copy of one).
    a : Tensor of shape (B, ...)
        Its input.
    z : Tensor
        ``layer(a)``.
    zero_tol : float, optional
        Relative tolerance; None: :func:`zero_tolerance` of ``z.dtype``.

    Returns
    -------
    BoolTensor of the shape of ``z``

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.rules import zero_outputs
    >>> edge = torch.nn.Linear(3, 1, bias=False, dtype=torch.float64)
    >>> _ = edge.weight.data.copy_(torch.tensor([[0.1, 0.2, -0.3]], dtype=torch.float64))
    >>> a = torch.tensor([[0.7, 0.7, 0.7], [0.7, 0.7, 0.1]], dtype=torch.float64)
    >>> z = edge(a).detach()
    >>> 0 < abs(float(z[0, 0])) < 1e-15  # zero but for rounding
    True
    >>> zero_outputs(edge, a, z).flatten().tolist()
    [True, False]
    """
    if zero_tol is None:
        zero_tol = zero_tolerance(z.dtype)
    absolute = _absolute_copy(layer)
    if absolute is None:
        return z == 0
    with torch.no_grad():
        scale = absolute(a.detach().abs())
    return z.detach().abs() <= zero_tol * scale


def gradient_rule(layer: nn.Module, a: torch.Tensor, relevance: torch.Tensor,
                  epsilon: float, zero_tol: float | None = None) -> torch.Tensor:
    """``a * grad_a(z . s)`` with ``s = R / (z + eps * sign(z))``, ``z = layer(a)``, and
    ``s = 0`` where ``z`` is zero to rounding (:func:`zero_outputs` with ``zero_tol``).

    The common form of the rules here, for ``layer`` itself or a modified copy of it. The
    input relevance sums to ``sum_j s_j (z_j - b_j)``: the outputs that are zero to
    rounding pass nothing on, the others all of ``R_j`` but the share
    ``R_j (eps * sign(z_j) + b_j) / (z_j + eps * sign(z_j))`` of the stabiliser and the
    bias.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.rules import gradient_rule
    >>> layer = torch.nn.Linear(3, 2, bias=False, dtype=torch.float64)
    >>> a = torch.rand(4, 3, dtype=torch.float64)
    >>> R = gradient_rule(layer, a, layer(a).detach(), 1e-12)
    >>> torch.allclose(R.sum(1), layer(a).sum(1))
    True
    """
    a = a.detach().requires_grad_(True)
    with torch.enable_grad():
        z = layer(a)
        sign = torch.where(z >= 0, 1.0, -1.0).to(z.dtype)
        denominator = (z + epsilon * sign).detach()
        # an output that is zero to rounding (or exactly, as from a bias-free layer on an
        # all-zero input, also with epsilon == 0) has no input share to pass its relevance
        # to: it is absorbed (not divided by about epsilon, nor 0 * inf = NaN)
        zero = zero_outputs(layer, a, z, zero_tol) | (denominator == 0)
        s = torch.where(zero, 0.0, relevance / torch.where(zero, 1.0, denominator))
        (grad,) = torch.autograd.grad(z, a, grad_outputs=s)
    return (a * grad).detach()


def _modified_copy(layer: nn.Module, weight: Callable[[torch.Tensor], torch.Tensor],
                   bias: Callable[[torch.Tensor], torch.Tensor]) -> nn.Module:
    """A copy of ``layer`` with ``weight(layer.weight)`` and ``bias(layer.bias)``."""
    out = copy.deepcopy(layer)
    # a Linear / Conv layer: weight and bias are tensors (nn.Module's attributes are typed
    # "Tensor | Module")
    with torch.no_grad():
        out_weight = cast(torch.Tensor, out.weight)
        out_weight.copy_(weight(out_weight))
        out_bias = cast("torch.Tensor | None", out.bias)
        if out_bias is not None:
            out_bias.copy_(bias(out_bias))
    return out


def _check_finite_non_negative(value, name: str) -> float:
    """``value`` as a float: a real number (TypeError otherwise; bools and numeric strings
    are not numbers here), finite and >= 0 (ValueError otherwise). Messages name ``name``
    and the value."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a non-negative number, got {value!r}.")
    # numbers.Real declares no __ge__ for type checkers (the numeric tower is untyped)
    if not (math.isfinite(value) and value >= 0):  # type: ignore[operator]
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}.")
    return float(value)


def check_epsilon(epsilon) -> float:
    """The stabiliser ``epsilon`` of an LRP rule as a float: a real number (TypeError
    otherwise), finite and >= 0 (ValueError otherwise)."""
    return _check_finite_non_negative(epsilon, "epsilon")


class EpsilonRule:
    """LRP-epsilon: each input's share of the layer's output, stabilised by ``epsilon``.

    ``R_in = a * grad_a(z @ s)`` with ``s = R_out / (z + epsilon * sign(z))``, ``z`` the
    output of the layer.

    Parameters
    ----------
    epsilon : float, default=1e-9
        Stabiliser (>= 0); larger values absorb the relevance of weak activations.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import EpsilonRule
    >>> layer = torch.nn.Linear(3, 2, bias=False, dtype=torch.float64)
    >>> a = torch.rand(4, 3, dtype=torch.float64)
    >>> R = EpsilonRule(1e-12).propagate(layer, a, torch.ones(4, 2, dtype=torch.float64))
    >>> R.sum(1).round(decimals=6).tolist()
    [2.0, 2.0, 2.0, 2.0]
    """

    def __init__(self, epsilon: float = 1e-9):
        self.epsilon = check_epsilon(epsilon)

    def propagate(self, layer: nn.Module, a: torch.Tensor,
                  relevance: torch.Tensor) -> torch.Tensor:
        """Relevance of the input ``a`` of ``layer`` from that of its output."""
        return gradient_rule(layer, a, relevance, self.epsilon)

    def __repr__(self) -> str:
        return f"EpsilonRule(epsilon={self.epsilon!r})"


class ZPlusRule:
    """LRP-z+: the epsilon rule on the layer with its weights clamped at 0 and no bias.

    Only positive contributions count, so relevance stays positive where the output
    relevance is; suited to layers whose inputs are non-negative (after a ReLU).

    Parameters
    ----------
    epsilon : float, default=1e-9
        Stabiliser (>= 0).

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import ZPlusRule
    >>> layer = torch.nn.Linear(3, 2, dtype=torch.float64)
    >>> a = torch.rand(4, 3, dtype=torch.float64)
    >>> R = ZPlusRule().propagate(layer, a, torch.ones(4, 2, dtype=torch.float64))
    >>> bool((R >= 0).all())
    True
    """

    def __init__(self, epsilon: float = 1e-9):
        self.epsilon = check_epsilon(epsilon)

    def propagate(self, layer: nn.Module, a: torch.Tensor,
                  relevance: torch.Tensor) -> torch.Tensor:
        """Relevance of the input ``a`` of ``layer`` from that of its output."""
        positive = _modified_copy(layer, lambda w: w.clamp(min=0), torch.zeros_like)
        return gradient_rule(positive, a, relevance, self.epsilon)

    def __repr__(self) -> str:
        return f"ZPlusRule(epsilon={self.epsilon!r})"


class GammaRule:
    """LRP-gamma: the epsilon rule on the layer with weights ``w + gamma * w^+`` (and
    biases ``b + gamma * b^+``).

    Positive contributions are favoured by the factor ``1 + gamma``; ``gamma = 0`` is the
    epsilon rule and large ``gamma`` tends to the z+ rule. For a layer without bias the
    relevance is conserved up to ``epsilon``.

    Parameters
    ----------
    gamma : float, default=0.25
        Weight (>= 0) of the positive part.
    epsilon : float, default=1e-9
        Stabiliser (>= 0).

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import GammaRule
    >>> layer = torch.nn.Linear(3, 2, bias=False, dtype=torch.float64)
    >>> a = torch.rand(4, 3, dtype=torch.float64)
    >>> R = GammaRule(0.25).propagate(layer, a, torch.ones(4, 2, dtype=torch.float64))
    >>> R.sum(1).round(decimals=6).tolist()  # conserved: each output carries 1
    [2.0, 2.0, 2.0, 2.0]
    """

    def __init__(self, gamma: float = 0.25, epsilon: float = 1e-9):
        self.gamma = _check_finite_non_negative(gamma, "gamma")
        self.epsilon = check_epsilon(epsilon)

    def propagate(self, layer: nn.Module, a: torch.Tensor,
                  relevance: torch.Tensor) -> torch.Tensor:
        """Relevance of the input ``a`` of ``layer`` from that of its output."""
        def favour(p):
            return p + self.gamma * p.clamp(min=0)

        return gradient_rule(_modified_copy(layer, favour, favour), a, relevance,
                             self.epsilon)

    def __repr__(self) -> str:
        return f"GammaRule(gamma={self.gamma!r}, epsilon={self.epsilon!r})"


# The rules that have a name: the strings lrp_backward and explain accept.
RULES: dict[str, Callable[[float], LRPRule]] = {"epsilon": EpsilonRule, "zplus": ZPlusRule}


def resolve_rule(rule: str | LRPRule, epsilon: float = 1e-9) -> LRPRule:
    """The rule object for ``rule``: a name of :data:`RULES` (built with ``epsilon``) or a
    rule object, returned as is.

    Parameters
    ----------
    rule : {"epsilon", "zplus"} or object with a ``propagate(layer, a, relevance)`` method
    epsilon : float, default=1e-9
        Stabiliser of a rule given by name.

    Returns
    -------
    LRPRule

    Raises
    ------
    ValueError
        Naming ``rule`` and its value when it is neither.

    Examples
    --------
    >>> from skxclust.nn import GammaRule
    >>> from skxclust.nn.rules import resolve_rule
    >>> resolve_rule("zplus", 1e-6)
    ZPlusRule(epsilon=1e-06)
    >>> resolve_rule(GammaRule(0.5))
    GammaRule(gamma=0.5, epsilon=1e-09)
    """
    if isinstance(rule, str):
        if rule in RULES:
            return RULES[rule](epsilon)
    elif callable(getattr(rule, "propagate", None)):
        return rule
    names = " or ".join(repr(name) for name in RULES)
    raise ValueError(
        f"rule must be {names}, or a rule object with a propagate(layer, a, relevance) "
        f"method, got {rule!r}."
    )
