"""skxclust: explainable and deformation-invariant clustering, scikit-learn style, on torch."""

from ._explainable import ExplainableKMeans
from ._pipeline import explain_pipeline

__version__ = "0.1.0"

__all__ = ["ExplainableKMeans", "explain_pipeline", "__version__"]
