"""Shape checks of the public nn functions: one line per argument, a clear message.

Only ``tensor.shape`` is read (no pass over the data, no device synchronisation), so the
checks are cheap enough for the per-chunk calls of the Lloyd and explanation loops. The
message names the expected shape and the actual one, e.g. ``centers must have shape (K, D)
with D == x.shape[1] == 64, got (3, 10)``.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["check_pair_args", "check_shape", "check_warp_args"]


@lru_cache(maxsize=256)
def _parse(pattern: str) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """``"(N, K)"`` -> ``(("N", "K"), None)``; ``"(B, ...)"`` -> ``(("B",), ())``.

    One ``...`` stands for any number of dimensions: the labels before it and those after
    it (None without ``...``).
    """
    labels = tuple(s.strip() for s in pattern.strip().strip("()").split(",") if s.strip())
    if "..." not in labels:
        return labels, None
    cut = labels.index("...")
    return labels[:cut], labels[cut + 1:]


def _matches(shape: tuple, head: tuple, tail: tuple | None, sizes: dict) -> bool:
    if tail is None:
        if len(shape) != len(head):
            return False
        pairs = zip(head, shape)
    else:
        if len(shape) < len(head) + len(tail):
            return False
        pairs = zip(head + tail, shape[:len(head)] + shape[len(shape) - len(tail):])
    for label, size in pairs:
        if label.isdigit():  # a literal size, e.g. "(N, 1)"
            if int(label) != size:
                return False
            continue
        want = sizes.get(label)
        if want is not None and (want[0] if isinstance(want, tuple) else want) != size:
            return False
    return True


def check_shape(tensor, name: str, *patterns: str, **sizes) -> None:
    """Raise ValueError unless ``tensor.shape`` matches one of ``patterns``.

    Parameters
    ----------
    tensor : Tensor
        Anything with a ``shape`` (dense or sparse tensor).
    name : str
        Name of the argument, for the message.
    *patterns : str
        Accepted shapes, e.g. ``"(K, D)"`` or ``"(B, K, D)"``; labels without an entry in
        ``sizes`` may take any size, and one ``...`` any number of dimensions.
    **sizes : int or (int, str)
        Required size of a label, optionally with where it comes from:
        ``D=(x.shape[1], "x.shape[1]")`` reads ``D == x.shape[1] == 64`` in the message.

    Raises
    ------
    ValueError
        ``"{name} must have shape {patterns} with {sizes}, got {shape}"``.
    """
    shape = tuple(tensor.shape)
    for pattern in patterns:
        head, tail = _parse(pattern)
        if _matches(shape, head, tail, sizes):
            return
    used = {label for p in patterns for part in _parse(p) for label in part or ()}
    conditions = []
    for label, want in sizes.items():
        if label not in used or want is None:
            continue
        if isinstance(want, tuple):
            conditions.append(f"{label} == {want[1]} == {want[0]}")
        else:
            conditions.append(f"{label} == {want}")
    where = f" with {' and '.join(conditions)}" if conditions else ""
    raise ValueError(f"{name} must have shape {' or '.join(patterns)}{where}, got {shape}.")


def check_warp_args(model, images=None, params=None, *, images_name="images",
                     images_dims="(B, P)", params_dims="(B, n_basis, D)", **sizes) -> None:
    """Shapes of images (``P == H * W``) and warp parameters against a warp ``model``
    (anything with ``shape``, ``n_basis`` and ``ndim``, e.g. a WarpModel)."""
    pixels = (model.shape[0] * model.shape[1], f"H * W of model.shape {model.shape}")
    if images is not None:
        check_shape(images, images_name, images_dims, P=pixels, **sizes)
    if params is not None:
        check_shape(params, "params", params_dims, n_basis=(model.n_basis, "model.n_basis"),
                    D=(model.ndim, "model.ndim"), **sizes)


def check_pair_args(model, samples, centroids, penalty, centroids_name="centroids",
                     centroids_dims="(K, P)") -> None:
    """Shapes of a warp fit's samples (B, P), the images warped onto them (K, P) and a
    per-sample penalty (a number or (B,)), for ``model``."""
    check_warp_args(model, samples, images_name="samples")
    check_warp_args(model, centroids, images_name=centroids_name, images_dims=centroids_dims,
                     B=(samples.shape[0], "samples.shape[0]"))
    if hasattr(penalty, "shape"):
        check_shape(penalty, "penalty", "()", "(B,)", B=(samples.shape[0], "samples.shape[0]"))
