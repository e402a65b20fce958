"""The self-contained HTML report: tables, matplotlib figures as base64 PNGs, a transcript browser.

Sections: overview and provenance; leaderboard per split (0-100 means, 95% intervals, significance
marks) and the paper's numbers beside ours; paired comparisons; bar charts with error bars; a radar
per system; persona consistency per round (drift); redundancy per round; judge agreement and
diagnostics; three-way comparisons; training logs (when the run used a checkpoint); transcripts
with every judge's rationale. No external resources; one small inline script filters transcripts.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .. import __version__
from ..criteria import AGENT_CRITERIA, GROUP_CRITERIA
from ..fileio import atomic_write_text, read_jsonl
from ..runs.summary import summarize_data
from ..runs.tables import ALL_JUDGES, RunData, load_runs, measure_order
from ..stats.bootstrap import bootstrap_mean
from ..stats.paired import significance_mark
from . import plots
from .leaderboard import cell, leaderboard_frame, measure_title, paper_comparison

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#23395d;color:#fff;padding:14px 24px}header h1{margin:0;font-size:22px}
nav{background:#e8edf4;padding:6px 24px;font-size:13px;position:sticky;top:0;z-index:2}nav a{margin-right:12px;color:#23395d}
main{padding:8px 24px 40px}section{margin:18px 0 28px}h2{border-bottom:2px solid #23395d;padding-bottom:3px;font-size:18px}
h3{font-size:15px;margin:14px 0 6px}table{border-collapse:collapse;font-size:12px;margin:6px 0 10px;background:#fff}
th,td{border:1px solid #ccd;padding:3px 6px;text-align:right;vertical-align:top}th{background:#eef1f6}
td.l,th.l{text-align:left}.note{color:#555;font-size:12px;max-width:1000px}.fig{display:inline-block;margin:4px 10px 4px 0}
img{max-width:100%;border:1px solid #dde;background:#fff}.muted{color:#888}
details{background:#fff;border:1px solid #ccd;margin:4px 0;padding:4px 8px}summary{cursor:pointer;font-size:13px}
.turn{margin:3px 0;font-size:13px}.turn .who{font-weight:600}.user .who{color:#8a3b12}.agent .who{color:#23395d}
.dir{color:#777;font-size:11px}.rat{font-size:12px;color:#333}input#tfilter{width:320px;padding:4px}
.paper td{background:#f6f6ee}.tw{max-width:100%;overflow-x:auto}td.rationale{max-width:520px;text-align:left}
"""

SCRIPT = """
document.addEventListener('DOMContentLoaded', function () {
  var box = document.getElementById('tfilter');
  if (!box) { return; }
  box.addEventListener('input', function () {
    var q = box.value.toLowerCase();
    var items = document.querySelectorAll('details.transcript');
    var shown = 0;
    items.forEach(function (d) {
      var hit = q === '' || d.getAttribute('data-key').indexOf(q) >= 0;
      d.style.display = hit ? '' : 'none';
      if (hit) { shown += 1; }
    });
    document.getElementById('tcount').textContent = shown + ' shown';
  });
});
"""

E = html.escape


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return f"{v:.{digits}f}"
    return E(str(v))


def html_table(df: pd.DataFrame, *, digits: int = 2, left: Sequence[str] = (), cls: str = "") -> str:
    if df is None or df.empty:
        return '<p class="muted">(nothing to show)</p>'
    head = "".join(f'<th class="{"l" if c in left else ""}">{E(str(c))}</th>' for c in df.columns)
    body = []
    for _, r in df.iterrows():
        tds = "".join(f'<td class="{"l" if c in left else ""}">{_fmt(r[c], digits)}</td>' for c in df.columns)
        body.append(f"<tr>{tds}</tr>")
    return f'<div class="tw"><table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _sys(label: str, reference: str | None) -> str:
    return f"{label} (reference)" if reference and label == reference else str(label)


def _img(uri: str | None, alt: str) -> str:
    if not uri:
        return ""
    return f'<div class="fig"><img src="{uri}" alt="{E(alt)}"></div>'


class ReportBuilder:
    def __init__(self, data: RunData, summary: dict[str, Any], *, title: str, max_transcripts: int = 300) -> None:
        self.data = data
        self.summary = summary
        self.title = title
        self.max_transcripts = max_transcripts
        self.agreement_boot = min(300, int(summary["bootstrap"]["n_boot"]))  # alpha bootstraps are costly
        self.frame = leaderboard_frame(summary)
        self.est = pd.DataFrame(summary["estimates"])
        self.est_all = self.est[self.est["judge"] == ALL_JUDGES] if not self.est.empty else self.est
        self.sections: list[tuple[str, str, str]] = []

    def add(self, anchor: str, heading: str, body: str) -> None:
        self.sections.append((anchor, heading, body))

    # sections
    def overview(self) -> None:
        rows = []
        for run_id, m in sorted(self.data.manifests.items()):
            prov = m.get("provenance", {})
            git = prov.get("git") or {}
            models = m.get("models", {}) if isinstance(m.get("models"), dict) else {}
            rows.append({
                "run": run_id, "status": m.get("status", "–"), "started": m.get("started", "–"), "ended": m.get("ended", "–"),
                "tasks": ", ".join(sorted((m.get("tasks") or {}).keys())) or "–",
                "systems": ", ".join(sorted((m.get("systems") or {}).keys())) if isinstance(m.get("systems"), dict) else "–",
                "model": models.get("default", "–"), "checkpoint": models.get("checkpoint") or "–",
                "judges": ", ".join(sorted((m.get("judges") or {}).keys())) if isinstance(m.get("judges"), dict) else "–",
                "cost_usd": m.get("cost_usd", "–"),
                "version": prov.get("version", "–"), "git": (git.get("commit", "")[:10] + (" (dirty)" if git.get("dirty") else "")) or "–",
            })
        counts = pd.DataFrame(self.summary["counts"]["dialogues"])
        uns = self.summary["counts"].get("judgments_unscored", {})
        sc = self.summary["counts"].get("judgments_scored", {})
        judge_rows = pd.DataFrame([{"judge": j, "scored rows": sc.get(j, 0), "unscored rows": sum(uns.get(j, {}).values()),
                                    "unscored reasons": "; ".join(f"{k}: {v}" for k, v in sorted(uns.get(j, {}).items())) or "–"}
                                   for j in sorted(set(sc) | set(uns))])
        body = (
            html_table(pd.DataFrame(rows), left=list(rows[0].keys()) if rows else ()) +
            "<h3>Dialogues</h3>" + html_table(counts, left=["label", "split", "task"]) +
            "<h3>Judge rows</h3>" + html_table(judge_rows, left=["judge", "unscored reasons"]) +
            '<p class="note">Unscored judge outputs (unparseable replies, failed calls) are counted here and left out of '
            "every mean; they are never scored as zero. Statistics: 95% percentile bootstrap over contexts "
            f"({self.summary['bootstrap']['n_boot']} replicates, seed {self.summary['bootstrap']['seed']}); agents of one "
            "dialogue and several profiles on one context resample together.</p>"
        )
        self.add("overview", "Overview and provenance", body)

    def leaderboard(self) -> None:
        f = self.frame
        if f.empty:
            self.add("leaderboard", "Leaderboard", '<p class="muted">No judgments or metrics in these runs yet: run '
                     "<code>mascot-eval judge</code> / <code>mascot-eval metrics</code> or <code>mascot-eval run --judges ...</code>.</p>")
            return
        ref = self.summary.get("reference")
        parts = [f'<p class="note">Mean [95% CI] on the 0-100 scale; n = contexts. Marks: paired {E(self.summary["test"])} test '
                 f"against <b>{E(str(ref or '–'))}</b> on shared contexts, Holm-corrected within the split: "
                 "* p&lt;0.05, ** p&lt;0.01, *** p&lt;0.001.</p>"]
        for split, g in f.groupby("split", sort=True):
            for level, crits in (("agent", AGENT_CRITERIA), ("group", GROUP_CRITERIA)):
                ms = [f"{level}.{c}" for c in crits] + [f"{level}.overall"]
                if not any(m in g.columns and g[m].notna().any() for m in ms):
                    continue
                rows = [{"System": _sys(r["system"], ref), **{measure_title(m): cell(r, m) if m in g.columns else "–" for m in ms},
                         "n": r.get(f"{level}.overall.n", "")} for _, r in g.iterrows()]
                parts.append(f"<h3>{level.capitalize()}-level, {E(split)}</h3>" + html_table(pd.DataFrame(rows), left=["System"]))
            mcols = [c for c in g.columns if c.startswith("metric.") and c.count(".") == 1 and g[c].notna().any()]
            if mcols:
                rows = [{"System": _sys(r["system"], ref), **{m.split(".", 1)[1]: cell(r, m) for m in mcols}} for _, r in g.iterrows()]
                parts.append(f"<h3>Automatic metrics, {E(split)}</h3>" + html_table(pd.DataFrame(rows), left=["System"]))
        corpus = pd.DataFrame(self.summary.get("corpus_metrics", []))
        if not corpus.empty:
            parts.append("<h3>Corpus-level metrics (one value per system and task)</h3>" +
                         html_table(corpus.pivot_table(index=["label", "split", "task"], columns="metric", values="value").reset_index(),
                                    digits=3, left=["label", "split", "task"]))
        for (task, level), df in paper_comparison(self.summary).items():
            parts.append(f"<h3>{E(task)}, {level}-level: ours beside the published numbers</h3>"
                         + html_table(df, left=["Source", "System"], cls="paper"))
        self.add("leaderboard", "Leaderboard", "".join(parts))

    def comparisons(self) -> None:
        c = pd.DataFrame(self.summary.get("comparisons", []))
        if c.empty:
            self.add("comparisons", "Paired comparisons", '<p class="muted">Needs at least two systems evaluated on shared contexts.</p>')
            return
        c = c.assign(sig=[significance_mark(p) for p in c["p_holm"]])
        cols = ["split", "measure", "a", "b", "n_pairs", "mean_a", "mean_b", "mean_diff", "diff_lo", "diff_hi",
                "wilcoxon_p", "perm_p", "p_holm", "sig", "rank_biserial", "cohen_dz"]
        body = ('<p class="note">Differences a - b of dialogue-level values on the contexts both systems share; Wilcoxon '
                "signed-rank (exact for n&le;25 without ties) and sign-flip permutation p-values; Holm correction over all "
                "comparisons of a split; effect sizes: matched-pairs rank-biserial r and Cohen's d_z.</p>"
                + html_table(c[cols], digits=3, left=["split", "measure", "a", "b", "sig"]))
        self.add("comparisons", "Paired comparisons", body)

    def charts(self) -> None:
        e = self.est_all
        if e.empty:
            return
        parts = []
        for split in sorted(e["split"].unique()):
            es = e[e["split"] == split]
            parts.append(_img(plots.bars(es, [f"agent.{c}" for c in AGENT_CRITERIA] + ["agent.overall"],
                                         f"Agent-level criteria ({split})"), f"agent-level bars {split}"))
            parts.append(_img(plots.bars(es, [f"group.{c}" for c in GROUP_CRITERIA] + ["group.overall"],
                                         f"Group-level criteria ({split})"), f"group-level bars {split}"))
            metric_ms = sorted(m for m in es["measure"].unique() if m.startswith("metric."))
            if metric_ms:
                parts.append(_img(plots.bars(es, metric_ms, f"Automatic metrics ({split})", ylabel="value"), f"metric bars {split}"))
        radars = []
        for split in sorted(e["split"].unique()):
            for lab in sorted(e["label"].unique()):
                radars.append(_img(plots.radar(e[e["split"] == split], lab, [f"agent.{c}" for c in AGENT_CRITERIA],
                                               f"{lab} ({split})"), f"radar {lab} {split}"))
        body = "".join(p for p in parts if p)
        if any(radars):
            body += "<h3>Radar per system (agent-level criteria)</h3>" + "".join(radars)
        self.add("charts", "Charts", body or '<p class="muted">(no scores to plot)</p>')

    def _round_change(self, metric: str) -> pd.DataFrame:
        """Per system: first-round and last-round mean of a per-round metric and the change (last - first)
        with a 95% bootstrap over contexts of the per-dialogue changes."""
        m = self.data.metrics
        cols = ["system", "first round", "last round", "mean first", "mean last", "change", "change lo", "change hi", "n"]
        if m.empty or "metric" not in m.columns:
            return pd.DataFrame(columns=cols)
        m = m[(m["metric"] == metric) & m["round"].notna() & m["dialogue_id"].notna()]
        m = m.assign(value=pd.to_numeric(m["value"], errors="coerce"), round=pd.to_numeric(m["round"], errors="coerce")).dropna(
            subset=["value", "round"])
        rows = []
        for lab, g in m.groupby("label", sort=True):
            per = g.groupby(["dialogue_id", "pair_key", "round"], as_index=False)["value"].mean()
            first_r, last_r = int(per["round"].min()), int(per["round"].max())
            if first_r == last_r:
                continue
            a = per[per["round"] == first_r].set_index("dialogue_id")
            b = per[per["round"] == last_r].set_index("dialogue_id")
            ids = a.index.intersection(b.index)
            d = (b.loc[ids, "value"] - a.loc[ids, "value"]).to_numpy(float)
            e = bootstrap_mean(d, [plots.context_of(str(k)) for k in a.loc[ids, "pair_key"]], n_boot=self.agreement_boot,
                               seed=self.summary["bootstrap"]["seed"])
            rows.append({"system": lab, "first round": first_r, "last round": last_r, "mean first": float(a.loc[ids, "value"].mean()),
                         "mean last": float(b.loc[ids, "value"].mean()), "change": e.mean, "change lo": e.lo, "change hi": e.hi,
                         "n": e.n})
        return pd.DataFrame(rows, columns=cols)

    def _judge_round_frame(self, criterion: str) -> pd.DataFrame:
        """Judge rows that carry a ``round`` (per-round judging) as a metrics-like frame; empty when judges
        scored whole dialogues (the default)."""
        rows = [{"dialogue_id": r["dialogue_id"], "pair_key": r["pair_key"], "label": self.data.label_of(r.get("run_id", ""), r["system"]),
                 "agent": r.get("agent"), "round": r["round"], "metric": f"judge_{criterion}", "value": float(r["score_100"])}
                for r in self.data.judgments
                if r.get("round") is not None and r.get("criterion") == criterion and r.get("status") == "scored"
                and r.get("score_100") is not None]
        return pd.DataFrame(rows)

    def drift(self) -> None:
        m = self.data.metrics
        parts = []
        judged = self._judge_round_frame("consistency")
        if not judged.empty:
            parts.append("<h3>Judge consistency score per round</h3>" + _img(plots.per_round(
                judged, "judge_consistency", "Judge consistency by round", "score (0-100)"), "judge consistency by round"))
        parts.append(
            '<p class="note">Judges score whole dialogues here (one Consistency score per agent and dialogue), so the '
            "per-round view uses a <b>metric proxy</b>, not a judge score: <code>persona_similarity</code>, the cosine "
            "similarity of each agent turn to its own persona card (MiniLM embeddings), and <code>persona_card_margin</code>, "
            "own card minus the closest other card of the group (below 0: the turn reads more like another persona). "
            "Values are averaged per dialogue and round; bands are 95% bootstrap intervals over contexts. A falling line "
            "is the persona drifting toward a generic or shared voice (collapse).</p>")
        names = set(m["metric"]) if not m.empty and "metric" in m.columns else set()
        found = False
        for name, title, ylabel in (("persona_similarity", "Persona similarity by round (drift)", "cosine to own persona card"),
                                    ("persona_card_margin", "Persona card margin by round", "own card - closest other card")):
            if name not in names:
                continue
            img = plots.per_round(m, name, title, ylabel)
            if not img:
                continue
            found = True
            parts.append(f"<h3>{E(name)}</h3>" + _img(img, f"{name} by round"))
            change = self._round_change(name)
            if not change.empty:
                parts.append(f'<p class="note">{E(name)}: change from the first to the last round (per dialogue, '
                             "95% bootstrap over contexts).</p>" + html_table(change, digits=3, left=["system"], cls="drift"))
            by_agent = [
                _img(plots.per_round(m[m["label"] == lab], name, f"{lab}: {name} per agent", ylabel, by="agent"), f"{name} per agent {lab}")
                for lab in sorted(m[m["metric"] == name]["label"].unique())[:8]
            ]
            if any(by_agent):
                parts.append(f"<details><summary>{E(name)} per agent</summary>{''.join(by_agent)}</details>")
        if not found:
            parts.append('<p class="muted">No per-turn persona metrics (persona_similarity, persona_card_margin) in these runs; '
                         "compute them with <code>mascot-eval metrics</code>.</p>")
        self.add("drift", "Persona consistency per round", "".join(parts))

    def redundancy(self) -> None:
        m = self.data.metrics
        names = set(m["metric"]) if not m.empty and "metric" in m.columns else set()
        parts = ['<p class="note">How much the agents of one round repeat each other: self-BLEU, ROUGE-L and embedding '
                 "cosine between the replies of one round (higher = more redundant; social sycophancy shows as rising "
                 "redundancy over the conversation). Bands: 95% bootstrap over contexts.</p>"]
        found = False
        for name, label in (("inter_agent_selfbleu", "self-BLEU between agents"), ("inter_agent_rougeL", "ROUGE-L between agents"),
                            ("inter_agent_cosine", "cosine between agents")):
            if name not in names:
                continue
            img = plots.per_round(m, name, f"Redundancy by round: {label}", name)
            if not img:
                continue
            found = True
            parts.append(f"<h3>{E(name)}</h3>" + _img(img, f"{name} by round"))
            change = self._round_change(name)
            if not change.empty:
                parts.append(html_table(change, digits=3, left=["system"], cls="redundancy"))
        if not found:
            parts.append('<p class="muted">No per-round redundancy metrics in these runs.</p>')
        self.add("redundancy", "Redundancy per round", "".join(parts))

    def judges(self) -> None:
        parts = []
        rows = self.data.judgments
        if not rows:
            self.add("judges", "Judge agreement and diagnostics", '<p class="muted">No judgments in these runs.</p>')
            return
        per_judge = self.est[(self.est["judge"] != ALL_JUDGES) & self.est["measure"].str.match(r"^(agent|group)\.")] if not self.est.empty else self.est
        if not per_judge.empty:
            pj = per_judge.pivot_table(index=["label", "split", "judge"], columns="measure", values="mean")
            pj = pj[measure_order(pj.columns)].reset_index()
            parts.append("<h3>Mean score per judge (0-100)</h3>" + html_table(pj, digits=1, left=["label", "split", "judge"], cls="perjudge"))
        try:
            from ..judges.agreement import agreement_table

            ag = agreement_table(rows, n_boot=self.agreement_boot, seed=self.summary["bootstrap"]["seed"])
        except ImportError as exc:
            ag = None
            parts.append(f'<p class="muted">Agreement unavailable: {E(str(exc))}</p>')
        if ag is not None:
            if ag.empty:
                parts.append('<p class="muted">Agreement needs at least two judges scoring the same items.</p>')
            else:
                parts.append("<h3>Agreement (Krippendorff's alpha, Spearman)</h3>"
                             '<p class="note">Alpha (interval and ordinal) over all judges on the items they scored; Spearman per '
                             "pair of judges; 95% bootstrap over items. n_items = scored units (agent x dialogue or dialogue).</p>"
                             + html_table(ag, digits=3, left=["level", "criterion", "statistic", "judges"], cls="agreement"))
                a = ag[ag["statistic"] == "alpha_interval"]
                if not a.empty:
                    idx = a["level"] + "." + a["criterion"]
                    parts.append(_img(plots.hbar(pd.Series(a["value"].to_numpy(), index=idx), "Krippendorff's alpha (interval)", "alpha",
                                                 xlim=(-1, 1), err=(pd.Series(a["lo"].to_numpy(), index=idx), pd.Series(a["hi"].to_numpy(), index=idx))), "alpha"))
        try:
            from ..judges.diagnostics import diagnostics_table

            diag = diagnostics_table(rows, [t for _, t in self.data.transcripts], self.data.comparisons)
            parts.append("<h3>Diagnostics per judge</h3>" + html_table(diag, digits=3, left=["judge", "judge_model"], cls="diagnostics"))
        except ImportError as exc:
            parts.append(f'<p class="muted">Diagnostics unavailable: {E(str(exc))}</p>')
        self.add("judges", "Judge agreement and diagnostics", "".join(parts))

    def threeway(self) -> None:
        comps = self.data.comparisons
        if not comps:
            self.add("threeway", "Three-way comparisons", '<p class="muted">No three-way comparisons; run '
                     "<code>mascot-eval compare RUN_DIR...</code> to add them.</p>")
            return
        from ..judges.threeway import latest_comparisons, summarize_comparisons

        s = summarize_comparisons(comps, n_boot=self.agreement_boot, seed=self.summary["bootstrap"]["seed"])
        pooled = s.get("pooled") or {}
        rows, shares = [], {}
        for sysname, d in (pooled.get("systems") or {}).items():
            bt = (pooled.get("bradley_terry") or {}).get("systems", {}).get(sysname, {})
            rows.append({"system": sysname, "win": d["win"]["mean"], "win_lo": d["win"]["lo"], "win_hi": d["win"]["hi"],
                         "tie": d["tie"]["mean"], "loss": d["loss"]["mean"], "n contexts": d["win"]["n"],
                         "BT strength": bt.get("strength"), "BT lo": bt.get("lo"), "BT hi": bt.get("hi"), "BT rank": bt.get("rank")})
            shares[sysname] = {"win": d["win"]["mean"], "tie": d["tie"]["mean"], "loss": d["loss"]["mean"]}
        fp = pooled.get("first_position_rate") or {}
        od = pooled.get("order_disagreement") or {}
        body = ('<p class="note">A judge sees the three systems\' dialogues of one context, anonymised, in every order, and '
                "names the best (or a tie). Win/tie/loss: share of valid calls, 95% bootstrap over contexts; Bradley-Terry "
                "log-strengths from the pairwise outcomes (ties count half).</p>"
                + html_table(pd.DataFrame(rows), digits=3, left=["system"], cls="threeway") +
                f'<p class="note">Calls {pooled.get("n_calls", 0)}, valid {pooled.get("n_valid", 0)}, unscored {pooled.get("n_unscored", 0)}; '
                f"orders per context {s.get('orders_per_context', '–')}; first-position pick rate {_fmt(fp.get('mean'), 3)} "
                f"[{_fmt(fp.get('lo'), 3)}, {_fmt(fp.get('hi'), 3)}] (1/3 = no position bias); orders disagreeing on a context "
                f"{_fmt(od.get('mean'), 3)}; majority verdicts {E(json.dumps(pooled.get('context_verdicts', {})))}.</p>")
        per_judge = []
        for j, b in (s.get("judges") or {}).items():
            pos = b.get("position_rates") or {}
            per_judge.append({"judge": j, "calls": b["n_calls"], "valid": b["n_valid"], "unscored": b["n_unscored"],
                              **{f"picks position {p}": (pos.get(p) or {}).get("mean") for p in ("1", "2", "3")},
                              "tie rate": (b.get("tie_rate") or {}).get("mean"),
                              "orders disagree": (b.get("order_disagreement") or {}).get("mean")})
        if per_judge:
            body += "<h3>Per judge: position bias and order agreement</h3>" + html_table(pd.DataFrame(per_judge), digits=3, left=["judge"])
        body += _img(plots.stacked_shares(pd.DataFrame(shares).T, "Three-way outcome shares (pooled judges)"), "three-way shares")
        by_ctx: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in latest_comparisons(comps):
            by_ctx[r["pair_key"]].append(r)
        verdicts = []
        for key in sorted(by_ctx)[: self.max_transcripts]:
            vr = pd.DataFrame([{"judge": r["judge"], "order": " / ".join(r["order"]), "best": r.get("best_system") or
                                ("tie" if r.get("tie") else "–"), "status": r["status"], "reason": r.get("reason") or "",
                                "rationale": r.get("rationale") or ""}
                               for r in sorted(by_ctx[key], key=lambda r: (r["judge"], r.get("order_index", 0)))])
            verdicts.append(f'<details class="verdict"><summary>{E(key)} · {len(vr)} calls</summary>'
                            + html_table(vr, left=list(vr.columns), cls="rat") + "</details>")
        body += "<h3>Verdicts and rationales per context</h3>" + "".join(verdicts)
        self.add("threeway", "Three-way comparisons", body)

    def training(self) -> None:
        """Training curves of the trainer checkpoint a run was generated from (``models.checkpoint`` in the manifest)."""
        from ..train.plots import curves as train_curves

        parts = []
        for run_id, m in sorted(self.data.manifests.items()):
            models = m.get("models") if isinstance(m.get("models"), dict) else {}
            ck = models.get("checkpoint") if models else None
            if not ck:
                continue
            log = Path(ck) / "train_log.jsonl"
            if not log.exists():
                parts.append(f'<p class="muted">{E(run_id)}: checkpoint {E(ck)} has no train_log.jsonl here.</p>')
                continue
            rows = list(read_jsonl(log))
            panels = train_curves(rows)  # reward, kl, loss per GRPO adapter; reward-model accuracy per epoch
            rm = [r for r in rows if r.get("step_name") == "reward_model" and isinstance(r.get("loss"), (int, float))]
            if rm:
                panels["reward model loss"] = {"Bradley-Terry loss": [(int(r["epoch"]), float(r["loss"])) for r in rm]}
            comp: dict[str, list[tuple[int, float]]] = {}
            for r in rows:
                if r.get("step_name") == "grpo" and "step" in r:
                    for k, v in r.items():
                        if k.startswith("rewards/") and isinstance(v, (int, float)) and math.isfinite(v):
                            comp.setdefault(f"{r.get('name')}: {k[len('rewards/'):]}", []).append((int(r["step"]), float(v)))
            if comp:
                panels["reward components"] = comp
            img = plots.panels(panels, f"{run_id}: training log of {ck}",
                               xlabels={"reward model accuracy": "epoch", "reward model loss": "epoch"})
            info = self._checkpoint_info(Path(ck), rows)
            parts.append(f"<h3>{E(run_id)}: checkpoint <code>{E(str(ck))}</code></h3>" + html_table(info, digits=3, left=["part", "stage"])
                         + (_img(img, f"training curves {run_id}") if img else '<p class="muted">The training log has nothing to plot.</p>'))
        if parts:
            self.add("training", "Training logs", '<p class="note">From the trainer output folder named in the run\'s manifest '
                     "(<code>train_log.jsonl</code>): GRPO reward, KL and loss per adapter (Stage 1 personas, Stage 2 Director), "
                     "reward-model accuracy and loss per epoch.</p>" + "".join(parts))

    @staticmethod
    def _checkpoint_info(ck: Path, rows: list[dict[str, Any]]) -> pd.DataFrame:
        out = []
        for name in dict.fromkeys(str(r.get("name")) for r in rows if r.get("step_name") == "grpo"):
            g = [r for r in rows if r.get("step_name") == "grpo" and str(r.get("name")) == name]
            last = g[-1]
            lora = next((r for r in rows if r.get("step_name") == "lora" and str(r.get("name")) == name), {})
            out.append({"part": name, "stage": last.get("stage", ""), "steps": last.get("step"),
                        "trainable %": lora.get("trainable_pct"),
                        "first reward": g[0].get("reward"), "last reward": last.get("reward"), "last kl": last.get("kl"),
                        "last loss": last.get("loss")})
        rm = [r for r in rows if r.get("step_name") == "reward_model"]
        if rm:
            out.append({"part": "reward model", "stage": rm[-1].get("stage", ""), "steps": rm[-1].get("epoch"),
                        "first reward": None, "last reward": None, "last kl": None, "last loss": rm[-1].get("loss"),
                        "heldout acc": rm[-1].get("heldout_acc")})
        return pd.DataFrame(out)

    def transcripts(self) -> None:
        by_dlg: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in self.data.judgments:
            by_dlg[(r.get("run_id", ""), r["dialogue_id"])].append(r)
        items = sorted(self.data.transcripts, key=lambda x: (x[1].task, x[1].context_id, x[1].user_profile or "", x[1].system))
        shown = items[: self.max_transcripts]
        out = [f'<p><input id="tfilter" type="search" placeholder="filter by system, task, context, text..."> '
               f'<span id="tcount">{len(shown)} shown</span>'
               + (f" (first {len(shown)} of {len(items)})" if len(items) > len(shown) else "") + "</p>"]
        for run_id, t in shown:
            label = self.data.label_of(run_id, t.system)
            js = by_dlg.get((run_id, t.dialogue_id), [])
            scored = [r for r in js if r.get("status") == "scored" and r.get("score_100") is not None]
            mean = sum(r["score_100"] for r in scored) / len(scored) if scored else None
            situation = t.context.get("situation") or t.context.get("prompt") or t.context.get("query") or ""
            key = " ".join([label, t.task, t.context_id, t.user_profile or "", str(situation)] + [x.text for x in t.turns]).lower()
            turns = []
            for x in t.turns:
                d = x.directive
                dtxt = f'<div class="dir">Director: {E(json.dumps(d, ensure_ascii=False))}</div>' if d else ""
                turns.append(f'<div class="turn {"user" if x.is_user else "agent"}"><span class="who">[{x.round}] {E(x.speaker)}:</span> '
                             f"{E(x.text)}{dtxt}</div>")
            jrows = pd.DataFrame([{
                "judge": r["judge"], "level": r["level"], "agent": r.get("agent") or "–", "criterion": r["criterion"],
                "score": r.get("score"), "status": r.get("status"), "reason": r.get("reason") or "",
                "rationale": r.get("rationale") or "",
            } for r in sorted(js, key=lambda r: (r["judge"], r["level"], str(r.get("agent")), r["criterion"]))])
            jhtml = (html_table(jrows, digits=1, left=["judge", "level", "agent", "criterion", "status", "reason", "rationale"], cls="rat")
                     if not jrows.empty else '<p class="muted">not judged</p>')
            out.append(
                f'<details class="transcript" data-key="{E(key[:4000])}"><summary>{E(label)} · {E(t.task)} · {E(t.context_id)}'
                f" · {E(t.user_profile or '-')} · {len(t.turns)} turns · mean judge score {_fmt(mean, 1)}</summary>"
                f'<p class="note">Situation: {E(str(situation)[:600])}</p>{"".join(turns)}<h3>Judgments</h3>{jhtml}</details>'
            )
        self.add("transcripts", "Transcripts and judge rationales", "".join(out))

    def build(self) -> str:
        for step in (self.overview, self.leaderboard, self.comparisons, self.charts, self.drift, self.redundancy,
                     self.judges, self.threeway, self.training, self.transcripts):
            step()
        nav = "".join(f'<a href="#{a}">{E(h)}</a>' for a, h, _ in self.sections)
        secs = "".join(f'<section id="{a}"><h2>{E(h)}</h2>{b}</section>' for a, h, b in self.sections)
        now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return (
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{E(self.title)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>{E(self.title)}</h1><div>mascot-eval {E(__version__)} · generated {now} · runs: "
            f"{E(', '.join(sorted(self.data.manifests)))}</div></header><nav>{nav}</nav><main>{secs}</main>"
            f"<script>{SCRIPT}</script></body></html>"
        )


def build_report(run_dirs: Sequence[Any], out: str | Path, *, reference: str | None = None, test: str = "wilcoxon",
                 n_boot: int = 2000, seed: int = 0, max_transcripts: int = 300, title: str | None = None,
                 data: RunData | None = None, summary: dict[str, Any] | None = None) -> Path:
    """Write the HTML report for one or more run directories to ``out`` (atomically) and return its path."""
    data = data or load_runs(list(run_dirs))
    summary = summary or summarize_data(data, reference=reference, test=test, n_boot=n_boot, seed=seed)
    title = title or f"mascot-eval report: {', '.join(sorted(data.manifests))}"
    doc = ReportBuilder(data, summary, title=title, max_transcripts=max_transcripts).build()
    out = Path(out)
    atomic_write_text(out, doc)
    return out
