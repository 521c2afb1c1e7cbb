"""skxclust: explainable and deformation-invariant clustering, scikit-learn style, on torch."""

from ._explainable import ExplainableKMeans

__version__ = "0.1.0"

__all__ = ["ExplainableKMeans", "__version__"]
