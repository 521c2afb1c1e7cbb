"""LRP through a feature extractor: relevance on features back to the raw input.

Pure torch; no scikit-learn import. Used for *deep clusters*: k-means on ``phi(x)``
explained by NEON on ``phi(x)``, then propagated through the layers of ``phi``.

Rules (``a``: layer input, ``z``: layer output before any activation):

- Linear / Conv1d / Conv2d / average pools, **epsilon rule**:
  ``R_in = a * grad_a(z . s)`` with ``s = R_out / (z + eps * sign(z))``.
- Linear / Conv on non-negative inputs (after a ReLU), **z-plus rule** when
  ``rule="zplus"``: the same with the weights clamped at 0 and no bias; the first layer
  (raw input, possibly negative) always uses the epsilon rule.
- ReLU: relevance passes through unchanged (it is explained at the next linear layer's
  pre-activation).
- Pools (average, max, adaptive): relevance is routed along the pooling's own gradient,
  ``R_in = (dz/da)^T R_out``: max pools give it to the winner, average pools split it
  evenly over each window. This conserves exactly even where the pooled activations are
  zero (the usual ``a * grad`` form would lose relevance on zero activations after a ReLU).
- Flatten, Unflatten, Identity, Dropout (evaluation mode): reshape only.

For a network without biases, each rule conserves relevance up to ``eps``; biases absorb
their share.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

__all__ = ["SUPPORTED_LAYERS", "supported_layers", "lrp_backward"]

_WEIGHTED = (nn.Linear, nn.Conv1d, nn.Conv2d)
_POOLS = (nn.AvgPool1d, nn.AvgPool2d, nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d,
          nn.MaxPool1d, nn.MaxPool2d, nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d)
_RESHAPES = (nn.Flatten, nn.Unflatten, nn.Identity, nn.Dropout)
SUPPORTED_LAYERS = _WEIGHTED + _POOLS + _RESHAPES + (nn.ReLU,)


def supported_layers(module: nn.Module) -> list[nn.Module]:
    """Flatten (nested) ``nn.Sequential`` containers into a list of supported layers.

    Raises
    ------
    TypeError
        Naming the first layer whose type has no LRP rule here.
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


def _positive_copy(layer: nn.Module) -> nn.Module:
    pos = copy.deepcopy(layer)
    with torch.no_grad():
        pos.weight.clamp_(min=0)
        if pos.bias is not None:
            pos.bias.zero_()
    return pos


def _gradient_rule(layer: nn.Module, a: torch.Tensor, relevance: torch.Tensor, eps: float):
    a = a.detach().requires_grad_(True)
    with torch.enable_grad():
        z = layer(a)
        sign = torch.where(z >= 0, 1.0, -1.0).to(z.dtype)
        s = (relevance / (z + eps * sign)).detach()
        (grad,) = torch.autograd.grad(z, a, grad_outputs=s)
    return (a * grad).detach()


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
    rule: str = "epsilon",
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
        Relevance of the (flattened) output.
    rule : {"epsilon", "zplus"}
        Rule for weighted layers after the first one.
    epsilon : float
        Stabiliser of the epsilon rule.

    Returns
    -------
    Tensor of the shape of ``x``.
    """
    if rule not in ("epsilon", "zplus"):
        raise ValueError(f"rule must be 'epsilon' or 'zplus', got {rule!r}.")
    activations = [x]
    with torch.no_grad():
        for layer in layers:
            activations.append(layer(activations[-1]))
    R = relevance.reshape(activations[-1].shape)
    for i in range(len(layers) - 1, -1, -1):
        layer, a = layers[i], activations[i]
        if isinstance(layer, (*_RESHAPES, nn.ReLU)):
            R = R.reshape(a.shape)
        elif isinstance(layer, _POOLS):
            R = _routing_rule(layer, a, R)
        elif isinstance(layer, _WEIGHTED) and rule == "zplus" and i > 0:
            R = _gradient_rule(_positive_copy(layer), a, R, epsilon)
        else:
            R = _gradient_rule(layer, a, R, epsilon)
    return R
