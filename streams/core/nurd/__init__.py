"""Online straggler prediction (SPEC 4): Nurd on River, its variants and baselines, one verb for all."""

from streams.core.nurd.baselines import HadoopJob, OutlierJob, SpeculationJob
from streams.core.nurd.methods import METHODS, Options, Predictor, make_method, uses_threshold
from streams.core.nurd.nurd import NurdJob
from streams.core.nurd.threshold import JobP90, Oracle, Threshold

__all__ = [
    "METHODS",
    "HadoopJob",
    "JobP90",
    "NurdJob",
    "Options",
    "Oracle",
    "OutlierJob",
    "Predictor",
    "SpeculationJob",
    "Threshold",
    "make_method",
    "uses_threshold",
]
