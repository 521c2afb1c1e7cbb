"""LRP through a feature extractor: relevance on features back to the raw input.

Pure torch; no scikit-learn import. Used for *deep clusters*: k-means on ``phi(x)``
explained by NEON on ``phi(x)``, then propagated through the layers of ``phi``.

Rules (``a``: layer input, ``z``: layer output before any activation):

- The **input layer**, i.e. the first Linear / Conv1d / Conv2d of the list, whatever
  reshapes, pools or other layers come before it (as zennit's composites pick their
  first layer by type): the **epsilon rule**,
  ``R_in = a * grad_a(z . s)`` with ``s = R_out / (z + eps * sign(z))``: its input is the
  raw data (or a reshaped or pooled copy of it), possibly negative.
- Every later Linear / Conv1d / Conv2d: the rule chosen by ``rule``, the epsilon rule by
  default; ``rule="zplus"`` (suited to non-negative inputs, after a ReLU) is the same with
  the weights clamped at 0 and no bias; or any rule object of :mod:`skxclust.nn.rules`
  (e.g. :class:`~skxclust.nn.GammaRule`) or of your own.
- ReLU: relevance passes through unchanged (it is explained at the next linear layer's
  pre-activation).
- Pools (average, max, adaptive): no rule choice; relevance is routed along the pooling's
  own gradient, ``R_in = (dz/da)^T R_out``: max pools give it to the winner, average pools
  split it evenly over each window. This conserves exactly even where the pooled
  activations are zero (the usual ``a * grad`` form would lose relevance on zero
  activations after a ReLU).
- Flatten, Unflatten, Identity, Dropout (evaluation mode): reshape only.

For a network without biases, each rule conserves relevance up to ``eps``; biases absorb
their share.
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_shape
from .rules import EpsilonRule, LRPRule, resolve_rule

__all__ = ["SUPPORTED_LAYERS", "supported_layers", "lrp_backward"]

_WEIGHTED = (nn.Linear, nn.Conv1d, nn.Conv2d)
_POOLS = (nn.AvgPool1d, nn.AvgPool2d, nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d,
          nn.MaxPool1d, nn.MaxPool2d, nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d)
_RESHAPES = (nn.Flatten, nn.Unflatten, nn.Identity, nn.Dropout)
SUPPORTED_LAYERS = _WEIGHTED + _POOLS + _RESHAPES + (nn.ReLU,)


def supported_layers(module: nn.Module) -> list[nn.Module]:
    """Flatten (nested) ``nn.Sequential`` containers into a list of supported layers.

    Parameters
    ----------
    module : nn.Module
        A supported layer, or an ``nn.Sequential`` of them (nested or not).

    Returns
    -------
    list of nn.Module

    Raises
    ------
    TypeError
        Naming the first layer whose type has no LRP rule here.

    Examples
    --------
    >>> from torch import nn
    >>> from skxclust.nn.propagation import supported_layers
    >>> net = nn.Sequential(nn.Linear(4, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 2)))
    >>> [type(layer).__name__ for layer in supported_layers(net)]
    ['Linear', 'ReLU', 'Linear']
    """
    if isinstance(module, nn.Sequential):
        layers = []
        for name, child in module.named_children():
            try:
                layers.extend(supported_layers(child))
            except TypeError as exc:
                raise TypeError(f"in layer {name!r}: {exc}") from None
        return layers
    if isinstance(module, SUPPORTED_LAYERS):
        return [module]
    names = ", ".join(sorted({t.__name__ for t in SUPPORTED_LAYERS}))
    raise TypeError(
        f"{type(module).__name__} is not supported for relevance propagation; a "
        f"feature_extractor must be an nn.Sequential of: {names}."
    )


def _routing_rule(layer: nn.Module, a: torch.Tensor, relevance: torch.Tensor):
    a = a.detach().requires_grad_(True)
    with torch.enable_grad():
        z = layer(a)
        (grad,) = torch.autograd.grad(z, a, grad_outputs=relevance.reshape(z.shape))
    return grad.detach()


def lrp_backward(
    layers: list[nn.Module],
    x: torch.Tensor,
    relevance: torch.Tensor,
    rule: str | LRPRule = "epsilon",
    epsilon: float = 1e-9,
) -> torch.Tensor:
    """Propagate relevance on the output of ``layers`` back to their input ``x``.

    Parameters
    ----------
    layers : list of nn.Module
        From :func:`supported_layers`, applied in order to ``x``.
    x : Tensor of shape (B, ...)
        Input of the first layer.
    relevance : Tensor of shape (B, F)
        Relevance of the (flattened) output: ``F`` is the number of outputs per row.
    rule : {"epsilon", "zplus"} or rule object, default="epsilon"
        Rule for the weighted layers (Linear, Conv1d, Conv2d) after the first weighted
        layer of the list, which always uses the epsilon rule (whatever reshapes or pools
        come before it): a name, or any object with a
        ``propagate(layer, a, relevance)`` method (:class:`~skxclust.nn.EpsilonRule`,
        :class:`~skxclust.nn.ZPlusRule`, :class:`~skxclust.nn.GammaRule` or your own; see
        :mod:`skxclust.nn.rules`).
    epsilon : float, default=1e-9
        Stabiliser of the epsilon rule of the first weighted layer, and of the rule given
        by name.

    Returns
    -------
    Tensor of the shape of ``x``.

    Examples
    --------
    For a network without biases relevance is conserved:

    >>> import torch
    >>> from torch import nn
    >>> from skxclust.nn import GammaRule, lrp_backward
    >>> _ = torch.manual_seed(0)
    >>> net = nn.Sequential(nn.Linear(4, 6, bias=False), nn.ReLU(),
    ...                     nn.Linear(6, 2, bias=False)).double()
    >>> x = torch.rand(3, 4, dtype=torch.float64)
    >>> out = net(x).detach()
    >>> R = lrp_backward(list(net), x, out, rule=GammaRule(0.25))
    >>> torch.allclose(R.sum(1), out.sum(1))
    True
    """
    rule = resolve_rule(rule, epsilon)
    check_shape(x, "x", "(B, ...)")
    check_shape(relevance, "relevance", "(B, ...)", B=(x.shape[0], "x.shape[0]"))
    first_rule = EpsilonRule(epsilon)
    # the input layer by type, not by position: a flat-row extractor starts with Unflatten
    first_weighted = next(
        (i for i, layer in enumerate(layers) if isinstance(layer, _WEIGHTED)), None)
    activations = [x]
    with torch.no_grad():
        for layer in layers:
            activations.append(layer(activations[-1]))
    out = activations[-1]
    if relevance.numel() != out.numel():
        raise ValueError(
            f"relevance must have shape (B, F) with B == x.shape[0] == {x.shape[0]} and F "
            f"== outputs per row of the layers == {out[0].numel()}, got "
            f"{tuple(relevance.shape)}."
        )
    R = relevance.reshape(out.shape)
    for i in range(len(layers) - 1, -1, -1):
        layer, a = layers[i], activations[i]
        if isinstance(layer, (*_RESHAPES, nn.ReLU)):
            R = R.reshape(a.shape)
        elif isinstance(layer, _POOLS):
            R = _routing_rule(layer, a, R)
        elif isinstance(layer, _WEIGHTED):
            R = (first_rule if i == first_weighted else rule).propagate(layer, a, R)
        else:  # a type supported_layers refuses (lrp_backward does not check the list)
            R = first_rule.propagate(layer, a, R)
    return R
