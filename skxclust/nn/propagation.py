r"""LRP through a feature extractor: relevance on features back to the raw input.

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
- At every Linear / Conv layer, first: an output that is **zero to rounding**,
  ``|z_j| <= zero_tol * (sum_i |w_ji a_i| + |b_j|)`` (:func:`~skxclust.nn.rules.zero_outputs`,
  ``zero_tol = sqrt(eps)`` of the dtype by default), passes no relevance on, whatever the
  rule: it is a zero activation whose sign is rounding noise (a zero-sum filter over a flat
  patch gives about 1e-17), and a rule would divide its relevance by about ``eps``.
- ReLU: relevance passes where the output is positive; the relevance of an output that
  is exactly 0 goes nowhere (its input, ``<= 0``, is not the cause of it): it is absorbed.
- Pools (average, max, adaptive): no rule choice; relevance is routed in proportion to each
  input's contribution, ``R_in = a * (dz/da)^T (R_out / z)`` (the z-rule: an average pool
  gives ``a_i / sum_window a`` of a window's relevance to input ``i``, a max pool all of it
  to the winner); where ``z`` is zero to rounding relative to the pool of ``|a|`` (e.g. a
  window of zeros), along the pooling's gradient instead (evenly over an average pool's
  window). Both conserve exactly.
- Flatten, Unflatten, Identity, Dropout (evaluation mode): reshape only.

What is conserved. For each row, up to rounding,

.. math:: \sum_i R_i(x) + A_{\mathrm{zero}}(x) + A_{\mathrm{rule}}(x) = \sum_j R_j^{\mathrm{out}},

the relevance given on the output (for :meth:`skxclust.ExplainableKMeans.explain`, the
cluster evidence ``f_c(x)``), where, summed over the layers (:func:`lrp_trace` returns
both per layer):

- :math:`A_{\mathrm{zero}}`, *absorbed at zero activations*: the relevance of ReLU
  outputs that are exactly 0 and of Linear / Conv outputs that are zero to rounding. Under
  NEON it holds the share that the midpoint rule gives to features that are zero (their
  root point is not): a part of the evidence that no input carries, not small in general,
  of either sign, and larger than ``f_c(x)`` itself on rows where ``f_c(x)`` is near 0.
- :math:`A_{\mathrm{rule}}`, *absorbed by the rules* of the other Linear / Conv outputs:
  for the built-in rules on the (modified) layer :math:`\tilde z = \tilde W a + \tilde b`,
  :math:`\sum_j R_j (\epsilon\,\mathrm{sign}\,\tilde z_j + \tilde b_j) /
  (\tilde z_j + \epsilon\,\mathrm{sign}\,\tilde z_j)`, the stabiliser's and the
  bias's share (plus all of :math:`R_j` where the modified output :math:`\tilde z_j`, but
  not :math:`z_j`, is zero to rounding). For a layer without bias (and always for z-plus,
  which drops the bias) it is at most :math:`\epsilon \sum_j |R_j| / |\tilde z_j|`; for a
  user's rule, whatever its input relevance misses of its output relevance.

Pools and reshapes conserve exactly. Measured on the deep-clusters example (a bias-free
edge-filter network, float64, all 1797 digits, epsilon rule): :math:`A_{\mathrm{zero}}` is
a third of ``f_c(x)`` on the median row, :math:`|A_{\mathrm{rule}}|` at most 1e-5 of it
(median 9e-9), and the identity holds to 1e-13 relative; the largest pixel relevance is
0.4 ``f_c(x)`` on the median row, and never more than 16 times the summed ``|relevance|``
of the features.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from ._checks import check_shape
from .rules import EpsilonRule, LRPRule, check_zero_tol, resolve_rule, zero_outputs, zero_tolerance

__all__ = ["SUPPORTED_LAYERS", "LRPTrace", "supported_layers", "lrp_backward", "lrp_trace",
           "pool_rule", "relu_rule"]

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


def relu_rule(a: torch.Tensor, relevance: torch.Tensor) -> torch.Tensor:
    """Relevance of a ReLU's input: that of its output where the output is positive, 0
    where it is exactly 0 (``a <= 0``).

    Parameters
    ----------
    a : Tensor of shape (B, ...)
        The ReLU's input.
    relevance : Tensor
        Relevance of its output (``a.numel()`` values).

    Returns
    -------
    Tensor of the shape of ``a``
        The relevance of the zero outputs is not passed on (it is absorbed).

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.propagation import relu_rule
    >>> relu_rule(torch.tensor([[2.0, 0.0, -1.0]]), torch.tensor([[0.5, 0.3, 0.2]])).tolist()
    [[0.5, 0.0, 0.0]]
    """
    relevance = relevance.reshape(a.shape)
    return torch.where(a > 0, relevance, torch.zeros_like(relevance))


def pool_rule(layer: nn.Module, a: torch.Tensor, relevance: torch.Tensor,
              zero_tol: float | None = None) -> torch.Tensor:
    """Relevance of a pool's input, in proportion to each input's contribution.

    ``R_in = a * (dz/da)^T (R / z)``, ``z = layer(a)``: an average pool gives input ``i``
    the share ``a_i / sum_window a`` of its window's relevance, a max pool gives it all to
    the winner. Where ``|z| <= zero_tol * layer(|a|)`` (a window of zeros, or of values
    that cancel to rounding), the relevance is routed along the pooling's gradient instead
    (evenly over an average pool's window). Conserves exactly either way.

    Parameters
    ----------
    layer : nn.Module
        An average or max pool (adaptive or not).
    a : Tensor of shape (B, ...)
        Its input.
    relevance : Tensor
        Relevance of its output (the number of values of ``layer(a)``).
    zero_tol : float, optional
        Relative tolerance; None: :func:`~skxclust.nn.rules.zero_tolerance` of the dtype.

    Returns
    -------
    Tensor of the shape of ``a``

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.propagation import pool_rule
    >>> a = torch.tensor([[[3.0, 1.0, 0.0, 0.0]]])
    >>> pool_rule(torch.nn.AvgPool1d(2), a, torch.tensor([[[1.0, 1.0]]])).tolist()
    [[[0.75, 0.25, 0.5, 0.5]]]
    """
    if zero_tol is None:
        zero_tol = zero_tolerance(a.dtype)
    a = a.detach().requires_grad_(True)
    with torch.enable_grad():
        z = layer(a)
        relevance = relevance.reshape(z.shape)
        with torch.no_grad():
            zero = z.abs() <= zero_tol * layer(a.detach().abs())
        s = torch.where(zero, 0.0, relevance / torch.where(zero, 1.0, z.detach()))
        (proportional,) = torch.autograd.grad(z, a, grad_outputs=s, retain_graph=True)
        (routed,) = torch.autograd.grad(z, a, grad_outputs=torch.where(zero, relevance, 0.0))
    return (a * proportional + routed).detach()


class LRPTrace(NamedTuple):
    """What :func:`lrp_trace` returns: the input relevance and what each layer absorbed.

    For each row ``b``, ``relevance[b].sum() + absorbed_at_zero[b].sum() +
    absorbed_by_rule[b].sum()`` equals the output relevance of the row, up to rounding.

    Attributes
    ----------
    relevance : Tensor of the shape of ``x``
        Relevance of the input.
    absorbed_at_zero : Tensor of shape (B, L)
        Per row and layer: the relevance of the zero activations, which goes nowhere (ReLU
        outputs exactly 0, Linear / Conv outputs zero to rounding); 0 for other layers.
    absorbed_by_rule : Tensor of shape (B, L)
        Per row and layer: what the rule of a Linear / Conv layer kept of the relevance of
        its other outputs (the stabiliser's and the bias's share for the built-in rules);
        0 for other layers, which conserve exactly.

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn.propagation import lrp_trace
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2, bias=False), torch.nn.ReLU()).double()
    >>> with torch.no_grad():
    ...     _ = net[0].weight.copy_(torch.tensor([[1.0, 1.0], [1.0, -1.0]]))
    >>> x = torch.tensor([[1.0, 2.0]], dtype=torch.float64)  # outputs 3 and 0 (ReLU of -1)
    >>> trace = lrp_trace(list(net), x, torch.tensor([[0.6, 0.4]], dtype=torch.float64),
    ...                   epsilon=0.0)
    >>> trace.relevance.round(decimals=12).tolist(), trace.absorbed_at_zero.tolist()
    ([[0.2, 0.4]], [[0.0, 0.4]])
    """

    relevance: torch.Tensor
    absorbed_at_zero: torch.Tensor
    absorbed_by_rule: torch.Tensor


def _row_sums(values: torch.Tensor) -> torch.Tensor:
    return values.reshape(values.shape[0], -1).sum(dim=1)


def lrp_trace(
    layers: list[nn.Module],
    x: torch.Tensor,
    relevance: torch.Tensor,
    rule: str | LRPRule = "epsilon",
    epsilon: float = 1e-9,
    zero_tol: float | None = None,
) -> LRPTrace:
    """:func:`lrp_backward`, with what every layer absorbs (see :class:`LRPTrace`).

    Parameters
    ----------
    layers, x, relevance, rule, epsilon, zero_tol
        As in :func:`lrp_backward`.

    Returns
    -------
    LRPTrace
        ``(relevance, absorbed_at_zero, absorbed_by_rule)``; the last two of shape
        ``(B, len(layers))``.

    Examples
    --------
    A bias-free ReLU network conserves what its zero activations do not absorb:

    >>> import torch
    >>> from torch import nn
    >>> from skxclust.nn.propagation import lrp_trace
    >>> _ = torch.manual_seed(0)
    >>> net = nn.Sequential(nn.Linear(4, 6, bias=False), nn.ReLU(),
    ...                     nn.Linear(6, 3, bias=False), nn.ReLU()).double()
    >>> x = torch.randn(5, 4, dtype=torch.float64)
    >>> R_out = torch.ones(5, 3, dtype=torch.float64)  # also on outputs that are 0
    >>> R, at_zero, by_rule = lrp_trace(list(net), x, R_out, epsilon=0.0)
    >>> total = R.sum(1) + at_zero.sum(1) + by_rule.sum(1)
    >>> torch.allclose(total, R_out.sum(1)), float(by_rule.abs().max()) < 1e-12
    (True, True)
    """
    rule = resolve_rule(rule, epsilon)
    zero_tol = check_zero_tol(zero_tol)
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
    at_zero = torch.zeros(x.shape[0], len(layers), dtype=R.dtype, device=R.device)
    by_rule = torch.zeros_like(at_zero)
    for i in range(len(layers) - 1, -1, -1):
        layer, a, z = layers[i], activations[i], activations[i + 1]
        if isinstance(layer, nn.ReLU):
            R = R.reshape(a.shape)
            at_zero[:, i] = _row_sums(torch.where(a > 0, 0.0, R))
            R = relu_rule(a, R)
        elif isinstance(layer, _RESHAPES):
            R = R.reshape(a.shape)
        elif isinstance(layer, _POOLS):
            R = pool_rule(layer, a, R, zero_tol)
        else:  # weighted; or a type supported_layers refuses (lrp_backward does not check)
            R = R.reshape(z.shape)
            zero = zero_outputs(layer, a, z, zero_tol)
            at_zero[:, i] = _row_sums(torch.where(zero, R, 0.0))
            R = torch.where(zero, 0.0, R)
            layer_rule = rule if isinstance(layer, _WEIGHTED) and i != first_weighted \
                else first_rule
            R_in = layer_rule.propagate(layer, a, R)
            by_rule[:, i] = _row_sums(R) - _row_sums(R_in)
            R = R_in
    return LRPTrace(R, at_zero, by_rule)


def lrp_backward(
    layers: list[nn.Module],
    x: torch.Tensor,
    relevance: torch.Tensor,
    rule: str | LRPRule = "epsilon",
    epsilon: float = 1e-9,
    zero_tol: float | None = None,
) -> torch.Tensor:
    """Propagate relevance on the output of ``layers`` back to their input ``x``.

    The rules are listed in :mod:`skxclust.nn.propagation`, with what is conserved;
    :func:`lrp_trace` returns, besides, what each layer absorbs.

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
    zero_tol : float, optional
        Relative tolerance under which a Linear / Conv or pool output counts as zero (see
        :func:`~skxclust.nn.rules.zero_outputs`); None: ``sqrt(eps)`` of the dtype. Its
        relevance is counted as absorbed at zero. The rules keep their own test at
        ``sqrt(eps)`` (an output they would divide by about ``eps``): with a smaller
        ``zero_tol`` such an output's relevance is absorbed by the rule instead.

    Returns
    -------
    Tensor of the shape of ``x``.

    Examples
    --------
    For a network without biases, relevance is conserved but for what reaches zero
    activations (here none: the output relevance is the output itself):

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
    return lrp_trace(layers, x, relevance, rule, epsilon, zero_tol).relevance
