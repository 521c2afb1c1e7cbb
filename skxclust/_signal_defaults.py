"""ST K-means' defaults that differ between images and 1-D signals ("auto" parameters).

A 1-D signal (a ``1 x n`` or ``n x 1`` row) gets the intensity transformation per pair
(a gain and an offset of the warped centroid, :mod:`skxclust.nn.appearance`) by default;
images keep none. Chosen by the model's own unsupervised score, never by labels: on the
TRAIN splits of the development sets of ``benchmarks/bench_timeseries.py`` (ArrowHead,
GunPoint, ItalyPowerDemand, Trace; two seeds each), the Laplace log-evidence per row
(:meth:`SpatialTransformerKMeans.score` on the training rows) was higher with
``appearance="intensity"`` than without on ArrowHead (66.0 against 65.4), GunPoint (30.8
against 11.5) and Trace (139.1 against 80.7), lower on ItalyPowerDemand (-9.00 against
-8.44); the same score kept ``warp_penalty=0.5`` against 5 and 50 on three of the four.
"""

from __future__ import annotations

__all__ = ["resolve_appearance"]


def resolve_appearance(appearance: str, image_shape) -> str | None:
    """The appearance transformation of a fit: ``appearance``, with "auto" resolved by
    the resolved ``image_shape`` (H, W) ("intensity" for 1-D signals, none for images),
    and None for "none"."""
    if appearance == "auto":
        appearance = "intensity" if min(int(s) for s in image_shape) == 1 else "none"
    return None if appearance == "none" else appearance
