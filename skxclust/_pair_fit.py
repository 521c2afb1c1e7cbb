"""What a warp assignment fitted for each row: :class:`PairFit`."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["PairFit"]


@dataclass(frozen=True)
class PairFit:
    """What an assignment fitted for each row and its centroid (the ``state`` of a warp
    :class:`~skxclust._geometry.Assignment`): the warp, and with an appearance
    transformation its coefficients and offset (None without; see
    :class:`~skxclust.nn.appearance.Appearance`)."""

    warps: torch.Tensor  # (n, n_basis, ndim)
    coef: torch.Tensor | None = None  # (n, C): the gain, then the other channels'
    offset: torch.Tensor | None = None  # (n,)

    def __getitem__(self, rows) -> PairFit:
        return PairFit(self.warps[rows], *(None if t is None else t[rows]
                                           for t in (self.coef, self.offset)))

    @staticmethod
    def concat(fits: list[PairFit]) -> PairFit:
        """The fits of consecutive row chunks as one."""
        coef, offset = ([getattr(f, name) for f in fits] for name in ("coef", "offset"))
        return PairFit(torch.cat([f.warps for f in fits]),
                       *(None if p[0] is None else torch.cat(p) for p in (coef, offset)))
