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
from ..runs.tables import ALL_JUDGES, RunData, load_runs
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
.paper td{background:#f6f6ee}
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
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


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
                rows = [{"System": r["system"], **{measure_title(m): cell(r, m) if m in g.columns else "–" for m in ms},
                         "n": r.get(f"{level}.overall.n", "")} for _, r in g.iterrows()]
                parts.append(f"<h3>{level.capitalize()}-level, {E(split)}</h3>" + html_table(pd.DataFrame(rows), left=["System"]))
            mcols = [c for c in g.columns if c.startswith("metric.") and c.count(".") == 1 and g[c].notna().any()]
            if mcols:
                rows = [{"System": r["system"], **{m.split(".", 1)[1]: cell(r, m) for m in mcols}} for _, r in g.iterrows()]
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

    def drift(self) -> None:
        m = self.data.metrics
        if m.empty or "metric" not in m.columns:
            self.add("drift", "Persona consistency per round", '<p class="muted">No metrics computed.</p>')
            return
        img = plots.per_round(m, "persona_similarity", "Persona similarity by round (drift)", "cosine to persona card")
        note = ('<p class="note">Cosine similarity of each agent turn to its persona card (MiniLM embeddings), averaged per '
                "round; a falling line is the persona collapsing toward a generic voice. Bands: 95% bootstrap over contexts.</p>")
        extra = ""
        for name in ("persona_distinctiveness", "persona_separation"):
            extra += _img(plots.per_round(m, name, f"{name} by round", name), name) if name in set(m["metric"]) else ""
        self.add("drift", "Persona consistency per round", note + (_img(img, "persona drift") if img else
                 '<p class="muted">No per-turn persona_similarity metric in these runs.</p>') + extra)

    def redundancy(self) -> None:
        m = self.data.metrics
        imgs = []
        if not m.empty and "metric" in m.columns:
            for name, label in (("inter_agent_selfbleu", "self-BLEU between agents"), ("inter_agent_cosine", "cosine between agents"),
                                ("inter_agent_rougeL", "ROUGE-L between agents")):
                if name in set(m["metric"]):
                    imgs.append(_img(plots.per_round(m, name, f"Redundancy by round: {label}", name), name))
        note = ('<p class="note">How much the agents of one round repeat each other (social sycophancy shows as rising '
                "redundancy); lower is less redundant.</p>")
        self.add("redundancy", "Redundancy per round", note + ("".join(imgs) if imgs else '<p class="muted">No per-round redundancy metrics.</p>'))

    def judges(self) -> None:
        parts = []
        rows = self.data.judgments
        if not rows:
            self.add("judges", "Judge agreement and diagnostics", '<p class="muted">No judgments in these runs.</p>')
            return
        per_judge = self.est[(self.est["judge"] != ALL_JUDGES) & self.est["measure"].str.match(r"^(agent|group)\.")] if not self.est.empty else self.est
        if not per_judge.empty:
            pj = per_judge.pivot_table(index=["label", "split", "measure"], columns="judge", values="mean").reset_index()
            parts.append("<h3>Mean score per judge (0-100)</h3>" + html_table(pj, digits=1, left=["label", "split", "measure"]))
        try:
            from ..judges.agreement import agreement_table

            ag = agreement_table(rows, n_boot=self.agreement_boot, seed=self.summary['bootstrap']['seed'])
        except ImportError as exc:
            ag = None
            parts.append(f'<p class="muted">Agreement unavailable: {E(str(exc))}</p>')
        if ag is not None:
            if ag.empty:
                parts.append('<p class="muted">Agreement needs at least two judges scoring the same items.</p>')
            else:
                parts.append("<h3>Agreement (Krippendorff's alpha, Spearman)</h3>" + html_table(ag, digits=3, left=["level", "criterion", "statistic", "judges"]))
                a = ag[ag["statistic"] == "alpha_interval"]
                if not a.empty:
                    idx = a["level"] + "." + a["criterion"]
                    parts.append(_img(plots.hbar(pd.Series(a["value"].to_numpy(), index=idx), "Krippendorff's alpha (interval)", "alpha",
                                                 xlim=(-1, 1), err=(pd.Series(a["lo"].to_numpy(), index=idx), pd.Series(a["hi"].to_numpy(), index=idx))), "alpha"))
        try:
            from ..judges.diagnostics import diagnostics_table

            diag = diagnostics_table(rows, [t for _, t in self.data.transcripts], self.data.comparisons)
            parts.append("<h3>Diagnostics per judge</h3>" + html_table(diag, digits=3, left=["judge", "judge_model"]))
        except ImportError as exc:
            parts.append(f'<p class="muted">Diagnostics unavailable: {E(str(exc))}</p>')
        self.add("judges", "Judge agreement and diagnostics", "".join(parts))

    def threeway(self) -> None:
        comps = self.data.comparisons
        if not comps:
            self.add("threeway", "Three-way comparisons", '<p class="muted">No three-way comparisons; run '
                     "<code>mascot-eval compare RUN_DIR...</code> to add them.</p>")
            return
        from ..judges.threeway import summarize_comparisons

        s = summarize_comparisons(comps)
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
        body = (html_table(pd.DataFrame(rows), digits=3, left=["system"]) +
                f'<p class="note">Calls {pooled.get("n_calls", 0)}, valid {pooled.get("n_valid", 0)}, unscored {pooled.get("n_unscored", 0)}; '
                f"orders per context {s.get('orders_per_context', '–')}; first-position pick rate {_fmt(fp.get('mean'), 3)} "
                f"[{_fmt(fp.get('lo'), 3)}, {_fmt(fp.get('hi'), 3)}] (1/3 = no position bias); orders disagreeing on a context "
                f"{_fmt(od.get('mean'), 3)}; majority verdicts {E(json.dumps(pooled.get('context_verdicts', {})))}.</p>")
        body += _img(plots.stacked_shares(pd.DataFrame(shares).T, "Three-way outcome shares (pooled judges)"), "three-way shares")
        self.add("threeway", "Three-way comparisons", body)

    def training(self) -> None:
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
            df = pd.DataFrame(list(read_jsonl(log)))
            if df.empty:
                continue
            group_key = next((k for k in ("stage", "phase", "step_name", "component") if k in df.columns), None)
            groups = df.groupby(group_key, sort=False) if group_key else [("log", df)]
            for name, g in groups:
                g = g.reset_index(drop=True)
                x = "step" if "step" in g.columns else None
                if x is None:
                    g = g.assign(row=range(len(g)))
                    x = "row"
                ys = [c for c in g.columns if c not in (x, "time", group_key, "epoch") and pd.to_numeric(g[c], errors="coerce").notna().sum() > 1][:6]
                parts.append(_img(plots.curves(g, x, ys, f"{run_id}: {name}"), f"training {name}"))
        if parts:
            self.add("training", "Training logs", "".join(parts))

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
