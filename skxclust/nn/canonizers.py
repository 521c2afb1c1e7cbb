"""Model rewrite: swap a distance layer for its neuralized form, and back.

:class:`NeuralizingCanonizer` follows zennit's canonizer protocol (``apply`` returns the
applied instances, each of which has ``register``/``remove``/``copy``), so it can be passed
to ``zennit.composites.Composite(canonizers=[...])`` — but it does not import zennit, and
``canonizer.applied(model)`` gives a plain context manager too.
"""

from __future__ import annotations

from torch import nn

from .neuralized import PairwiseSquaredDistance, neuralized_head

__all__ = ["NeuralizingCanonizer"]


class NeuralizingCanonizer:
    """Temporarily replace every :class:`PairwiseSquaredDistance` by neuralized k-means.

    While applied, a distance layer with centroids ``mu`` (output: squared distances
    ``(N, K)``) instead outputs the cluster evidence ``f`` of shape ``(N, K)``, computed by a
    child ``neuralized``: a :class:`~skxclust.nn.NeuralizedKMeans` followed by its pool
    (hard or LogMeanExp min-pool). The arg-min of the
    distances equals the arg-max of ``f``, so the model's cluster assignment is unchanged.
    ``remove`` restores the original layer exactly.

    Parameters
    ----------
    beta : float or None
        Pool stiffness: None for the hard minimum, a positive value for the smooth
        LogMeanExp pool (better for gradient-based attribution).

    Examples
    --------
    >>> import torch
    >>> from skxclust.nn import NeuralizingCanonizer, PairwiseSquaredDistance
    >>> model = torch.nn.Sequential(PairwiseSquaredDistance(torch.eye(3)))
    >>> with NeuralizingCanonizer().applied(model):
    ...     f = model(torch.tensor([[1.0, 0.0, 0.0]]))
    >>> int(f.argmax())
    0
    """

    def __init__(self, beta: float | None = None):
        self.beta = beta
        self.module: PairwiseSquaredDistance | None = None

    def apply(self, root_module: nn.Module) -> list[NeuralizingCanonizer]:
        """Apply to every distance layer below ``root_module``; return the instances."""
        instances = []
        for module in root_module.modules():
            if isinstance(module, PairwiseSquaredDistance):
                instance = self.copy()
                instance.register(module)
                instances.append(instance)
        return instances

    def register(self, module: PairwiseSquaredDistance) -> None:
        """Rewrite one distance layer."""
        self.module = module
        head = neuralized_head(module.centers.detach(), beta=self.beta)
        module.add_module("neuralized", head)
        # instance attribute shadows the class method (deliberate, removed by remove())
        module.forward = head.forward  # type: ignore[method-assign]

    def remove(self) -> None:
        """Restore the distance layer."""
        if self.module is not None:
            del self.module.forward
            del self.module.neuralized
            self.module = None

    def copy(self) -> NeuralizingCanonizer:
        """A fresh, unapplied instance with the same settings."""
        return self.__class__(beta=self.beta)

    def applied(self, root_module: nn.Module) -> _Applied:
        """Context manager applying the canonizer and removing it in ``finally``."""
        return _Applied(self, root_module)


class _Applied:
    def __init__(self, canonizer: NeuralizingCanonizer, root: nn.Module):
        self.canonizer, self.root = canonizer, root
        self.instances: list[NeuralizingCanonizer] = []

    def __enter__(self) -> nn.Module:
        self.instances = self.canonizer.apply(self.root)
        return self.root

    def __exit__(self, *exc) -> None:
        for instance in self.instances:
            instance.remove()
        self.instances = []

