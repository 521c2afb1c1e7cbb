"""Image and signal shapes: how a row of ``n_features`` values is read.

The one place where the ``image_shape`` of the estimators, of :mod:`skxclust.plotting`
and of the generators of :mod:`skxclust.datasets` is resolved and validated.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["AUTO_LANDMARKS", "is_signal", "resolve_image_shape", "resolve_n_landmarks",
           "resolve_warp_shape"]

#: ``n_landmarks="auto"`` of :class:`~skxclust.SpatialTransformerKMeans`: a 4 x 4 control
#: grid for images (the former default), 8 knots along time for signals (``(1, L)``,
#: ``(L, 1)``, ``(C, 1, L)``), chosen by the model's own score on the series sets of
#: ``benchmarks/bench_timeseries.py`` (user guide, "Time series").
AUTO_LANDMARKS = {"image": 16, "signal": 64}


def _shape_entries(image_shape) -> tuple | None:
    """The entries of ``image_shape`` as a tuple: those of a tuple or list as they are
    (bools stay bools), those of any other 1-D array-like (numpy array, tensor) read
    through numpy; None for a string, bytes, a scalar or anything numpy cannot read."""
    if isinstance(image_shape, (tuple, list)):
        return tuple(image_shape)
    if isinstance(image_shape, (str, bytes)):
        return None
    try:
        array = np.asarray(image_shape)
    except (TypeError, ValueError):
        return None
    return tuple(array.tolist()) if array.ndim == 1 else None


def _positive_ints(entries: tuple) -> bool:
    """Whether every entry is a positive int (numpy ints too, bools not)."""
    # numbers.Integral declares no __ge__ for type checkers (the numeric tower is untyped)
    return all(isinstance(s, (numbers.Integral, np.integer)) and not isinstance(s, bool)
               and s >= 1 for s in entries)  # type: ignore[operator]


def resolve_image_shape(image_shape, n_features: int, *,
                        allow_none: bool = True) -> tuple[int, int]:
    """The (H, W) that rows of ``n_features`` values are reshaped to (row-major).

    The one place where image shapes are resolved and validated: the generators of
    :mod:`skxclust.datasets` call it, and the ST K-means fits, their explanations and
    :mod:`skxclust.plotting` call it through :func:`resolve_warp_shape`.

    Parameters
    ----------
    image_shape : pair of int or None
        ``(H, W)`` with ``H * W == n_features``, as a tuple, a list or a 1-D array of
        ints (not bools). None gives a square image when ``n_features`` is a perfect
        square and a ``1 x n_features`` signal otherwise.
    n_features : int
    allow_none : bool, default=True
        False where the shape is required (the generators of :mod:`skxclust.datasets`):
        None is then refused like any other value that is not a pair.

    Returns
    -------
    (int, int)

    Raises
    ------
    ValueError
        Naming ``image_shape`` and its value, when it is not a pair of positive ints (or
        None, where allowed) or does not hold ``n_features`` pixels.

    Examples
    --------
    >>> resolve_image_shape(None, 64), resolve_image_shape(None, 10)
    ((8, 8), (1, 10))
    >>> resolve_image_shape((4, 16), 64)
    (4, 16)
    >>> resolve_image_shape(None, 64, allow_none=False)
    Traceback (most recent call last):
    ...
    ValueError: image_shape=None must be a pair (H, W) of positive ints.
    """
    if image_shape is None and allow_none:
        side = math.isqrt(n_features)
        return (side, side) if side * side == n_features else (1, n_features)
    shape = _shape_entries(image_shape)
    if shape is None or len(shape) != 2 or not _positive_ints(shape):
        expected = "None or a pair" if allow_none else "a pair"
        raise ValueError(
            f"image_shape={image_shape!r} must be {expected} (H, W) of positive ints."
        )
    height, width = int(shape[0]), int(shape[1])
    if height * width != n_features:
        raise ValueError(
            f"image_shape={image_shape!r} holds {height * width} pixels but X has "
            f"n_features={n_features}; H * W must equal n_features."
        )
    return height, width


def resolve_warp_shape(image_shape, n_features: int) -> tuple[int, ...]:
    """The shape a :class:`~skxclust.SpatialTransformerKMeans` warps rows of
    ``n_features`` values as: ``(H, W)`` as :func:`resolve_image_shape` resolves it, or
    ``(C, 1, L)``, the ``C`` channels of a signal of length ``L`` (``C * L == n_features``,
    channel after channel), all warped by one warp along time.

    Raises
    ------
    ValueError
        Naming ``image_shape`` and its value: for a pair, as :func:`resolve_image_shape`
        does; for anything else that is not ``(C, 1, L)`` of positive ints.

    Examples
    --------
    >>> resolve_warp_shape((3, 1, 50), 150), resolve_warp_shape(None, 64)
    ((3, 1, 50), (8, 8))
    >>> resolve_warp_shape((3, 2, 25), 150)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: image_shape=(3, 2, 25) must be None, a pair (H, W) of positive ints, or ...
    """
    shape = _shape_entries(image_shape)
    if image_shape is None or shape is not None and len(shape) == 2:
        return resolve_image_shape(image_shape, n_features)
    if shape is None or len(shape) != 3 or not _positive_ints(shape) or shape[1] != 1:
        raise ValueError(
            f"image_shape={image_shape!r} must be None, a pair (H, W) of positive ints, or "
            "(C, 1, L): C channels of a signal of length L."
        )
    channels, length = int(shape[0]), int(shape[2])
    if channels * length != n_features:
        raise ValueError(
            f"image_shape={image_shape!r} holds {channels * length} values but X has "
            f"n_features={n_features}; C * L must equal n_features."
        )
    return channels, 1, length


def is_signal(shape: tuple[int, ...]) -> bool:
    """Whether rows of ``shape`` (as :func:`resolve_warp_shape` returns it) are warped
    along one axis: ``(1, L)``, ``(L, 1)`` or the channels ``(C, 1, L)`` of a signal.

    Examples
    --------
    >>> is_signal((1, 40)), is_signal((3, 1, 20)), is_signal((8, 8))
    (True, True, False)
    """
    return min(shape) == 1


def resolve_n_landmarks(n_landmarks, shape: tuple[int, ...]) -> int:
    """``n_landmarks`` of a warp of rows of ``shape`` (as :func:`resolve_warp_shape`
    returns it): an int as it is, "auto" as :data:`AUTO_LANDMARKS` gives it for an image
    or a signal (:func:`is_signal`).

    Examples
    --------
    >>> resolve_n_landmarks("auto", (28, 28)), resolve_n_landmarks("auto", (1, 275))
    (16, 64)
    >>> resolve_n_landmarks("auto", (6, 1, 100)), resolve_n_landmarks(36, (1, 275))
    (64, 36)
    """
    if not isinstance(n_landmarks, str):
        return int(n_landmarks)
    return AUTO_LANDMARKS["signal" if is_signal(shape) else "image"]
