"""summary.json: every number a run reports (schema ``mascot-summary/2``, :mod:`mascot_eval.records.summary`).

The statistics stage reads the run's artifacts (transcripts, judgments, comparisons, metrics, the
manifest) and computes everything the report and the leaderboard show: estimates with n and 95%
cluster-bootstrap intervals, paired tests, judge agreement and diagnostics, three-way results,
per-round drift and redundancy, decision statistics and the training log of the checkpoint used.
The report only renders this file (plus the transcripts, for the browser).
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..fileio import atomic_write_json, read_jsonl, sha256_file, stable_hash
from ..records.summary import Summary
from ..stats.compare import compare_systems
from ..stats.describe import describe
from ..stats.rounds import PERSONA_METRICS, ROUND_METRICS, judge_round_frame, round_changes, round_series
from .rundir import RunDir
from .tables import ALL_JUDGES, RunData, load_runs

SCHEMA = "mascot-summary/2"
REFERENCE_SYSTEM = "mascot"
AGREEMENT_BOOT = 300  # alpha and Spearman bootstraps are costlier; 300 replicates (or n_boot, if smaller)
INPUT_FILES = ("transcripts.jsonl", "judgments.jsonl", "comparisons.jsonl", "metrics.parquet", "evaluators.json")
# what the summary reads from the manifest (its times, status and invocations change on every resume)
MANIFEST_KEYS = (
    "provenance",
    "task_files",
    "tasks",
    "systems",
    "models",
    "judges",
    "comparisons",
    "seeds",
    "settings",
    "usage",
    "cost_usd",
)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if hasattr(v, "item"):
        return _clean(v.item())
    return v


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _clean(v) for k, v in row.items()} for row in df.to_dict("records")]


def _clean_all(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _clean_all(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean_all(v) for v in obj]
    return _clean(obj)


def pick_reference(labels: Sequence[str], reference: str | None = None) -> str | None:
    """The system the others are compared with: the given one, else `mascot` if present, else all pairs."""
    if reference is not None:
        return reference
    return REFERENCE_SYSTEM if REFERENCE_SYSTEM in labels else None


def _counts(data: RunData) -> dict[str, Any]:
    counts = [{"label": data.label_of(run_id, t.system), "split": t.split, "task": t.task} for run_id, t in data.transcripts]
    count_df = pd.DataFrame(counts, columns=["label", "split", "task"])
    dialogues = count_df.groupby(["label", "split", "task"]).size().reset_index(name="dialogues") if counts else count_df
    scored: dict[str, int] = {}
    failed: dict[str, int] = {}
    for r in data.judgments:
        j = str(r.get("judge"))
        if r.get("status") == "scored" and r.get("score_100") is not None:
            scored[j] = scored.get(j, 0) + 1
        elif r.get("status") == "call_failed":
            failed[j] = failed.get(j, 0) + 1
    return {
        "dialogues": records(dialogues),
        "judgments_scored": scored,
        "judgments_unscored": {j: dict(c) for j, c in data.unscored.items()},
        "judgments_failed": failed,
    }


def _agreement(data: RunData, n_boot: int, seed: int) -> list[dict[str, Any]]:
    if not data.judgments:
        return []
    from ..judges.agreement import agreement_table

    return records(agreement_table(data.judgments, n_boot=min(AGREEMENT_BOOT, n_boot), seed=seed))


def _diagnostics(data: RunData) -> list[dict[str, Any]]:
    if not data.judgments and not data.comparisons:
        return []
    from ..judges.diagnostics import diagnostics_table

    return records(diagnostics_table(data.judgments, [t for _, t in data.transcripts], data.comparisons))


def _threeway(data: RunData, n_boot: int, seed: int) -> dict[str, Any] | None:
    if not data.comparisons:
        return None
    from ..judges.threeway import latest_comparisons, summarize_comparisons

    s = summarize_comparisons(data.comparisons, n_boot=min(AGREEMENT_BOOT, n_boot), seed=seed)
    s["verdicts"] = [
        {
            k: r.get(k)
            for k in (
                "pair_key",
                "judge",
                "order",
                "order_index",
                "best_system",
                "tie",
                "status",
                "reason",
                "rationale",
                "run_id",
            )
        }
        for r in sorted(latest_comparisons(data.comparisons), key=lambda r: (r["pair_key"], r["judge"], r.get("order_index", 0)))
    ]
    return _clean_all(s)


def _rounds(data: RunData, n_boot: int, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nb = min(AGREEMENT_BOOT * 2, n_boot)
    series: list[dict[str, Any]] = []
    changes: list[dict[str, Any]] = []
    m = data.metrics
    for name in ROUND_METRICS:
        series += round_series(m, name, n_boot=nb, seed=seed)
        if name in PERSONA_METRICS:
            series += round_series(m, name, by_agent=True, n_boot=nb, seed=seed)
        changes += round_changes(m, name, n_boot=nb, seed=seed)
    judged = judge_round_frame(data.judgments, "consistency", data.label_of)
    if not judged.empty:
        series += round_series(judged, "judge_consistency", n_boot=nb, seed=seed)
    return _clean_all(series), _clean_all(changes)


def _training(data: RunData) -> list[dict[str, Any]]:
    """The training log of each run's checkpoint (``models.checkpoint`` in its manifest), as series and a table."""
    from ..train.plots import curves

    out = []
    for run_id, m in sorted(data.manifests.items()):
        ck = (m.get("models") or {}).get("checkpoint")
        if not ck:
            continue
        log = Path(ck) / "train_log.jsonl"
        if not log.exists():
            out.append({"run_id": run_id, "checkpoint": ck, "missing": True, "series": {}, "parts": []})
            continue
        rows = list(read_jsonl(log))
        panels = curves(rows)
        rm = [r for r in rows if r.get("step_name") == "reward_model" and isinstance(r.get("loss"), (int, float))]
        if rm:
            panels["reward model loss"] = {"Bradley-Terry loss": [(int(r["epoch"]), float(r["loss"])) for r in rm]}
        comp: dict[str, list[tuple[float, float]]] = {}  # (step, value)
        for r in rows:
            if r.get("step_name") == "grpo" and "step" in r:
                for k, v in r.items():
                    if k.startswith("rewards/") and isinstance(v, (int, float)) and math.isfinite(v):
                        comp.setdefault(f"{r.get('name')}: {k[len('rewards/') :]}", []).append((int(r["step"]), float(v)))
        if comp:
            panels["reward components"] = comp
        out.append(
            {
                "run_id": run_id,
                "checkpoint": ck,
                "missing": False,
                "series": {p: {s: [list(pt) for pt in pts] for s, pts in ser.items()} for p, ser in panels.items()},
                "parts": _checkpoint_parts(rows),
            }
        )
    return _clean_all(out)


def _checkpoint_parts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for name in dict.fromkeys(str(r.get("name")) for r in rows if r.get("step_name") == "grpo"):
        g = [r for r in rows if r.get("step_name") == "grpo" and str(r.get("name")) == name]
        last = g[-1]
        lora = next((r for r in rows if r.get("step_name") == "lora" and str(r.get("name")) == name), {})
        out.append(
            {
                "part": name,
                "stage": last.get("stage", ""),
                "steps": last.get("step"),
                "trainable_pct": lora.get("trainable_pct"),
                "first_reward": g[0].get("reward"),
                "last_reward": last.get("reward"),
                "last_kl": last.get("kl"),
                "last_loss": last.get("loss"),
            }
        )
    rm = [r for r in rows if r.get("step_name") == "reward_model"]
    if rm:
        out.append(
            {
                "part": "reward model",
                "stage": rm[-1].get("stage", ""),
                "steps": rm[-1].get("epoch"),
                "last_loss": rm[-1].get("loss"),
                "heldout_accuracy": rm[-1].get("heldout_accuracy", rm[-1].get("heldout_acc")),
                "heldout_pairs": rm[-1].get("heldout_pairs"),
            }
        )
    return out


def _decisions(data: RunData) -> list[dict[str, Any]]:
    """How each system's Director / MultiAgentESC decisions were obtained (constrained, parsed, re-asked, fallback)."""
    from ..stats.decisions import decision_rows, decision_stats

    return _clean_all(decision_rows(decision_stats(data.transcripts, data.labels)))


def _figures(data: RunData, summary: dict[str, Any], n_boot: int, seed: int) -> dict[str, Any]:
    """Counterparts of the paper's figures: the ablation table, MBTI x agent heatmaps, model-size sensitivity."""
    from ..stats.figures import ablation_table, heatmap_labels, mbti_heatmap, paper_sensitivity, sensitivity_table

    frecords = records

    nb = min(AGREEMENT_BOOT * 2, n_boot)
    out: dict[str, Any] = {"ablation": {split: frecords(df) for split, df in ablation_table(summary).items()}}
    out["heatmaps"] = [
        {"label": lab, "measure": m, "cells": frecords(mbti_heatmap(data, lab, m, n_boot=nb, seed=seed))}
        for lab in heatmap_labels(data)
        for m in ("agent.overall", "agent.consistency")
    ]
    sens = sensitivity_table(data, n_boot=nb, seed=seed)
    out["sensitivity"] = frecords(sens) if len(sens) >= 2 else []
    out["paper_sensitivity"] = frecords(paper_sensitivity()) if out["sensitivity"] else []
    return _clean_all(out)


def validation_of(rd: RunDir) -> dict[str, Any] | None:
    """The evaluators table a `judges validate` run wrote into ``rd`` (None for other runs)."""
    import json

    p = rd.path / "evaluators.json"
    if not p.is_file():
        return None
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        from ..errors import UserError

        raise UserError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno}); rerun `mascot-eval judges validate`") from None
    return {k: d.get(k) for k in ("command", "created", "sets", "judges", "criteria", "steering", "probes", "limit", "n_boot")}


def _run_info(data: RunData) -> dict[str, Any]:
    """Per run: what the report's overview shows, read from its manifest."""
    out = {}
    for run_id, m in sorted(data.manifests.items()):
        prov = m.get("provenance") or {}
        git = prov.get("git") or {}
        models = m.get("models") or {}
        out[run_id] = {
            "started": m.get("started"),
            "tasks": sorted((m.get("tasks") or {}).keys()),
            "systems": sorted((m.get("systems") or {}).keys()),
            "model": models.get("default"),
            "checkpoint": models.get("checkpoint"),
            "judges": sorted((m.get("judges") or {}).keys()),
            "cost_usd": m.get("cost_usd"),
            "usage": {step: (led or {}).get("total") for step, led in (m.get("usage") or {}).items()},
            "version": prov.get("version"),
            "git": (git.get("commit") or "")[:10] + (" (dirty)" if git.get("dirty") else ""),
            "settings": m.get("settings") or {},
        }
    return out


def summarize_data(
    data: RunData, *, reference: str | None = None, test: str = "wilcoxon", n_boot: int = 2000, seed: int = 0
) -> dict[str, Any]:
    units = data.units
    est = describe(units, ("label", "split", "measure", "judge"), n_boot=n_boot, seed=seed)
    task_est = describe(units[units["judge"] == ALL_JUDGES], ("label", "split", "task", "measure"), n_boot=n_boot, seed=seed)
    labels = sorted(set(units["label"])) if not units.empty else []
    ref = pick_reference(labels, reference)
    comps = compare_systems(units, reference=ref if ref in labels else None, test=test, n_boot=n_boot, seed=seed)
    corpus = pd.DataFrame()
    if not data.metrics.empty and "unit" in data.metrics.columns:
        c = data.metrics[data.metrics["unit"] == "corpus"]
        if not c.empty:
            corpus = c.groupby(["label", "split", "task", "metric"], as_index=False)["value"].mean()
    rounds, changes = _rounds(data, n_boot, seed)
    summary = {
        "schema": SCHEMA,
        "generated": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "runs": sorted(data.manifests),
        "labels": {f"{r}/{s}": lab for (r, s), lab in sorted(data.labels.items())},
        "judges": data.judges,
        "reference": ref,
        "test": test,
        "bootstrap": {"n_boot": n_boot, "seed": seed, "level": 0.95, "cluster": "task:context_id"},
        "estimates": records(est.assign(task=None) if not est.empty else est),
        "task_estimates": records(task_est.assign(judge=ALL_JUDGES) if not task_est.empty else task_est),
        "comparisons": records(comps),
        "corpus_metrics": records(corpus),
        "counts": _counts(data),
        "agreement": _agreement(data, n_boot, seed),
        "judge_diagnostics": _clean_all(_diagnostics(data)),
        "threeway": _threeway(data, n_boot, seed),
        "rounds": rounds,
        "round_changes": changes,
        "decisions": _decisions(data),
        "training": _training(data),
        "figures": {},
        "manifest": _run_info(data),
    }
    summary["figures"] = _figures(data, summary, n_boot, seed)
    return Summary.load(summary, where="summary (being written)").to_dict()


def inputs_hash(rd: RunDir, settings: dict[str, Any]) -> dict[str, str]:
    """Content hashes of the files a summary is computed from, plus its settings."""
    out = {name: sha256_file(rd.path / name)[:16] for name in INPUT_FILES if (rd.path / name).exists()}
    m = rd.read_manifest()
    out["manifest.json"] = stable_hash({k: m.get(k) for k in MANIFEST_KEYS})
    ck = (m.get("models") or {}).get("checkpoint")
    if ck and (Path(ck) / "train_log.jsonl").exists():
        out["train_log.jsonl"] = sha256_file(Path(ck) / "train_log.jsonl")[:16]
    out["settings"] = stable_hash(settings)
    return out


def summarize(
    rundir: RunDir | str, *, reference: str | None = None, test: str = "wilcoxon", n_boot: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """Compute the statistics of one run directory and write its summary.json atomically; an existing
    summary computed from identical inputs and settings is kept as it is (nothing recomputed)."""
    import time

    from ..records.manifest import StepRecord

    rd = rundir if isinstance(rundir, RunDir) else RunDir(rundir)
    t0 = time.perf_counter()
    settings = {"reference": reference, "test": test, "n_boot": n_boot, "seed": seed, "schema": SCHEMA}
    old = load_summary(rd, missing_ok=True)
    want = inputs_hash(rd, settings)
    with rd.lock():
        if old is not None and old.get("inputs") == want:
            summary, status = old, "skipped"
        else:
            data = load_runs([rd])
            summary = summarize_data(data, reference=reference, test=test, n_boot=n_boot, seed=seed)
            summary["validation"] = validation_of(rd)
            summary["run_id"] = rd.run_id
            summary["inputs"] = want
            atomic_write_json(rd.summary_path, summary)
            status = "done"
        rd.update_manifest(
            steps={
                "summary": StepRecord(
                    status=status,
                    seconds=round(time.perf_counter() - t0, 3),
                    inputs_hash=stable_hash(want),
                    counts={"estimates": len(summary["estimates"]), "comparisons": len(summary["comparisons"])},
                ).model_dump()
            }
        )
    return summary


def load_summary(rd: RunDir, *, missing_ok: bool = False) -> dict[str, Any] | None:
    """The run's summary.json, validated (a summary of another version is a one-line error)."""
    import json

    from ..errors import UserError

    if not rd.summary_path.exists():
        if missing_ok:
            return None
        raise UserError(f"{rd.summary_path}: no summary yet; run `mascot-eval run` (or `mascot-eval report`, which computes it)")
    try:
        data = json.loads(rd.summary_path.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UserError(f"{rd.summary_path}: not valid JSON; delete it and rerun to recompute") from None
    if isinstance(data, dict) and data.get("schema") != SCHEMA:
        if missing_ok:
            return None  # an older summary is simply recomputed
        raise UserError(f"{rd.summary_path}: schema {data.get('schema')!r}, expected {SCHEMA!r}; rerun to recompute")
    return Summary.load(data, where=str(rd.summary_path)).to_dict()
