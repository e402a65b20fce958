"""The metric row (``metrics.parquet`` / ``metrics.csv``, long format, schema ``mascot-metric/1``).

One value of one automatic metric. ``unit`` says what it describes: an agent ``turn``, a ``round``,
an ``agent`` in a dialogue, a ``dialogue``, or the ``corpus`` of one system on one task (corpus rows
have no ``dialogue_id``/``pair_key``). The table's columns are exactly :data:`COLUMNS`.
"""

from __future__ import annotations

from typing import Literal, Final

from .base import Record

SCHEMA: Final = "mascot-metric/1"
Unit = Literal["turn", "round", "agent", "dialogue", "corpus"]


class MetricRow(Record):
    """One value of one automatic metric (a row of the long metrics table)."""

    dialogue_id: str | None = None
    pair_key: str | None = None
    system: str
    task: str
    split: str
    domain: str
    agent: str | None = None
    round: int | None = None
    metric: str
    value: float
    unit: Unit


COLUMNS = list(MetricRow.model_fields)
