"""skxclust: explainable and deformation-invariant clustering, scikit-learn style, on torch."""

# First, before anything imports torch: idle OpenMP threads spin only briefly before they
# sleep (a no-op when the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT, or torch was
# imported first; see skxclust/_openmp.py).
from . import _openmp

_openmp.SPIN_SET_BY_SKXCLUST = _openmp.set_short_spin()

from ._explainable import ExplainableKMeans  # noqa: E402
from ._pipeline import explain_pipeline  # noqa: E402
from ._progress import config_context, get_config, set_config  # noqa: E402
from ._spatial import SpatialTransformerKMeans  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "ExplainableKMeans",
    "SpatialTransformerKMeans",
    "config_context",
    "explain_pipeline",
    "get_config",
    "set_config",
    "__version__",
]
