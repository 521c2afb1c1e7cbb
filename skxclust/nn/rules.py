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

so relevance is conserved up to :math:`\epsilon` and what the biases absorb.

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
           "resolve_rule"]


@runtime_checkable
class LRPRule(Protocol):
    """What :func:`~skxclust.nn.lrp_backward` needs of a rule: one ``propagate`` method."""

    def propagate(self, layer: nn.Module, a: torch.Tensor,
                  relevance: torch.Tensor) -> torch.Tensor:
        """Relevance of the input ``a`` of ``layer`` from that of its output."""
        ...  # pragma: no cover


def gradient_rule(layer: nn.Module, a: torch.Tensor, relevance: torch.Tensor,
                  epsilon: float) -> torch.Tensor:
    """``a * grad_a(z . s)`` with ``s = R / (z + eps * sign(z))``, ``z = layer(a)``.

    The common form of the rules here, for ``layer`` itself or a modified copy of it.

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
        # z == 0 with epsilon == 0 (e.g. a bias-free layer on an all-zero input): no input
        # has a share of that output, so its relevance is not passed on (not 0 * inf = NaN)
        zero = denominator == 0
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
