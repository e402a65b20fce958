"""Our counterparts of the paper's figures: ablation table, MBTI x agent heatmap, model-size sweep."""

from __future__ import annotations

import json

import pandas as pd

from mascot_eval.runs.rundir import RunDir
from mascot_eval.runs.summary import summarize_data
from mascot_eval.runs.tables import load_runs
from mascot_eval.stats.figures import ablation_table, mbti_heatmap, paper_sensitivity, sensitivity_table
from mascot_eval.taskspec import MBTI_TYPES
from tests import fakes
from tests.cli_helpers import run_cli
from tests.judge_helpers import criteria_in, scores_json
from tests.runfactory import build_run, judgment_rows, noisy_scores
from tests.test_decisions import emo_context, prefer, run, text_responder


def test_ablation_table_beside_the_papers(tmp_path, capsys):
    rd = build_run(
        tmp_path / "abl",
        systems=["mascot", "mascot-p", "mascot-c"],
        n_contexts=10,
        score=noisy_scores({"mascot": 0.6, "mascot-p": 0.2, "mascot-c": 0.4}),
    )
    summary = summarize_data(load_runs([rd]), n_boot=200)
    tables = ablation_table(summary)
    df = tables["in_domain"]
    assert list(df["criterion"][:6]) == ["emotion", "empathy", "consistency", "relevance", "contribution", "overall"]
    row = df[(df["level"] == "agent") & (df["criterion"] == "overall")].iloc[0]
    assert row["paper.MASCOT"] == 73.7 and row["paper.MASCOT-P"] == 69.6 and row["paper.MASCOT-C"] == 72.8
    assert row["mascot.n"] == 10 and row["mascot.std"] > 0 and row["mascot.lo"] <= row["mascot.mean"] <= row["mascot.hi"]
    assert row["mascot.mean"] > row["mascot-p.mean"]
    g = df[(df["level"] == "group") & (df["criterion"] == "relevance")].iloc[0]
    assert g["paper.MASCOT-C"] == 47.9  # the paper's "coherence"
    md = tmp_path / "lb.md"
    code, _, _ = run_cli(["leaderboard", str(rd.path), "--markdown", str(md), "--n-boot", "200"], capsys)
    assert code == 0
    text = md.read_text()
    assert "### Ablations, in_domain, beside the paper" in text
    assert "| Level | Criterion | mascot | mascot-p | mascot-c | paper MASCOT | paper MASCOT-P | paper MASCOT-C |" in text
    line = next(x for x in text.splitlines() if x.startswith("| agent | Overall |"))
    assert " ± " in line and "n=10" in line and line.endswith("| 73.7 | 69.6 | 72.8 |")
    # the HTML report: the same table in the figures section, the systems in the same order as the markdown
    from tests.test_report import Doc

    code, _, _ = run_cli(["report", str(rd.path), "--n-boot", "200"], capsys)
    assert code == 0
    doc = Doc((rd.path / "report.html").read_text(encoding="utf-8"))
    abl = doc.table("figures", "paper.MASCOT", cls="paper")
    assert list(abl.columns[:8]) == [
        "level",
        "criterion",
        "mascot",
        "mascot-p",
        "mascot-c",
        "paper.MASCOT",
        "paper.MASCOT-P",
        "paper.MASCOT-C",
    ]
    hrow = abl[(abl["level"] == "agent") & (abl["criterion"] == "overall")].iloc[0]
    mrow = row  # the ablation_table row above
    assert (
        hrow["mascot"]
        == f"{mrow['mascot.mean']:.1f} ± {mrow['mascot.std']:.1f} [{mrow['mascot.lo']:.1f}, {mrow['mascot.hi']:.1f}] n=10"
    )
    assert (hrow["paper.MASCOT"], hrow["paper.MASCOT-P"], hrow["paper.MASCOT-C"]) == ("73.7", "69.6", "72.8")


def test_mbti_heatmap_over_16_profiles(tmp_path, fake_model, tmp_cache, capsys):
    fake_model("hm", text_responder())
    spec = fakes.script_probs("hm", prefer(["Catalyst"]))
    pairs = [(emo_context(i), p) for i, p in enumerate(MBTI_TYPES)]
    _, _, rd = run(tmp_path, ["mascot"], spec, pairs=pairs, rounds=1)
    ts = rd.transcripts()
    assert sorted(t.user_profile for t in ts) == sorted(MBTI_TYPES)
    prof = {t.dialogue_id: t.user_profile for t in ts}

    def score(system, ctx, level, agent, crit):  # constructed judgments: E profiles 4, I profiles 2; Catalyst +1
        t = ts[ctx]
        s = 4.0 if prof[t.dialogue_id].startswith("E") else 2.0
        return s + (1.0 if agent == "Catalyst" else 0.0) if level == "agent" else 3.0

    for i, t in enumerate(ts):
        for row in judgment_rows(t, "gpt", score, i):
            rd.append_judgment(row)
    data = load_runs([rd])
    df = mbti_heatmap(data, "mascot", "agent.overall", n_boot=200)
    assert list(dict.fromkeys(df["profile"])) == list(MBTI_TYPES) + ["all"]
    assert list(dict.fromkeys(df["agent"])) == ["Anchor", "Catalyst", "Beacon", "all"]
    cell = df.set_index(["profile", "agent"])
    assert cell.loc[("ENFP", "Anchor"), "mean"] == 75.0 and cell.loc[("ENFP", "Catalyst"), "mean"] == 100.0
    assert cell.loc[("INTJ", "Beacon"), "mean"] == 25.0 and cell.loc[("INTJ", "Beacon"), "n"] == 1
    assert cell.loc[("all", "Anchor"), "n"] == 16 and cell.loc[("all", "all"), "n"] == 16
    assert cell.loc[("all", "Anchor"), "mean"] == 50.0
    cons = mbti_heatmap(data, "mascot", "agent.consistency", n_boot=200)
    assert len(cons) == 17 * 4
    md = tmp_path / "lb.md"
    code, _, _ = run_cli(["leaderboard", str(rd.path), "--markdown", str(md), "--n-boot", "200"], capsys)
    assert code == 0
    text = md.read_text()
    assert "### mascot: Overall (agent.overall) by user MBTI profile x agent" in text
    assert "### mascot: Consistency (agent.consistency) by user MBTI profile x agent" in text
    assert "| ENFP | 75.0 (n=1) | 100.0 (n=1) | 75.0 (n=1) | 83.3 (n=1) |" in text
    assert "| all | 50.0 (n=16) |" in text
    assert "### Decisions" in text and "| mascot | director | choices |" in text
    # the HTML report: one heatmap table per measure, profiles x agents with n per cell
    from tests.test_report import Doc

    code, _, _ = run_cli(["report", str(rd.path), "--n-boot", "200"], capsys)
    assert code == 0
    doc = Doc((rd.path / "report.html").read_text(encoding="utf-8"))
    heat = [t for t in doc.tables if t["section"] == "figures" and t["cls"] == "heatmap"]
    assert len(heat) == 2
    hm = pd.DataFrame(heat[0]["rows"][1:], columns=heat[0]["rows"][0]).set_index("profile")
    assert list(hm.columns) == ["Anchor", "Catalyst", "Beacon", "all"] and list(hm.index) == list(MBTI_TYPES) + ["all"]
    assert hm.loc["ENFP", "Catalyst"] == "100.0 (n=1)" and hm.loc["all", "Anchor"] == "50.0 (n=16)"
    assert "<h3>mascot: agent.consistency by user MBTI profile x agent" in doc.sections["figures"]


def test_sweep_over_two_director_models_writes_the_sensitivity_table(tmp_path, fake_model, tmp_cache, capsys):
    fake_model("s1", text_responder())  # speakers and the simulated user
    fake_model("judge", lambda req: scores_json(criteria_in(req.messages[-1]["content"]), value=4))
    fake_model("d1", text_responder())
    fakes.script_probs("d1", prefer(["Beacon"]))  # a Director that scores choices
    fake_model("d2", text_responder(director=lambda req: "no idea"))  # text only, always falls back
    out = tmp_path / "sweep"
    code, _, err = run_cli(
        [
            "sweep",
            "--vary",
            "director-model=fakeprobs/d1,fake/d2",
            "--vary",
            "speaker-model=fake/s1",
            "--model",
            "fake/s1",
            "--limit",
            "2",
            "--judges",
            "fake/judge",
            "--metrics",
            "none",
            "--no-report",
            "--no-progress",
            "--n-boot",
            "200",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, err
    sweep = json.loads((out / "sweep.json").read_text())
    assert [r["combination"] for r in sweep["runs"]] == [
        {"director-model": "fakeprobs/d1", "speaker-model": "fake/s1"},
        {"director-model": "fake/d2", "speaker-model": "fake/s1"},
    ]
    table = pd.read_csv(out / "sensitivity.csv")
    assert sorted(table["director_model"]) == ["fake/d2", "fakeprobs/d1"]  # one row per run
    assert set(table["speaker_model"]) == {"fake/s1"} and set(table["dialogues"]) == {2}
    assert (table["agent.overall.mean"] == 75.0).all() and (table["group.overall.n"] == 2).all()
    md = (out / "sensitivity.md").read_text()
    assert "### Model-size sensitivity (ours)" in md and "| Director | 0.6B | 51.7 | 63.9 |" in md
    assert "| Speaker | 8B | 71.5 | 68.4 |" in md
    # each run's manifest says which model played which role; the derived system file is kept
    runs = [RunDir(r["run_dir"]) for r in sweep["runs"]]
    models = [rd.read_manifest()["systems"]["mascot"]["models"]["demo"] for rd in runs]
    assert [m["director"] for m in models] == ["fakeprobs/d1", "fake/d2"]
    assert all(m["agent:anchor"] == "fake/s1" for m in models)
    by = {t.system: t for t in runs[1].transcripts()}
    assert by["mascot"].stats["director"]["fallbacks"] == by["mascot"].stats["director"]["decisions"] > 0
    # the same table from the leaderboard over the sweep's runs, with the decision statistics
    md2 = tmp_path / "lb.md"
    code, _, _ = run_cli(
        ["leaderboard", *[r["run_dir"] for r in sweep["runs"]], "--markdown", str(md2), "--n-boot", "200"], capsys
    )
    assert code == 0
    text = md2.read_text()
    assert "### Model-size sensitivity (ours)" in text and "fakeprobs/d1" in text
    assert "| director | choices |" in text and "| director | text |" in text
    # and in the HTML report over the sweep's runs: our sensitivity table beside the paper's Section 5.8
    from tests.test_report import Doc

    html = tmp_path / "sweep.html"
    code, _, _ = run_cli(["report", *[r["run_dir"] for r in sweep["runs"]], "--out", str(html), "--n-boot", "200"], capsys)
    assert code == 0
    doc = Doc(html.read_text(encoding="utf-8"))
    ours = doc.table("figures", "director_model", cls="sensitivity")
    assert sorted(ours["director_model"]) == ["fake/d2", "fakeprobs/d1"] and set(ours["speaker_model"]) == {"fake/s1"}
    paper = doc.table("figures", "factor", cls="paper")
    assert {"director", "speaker"} == set(paper["factor"]) and {"0.6B", "1.7B", "8B"} <= set(paper["size"])
    d06 = paper[(paper["factor"] == "director") & (paper["size"] == "0.6B")].iloc[0].tolist()
    assert "51.7" in d06 and "63.9" in d06  # the digitised values the markdown prints too
    dec = doc.table("decisions", "decision")
    assert sorted(dec[dec["decision"] == "director"]["mode"]) == ["choices", "text"]
    # rerunning the sweep resumes: nothing new is generated
    n_calls = len(fakes.CALLS.get("s1", []))
    code, _, err = run_cli(
        [
            "sweep",
            "--vary",
            "director-model=fakeprobs/d1,fake/d2",
            "--vary",
            "speaker-model=fake/s1",
            "--model",
            "fake/s1",
            "--limit",
            "2",
            "--judges",
            "fake/judge",
            "--metrics",
            "none",
            "--no-report",
            "--no-progress",
            "--n-boot",
            "200",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0 and len(fakes.CALLS.get("s1", [])) == n_calls
    assert "0 new, 2 reused" in err


def test_sensitivity_table_needs_director_runs_and_paper_values():
    pub = paper_sensitivity()
    assert list(pub["factor"]) == ["director"] * 3 + ["speaker"] * 3
    assert pub[(pub["factor"] == "speaker") & (pub["size"] == "0.6B")].iloc[0]["collective"] == 50.5


def test_sweep_rejects_a_bad_vary(tmp_path, capsys):
    code, _, err = run_cli(["sweep", "--vary", "directr-model=a,b", "--out", str(tmp_path / "s")], capsys)
    assert code == 2 and "unknown key 'directr-model'" in err and "director-model" in err
    code, _, err = run_cli(
        ["sweep", "--vary", "director-model=fake/a", "--system", "zero-shot", "--out", str(tmp_path / "s")], capsys
    )
    assert code == 2 and "has no Director" in err
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").glob("*/manifest.json"))


def test_sensitivity_table_from_manifests(tmp_path):
    a = build_run(
        tmp_path / "ra",
        systems=["mascot"],
        score=noisy_scores({"mascot": 0.5}),
        n_contexts=6,
        manifest={
            "systems": {
                "mascot": {
                    "kind": "mascot",
                    "models": {"ed-positive": {"director": "hf/small", "agent:anchor": "hf/big", "agent:catalyst": "hf/big"}},
                }
            }
        },
    )
    b = build_run(
        tmp_path / "rb",
        systems=["mascot"],
        score=noisy_scores({"mascot": 0.1}),
        n_contexts=6,
        manifest={
            "systems": {"mascot": {"kind": "mascot", "models": {"ed-positive": {"director": "hf/big", "agent:anchor": "hf/big"}}}}
        },
    )
    t = sensitivity_table(load_runs([a, b]), n_boot=200)
    assert list(t["label"]) == ["mascot@ra", "mascot@rb"] and list(t["director_model"]) == ["hf/small", "hf/big"]
    assert list(t["speaker_model"]) == ["hf/big", "hf/big"]
    assert t.iloc[0]["agent.overall.mean"] > t.iloc[1]["agent.overall.mean"] and (t["agent.overall.n"] == 6).all()
