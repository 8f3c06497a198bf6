"""Prediction (upstream ``pkg/koordlet/prediction``): decaying histograms of usage and the prod reclaimable peak.

- :mod:`agent.prediction.histogram`: exponential buckets and decaying histograms, with checkpoints;
- :mod:`agent.prediction.checkpoint`: model checkpoints on disk;
- :mod:`agent.prediction.server`: the models of pods, priority classes, the node and the system, trained once a minute;
- :mod:`agent.prediction.peak`: ``prodReclaimableMetric`` from the models.
"""

from agent.prediction.histogram import DecayingHistogram, HistogramError
from agent.prediction.peak import PodView, prod_reclaimable
from agent.prediction.server import PodUsage, PredictionConfig, PredictionError, PredictServer

__all__ = [
    "DecayingHistogram",
    "HistogramError",
    "PodUsage",
    "PodView",
    "PredictServer",
    "PredictionConfig",
    "PredictionError",
    "prod_reclaimable",
]
