"""The HTML report's content on hand-built run directories: self-contained images, leaderboard with
intervals and marks, charts, drift and redundancy per round, judge agreement, three-way results,
training logs from the checkpoint and the transcript browser with every judge's rationale."""

from __future__ import annotations

import base64
import re
import struct
from html.parser import HTMLParser

import pandas as pd
import pytest

from mascot_eval.fileio import append_jsonl
from mascot_eval.reports.html import render_report as build_report
from mascot_eval.reports.leaderboard import cell, leaderboard_frame
from mascot_eval.runs.summary import summarize_data
from mascot_eval.runs.tables import load_runs
from tests.reportfactory import build_report_run
from tests.runfactory import build_run, judgment_rows, make_transcript, noisy_scores
from tests.cli_helpers import run_cli

N_BOOT = 200
SECTIONS = [
    "overview",
    "leaderboard",
    "comparisons",
    "charts",
    "drift",
    "redundancy",
    "judges",
    "threeway",
    "figures",
    "training",
    "transcripts",
]


class Doc(HTMLParser):
    """Sections (id -> raw html), images (src, alt) and tables (list of row lists, with the section and class)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.text = text
        self.images: list[dict[str, str]] = []
        self.tables: list[dict] = []
        self.scripts = 0
        self.external: list[str] = []
        self._section = ""
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self.feed(text)
        self.sections = {m.group(1): m.group(2) for m in re.finditer(r'<section id="([^"]+)">(.*?)</section>', text, re.S)}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self._section = a.get("id", "")
        elif tag == "img":
            self.images.append({"src": a.get("src", ""), "alt": a.get("alt", ""), "section": self._section})
        elif tag == "table":
            self.tables.append({"section": self._section, "cls": a.get("class", ""), "rows": []})
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "script":
            self.scripts += 1
            if a.get("src"):
                self.external.append(a["src"])
        elif tag == "link" and a.get("href"):
            self.external.append(a["href"])

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[-1]["rows"].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def table(self, section: str, header_has: str, cls: str | None = None) -> pd.DataFrame:
        for t in self.tables:
            if t["section"] == section and t["rows"] and header_has in t["rows"][0] and (cls is None or t["cls"] == cls):
                return pd.DataFrame(t["rows"][1:], columns=t["rows"][0])
        raise AssertionError(f"no table with column {header_has!r} in section {section}")


def png_size(uri: str) -> tuple[int, int]:
    assert uri.startswith("data:image/png;base64,"), uri[:40]
    raw = base64.b64decode(uri.split(",", 1)[1], validate=True)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and raw[12:16] == b"IHDR"
    return struct.unpack(">II", raw[16:24])


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    rd = build_report_run(tmp)
    assert run_cli(["report", str(rd.path), "--n-boot", str(N_BOOT)])[0] == 0
    return rd, Doc(rd.report_path.read_text(encoding="utf-8"))


def test_self_contained_with_every_section(full):
    _, doc = full
    assert list(doc.sections) == SECTIONS
    assert doc.external == [] and "http://" not in doc.text and "https://" not in doc.text
    assert doc.scripts == 1  # the transcript filter, inline
    sizes = [png_size(i["src"]) for i in doc.images]
    assert all(w > 50 and h > 50 for w, h in sizes)
    per_section = pd.Series([i["section"] for i in doc.images]).value_counts().to_dict()
    # bars: agent, group, metrics; radars: one per system; drift: systems + one per agent panel per system
    assert per_section["charts"] == 3 + 3
    assert per_section["drift"] == 1 + 3
    assert per_section["redundancy"] == 1 and per_section["judges"] == 1
    assert per_section["threeway"] == 1 and per_section["training"] == 1
    alts = {i["alt"] for i in doc.images}
    assert {"radar mascot in_domain", "radar zero-shot in_domain", "radar few-shot in_domain"} <= alts


def test_leaderboard_intervals_and_marks_match_the_summary(full):
    rd, doc = full
    data = load_runs([rd])
    summary = summarize_data(data, n_boot=N_BOOT, seed=0)
    frame = leaderboard_frame(summary).set_index("system")
    agent = doc.table("leaderboard", "Contribution").set_index("System")
    assert list(agent.columns) == ["Emotion", "Empathy", "Consistency", "Relevance", "Contribution", "Overall", "n"]
    assert agent.loc["mascot (reference)", "Overall"] == cell(frame.loc["mascot"], "agent.overall")
    z = agent.loc["zero-shot", "Overall"]
    assert z == cell(frame.loc["zero-shot"], "agent.overall")
    assert re.fullmatch(r"\d+\.\d \[\d+\.\d, \d+\.\d\]\*+", z)  # mean [lo, hi] and a significance mark
    assert not agent.loc["mascot (reference)", "Overall"].endswith("*")
    assert set(agent["n"]) == {"12"}
    group = doc.table("leaderboard", "Fidelity")
    assert "Originality" in group.columns and len(group) == 3
    metrics = doc.table("leaderboard", "inter_agent_selfbleu")
    assert metrics.set_index("System").loc["mascot (reference)", "inter_agent_selfbleu"].startswith("0.125 [")
    paper = doc.table("leaderboard", "Source")
    assert {"ours", "paper"} <= set(paper["Source"])
    comps = doc.table("comparisons", "p_holm")
    assert set(comps["a"]) == {"mascot"} and set(comps["b"]) == {"zero-shot", "few-shot"}
    assert (comps[comps["measure"] == "agent.overall"]["sig"] != "").all()


def test_drift_and_redundancy_per_round(full):
    _, doc = full
    drift = doc.sections["drift"]
    assert "metric proxy" in drift and "not a judge score" in drift
    t = doc.table("drift", "change", cls="drift").set_index("system")
    # runfactory: persona_similarity = 0.5 - 0.05 * round + v / 10, so every dialogue drifts by -0.05
    assert set(t["change"]) == {"-0.050"} and set(t["n"]) == {"12"}
    assert t.loc["mascot", "mean first"] == "0.461"
    r = doc.table("redundancy", "change", cls="redundancy").set_index("system")
    assert set(r["change"]) == {"0.010"}  # inter_agent_selfbleu = v + 0.01 * round
    assert r.loc["mascot", "mean first"] == "0.120" and r.loc["zero-shot", "mean last"] == "0.330"


def test_judge_agreement_and_diagnostics(full):
    _, doc = full
    ag = doc.table("judges", "statistic", cls="agreement")
    assert {"alpha_interval", "alpha_ordinal", "spearman"} <= set(ag["statistic"])
    vals = ag["value"].astype(float)
    assert ((vals > 0.5) & (vals < 1.0)).all()  # claude is half a point off on a third of the items
    per = doc.table("judges", "agent.overall", cls="perjudge")
    assert set(per["judge"]) == {"gpt", "claude"} and len(per) == 6
    diag = doc.table("judges", "judge_model", cls="diagnostics")
    assert set(diag["judge"]) == {"gpt", "claude"}
    judge_rows = doc.table("overview", "unscored rows").set_index("judge")
    assert (
        judge_rows.loc["claude", "unscored rows"] == "1" and "no score in reply" in judge_rows.loc["claude", "unscored reasons"]
    )


def test_threeway_results(full):
    _, doc = full
    t = doc.table("threeway", "BT rank", cls="threeway").set_index("system")
    assert t.loc["mascot", "win"] == "0.667" and t.loc["mascot", "BT rank"] == "1"  # 8 of 12 contexts, 4 ties
    assert t.loc["zero-shot", "win"] == "0.000" and t.loc["zero-shot", "tie"] == "0.333"
    pj = doc.table("threeway", "picks position 1").set_index("judge")
    assert pj.loc["gpt", "calls"] == "72" and pj.loc["gpt", "picks position 1"] == "0.333"
    assert doc.sections["threeway"].count('class="verdict"') == 12 and "A listens best" in doc.sections["threeway"]


def test_training_logs_from_the_checkpoint(full):
    _, doc = full
    t = doc.table("training", "part").set_index("part")
    assert list(t.index) == ["anchor", "catalyst", "director", "reward model"]
    assert t.loc["director", "stage"] == "stage2" and t.loc["director", "steps"] == "6"
    assert t.loc["anchor", "last reward"] == "0.500" and t.loc["catalyst", "last reward"] == "0.440"
    assert t.loc["reward model", "heldout acc"] == "0.650"
    assert t.loc["anchor", "trainable %"] == "0.680" and t.loc["reward model", "trainable %"] == "–"
    assert "ckpt" in doc.sections["training"]


def test_transcript_browser_has_every_judge_rationale(full):
    rd, doc = full
    tr = doc.sections["transcripts"]
    items = re.findall(r'<details class="transcript" data-key="[^"]*"><summary>(.*?)</summary>(.*?)</details>', tr, re.S)
    assert len(items) == 36 and 'id="tfilter"' in tr
    first = next(body for head, body in items if head.startswith("mascot · ed-positive · c000"))
    assert "Anchor says something about 0 in round 1 as mascot." in first
    for judge in ("gpt", "claude"):
        assert f"<td class=\"l\">{judge}</td>" in first
    assert "because empathy looked like" in first and "no score in reply" in first
    n_rows = first.count("<tr>") - 1
    assert n_rows == 2 * (3 * 5 + 4)  # two judges x (3 agents x 5 criteria + 4 group criteria)


def test_per_round_judge_scores_and_missing_log(tmp_path):
    """Judge rows that carry a round are plotted per round; a checkpoint without a log is named, not plotted."""
    rd = build_run(
        tmp_path / "r",
        systems=["mascot"],
        score=noisy_scores({"mascot": 0.0}),
        n_contexts=3,
        manifest={"models": {"checkpoint": str(tmp_path / "nolog")}},
    )
    t = make_transcript("ed-positive", 0, "mascot")
    for r in (1, 2):
        for row in judgment_rows(t, "gpt", lambda *a: 4.0 - r, 0):
            if row["criterion"] == "consistency" and row["level"] == "agent":
                append_jsonl(
                    rd.judgments_path, {**row, "criterion": "consistency", "round": r, "dialogue_id": t.dialogue_id + f"#r{r}"}
                )
    doc = Doc(build_report([rd], tmp_path / "r.html", n_boot=100).read_text())
    assert any(i["alt"] == "judge consistency by round" for i in doc.images)
    assert "has no train_log.jsonl" in doc.sections["training"]
    assert all(png_size(i["src"])[0] > 0 for i in doc.images)


def test_empty_run_and_several_runs(tmp_path, capsys):
    bare = tmp_path / "bare"
    rd = build_run(bare, systems=["mascot"], score=lambda *a: None, n_contexts=2)  # every judge reply unscored
    doc = Doc(build_report([rd], tmp_path / "bare.html", n_boot=100).read_text())
    assert "No judgments or metrics" in doc.sections["leaderboard"] and "training" not in doc.sections
    assert doc.images == [] and len(re.findall(r'class="transcript"', doc.text)) == 2
    a = build_run(tmp_path / "base", systems=["mascot"], score=noisy_scores({"mascot": 0.0}), n_contexts=4)
    b = build_run(tmp_path / "cand", systems=["mascot"], score=noisy_scores({"mascot": 0.5}), n_contexts=4)
    assert run_cli(["report", str(a.path), str(b.path)])[0] == 2 and "--out" in capsys.readouterr().err
    out = tmp_path / "both.html"
    assert run_cli(["report", str(a.path), str(b.path), "--out", str(out), "--n-boot", "100"])[0] == 0
    assert f"report: {out}" in capsys.readouterr().out
    doc = Doc(out.read_text())
    agent = doc.table("leaderboard", "Contribution")
    assert set(agent["System"]) == {"mascot@base", "mascot@cand"}
    assert doc.table("comparisons", "p_holm")["n_pairs"].eq("4").all()
