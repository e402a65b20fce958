"""The self-contained HTML report: a jinja2 template (autoescaped, sandboxed) over summary.json.

The report renders; it computes no statistic. Everything it shows comes from the summary (see
:mod:`mascot_eval.runs.summary`), plus the transcripts and their judgment rows for the transcript
browser. Figures are matplotlib PNGs embedded as base64 (cached by the hash of the numbers they
draw); one small inline script filters transcripts. Every string from a run (agent text, judge
rationales, names) goes through the template's autoescaping, so text a model wrote cannot inject
markup or script into the page. An unchanged report (same summary, transcripts and judgments) is
not rendered again.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .. import __version__
from ..criteria import AGENT_CRITERIA, GROUP_CRITERIA
from ..fileio import atomic_write_text, sha256_file, stable_hash
from ..runs.rundir import RunDir
from ..runs.tables import ALL_JUDGES, measure_order
from ..stats.paired import significance_mark
from .leaderboard import cell, leaderboard_frame, measure_title, paper_comparison

TEMPLATE = "report.html.j2"
TEMPLATE_DIR = Path(__file__).parent / "templates"
HASH_META = "mascot-report-inputs"
TRAINING_COLUMNS = {
    "part": "part",
    "stage": "stage",
    "steps": "steps",
    "trainable_pct": "trainable %",
    "first_reward": "first reward",
    "last_reward": "last reward",
    "last_kl": "last kl",
    "last_loss": "last loss",
    "heldout_accuracy": "heldout acc",
    "heldout_pairs": "heldout pairs",
}


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return "–"
        return f"{v:.{digits}f}"
    return str(v)


def table(
    df: pd.DataFrame | list[dict[str, Any]] | None, *, digits: int = 2, left: Sequence[str] = (), cls: str = ""
) -> dict[str, Any]:
    """A table for the template: column names, rows of formatted strings, which columns align left."""
    frame = pd.DataFrame(df) if isinstance(df, list) else df
    if frame is None or frame.empty:
        return {"columns": [], "rows": [], "left": [], "cls": cls}
    cols = [str(c) for c in frame.columns]
    rows = [[_fmt(v, digits) for v in r] for r in frame.itertuples(index=False, name=None)]
    return {"columns": cols, "rows": rows, "left": [c in left for c in cols], "cls": cls}


def _sys(label: str, reference: str | None) -> str:
    return f"{label} (reference)" if reference and label == reference else str(label)


class ReportData:
    """Everything the template shows, built from a summary (and transcripts/judgments for the browser)."""

    def __init__(
        self,
        summary: dict[str, Any],
        transcripts: list[tuple[str, Any]],
        judgments: list[dict[str, Any]],
        *,
        title: str,
        max_transcripts: int,
        figures: bool = True,
    ) -> None:
        self.s = summary
        self.transcripts = transcripts
        self.judgments = judgments
        self.title = title
        self.max_transcripts = max_transcripts
        self.figures = figures
        self.est = pd.DataFrame(summary["estimates"])
        self.est_all = self.est[self.est["judge"] == ALL_JUDGES] if not self.est.empty else self.est

    def img(self, kind: str, *args: Any, alt: str, **kw: Any) -> dict[str, str] | None:
        if not self.figures:
            return None
        from . import plots

        uri = plots.cached(kind, *args, **kw)
        return {"src": uri, "alt": alt} if uri else None

    # sections -------------------------------------------------------------------------------------
    def overview(self) -> dict[str, Any]:
        runs = []
        for run_id, m in sorted((self.s.get("manifest") or {}).items()):
            usage = m.get("usage") or {}
            calls = sum(int((u or {}).get("calls", 0)) for u in usage.values())
            retries = sum(int((u or {}).get("retries", 0)) for u in usage.values())
            failures = sum(int((u or {}).get("failures", 0)) for u in usage.values())
            runs.append(
                {
                    "run": run_id,
                    "started": m.get("started"),
                    "tasks": ", ".join(m.get("tasks") or []) or "–",
                    "systems": ", ".join(m.get("systems") or []) or "–",
                    "model": m.get("model"),
                    "checkpoint": m.get("checkpoint") or "–",
                    "judges": ", ".join(m.get("judges") or []) or "–",
                    "calls": calls,
                    "retries": retries,
                    "failed calls": failures,
                    "cost_usd": m.get("cost_usd"),
                    "version": m.get("version"),
                    "git": m.get("git") or "–",
                }
            )
        c = self.s["counts"]
        uns, sc, fa = c.get("judgments_unscored", {}), c.get("judgments_scored", {}), c.get("judgments_failed", {})
        judge_rows = [
            {
                "judge": j,
                "scored rows": sc.get(j, 0),
                "unscored rows": sum(uns.get(j, {}).values()),
                "failed-call rows": fa.get(j, 0),
                "unscored reasons": "; ".join(f"{k}: {v}" for k, v in sorted(uns.get(j, {}).items())) or "–",
            }
            for j in sorted(set(sc) | set(uns) | set(fa))
        ]
        return {
            "runs": table(runs, digits=4, left=["run", "started", "tasks", "systems", "model", "checkpoint", "judges", "git"]),
            "dialogues": table(c.get("dialogues", []), left=["label", "split", "task"]),
            "judges": table(judge_rows, left=["judge", "unscored reasons"]),
            "bootstrap": self.s["bootstrap"],
        }

    def leaderboard(self) -> dict[str, Any]:
        f = leaderboard_frame(self.s)
        ref = self.s.get("reference")
        out: dict[str, Any] = {"empty": f.empty, "reference": ref or "–", "test": self.s.get("test"), "tables": []}
        if f.empty:
            return out
        for split, g in f.groupby("split", sort=True):
            for level, crits in (("agent", AGENT_CRITERIA), ("group", GROUP_CRITERIA)):
                ms = [f"{level}.{c}" for c in crits] + [f"{level}.overall"]
                if not any(m in g.columns and g[m].notna().any() for m in ms):
                    continue
                rows = [
                    {
                        "System": _sys(r["system"], ref),
                        **{measure_title(m): cell(r, m) if m in g.columns else "–" for m in ms},
                        "n": r.get(f"{level}.overall.n", ""),
                    }
                    for _, r in g.iterrows()
                ]
                out["tables"].append({"title": f"{level.capitalize()}-level, {split}", "table": table(rows, left=["System"])})
            mcols = [c for c in g.columns if c.startswith("metric.") and c.count(".") == 1 and g[c].notna().any()]
            if mcols:
                rows = [
                    {"System": _sys(r["system"], ref), **{m.split(".", 1)[1]: cell(r, m) for m in mcols}} for _, r in g.iterrows()
                ]
                out["tables"].append({"title": f"Automatic metrics, {split}", "table": table(rows, left=["System"])})
        corpus = pd.DataFrame(self.s.get("corpus_metrics", []))
        if not corpus.empty:
            pv = corpus.pivot_table(index=["label", "split", "task"], columns="metric", values="value").reset_index()
            out["tables"].append(
                {
                    "title": "Corpus-level metrics (one value per system and task)",
                    "table": table(pv, digits=3, left=["label", "split", "task"]),
                }
            )
        for (task, level), df in paper_comparison(self.s).items():
            out["tables"].append(
                {
                    "title": f"{task}, {level}-level: ours beside the published numbers",
                    "table": table(df, left=["Source", "System"], cls="paper"),
                }
            )
        return out

    def comparisons(self) -> dict[str, Any]:
        c = pd.DataFrame(self.s.get("comparisons", []))
        if c.empty:
            return {"table": table(None)}
        c = c.assign(sig=[significance_mark(p) for p in c["p_holm"]])
        cols = [
            "split",
            "measure",
            "a",
            "b",
            "n_pairs",
            "mean_a",
            "mean_b",
            "mean_diff",
            "diff_lo",
            "diff_hi",
            "wilcoxon_p",
            "perm_p",
            "p_holm",
            "sig",
            "rank_biserial",
            "cohen_dz",
        ]
        return {"table": table(c[cols], digits=3, left=["split", "measure", "a", "b", "sig"])}

    def charts(self) -> dict[str, Any]:
        e = self.est_all
        out: dict[str, Any] = {"bars": [], "radars": []}
        if e.empty:
            return out
        cols = ["label", "measure", "mean", "lo", "hi"]
        for split in sorted(e["split"].unique()):
            es = e[e["split"] == split][cols]
            for ms, title, ylabel in (
                ([f"agent.{c}" for c in AGENT_CRITERIA] + ["agent.overall"], f"Agent-level criteria ({split})", "score (0-100)"),
                ([f"group.{c}" for c in GROUP_CRITERIA] + ["group.overall"], f"Group-level criteria ({split})", "score (0-100)"),
                (sorted(m for m in es["measure"].unique() if m.startswith("metric.")), f"Automatic metrics ({split})", "value"),
            ):
                sub = es[es["measure"].isin(ms)]
                if not sub.empty:
                    out["bars"].append(self.img("bars", records_of(sub), ms, title, ylabel=ylabel, alt=title))
            for lab in sorted(es["label"].unique()):
                crit = [f"agent.{c}" for c in AGENT_CRITERIA]
                sub = es[(es["label"] == lab) & es["measure"].isin(crit)]
                if len(sub) >= 3:
                    out["radars"].append(
                        self.img("radar", records_of(sub), lab, crit, f"{lab} ({split})", alt=f"radar {lab} {split}")
                    )
        out["bars"] = [x for x in out["bars"] if x]
        out["radars"] = [x for x in out["radars"] if x]
        return out

    def _series(self, metric: str, *, by_agent: bool = False) -> list[dict[str, Any]]:
        return [r for r in self.s.get("rounds", []) if r["metric"] == metric and (r.get("agent") is not None) == by_agent]

    def _changes(self, metric: str, cls: str) -> dict[str, Any]:
        rows = [
            {
                "system": r["label"],
                "first round": r["first_round"],
                "last round": r["last_round"],
                "mean first": r["mean_first"],
                "mean last": r["mean_last"],
                "change": r["change"],
                "change lo": r["change_lo"],
                "change hi": r["change_hi"],
                "n": r["n"],
            }
            for r in self.s.get("round_changes", [])
            if r["metric"] == metric
        ]
        return table(rows, digits=3, left=["system"], cls=cls)

    def drift(self) -> dict[str, Any]:
        out: dict[str, Any] = {"judged": None, "metrics": []}
        js = self._series("judge_consistency")
        if js:
            out["judged"] = self.img(
                "per_round", js, "Judge consistency by round", "score (0-100)", alt="judge consistency by round"
            )
        for name, title, ylabel in (
            ("persona_similarity", "Persona similarity by round (drift)", "cosine to own persona card"),
            ("persona_card_margin", "Persona card margin by round", "own card - closest other card"),
        ):
            series = self._series(name)
            if not series:
                continue
            by_agent = self._series(name, by_agent=True)
            labels = sorted({r["label"] for r in by_agent})[:8]
            per_agent = [
                self.img(
                    "per_round",
                    [r for r in by_agent if r["label"] == lab],
                    f"{lab}: {name} per agent",
                    ylabel,
                    by="agent",
                    alt=f"{name} per agent {lab}",
                )
                for lab in labels
            ]
            out["metrics"].append(
                {
                    "name": name,
                    "img": self.img("per_round", series, title, ylabel, alt=f"{name} by round"),
                    "changes": self._changes(name, "drift"),
                    "per_agent": [x for x in per_agent if x],
                }
            )
        return out

    def redundancy(self) -> dict[str, Any]:
        out = []
        for name, label in (
            ("inter_agent_selfbleu", "self-BLEU between agents"),
            ("inter_agent_rougeL", "ROUGE-L between agents"),
            ("inter_agent_cosine", "cosine between agents"),
        ):
            series = self._series(name)
            if series:
                out.append(
                    {
                        "name": name,
                        "img": self.img("per_round", series, f"Redundancy by round: {label}", name, alt=f"{name} by round"),
                        "changes": self._changes(name, "redundancy"),
                    }
                )
        return {"metrics": out}

    def judges(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "any": bool(self.s["counts"].get("judgments_scored") or self.s["counts"].get("judgments_unscored")),
            "per_judge": None,
            "agreement": None,
            "alpha_img": None,
            "diagnostics": table(self.s.get("judge_diagnostics", []), digits=3, left=["judge", "judge_model"], cls="diagnostics"),
        }
        est = self.est
        if not est.empty:
            pj = est[(est["judge"] != ALL_JUDGES) & est["measure"].str.match(r"^(agent|group)\.")]
            if not pj.empty:
                piv = pj.pivot_table(index=["label", "split", "judge"], columns="measure", values="mean")
                piv = piv[measure_order(piv.columns)].reset_index()
                out["per_judge"] = table(piv, digits=1, left=["label", "split", "judge"], cls="perjudge")
        ag = pd.DataFrame(self.s.get("agreement", []))
        if not ag.empty:
            out["agreement"] = table(ag, digits=3, left=["level", "criterion", "statistic", "judges"], cls="agreement")
            a = ag[ag["statistic"] == "alpha_interval"]
            if not a.empty:
                pts = [{"label": f"{r.level}.{r.criterion}", "value": r.value, "lo": r.lo, "hi": r.hi} for r in a.itertuples()]
                out["alpha_img"] = self.img("hbar", pts, "Krippendorff's alpha (interval)", "alpha", xlim=(-1, 1), alt="alpha")
        return out

    def threeway(self) -> dict[str, Any] | None:
        s = self.s.get("threeway")
        if not s:
            return None
        pooled = s.get("pooled") or {}
        rows, shares = [], []
        for sysname, d in (pooled.get("systems") or {}).items():
            bt = (pooled.get("bradley_terry") or {}).get("systems", {}).get(sysname, {})
            rows.append(
                {
                    "system": sysname,
                    "win": d["win"]["mean"],
                    "win_lo": d["win"]["lo"],
                    "win_hi": d["win"]["hi"],
                    "tie": d["tie"]["mean"],
                    "loss": d["loss"]["mean"],
                    "n contexts": d["win"]["n"],
                    "BT strength": bt.get("strength"),
                    "BT lo": bt.get("lo"),
                    "BT hi": bt.get("hi"),
                    "BT rank": bt.get("rank"),
                }
            )
            shares.append({"label": sysname, "win": d["win"]["mean"], "tie": d["tie"]["mean"], "loss": d["loss"]["mean"]})
        per_judge = []
        for j, b in (s.get("judges") or {}).items():
            pos = b.get("position_rates") or {}
            per_judge.append(
                {
                    "judge": j,
                    "calls": b["n_calls"],
                    "valid": b["n_valid"],
                    "unscored": b["n_unscored"],
                    **{f"picks position {p}": (pos.get(p) or {}).get("mean") for p in ("1", "2", "3")},
                    "tie rate": (b.get("tie_rate") or {}).get("mean"),
                    "orders disagree": (b.get("order_disagreement") or {}).get("mean"),
                }
            )
        by_ctx: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in s.get("verdicts", []):
            by_ctx[r["pair_key"]].append(r)
        verdicts = []
        for key in sorted(by_ctx)[: self.max_transcripts]:
            vr = [
                {
                    "judge": r["judge"],
                    "order": " / ".join(r["order"]),
                    "best": r.get("best_system") or ("tie" if r.get("tie") else "–"),
                    "status": r["status"],
                    "reason": r.get("reason") or "",
                    "rationale": r.get("rationale") or "",
                }
                for r in by_ctx[key]
            ]
            verdicts.append({"key": key, "n": len(vr), "table": table(vr, left=list(vr[0].keys()), cls="rat")})
        fp, od = pooled.get("first_position_rate") or {}, pooled.get("order_disagreement") or {}
        return {
            "table": table(rows, digits=3, left=["system"], cls="threeway"),
            "calls": pooled.get("n_calls", 0),
            "valid": pooled.get("n_valid", 0),
            "unscored": pooled.get("n_unscored", 0),
            "orders": s.get("orders_per_context", "–"),
            "fp": [_fmt(fp.get(k), 3) for k in ("mean", "lo", "hi")],
            "od": _fmt(od.get("mean"), 3),
            "majority": json.dumps(pooled.get("context_verdicts", {})),
            "per_judge": table(per_judge, digits=3, left=["judge"]) if per_judge else None,
            "img": self.img("stacked_shares", shares, "Three-way outcome shares (pooled judges)", alt="three-way shares")
            if shares
            else None,
            "verdicts": verdicts,
        }

    def training(self) -> list[dict[str, Any]]:
        out = []
        for t in self.s.get("training", []):
            img = (
                None
                if t.get("missing")
                else self.img(
                    "panels",
                    t["series"],
                    f"{t['run_id']}: training log of {t['checkpoint']}",
                    xlabels={"reward model accuracy": "epoch", "reward model loss": "epoch"},
                    alt=f"training curves {t['run_id']}",
                )
            )
            parts = pd.DataFrame(t.get("parts", []), columns=list(TRAINING_COLUMNS)).rename(columns=TRAINING_COLUMNS)
            out.append(
                {
                    "run_id": t["run_id"],
                    "checkpoint": t["checkpoint"],
                    "missing": t.get("missing"),
                    "img": img,
                    "parts": table(parts, digits=3, left=["part", "stage"]),
                }
            )
        return out

    def paper_figures(self) -> dict[str, Any]:
        """The paper's figures beside ours: the ablation table, MBTI x agent heatmaps, model-size sensitivity."""
        f = self.s.get("figures") or {}
        out: dict[str, Any] = {"ablation": [], "heatmaps": [], "sensitivity": None, "paper_sensitivity": None}
        for split, rows in (f.get("ablation") or {}).items():
            df = pd.DataFrame(rows)
            # in the table's own order (the systems' order, as the markdown leaderboard prints them)
            ours = list(
                dict.fromkeys(c.rsplit(".", 1)[0] for c in df.columns if c.endswith(".mean") and not c.startswith("paper."))
            )
            shown = [
                {
                    "level": r["level"],
                    "criterion": r["criterion"],
                    **{
                        lab: (
                            f"{_fmt(r[f'{lab}.mean'], 1)} ± {_fmt(r[f'{lab}.std'], 1)} [{_fmt(r[f'{lab}.lo'], 1)}, "
                            f"{_fmt(r[f'{lab}.hi'], 1)}] n={r[f'{lab}.n']}"
                            if r.get(f"{lab}.mean") is not None
                            else "–"
                        )
                        for lab in ours
                    },
                    **{c: _fmt(r[c], 1) for c in df.columns if c.startswith("paper.") and c != "paper.approx"},
                    "paper approx.": "yes" if r.get("paper.approx") else "",
                }
                for r in rows
            ]
            out["ablation"].append({"split": split, "table": table(shown, left=["level", "criterion"], cls="paper")})
        for h in f.get("heatmaps") or []:
            cells = pd.DataFrame(h["cells"])
            if cells.empty:
                continue
            cells["cell"] = [f"{_fmt(m, 1)} (n={n})" for m, n in zip(cells["mean"], cells["n"])]
            piv = cells.pivot_table(index="profile", columns="agent", values="cell", aggfunc="first", sort=False)
            piv = piv.reindex(index=list(dict.fromkeys(cells["profile"])), columns=list(dict.fromkeys(cells["agent"])))
            out["heatmaps"].append(
                {"label": h["label"], "measure": h["measure"], "table": table(piv.reset_index(), left=["profile"], cls="heatmap")}
            )
        if f.get("sensitivity"):
            out["sensitivity"] = table(
                f["sensitivity"],
                digits=1,
                left=["run_id", "system", "label", "director_model", "speaker_model"],
                cls="sensitivity",
            )
            out["paper_sensitivity"] = table(f.get("paper_sensitivity") or [], digits=1, left=["factor", "size"], cls="paper")
        out["any"] = bool(out["ablation"] or out["heatmaps"] or out["sensitivity"])
        return out

    def decisions(self) -> dict[str, Any]:
        return {"table": table(self.s.get("decisions", []), digits=3, left=["system", "decision", "mode"])}

    def transcript_items(self) -> dict[str, Any]:
        by_dlg: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in self.judgments:
            by_dlg[(r.get("run_id", ""), r["dialogue_id"])].append(r)
        labels = self.s.get("labels", {})
        items = sorted(self.transcripts, key=lambda x: (x[1].task, x[1].context_id, x[1].user_profile or "", x[1].system))
        shown = items[: self.max_transcripts]
        out = []
        for run_id, t in shown:
            label = labels.get(f"{run_id}/{t.system}", t.system)
            js = by_dlg.get((run_id, t.dialogue_id), [])
            scored = [r for r in js if r.get("status") == "scored" and r.get("score_100") is not None]
            mean = sum(r["score_100"] for r in scored) / len(scored) if scored else None
            situation = str(t.context.get("situation") or t.context.get("prompt") or t.context.get("query") or "")
            key = " ".join([label, t.task, t.context_id, t.user_profile or "", situation] + [x.text for x in t.turns]).lower()
            turns = []
            for x in t.turns:
                d = x.directive
                source = (d or {}).get("source") or (
                    "fallback" if ((x.meta or {}).get("director") or {}).get("fallback") else None
                )
                turns.append(
                    {
                        "round": x.round,
                        "speaker": x.speaker,
                        "text": x.text,
                        "user": x.is_user,
                        "directive": json.dumps({k: v for k, v in d.items() if k != "source"}, ensure_ascii=False) if d else None,
                        "source": source,
                        "fallback": source == "fallback",
                    }
                )
            jrows = [
                {
                    "judge": r["judge"],
                    "level": r["level"],
                    "agent": r.get("agent") or "–",
                    "criterion": r["criterion"],
                    "score": r.get("score"),
                    "status": r.get("status"),
                    "reason": r.get("reason") or "",
                    "rationale": r.get("rationale") or "",
                }
                for r in sorted(js, key=lambda r: (r["judge"], r["level"], str(r.get("agent")), r["criterion"]))
            ]
            out.append(
                {
                    "label": label,
                    "task": t.task,
                    "context_id": t.context_id,
                    "profile": t.user_profile or "-",
                    "n_turns": len(t.turns),
                    "mean": _fmt(mean, 1),
                    "situation": situation[:600],
                    "key": key[:4000],
                    "turns": turns,
                    "judgments": table(
                        jrows, digits=1, left=["judge", "level", "agent", "criterion", "status", "reason", "rationale"], cls="rat"
                    )
                    if jrows
                    else None,
                }
            )
        return {"items": out, "total": len(items), "shown": len(shown)}

    def validation(self) -> dict[str, Any] | None:
        """The evaluators table of a `judges validate` folder: agreement with human ratings per judge,
        set and criterion (with 95% bootstrap intervals), cost and unscored per judge x set, steering."""
        v = self.s.get("validation")
        if not v:
            return None

        def ci(r: dict[str, Any], k: str) -> str:
            x, lo, hi = r.get(k), r.get(f"{k}_lo"), r.get(f"{k}_hi")
            if x is None:
                return "-"
            return f"{x:+.2f} [{lo:+.2f}, {hi:+.2f}]" if lo is not None and hi is not None else f"{x:+.2f}"

        crit = [
            {
                "judge": r["judge"],
                "value": r.get("value"),
                "set": r["set"],
                "criterion ~ human": f"{r['criterion']} ~ {r.get('human_rating')}",
                "n": r["n"],
                "Spearman": ci(r, "spearman"),
                "Kendall": ci(r, "kendall"),
                "alpha (ordinal)": ci(r, "alpha_ordinal"),
                "exact": ci(r, "exact"),
                "within 1": ci(r, "within1"),
                "bias": ci(r, "bias"),
            }
            for r in v.get("criteria") or []
        ]
        judges = [
            {
                "judge": r["judge"],
                "set": r["set"],
                "dialogues": r["dialogues"],
                "unscored": r["unscored"],
                "unscored rate": r.get("unscored_rate"),
                "price / 1,000": r.get("price_usd_per_1000"),
                "call-s / 1,000": r.get("call_seconds_per_1000"),
            }
            for r in v.get("judges") or []
        ]
        steer = v.get("steering") or []
        steer_rows = (
            [{k: val for k, val in r.items() if not isinstance(val, (dict, list))} for r in steer]
            if isinstance(steer, list)
            else []
        )
        return {
            "command": v.get("command"),
            "created": v.get("created"),
            "criteria": table(crit, digits=2, left=["judge", "value", "set", "criterion ~ human"], cls="evaluators"),
            "judges": table(judges, digits=3, left=["judge", "set"]),
            "steering": table(steer_rows, digits=2, left=[k for k in ("judge", "probe") if steer_rows and k in steer_rows[0]]),
        }

    def context(self) -> dict[str, Any]:
        sections = [
            ("overview", "Overview and provenance"),
            ("leaderboard", "Leaderboard"),
            ("comparisons", "Paired comparisons"),
            ("charts", "Charts"),
            ("drift", "Persona consistency per round"),
            ("redundancy", "Redundancy per round"),
            ("judges", "Judge agreement and diagnostics"),
            ("threeway", "Three-way comparisons"),
        ]
        training = self.training()
        decisions = self.decisions()
        figures = self.paper_figures()
        if decisions["table"]["rows"]:
            sections.insert(3, ("decisions", "Decisions (Director, MultiAgentESC)"))
        if figures["any"]:
            sections.insert(sections.index(("threeway", "Three-way comparisons")) + 1, ("figures", "The paper's figures"))
        validation = self.validation()
        if validation:
            sections.insert(
                sections.index(("judges", "Judge agreement and diagnostics")) + 1, ("validation", "Judges against human ratings")
            )
        if training:
            sections.append(("training", "Training logs"))
        sections.append(("transcripts", "Transcripts and judge rationales"))
        return {
            "title": self.title,
            "version": __version__,
            "runs": ", ".join(self.s.get("runs", [])),
            "generated": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "nav": sections,
            "overview": self.overview(),
            "leaderboard": self.leaderboard(),
            "comparisons": self.comparisons(),
            "charts": self.charts(),
            "drift": self.drift(),
            "redundancy": self.redundancy(),
            "judges": self.judges(),
            "threeway": self.threeway(),
            "training": training,
            "decisions": decisions,
            "figures": figures,
            "validation": validation,
            "transcripts": self.transcript_items(),
        }


def records_of(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in df.to_dict("records")]


def render_html(
    summary: dict[str, Any],
    transcripts: list[tuple[str, Any]],
    judgments: list[dict[str, Any]],
    *,
    title: str,
    max_transcripts: int = 300,
    inputs: str = "",
    figures: bool = True,
) -> str:
    from .. import templating

    ctx = ReportData(summary, transcripts, judgments, title=title, max_transcripts=max_transcripts, figures=figures).context()
    env = templating.environment([TEMPLATE_DIR], what="report template", autoescape=True)
    return templating.render(env, TEMPLATE, {**ctx, "inputs_hash": inputs, "hash_meta": HASH_META}, limit=None)


def _inputs_hash(rundirs: Sequence[RunDir], summary: dict[str, Any], settings: dict[str, Any]) -> str:
    parts: dict[str, Any] = {
        "summary": stable_hash({k: v for k, v in summary.items() if k != "generated"}),
        "settings": settings,
        "template": sha256_file(TEMPLATE_DIR / TEMPLATE)[:16],
        "version": __version__,
    }
    for rd in rundirs:
        for name in ("transcripts.jsonl", "judgments.jsonl"):
            p = rd.path / name
            parts[f"{rd.run_id}/{name}"] = sha256_file(p)[:16] if p.exists() else None
    return stable_hash(parts)


def report_inputs(out: Path) -> str | None:
    """The inputs hash a rendered report carries (None when there is no report)."""
    if not out.exists():
        return None
    import re

    with open(out, encoding="utf-8", errors="replace") as fh:
        head = fh.read(2000)
    m = re.search(rf'<meta name="{HASH_META}" content="([0-9a-f]+)">', head)
    return m.group(1) if m else None


def render_report(
    run_dirs: Sequence[str | Path | RunDir],
    out: str | Path,
    *,
    summary: dict[str, Any] | None = None,
    reference: str | None = None,
    test: str = "wilcoxon",
    n_boot: int = 2000,
    seed: int = 0,
    max_transcripts: int = 300,
    title: str | None = None,
) -> Path:
    """Write the HTML report of one or more runs to ``out`` (atomically) and return its path.

    One run: its summary.json (computed in memory when it is missing or stale; the report never writes
    a run's summary). Several runs: their combined statistics, computed in memory. Nothing is rendered
    when the report at ``out`` was made from the same inputs."""
    from ..runs.summary import inputs_hash, load_summary, summarize_data, validation_of
    from ..runs.tables import load_runs

    rundirs = [p if isinstance(p, RunDir) else RunDir(p) for p in run_dirs]
    if not rundirs:
        from ..errors import UserError

        raise UserError("no run directory given; pass one or more folders written by `mascot-eval run`")
    for rd in rundirs:
        if not rd.transcripts_path.exists():
            from ..errors import UserError

            raise UserError(
                f"{rd.path}: no transcripts.jsonl; this is not a run directory with dialogues (run `mascot-eval run`)"
            )
    settings = {"reference": reference, "test": test, "n_boot": n_boot, "seed": seed, "schema": "mascot-summary/2"}
    if summary is None and len(rundirs) == 1:
        s = load_summary(rundirs[0], missing_ok=True)
        if s is not None and s.get("inputs") == inputs_hash(rundirs[0], settings):
            summary = s
    if summary is None:
        summary = summarize_data(load_runs(rundirs), reference=reference, test=test, n_boot=n_boot, seed=seed)
        if len(rundirs) == 1:
            summary["validation"] = validation_of(rundirs[0])
    title = title or f"mascot-eval report: {', '.join(summary.get('runs', []))}"
    out = Path(out)
    h = _inputs_hash(rundirs, summary, {"title": title, "max_transcripts": max_transcripts})
    if report_inputs(out) == h:
        return out
    transcripts = [(rd.run_id, t) for rd in rundirs for t in rd.transcripts()]
    from ..records.judgment import latest_rows

    judgments = [{**r, "run_id": rd.run_id} for rd in rundirs for r in latest_rows(rd.judgments())]
    atomic_write_text(out, render_html(summary, transcripts, judgments, title=title, max_transcripts=max_transcripts, inputs=h))
    return out
