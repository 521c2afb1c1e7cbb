"""Centroids of 1-D signals drawn as curves (for :func:`skxclust.plotting.plot_centroids`).

A centroid of ``n`` samples along one axis reads as a curve, not as a ``1 x n`` heat
strip; the members of its cluster, brought into its frame (``align`` of ST K-means,
the rows themselves for other estimators), are drawn faint behind it. The channels of a
multivariate signal (``image_shape=(C, 1, L)``) are drawn one below the other.
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


def draw_signal(ax, centroid: np.ndarray, members, ylim, channels: int = 1) -> None:
    """One panel: the ``members`` (m, n) faint, the ``centroid`` (n,) on top; with
    ``channels`` > 1 (rows of ``channels`` series of ``n / channels`` samples), the
    channels are drawn one below the other, each on the scale ``ylim`` (or its own
    data's), channel 0 on top."""
    length = len(centroid) // channels
    members = None if members is None or not len(members) else np.asarray(members)
    if ylim is None:
        values = centroid if members is None else np.concatenate([centroid, members.ravel()])
        ylim = (float(values.min()), float(values.max())) if channels > 1 else None
    step = 1.05 * (ylim[1] - ylim[0]) if channels > 1 and ylim[1] > ylim[0] else 1.0
    offsets = -step * np.arange(channels)[:, None]  # (C, 1): channel c shifted down
    if members is not None:
        curves = members.reshape(-1, channels, length) + offsets
        ax.plot(curves.reshape(-1, length).T, **MEMBER_STYLE)
    ax.plot((centroid.reshape(channels, length) + offsets).T, **CENTROID_STYLE)
    if ylim is not None:
        ax.set_ylim(ylim[0] + offsets[-1, 0], ylim[1])
    if channels > 1:
        ax.set_yticks(offsets[:, 0], [f"ch {c}" for c in range(channels)])
    ax.set_xlim(0, length - 1)
    ax.tick_params(labelsize=7)
