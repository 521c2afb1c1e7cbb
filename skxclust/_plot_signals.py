"""Centroids of 1-D signals drawn as curves (for :func:`skxclust.plotting.plot_centroids`).

A centroid of ``n`` samples along one axis reads as a curve, not as a ``1 x n`` heat
strip; the members of its cluster, brought into its frame (``align`` of ST K-means,
the rows themselves for other estimators), are drawn faint behind it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["cluster_members", "draw_signal"]

CENTROID_STYLE = {"color": "black", "linewidth": 1.6, "zorder": 3}
MEMBER_STYLE = {"color": "tab:blue", "linewidth": 0.6, "alpha": 0.25, "zorder": 1}


def cluster_members(estimator: Any, X, n_clusters: int, max_members: int) -> list:
    """Up to ``max_members`` rows of each cluster of ``X`` (None: no members), aligned
    to their centroid when the estimator has ``align``; a list of (m, n) arrays."""
    if X is None:
        return [None] * n_clusters
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(estimator.predict(X))
    rows = np.asarray(estimator.align(X)) if hasattr(estimator, "align") else X
    return [rows[labels == k][:max_members] for k in range(n_clusters)]


def draw_signal(ax, centroid: np.ndarray, members, ylim) -> None:
    """One panel: the ``members`` (m, n) faint, the ``centroid`` (n,) on top."""
    if members is not None and len(members):
        ax.plot(np.asarray(members).T, **MEMBER_STYLE)
    ax.plot(centroid, **CENTROID_STYLE)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlim(0, len(centroid) - 1)
    ax.tick_params(labelsize=7)
