"""On the real embedded SmolLM2-135M: every system and ablation writes valid transcripts, and
`mascot-eval run --judges local` completes with the whole run directory (slow; runs in CI)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from mascot_eval.paths import tasks_dir
from mascot_eval.runs.rundir import RunDir
from tests.cli_helpers import run_cli as _cli
from mascot_eval.systems.config import system_files
from mascot_eval.transcript import JSON_SCHEMA

pytestmark = [pytest.mark.slow, pytest.mark.torch]


@pytest.fixture
def one_round_task(tmp_path) -> Path:
    """The demo task cut to one round (same contexts) so every system fits in a CI minute or two."""
    # demo paths are relative to the task file's folder (absolute paths are refused), so the contexts travel along
    shutil.copy(tasks_dir() / "data" / "demo_contexts.yaml", tmp_path / "demo_contexts.yaml")
    p = tmp_path / "demo-1r.yaml"
    p.write_text(
        "name: demo-1r\nsplit: in_domain\ndomain: emotional\n"
        "source: {loader: demo, path: demo_contexts.yaml}\n"
        "personas: emotional\nuser: {profiles: [INFJ]}\nrounds: 1\n"
    )
    return p


def test_every_system_writes_valid_transcripts_on_the_embedded_model(one_round_task, tmp_path, tmp_cache, capsys):
    systems = [s for s in system_files() if s != "sft"]  # sft needs a checkpoint with an sft adapter
    out = tmp_path / "run"
    code, _, err = _cli(
        [
            "generate",
            "--task",
            str(one_round_task),
            "--system",
            ",".join(systems),
            "--limit",
            "1",
            "--out",
            str(out),
            "--no-progress",
            "--max-connections",
            "16",
        ],
        capsys,
    )
    assert code == 0, err
    ts = RunDir(out).transcripts()
    assert sorted(t.system for t in ts) == sorted(systems)
    for t in ts:
        jsonschema.validate(json.loads(json.dumps(t.to_dict())), JSON_SCHEMA)
        agent_turns = [x for x in t.turns if not x.is_user]
        assert t.turns[0].is_user and t.turns[0].text.strip()
        assert agent_turns and all(x.model == "embedded" for x in agent_turns), t.system
        # a 135M model sometimes writes only the user's next line: such a turn is resampled once, and if it is
        # still empty it stays empty, flagged and counted (never padded with made-up text)
        assert all(x.text.strip() or x.meta.get("empty") for x in agent_turns), t.system
        assert (t.stats.get("agents") or {}).get("empty_turns", 0) == sum(1 for x in agent_turns if not x.text.strip())
        assert all(x.speaker in t.agents for x in agent_turns)
    agent_turns = [x for t in ts for x in t.turns if not x.is_user]
    assert sum(1 for x in agent_turns if x.text.strip()) >= len(agent_turns) / 2
    by = {t.system: t for t in ts}
    assert by["single-agent"].agents != by["mascot"].agents and len(by["single-agent"].agents) == 1
    # on the embedded model every decision is made by choice scoring: valid by construction, no fallback
    for name in ("mascot", "mascot-p", "mascot-c"):
        d = by[name].stats["director"]
        assert d["mode"] == "choices" and d["decisions"] == d["valid_first"] == d["sources"]["constrained"] > 0, name
        assert d["fallbacks"] == 0 and d["invalid_reasons"] == {}, name
        assert all(
            x.directive and set(x.directive) == {"speaker", "action", "tone", "source"} and x.directive["source"] == "constrained"
            for x in by[name].turns
            if not x.is_user
        ), name
    assert all(x.speaker == x.meta["order"][i] for i, x in enumerate(by["mascot-c"].agent_turns))  # random order
    m = by["multiagentesc"].stats["multiagentesc"]
    assert m["mode"] == "choices" and m["strategy_sources"]["fallback"] == m["vote_sources"]["fallback"] == 0
    assert m["invalid_votes"] == m["strategy_fallbacks"] == m["selection_fallbacks"] == 0


def test_run_with_the_local_judge_on_the_embedded_model(one_round_task, tmp_path, tmp_cache, capsys):
    out = tmp_path / "run"
    code, stdout, err = _cli(
        [
            "run",
            "--task",
            str(one_round_task),
            "--limit",
            "2",
            "--judges",
            "local",
            "--out",
            str(out),
            "--no-progress",
            "--n-boot",
            "200",
        ],
        capsys,
    )
    assert code == 0, err
    rd = RunDir(out)
    assert len(rd.transcripts()) == 2
    rows = list(rd.judgments())
    assert rows and {r["judge"] for r in rows} == {"local"}
    # mode: logprob reads every score from the digit probabilities: nothing is left unscored
    assert all(r["status"] == "scored" and r["score"] in (1, 2, 3, 4, 5) and 1.0 <= r["weighted_score"] <= 5.0 for r in rows)
    for f in (
        "manifest.json",
        "transcripts.jsonl",
        "judgments.jsonl",
        "metrics.parquet",
        "metrics.csv",
        "summary.json",
        "report.html",
    ):
        assert (out / f).is_file(), f
    assert rd.read_manifest()["status"] == "complete"
    assert "report:" in stdout
