"""Figures for clusterings and their explanations (matplotlib: ``pip install skxclust[plot]``).

Every function draws into a new or given matplotlib Figure and returns it; none calls
``show()``. Images are given as flat rows of ``n_features`` values plus an
``image_shape`` ``(H, W)``; when ``image_shape`` is None it is taken from the estimator
(``image_shape_`` / ``image_shape``) or inferred for square images, and rows that are not
images are drawn as 1-D signals; ``(C, 1, L)`` is a signal of ``C`` channels (curves one
below the other in :func:`plot_centroids`, a ``C x L`` map elsewhere).

Colour conventions, shared by the gallery and ``examples/demo.py``: images (samples,
centroids) in ``"gray_r"``, dark ink on white; relevance maps in the diverging ``"bwr"``
centred at zero with symmetric limits ``[-m, m]``: red speaks for the explained cluster,
blue against it, white is neutral. ``shared_scale=True`` gives all panels of a call one
scale and, with ``colorbar``, one labelled colorbar.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._plot_signals import cluster_members, draw_signal
from ._shapes import is_signal, resolve_warp_shape

__all__ = ["plot_alignment", "plot_centroids", "plot_pixel_flipping", "plot_relevance"]

_INSTALL_HINT = (
    "skxclust.plotting needs matplotlib, which is an optional dependency; install it with "
    "`pip install skxclust[plot]` (or `pip install matplotlib`)."
)


# -- helpers shared by every plotting function -------------------------------------------
def _pyplot():
    """Import :mod:`matplotlib.pyplot`, with an install hint when it is missing."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return plt


def _image_shape(
    n_features: int, image_shape: Sequence[int] | None, estimator: Any = None
) -> tuple[int, ...] | None:
    """The (H, W) to draw rows of ``n_features`` values as, or None for 1-D signals
    (``(C, 1, L)`` for the channels of a signal: a ``C x L`` image, or ``C`` curves).

    ``image_shape`` None takes the estimator's ``image_shape_`` / ``image_shape``; the
    shape is resolved by :func:`skxclust._shapes.resolve_warp_shape`, and a shape
    inferred for data that are not square images means 1-D signals (drawn as strips).
    """
    if image_shape is None and estimator is not None:
        image_shape = getattr(estimator, "image_shape_", None)
        if image_shape is None:
            image_shape = getattr(estimator, "image_shape", None)
    shape = resolve_warp_shape(image_shape, n_features)
    if image_shape is None and shape[0] == 1:
        return None
    return shape


def _as_rows(values, name: str) -> np.ndarray:
    """A finite 2-D float array (one row per sample) from a row or a 2-D array."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(
            f"{name} must be a non-empty array of shape (n_samples, n_features) or "
            f"(n_features,); got shape {np.shape(values)}."
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinity.")
    return arr


def _panel_axes(n_panels: int, n_cols: int, *, fig=None, axes=None, figsize=None,
                panel_size: float = 1.6):
    """Return ``(fig, axes)`` with exactly ``n_panels`` axes in a grid of ``n_cols``.

    ``axes`` (at least ``n_panels`` of them) are used as given; otherwise subplots are
    added to ``fig`` (a new figure when None). Grid cells beyond ``n_panels`` are not
    created, so ``len(fig.axes)`` counts only drawn panels (plus any colorbars).
    """
    if axes is not None:
        axes = list(np.ravel(axes))
        if len(axes) < n_panels:
            raise ValueError(f"axes holds {len(axes)} Axes, {n_panels} are needed.")
        return axes[0].figure, axes[:n_panels]
    n_rows = math.ceil(n_panels / n_cols)
    if fig is None:
        if figsize is None:
            figsize = (panel_size * n_cols + 0.4, panel_size * n_rows + 0.4)
        fig = _pyplot().figure(figsize=figsize, layout="constrained")
    grid = fig.add_gridspec(n_rows, n_cols)
    return fig, [fig.add_subplot(grid[i // n_cols, i % n_cols]) for i in range(n_panels)]


def _as_image(row: np.ndarray, shape) -> np.ndarray:
    """A flat row as a 2-D image: (H, W), or (C, L) for the channels of a signal."""
    return row.reshape(shape[0], shape[-1])


def _draw_row(ax, row: np.ndarray, shape, *, cmap, vmin=None, vmax=None):
    """Draw one flat row as an image (``shape`` given) or as a heat strip (1-D)."""
    if shape is not None:
        mappable = ax.imshow(_as_image(row, shape), cmap=cmap, vmin=vmin, vmax=vmax,
                             interpolation="nearest", aspect="auto" if len(shape) == 3
                             else None)
    else:
        mappable = ax.imshow(row[None, :], cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                             interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    return mappable


def _symmetric_limit(values: np.ndarray) -> float:
    """``max |values|``, or 1 for an all-zero map (so that the limits stay valid)."""
    m = float(np.max(np.abs(values)))
    return m if m > 0 else 1.0


RELEVANCE_LABEL = "relevance\nred for, blue against"


def _shared_colorbar(fig, mappable, panels, label: str):
    """One colorbar for all ``panels`` (they share ``mappable``'s scale), labelled."""
    bar = fig.colorbar(mappable, ax=list(panels), shrink=0.9, fraction=0.03, pad=0.01)
    bar.set_label(label, fontsize=8)
    bar.ax.tick_params(labelsize=7)
    return bar


# -- public functions --------------------------------------------------------------------
def plot_centroids(
    estimator: Any,
    image_shape: Sequence[int] | None = None,
    *,
    n_cols: int | None = None,
    cmap: str = "gray_r",
    titles: bool | Sequence[str] = True,
    shared_scale: bool = True,
    colorbar: bool | str = False,
    vmin: float | None = None,
    vmax: float | None = None,
    fig=None,
    axes=None,
    figsize: tuple[float, float] | None = None,
    X=None,
    max_members: int = 20,
):
    """Draw every cluster centroid, one panel per cluster (images, or curves for signals).

    Parameters
    ----------
    estimator : fitted estimator with ``cluster_centers_``, or array-like of shape \
            (n_clusters, n_features)
        The centroids to draw.
    image_shape : (height, width), default=None
        Shape of one image. None takes the estimator's ``image_shape_``/``image_shape``
        or a square shape when ``n_features`` is a perfect square; otherwise, and for a
        ``1 x n`` or ``n x 1`` shape, each centroid is a 1-D signal drawn as a curve
        (``(C, 1, L)``: ``C`` curves, the channels, one below the other).
    n_cols : int, default=None
        Panels per row; default ``min(n_clusters, 10)``.
    cmap : str, default="gray_r"
        Colormap of the centroid images (dark ink on white).
    titles : bool or sequence of str, default=True
        True titles each panel "cluster k" (with its size, "n=...", when the estimator has
        ``labels_``); a sequence gives one title per cluster; False draws none.
    shared_scale : bool, default=True
        One colour scale, from the smallest to the largest value of all centroids, so
        that equal shades mean equal values; False scales each panel to its own range.
    colorbar : bool or str, default=False
        Add one colorbar for all panels (with ``shared_scale``); a string is its label.
    vmin, vmax : float, default=None
        Ends of the shared colour scale instead of the centroids' extremes (e.g. the
        range of the data, so that several figures or rows share one scale).
    fig : matplotlib Figure, default=None
        Figure to add the panels to; a new one when None.
    axes : sequence of matplotlib Axes, default=None
        At least ``n_clusters`` Axes to draw into (then ``fig`` is ignored).
    figsize : (float, float), default=None
        Size of a new figure.
    X : array-like of shape (n_samples, n_features), default=None
        Signals only: rows whose members of each cluster (``predict``) are drawn faint
        behind its centroid, brought into its frame by the estimator's ``align`` when it
        has one (ST K-means), as they are otherwise.
    max_members : int, default=20
        At most this many members drawn per cluster.

    Returns
    -------
    matplotlib.figure.Figure
        With one Axes per cluster.

    Examples
    --------
    >>> import numpy as np
    >>> from skxclust.plotting import plot_centroids
    >>> fig = plot_centroids(np.random.default_rng(0).random((3, 16)))
    >>> len(fig.axes)
    3
    >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    centers = getattr(estimator, "cluster_centers_", estimator)
    centers = _as_rows(centers, "cluster_centers_")
    n_clusters, n_features = centers.shape
    shape = _image_shape(n_features, image_shape, estimator)
    n_cols = min(n_clusters, 10) if n_cols is None else int(n_cols)
    if n_cols < 1:
        raise ValueError(f"n_cols must be >= 1, got {n_cols}.")
    if not isinstance(titles, bool):
        titles = list(titles)
        if len(titles) != n_clusters:
            raise ValueError(f"titles has {len(titles)} entries for {n_clusters} clusters.")
    signal = shape is None or is_signal(shape)
    fig, panels = _panel_axes(n_clusters, n_cols, fig=fig, axes=axes, figsize=figsize,
                              panel_size=2.2 if signal else 1.6)
    labels = getattr(estimator, "labels_", None)
    sizes = np.bincount(np.asarray(labels), minlength=n_clusters) if labels is not None else None
    lo: float | None = None
    hi: float | None = None
    if shared_scale:
        lo, hi = float(centers.min()), float(centers.max())
        if X is not None and signal:  # room for the members
            lo, hi = min(lo, float(np.min(X))), max(hi, float(np.max(X)))
        lo, hi = (lo if vmin is None else float(vmin)), (hi if vmax is None else float(vmax))
        if hi <= lo:
            hi = lo + 1.0
    members = cluster_members(estimator, X if signal else None, n_clusters, max_members)
    for k, ax in enumerate(panels):
        if signal:
            draw_signal(ax, centers[k], members[k], (lo, hi) if shared_scale else None,
                        channels=shape[0] if shape is not None and len(shape) == 3 else 1)
        else:
            mappable = _draw_row(ax, centers[k], shape, cmap=cmap, vmin=lo, vmax=hi)
        if titles is True:
            ax.set_title(f"cluster {k}" if sizes is None else f"cluster {k}\nn={sizes[k]}",
                         fontsize=9)
        elif titles:
            ax.set_title(titles[k], fontsize=9)
    if colorbar and shared_scale and not signal:
        _shared_colorbar(fig, mappable, panels,
                         colorbar if isinstance(colorbar, str) else "centroid value")
    return fig


def plot_relevance(
    X,
    R,
    image_shape: Sequence[int] | None = None,
    *,
    show_sample: bool = True,
    overlay: bool = False,
    n_cols: int | None = None,
    shared_scale: bool = False,
    cmap: str = "bwr",
    sample_cmap: str = "gray_r",
    titles: Sequence[str] | None = None,
    colorbar: bool | str = True,
    fig=None,
    axes=None,
    figsize: tuple[float, float] | None = None,
):
    """Draw relevance maps (e.g. from ``ExplainableKMeans.explain``) next to their samples.

    Each sample gets its own panel (when ``show_sample``) followed by its relevance in a diverging
    colormap centred at zero with symmetric limits ``[-m, m]``, ``m = max |R|`` of that
    sample (or of all samples with ``shared_scale``).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features) or (n_features,)
        The explained samples.
    R : array-like of the same shape as X
        Their relevance.
    image_shape : (height, width), default=None
        Shape of one image; None infers a square shape, otherwise rows are drawn as 1-D
        signals (the sample as a line over its relevance strip); ``(C, 1, L)``: the
        channels of a signal, drawn as a ``C x L`` map.
    show_sample : bool, default=True
        Add a panel with the sample left of each relevance map.
    overlay : bool, default=False
        Draw the sample's outline (a contour at half its range) over the relevance map.
        1-D signals always show the sample as a line over the relevance.
    n_cols : int, default=None
        Samples per row of the figure; default ``min(n_samples, 4)``.
    shared_scale : bool, default=False
        Use one colour scale for all samples (compare magnitudes across samples) instead
        of one per sample (see the pattern of each).
    cmap : str, default="bwr"
        Diverging colormap of the relevance.
    sample_cmap : str, default="gray_r"
        Colormap of the sample panels (dark ink on white).
    titles : sequence of str, default=None
        One title per sample, put over its first panel (the sample when ``show_sample``).
    colorbar : bool or str, default=True
        Add a colorbar next to every relevance map (each is an extra Axes of the figure);
        with ``shared_scale`` one colorbar for all of them. A string labels the
        colorbar(s); True labels them "relevance, red for, blue against" (the cluster).
    fig : matplotlib Figure, default=None
        Figure to add the panels to; a new one when None.
    axes : sequence of matplotlib Axes, default=None
        Panels to draw into, in order (``2 * n_samples`` with ``show_sample``, else
        ``n_samples``); then ``fig`` and ``n_cols`` are ignored.
    figsize : (float, float), default=None
        Size of a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        Panels in order (sample, relevance, for each sample), then the colorbars.

    Examples
    --------
    >>> import numpy as np
    >>> from skxclust.plotting import plot_relevance
    >>> X = np.random.default_rng(0).random((2, 16))
    >>> fig = plot_relevance(X, X - 0.5, colorbar=False)
    >>> len(fig.axes)
    4
    >>> vmin, vmax = fig.axes[1].images[0].get_clim()
    >>> bool(vmin == -vmax)
    True
    >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    X = _as_rows(X, "X")
    R = _as_rows(R, "R")
    if X.shape != R.shape:
        raise ValueError(f"X and R must have the same shape, got {X.shape} and {R.shape}.")
    n_samples, n_features = X.shape
    shape = _image_shape(n_features, image_shape)
    if titles is not None:
        titles = list(titles)
        if len(titles) != n_samples:
            raise ValueError(f"titles has {len(titles)} entries for {n_samples} samples.")
    per_sample = 2 if show_sample else 1
    n_cols = min(n_samples, 4) if n_cols is None else int(n_cols)
    if n_cols < 1:
        raise ValueError(f"n_cols must be >= 1, got {n_cols}.")
    fig, panels = _panel_axes(n_samples * per_sample, n_cols * per_sample, fig=fig, axes=axes,
                              figsize=figsize, panel_size=2.0)
    shared = _symmetric_limit(R) if shared_scale else None
    label = colorbar if isinstance(colorbar, str) else RELEVANCE_LABEL
    for i in range(n_samples):
        if show_sample:
            _draw_row(panels[per_sample * i], X[i], shape, cmap=sample_cmap)
        ax = panels[per_sample * i + per_sample - 1]
        m = shared if shared is not None else _symmetric_limit(R[i])
        mappable = _draw_row(ax, R[i], shape, cmap=cmap, vmin=-m, vmax=m)
        if shape is None:
            lo, hi = float(X[i].min()), float(X[i].max())
            hi = hi if hi > lo else lo + 1.0
            mappable.set_extent((-0.5, n_features - 0.5, lo, hi))
            ax.plot(np.arange(n_features), X[i], color="k", linewidth=1.0)
            ax.set_ylim(lo, hi)
        elif overlay:
            img = _as_image(X[i], shape)
            lo, hi = float(img.min()), float(img.max())
            if hi > lo:
                ax.contour(img, levels=[(lo + hi) / 2], colors="k", linewidths=0.8)
        if titles is not None:
            panels[per_sample * i].set_title(titles[i], fontsize=9, loc="left")
        if colorbar and shared is None:
            fig.colorbar(mappable, ax=ax, shrink=0.8).set_label(label, fontsize=7)
    if colorbar and shared is not None:
        _shared_colorbar(fig, mappable, panels[per_sample - 1::per_sample], label)
    return fig


def plot_pixel_flipping(results, ax=None, *, figsize=None):
    """Pixel-flipping curves: cluster evidence left as the most relevant features go.

    Each curve is the mean normalised evidence ``f_c(x_perturbed) / f_c(x)`` after
    removing a growing fraction of the features, most relevant first (see
    ``benchmarks/bench_faithfulness.py``); a curve that falls faster (a smaller area)
    means a more faithful ordering. The legend gives each method's area; a method has
    the same colour in every panel.

    Parameters
    ----------
    results : sequence of dict, or dict with a ``"results"`` key
        Records with keys ``"method"`` and ``"curve"`` (values at equally spaced
        fractions removed from 0 to 1), optionally ``"area"``, ``"dataset"``, ``"model"``
        and ``"fraction_removed"``. The JSON written by the benchmark is accepted as is.
    ax : matplotlib Axes, default=None
        Draw every curve into this Axes (labels then name dataset and model when there are
        several). None: a new Figure with one panel per (dataset, model).
    figsize : (float, float), default=None
        Size of the new Figure; ignored when ``ax`` is given.

    Returns
    -------
    matplotlib.figure.Figure
        The Figure drawn into (``ax.figure`` when ``ax`` is given).

    Raises
    ------
    ValueError
        If ``results`` is empty or a record lacks ``"method"`` or ``"curve"``.
    """
    plt = _pyplot()
    records = results.get("results") if isinstance(results, dict) else results
    records = list(records) if records is not None else []
    if not records:
        raise ValueError("results must hold at least one record with 'method' and 'curve'.")
    groups: dict = {}
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or "method" not in rec or "curve" not in rec:
            raise ValueError(f"record {i} of results needs the keys 'method' and 'curve'.")
        key = (rec.get("dataset"), rec.get("model"))
        groups.setdefault(key, []).append(rec)

    def _name(key):
        return " / ".join(str(k) for k in key if k is not None)

    if ax is None:
        n_cols = min(len(groups), 2)
        n_rows = math.ceil(len(groups) / n_cols)
        fig = plt.figure(figsize=figsize or (5.0 * n_cols, 3.6 * n_rows), layout="constrained")
        axes = [fig.add_subplot(n_rows, n_cols, i + 1) for i in range(len(groups))]
        targets = list(zip(groups, axes))
    else:
        fig = ax.figure
        targets = [(key, ax) for key in groups]
    # one colour per method in every panel (drawn into one given Axes: matplotlib's cycle)
    methods = list(dict.fromkeys(rec["method"] for rec in records))
    for key, target_ax in targets:
        prefix = f"{_name(key)}: " if ax is not None and len(groups) > 1 else ""
        for rec in groups[key]:
            curve = np.asarray(rec["curve"], dtype=float)
            frac = np.asarray(rec.get("fraction_removed", np.linspace(0, 1, curve.size)))
            label = f"{prefix}{rec['method']}"
            if rec.get("area") is not None:
                label += f" ({float(rec['area']):.3f})"
            style = "--" if rec["method"] == "random" else "-"
            color = None if ax is not None else f"C{methods.index(rec['method']) % 10}"
            target_ax.plot(frac, curve, style, label=label, linewidth=1.5, color=color)
        target_ax.axhline(0.0, color="0.6", linewidth=0.8)
        target_ax.set_xlabel("fraction of features removed")
        target_ax.set_ylabel("f_c(x perturbed) / f_c(x)")
        if ax is None and _name(key):
            target_ax.set_title(_name(key), fontsize=10)
        target_ax.legend(fontsize=8, title="method (area)", title_fontsize=8)
    return fig


def plot_alignment(estimator, X, image_shape=None, *, cmap="gray_r", figsize=None):
    """Show each sample, the sample aligned into its centroid's frame, and the centroid.

    Parameters
    ----------
    estimator : fitted SpatialTransformerKMeans
        Anything with ``predict``, ``align`` and ``cluster_centers_``.
    X : array-like of shape (n_samples, n_features)
        A few samples (one row of three panels each).
    image_shape : (H, W), optional
        Defaults to the estimator's ``image_shape_``; 1-D signals are drawn as strips,
        ``(C, 1, L)`` as ``C x L`` maps.
    cmap : str, default="gray_r"
    figsize : (float, float), optional

    Returns
    -------
    matplotlib.figure.Figure
        ``3 * n_samples`` axes, titled "sample", "aligned", "centroid" on the first row.
    """
    rows = _as_rows(X, "X")
    for name in ("predict", "align", "cluster_centers_"):
        if not hasattr(estimator, name):
            raise TypeError(f"plot_alignment needs a fitted estimator with {name!r} "
                            f"(e.g. SpatialTransformerKMeans); got {type(estimator).__name__}.")
    shape = _image_shape(rows.shape[1], image_shape, estimator)
    labels = estimator.predict(rows)
    aligned = np.asarray(estimator.align(rows), dtype=np.float64)
    centers = np.asarray(estimator.cluster_centers_, dtype=np.float64)
    fig, axes = _panel_axes(3 * len(rows), 3, figsize=figsize)
    for i, label in enumerate(labels):
        panels = (rows[i], aligned[i], centers[label])
        for j, (ax, img) in enumerate(zip(axes[3 * i: 3 * i + 3], panels)):
            _draw_row(ax, img, shape, cmap=cmap)
            if i == 0:
                ax.set_title(("sample", "aligned", f"centroid {label}")[j], fontsize=8)
    return fig
