"""Judge diagnostics: how reliable and how costly each judge was in a run.

Per judge: judging units (one call with its re-asks), API calls, parse-failure rate (units left
unscored because the reply could not be parsed; never hidden as zeros), re-ask rate, call
failures, verdicts the guards left unscored (``degenerate``, ``steered``), first-position pick
rate in three-way comparisons (1/3 = no bias), length bias
(Spearman correlation between a unit's overall score and the words it judged), and tokens, cost
and latency per 100 dialogues.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..transcript import Transcript
from .agreement import scored_frame
from .prompts import reply_words
from .run import latest_judgments

COLUMNS = [
    "judge",
    "judge_model",
    "dialogues",
    "units",
    "api_calls",
    "scored_units",
    "parse_failures",
    "parse_failure_rate",
    "reask_rate",
    "call_failures",
    "degenerate",
    "steered",
    "cached_calls",
    "first_position_rate",
    "first_position_n",
    "length_bias_spearman",
    "length_bias_n",
    "prompt_tokens_per_100",
    "completion_tokens_per_100",
    "cost_usd_per_100",
    "latency_s_per_100",
]


def _first_position(comparisons: list[dict[str, Any]], judge: str) -> tuple[float, int]:
    picks = [c for c in comparisons if c.get("judge") == judge and c.get("status") == "scored" and not c.get("tie")]
    if not picks:
        return float("nan"), 0
    return float(np.mean([c["best_position"] == 1 for c in picks])), len(picks)


def _length_bias(df: pd.DataFrame, words: dict[tuple[str, str], int]) -> tuple[float, int]:
    from scipy.stats import spearmanr

    ov = df[df["criterion"] == "overall"]
    if ov.empty:
        return float("nan"), 0
    counts = [words.get((d, a if isinstance(a, str) else ""), np.nan) for d, a in zip(ov["dialogue_id"], ov["agent"])]
    x = np.asarray(counts, dtype=float)
    y = ov["score"].to_numpy(dtype=float)
    ok = ~np.isnan(x)
    x, y = x[ok], y[ok]
    if x.size < 3 or np.unique(x).size < 2 or np.unique(y).size < 2:
        return float("nan"), int(x.size)
    return float(spearmanr(x, y).statistic), int(x.size)


def diagnostics_table(
    rows: Iterable[dict[str, Any]], transcripts: list[Transcript], comparisons: Iterable[dict[str, Any]] | None = None
) -> pd.DataFrame:
    rows = latest_judgments(rows)
    comps = list(comparisons or [])
    words: dict[tuple[str, str], int] = {}
    for t in transcripts:
        words[(t.dialogue_id, "")] = reply_words(t, None)
        for a in t.agents:
            words[(t.dialogue_id, a)] = reply_words(t, a)
    out = []
    judges = sorted({r["judge"] for r in rows} | {c["judge"] for c in comps})
    for j in judges:
        jr = [r for r in rows if r["judge"] == j]
        units: dict[tuple, dict[str, Any]] = {}
        for r in jr:
            units.setdefault((r["dialogue_id"], r["level"], r.get("agent")), r)
        judged = [u for u in units.values() if not (u.get("reason") or "").startswith("no_turns")]
        n_units = len(judged)
        usage = [u.get("usage") or {} for u in judged]
        parse_fail = sum(1 for u in judged if (u.get("reason") or "").startswith("parse_failed"))
        call_fail = sum(1 for u in judged if (u.get("reason") or "").startswith("call_failed"))
        dialogues = len({u["dialogue_id"] for u in judged}) or 0
        per100 = 100.0 / dialogues if dialogues else float("nan")
        fp, fp_n = _first_position(comps, j)
        lb, lb_n = _length_bias(scored_frame(jr), words) if jr else (float("nan"), 0)
        model = (jr[0] if jr else next(c for c in comps if c["judge"] == j)).get("judge_model")
        out.append(
            {
                "judge": j,
                "judge_model": model,
                "dialogues": dialogues,
                "units": n_units,
                "api_calls": int(sum(u.get("calls", 0) for u in usage)),
                "scored_units": sum(1 for u in judged if u.get("status") == "scored"),
                "parse_failures": parse_fail,
                "parse_failure_rate": parse_fail / n_units if n_units else float("nan"),
                "reask_rate": sum(1 for u in usage if u.get("reasks", 0) > 0) / n_units if n_units else float("nan"),
                "call_failures": call_fail,
                "degenerate": sum(1 for u in judged if (u.get("reason") or "").startswith("degenerate")),
                "steered": sum(1 for u in judged if (u.get("reason") or "").startswith("steered")),
                "cached_calls": int(sum(u.get("cached", 0) for u in usage)),
                "first_position_rate": fp,
                "first_position_n": fp_n,
                "length_bias_spearman": lb,
                "length_bias_n": lb_n,
                "prompt_tokens_per_100": sum(u.get("prompt_tokens", 0) for u in usage) * per100,
                "completion_tokens_per_100": sum(u.get("completion_tokens", 0) for u in usage) * per100,
                "cost_usd_per_100": sum(u.get("cost_usd", 0.0) for u in usage) * per100,
                "latency_s_per_100": sum(u.get("latency_s", 0.0) for u in usage) * per100,
            }
        )
    return pd.DataFrame(out, columns=COLUMNS)
