"""Inter-agent redundancy of groups of replies as an ``evaluate`` module (see mascot_eval.metrics.evaluate_modules)."""

from __future__ import annotations

import datasets
import evaluate

from mascot_eval.metrics.compute import compute
from mascot_eval.transcript import Transcript, Turn

_DESCRIPTION = """
Redundancy among several replies to the same prompt (e.g. the agents of one round), computed by
mascot-eval exactly as its inter-agent metrics: self-BLEU (nltk sentence BLEU-4, method1 smoothing,
epsilon 0.1, each reply against the others), mean pairwise ROUGE-L F (rouge-score tokenizer) and mean
pairwise cosine of MiniLM-L6 sentence embeddings; plus distinct-1/2 and entropy-2 over all replies.
Higher self-BLEU / ROUGE-L / cosine = more redundant; higher distinct/entropy = more diverse.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of groups; each group is a list of at least two reply strings.
    embeddings: compute the MiniLM cosine (default True; needs torch).
Returns:
    {"selfbleu": mean, "rougeL": mean, "cosine": mean, "per_group": {"selfbleu": [...], ...},
     "distinct_1": ..., "distinct_2": ..., "entropy_2": ..., "n_groups": int}
Example:
    >>> r = evaluate.load(module_path("mascot_redundancy"))
    >>> r.compute(predictions=[["I hear you.", "I hear you!", "Try a walk."]], embeddings=False)["selfbleu"]
"""

_CITATION = ""

_METRICS = {"selfbleu": "inter_agent_selfbleu", "rougeL": "inter_agent_rougeL", "cosine": "inter_agent_cosine"}


def groups_to_transcripts(groups: list[list[str]]) -> list[Transcript]:
    """One single-round dialogue per group: an empty user turn, then agent1..agentN with the replies."""
    out = []
    for i, replies in enumerate(groups):
        agents = [f"agent{k + 1}" for k in range(len(replies))]
        turns = [Turn(round=1, speaker="user", text="")] + [Turn(round=1, speaker=a, text=r) for a, r in zip(agents, replies)]
        out.append(
            Transcript(
                dialogue_id=f"group-{i}",
                task="groups",
                task_version="1",
                split="in_domain",
                domain="-",
                context_id=str(i),
                system="predictions",
                system_config_hash="-",
                persona_group="-",
                agents=agents,
                turns=turns,
            )
        )
    return out


class MascotRedundancy(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Sequence(datasets.Value("string"))}),
            reference_urls=[],
        )

    def _compute(self, predictions, embeddings: bool = True):  # type: ignore[no-untyped-def]
        groups = [list(g) for g in predictions]
        short = [i for i, g in enumerate(groups) if len(g) < 2]
        if short:
            raise ValueError(f"predictions[{short[0]}] has {len(groups[short[0]])} reply; each group needs at least two")
        keys = [k for k in _METRICS if embeddings or k != "cosine"]
        names = [_METRICS[k] for k in keys] + ["distinct_1_corpus", "distinct_2_corpus", "entropy_2_corpus"]
        df = compute(groups_to_transcripts(groups), names)
        out: dict = {"per_group": {}}
        for k in keys:
            vals = df[df["metric"] == _METRICS[k]].sort_values("dialogue_id", key=lambda s: s.str[6:].astype(int))
            per = [float(v) for v in vals["value"]]
            out["per_group"][k] = per
            out[k] = sum(per) / len(per) if per else float("nan")
        for name in ("distinct_1", "distinct_2", "entropy_2"):
            vals = df[df["metric"] == f"{name}_corpus"]["value"]
            out[name] = float(vals.iloc[0]) if len(vals) else float("nan")
        out["n_groups"] = len(groups)
        return out
