"""The run summary (``summary.json``, schema ``mascot-summary/2``): every number a run reports.

The statistics stage writes it from the run's artifacts; the report and the leaderboard only read
it (plus the transcripts, for the browser). Each estimate carries its n (contexts), n_obs and 95%
cluster-bootstrap interval. Sections:

estimates / task_estimates   per label x split (x task) x measure x judge: mean, lo, hi, n, n_obs, std
comparisons                   paired tests between systems on shared contexts (stats/compare.py)
corpus_metrics                corpus-level metric values (one number per system and task: no interval)
counts                        dialogues, scored / unscored / failed judge rows per judge and reason
agreement                     Krippendorff's alpha and pairwise Spearman between judges, with intervals
judge_diagnostics             per judge: calls, parse failures, position and length bias, cost
threeway                      three-way comparisons: win/tie/loss, Bradley-Terry, position bias, verdicts
rounds / round_changes        per-round series of persona and redundancy metrics, first->last changes
decisions                     the Director's (and MultiAgentESC's) decision statistics per system
training                      the training log of the checkpoint a run was generated from
figures                       counterparts of the paper's figures (ablation, MBTI heatmap, sensitivity)
inputs                        content hashes of the artifacts it was computed from (reruns skip when equal)
"""

from __future__ import annotations

from typing import Any, Literal, Final

from pydantic import Field

from .base import Record

SCHEMA: Final = "mascot-summary/2"


class Estimate(Record):
    label: str
    split: str
    task: str | None = None  # set in task_estimates
    measure: str
    judge: str = "all"
    mean: float | None
    lo: float | None
    hi: float | None
    n: int  # clusters (contexts)
    n_obs: int
    std: float | None


class PairedComparison(Record):
    split: str
    measure: str
    a: str
    b: str
    n_pairs: int
    mean_a: float | None
    mean_b: float | None
    mean_diff: float | None
    diff_lo: float | None
    diff_hi: float | None
    wilcoxon_stat: float | None
    wilcoxon_p: float | None
    wilcoxon_method: str
    perm_p: float | None
    perm_method: str
    rank_biserial: float | None
    cohen_dz: float | None
    test: str
    p: float | None
    p_holm: float | None


class CorpusMetric(Record):
    label: str
    split: str
    task: str
    metric: str
    value: float | None


class DialogueCount(Record):
    label: str
    split: str
    task: str
    dialogues: int


class Counts(Record):
    dialogues: list[DialogueCount] = Field(default_factory=list)
    judgments_scored: dict[str, int] = Field(default_factory=dict)  # judge -> scored rows
    judgments_unscored: dict[str, dict[str, int]] = Field(default_factory=dict)  # judge -> reason -> rows
    judgments_failed: dict[str, int] = Field(default_factory=dict)  # judge -> rows of failed calls


class AgreementRow(Record):
    level: str
    criterion: str
    statistic: str  # alpha_interval, alpha_ordinal, spearman
    judges: str
    value: float | None
    lo: float | None
    hi: float | None
    n_items: int
    n_judges: int


class RoundPoint(Record):
    label: str
    metric: str
    agent: str | None = None  # None = all agents
    round: int
    mean: float | None
    lo: float | None
    hi: float | None
    n: int


class RoundChange(Record):
    label: str
    metric: str
    first_round: int
    last_round: int
    mean_first: float | None
    mean_last: float | None
    change: float | None
    change_lo: float | None
    change_hi: float | None
    n: int


class Bootstrap(Record):
    n_boot: int
    seed: int
    level: float = 0.95
    cluster: str = "task:context_id"


class Summary(Record):
    """Every number a run reports, with n, intervals and the hashes of its inputs."""

    schema_: Literal["mascot-summary/2"] = Field(default=SCHEMA, alias="schema")
    generated: str
    run_id: str | None = None
    runs: list[str]
    labels: dict[str, str] = Field(default_factory=dict)  # "<run_id>/<system>" -> label shown in tables
    judges: list[str] = Field(default_factory=list)
    reference: str | None = None
    test: str
    bootstrap: Bootstrap
    estimates: list[Estimate] = Field(default_factory=list)
    task_estimates: list[Estimate] = Field(default_factory=list)
    comparisons: list[PairedComparison] = Field(default_factory=list)
    corpus_metrics: list[CorpusMetric] = Field(default_factory=list)
    counts: Counts = Field(default_factory=Counts)
    agreement: list[AgreementRow] = Field(default_factory=list)
    judge_diagnostics: list[dict[str, Any]] = Field(default_factory=list)
    threeway: dict[str, Any] | None = None
    rounds: list[RoundPoint] = Field(default_factory=list)
    round_changes: list[RoundChange] = Field(default_factory=list)
    decisions: list[dict[str, Any]] = Field(default_factory=list)
    training: list[dict[str, Any]] = Field(default_factory=list)
    figures: dict[str, Any] = Field(default_factory=dict)
    # `judges validate` output folders: the evaluators table (evaluators.json: sets, per judge x set, per
    # criterion with intervals, steering probes) as written beside the rows
    validation: dict[str, Any] | None = None
    manifest: dict[str, Any] = Field(default_factory=dict)  # status, times, cost and settings of each run
    inputs: dict[str, str] = Field(default_factory=dict)
