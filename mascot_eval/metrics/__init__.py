"""Automatic metrics computed from transcripts: diversity, redundancy, echo, repetition, persona
distinctiveness and length statistics.

``METRICS`` maps a name to a :class:`~mascot_eval.metrics.base.Metric` (unit, precise definition,
what a higher value means, and the function). Plug-ins register a ``Metric`` instance under the
entry-point group ``mascot_eval.metrics``. Compute with :func:`mascot_eval.metrics.compute.compute`.
"""

from __future__ import annotations

from ..registry import Registry
from .base import UNITS, Metric, Rows

METRICS: Registry[Metric] = Registry("metric", builtins_module="mascot_eval.metrics.builtin")


def register(metric: Metric) -> Metric:
    METRICS.add(metric.name, metric)
    return metric


__all__ = ["METRICS", "Metric", "Rows", "UNITS", "register"]
