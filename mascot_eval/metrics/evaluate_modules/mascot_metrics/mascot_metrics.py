"""mascot-eval's automatic dialogue metrics as an ``evaluate`` module (see mascot_eval.metrics.evaluate_modules)."""

from __future__ import annotations

import json

import datasets
import evaluate

from mascot_eval.metrics import METRICS
from mascot_eval.metrics.compute import compute
from mascot_eval.metrics.table import system_means
from mascot_eval.transcript import Transcript

_DESCRIPTION = """
Automatic metrics of multi-agent dialogues from mascot-eval: lexical diversity (distinct-n, n-gram
entropy), inter-agent redundancy within a round (self-BLEU, ROUGE-L, MiniLM cosine), echo and
sycophancy, self-repetition, persona distinctiveness and length statistics. The config name selects
one metric (see `mascot-eval metrics --list`); "default" computes all of them.
"""

_KWARGS_DESCRIPTION = """
Args:
    transcripts: list of transcripts in the mascot-transcript/1 format, as JSON strings (or dicts).
    metrics: optional list of metric names (overrides the config name).
    return_rows: if True, also return the long table (one dict per metric value) under "rows".
Returns:
    {metric name: mean over dialogues (corpus metrics: over system x task groups), ..., "n_dialogues": int}.
    A metric without any value (e.g. no round with two agents) is missing from the result.
Example:
    >>> m = evaluate.load(module_path("mascot_metrics"), "distinct_2")
    >>> m.compute(transcripts=[json.dumps(t.to_dict()) for t in transcripts])
    {'distinct_2': 0.83, 'n_dialogues': 12}
"""

_CITATION = """
@misc{mascot_eval,
  title = {mascot-eval: evaluation harness for multi-agent socio-collaborative companions},
  note = {Metric definitions: `mascot-eval metrics --list`}
}
"""


class MascotMetrics(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"transcripts": datasets.Value("string")}),
            reference_urls=[],
        )

    def _names(self, metrics) -> list[str] | None:  # type: ignore[no-untyped-def]
        if metrics is not None:
            return [metrics] if isinstance(metrics, str) else list(metrics)
        if self.config_name and self.config_name != "default":
            METRICS.get(self.config_name)  # unknown names raise with a did-you-mean
            return [self.config_name]
        return None

    def add_batch(self, *, transcripts=None, **kwargs):  # type: ignore[no-untyped-def]
        """Add transcripts (JSON strings or dicts) to the metric's buffer."""
        if transcripts is not None:
            transcripts = [t if isinstance(t, str) else json.dumps(t) for t in transcripts]
        return super().add_batch(transcripts=transcripts, **kwargs)

    def compute(self, *, transcripts=None, **kwargs):  # type: ignore[no-untyped-def]
        """Compute the metrics; transcripts may be JSON strings or dicts."""
        if transcripts is not None:
            transcripts = [t if isinstance(t, str) else json.dumps(t) for t in transcripts]
        return super().compute(transcripts=transcripts, **kwargs)

    def _compute(self, transcripts, metrics=None, return_rows: bool = False):  # type: ignore[no-untyped-def]
        parsed = [Transcript.from_dict(json.loads(t), where=f"transcripts[{i}]") for i, t in enumerate(transcripts)]
        df = compute(parsed, self._names(metrics))
        means = system_means(df.assign(system="all"))
        out: dict = {name: float(means.loc[name, "all"]) for name in means.index} if not means.empty else {}
        out["n_dialogues"] = len(parsed)
        if return_rows:
            rows = df.astype(object).where(df.notna(), None)
            out["rows"] = rows.to_dict("records")
        return out
