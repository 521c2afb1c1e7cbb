"""skxclust: explainable and deformation-invariant clustering, scikit-learn style, on torch."""

from ._explainable import ExplainableKMeans
from ._pipeline import explain_pipeline
from ._spatial import SpatialTransformerKMeans

__version__ = "0.1.0"

__all__ = ["ExplainableKMeans", "SpatialTransformerKMeans", "explain_pipeline", "__version__"]
