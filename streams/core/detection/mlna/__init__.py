"""ML-NA (SPEC 6): cumulative node features per sub-period, k-means with the Calinski-Harabasz choice of k,
automatic labelling of the weak cluster, and classifiers that predict next period's weak nodes."""

from streams.core.detection.mlna.detector import MlnaDetector

__all__ = ["MlnaDetector"]
