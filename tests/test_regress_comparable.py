"""Comparable or refused: baseline and candidate must share tasks (versions, content hashes), contexts,
levels, judges (model, spec hash, template hash), rubrics and user-simulator settings; a difference is one
line naming the field and both values, exit 2, unless --allow-mismatch FIELD (then printed)."""

from __future__ import annotations

import json
import re

import pytest

from tests.cli_helpers import run_cli
from tests.gatefactory import jittered
from tests.runfactory import build_run

SCORE = jittered(5, "x", p_down=0.1, p_up=0.1)


def _gate(args, capsys):
    code, out, err = run_cli(["regress", *args], capsys)
    return code, out, err


@pytest.fixture
def base(tmp_path):
    return build_run(tmp_path / "base", systems=["mascot"], score=SCORE, n_contexts=10)


def _fields(err: str) -> list[str]:
    """The field named by each refusal line (`not comparable: FIELD[ (detail)]: baseline ..., candidate ...`)."""
    return [re.search(r"not comparable: ([^:]+):", line).group(1) for line in err.strip().splitlines()]


def _rewrite(path, fn):
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(fn(r)) + "\n" for r in rows))


def test_mismatched_judges_exit_2_naming_the_field(tmp_path, base, capsys):
    other = build_run(tmp_path / "claude", systems=["mascot"], score=SCORE, n_contexts=10, judges=("claude",))
    code, out, err = _gate(["--baseline", str(base.path), "--candidate", str(other.path)], capsys)
    assert code == 2 and not out, out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert "judges: baseline [gpt], candidate [claude]" in lines[0] and "--allow-mismatch judges" in lines[0]
    code, out, _ = _gate(["--baseline", str(base.path), "--candidate", str(other.path), "--allow-mismatch", "judges"], capsys)
    assert code in (0, 1, 3) and "allowed mismatch: judges: baseline [gpt], candidate [claude]" in out


def test_same_judge_name_other_spec_or_template(tmp_path, base, capsys):
    cand = build_run(tmp_path / "cand", systems=["mascot"], score=SCORE, n_contexts=10)
    _rewrite(cand.judgments_path, lambda r: {**r, "spec_hash": "s2", "template_hash": "t2", "judge_model": "fake/gpt-5"})
    code, _, err = _gate(["--baseline", str(base.path), "--candidate", str(cand.path)], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert _fields(err) == ["judge_model (gpt)", "judge_spec (gpt)", "judge_template (gpt)"] and len(lines) == 3
    assert "judge_spec (gpt): baseline [s], candidate [s2]" in err
    code, out, _ = _gate(
        [
            "--baseline",
            str(base.path),
            "--candidate",
            str(cand.path),
            "--allow-mismatch",
            "judge_model,judge_spec",
            "--allow-mismatch",
            "judge_template",
        ],
        capsys,
    )
    assert code in (0, 1, 3) and out.count("allowed mismatch:") == 3


def test_task_hash_version_levels_user_sim_and_rubric(tmp_path, base, capsys):
    cand = build_run(
        tmp_path / "cand",
        systems=["mascot"],
        score=SCORE,
        n_contexts=10,
        manifest={"judges": {"gpt": {"rubrics": {"agent": "r2", "group": "g"}}}},
    )
    cand.update_manifest(tasks={"ed-positive": {"version": "1", "content_hash": "def", "split": "in_domain"}})
    base.update_manifest(judges={"gpt": {"rubrics": {"agent": "r1", "group": "g"}}})
    _rewrite(
        cand.transcripts_path, lambda t: {**t, "stats": {**t.get("stats", {}), "user_sim": {"model": "embedded", "hash": "u2"}}}
    )
    _rewrite(cand.judgments_path, lambda r: r if r["level"] == "agent" else None)
    cand.judgments_path.write_text(cand.judgments_path.read_text().replace("null\n", ""))
    code, _, err = _gate(["--baseline", str(base.path), "--candidate", str(cand.path), "--metrics", "agent.overall"], capsys)
    assert code == 2
    assert _fields(err) == ["task_hash (ed-positive)", "levels", "rubric (gpt)", "user_sim"], err
    assert "task_hash (ed-positive): baseline abc, candidate def" in err
    assert "levels: baseline [agent, group], candidate [agent]" in err
    assert "user_sim: baseline [(not recorded)], candidate [hash=u2 model=embedded]" in err
    code, out, _ = _gate(
        [
            "--baseline",
            str(base.path),
            "--candidate",
            str(cand.path),
            "--metrics",
            "agent.overall",
            "--allow-mismatch",
            "task_hash,levels,rubric,user_sim",
        ],
        capsys,
    )
    assert code in (0, 1, 3) and out.count("allowed mismatch:") == 4


def test_tasks_and_contexts(tmp_path, base, capsys):
    other = build_run(tmp_path / "other", systems=["mascot"], score=SCORE, n_contexts=10, task="ed-negative")
    code, _, err = _gate(["--baseline", str(base.path), "--candidate", str(other.path)], capsys)
    assert code == 2 and "tasks: baseline [ed-positive], candidate [ed-negative]" in err
    fewer = build_run(tmp_path / "fewer", systems=["mascot"], score=SCORE, n_contexts=8)
    code, _, err = _gate(["--baseline", str(base.path), "--candidate", str(fewer.path)], capsys)
    assert code == 2 and "contexts: baseline 10 dialogues (2 not in candidate, e.g. ed-positive:c008:-" in err
    code, out, _ = _gate(
        [
            "--baseline",
            str(base.path),
            "--candidate",
            str(fewer.path),
            "--allow-mismatch",
            "contexts",
            "--metrics",
            "agent.overall",
        ],
        capsys,
    )
    assert "allowed mismatch: contexts" in out and " 8 " in next(x for x in out.splitlines() if "agent.overall" in x)


def test_unknown_field_and_other_unusable_inputs(tmp_path, base, capsys):
    code, _, err = _gate(["--baseline", str(base.path), "--candidate", str(base.path), "--allow-mismatch", "judge"], capsys)
    assert code == 2 and "not a field" in err and "did you mean" in err
    code, _, err = _gate(["--baseline", str(base.path), "--candidate", str(base.path), "--metrics", "agent.charisma"], capsys)
    assert code == 2 and "agent.charisma" in err
    two = build_run(tmp_path / "two", systems=["mascot", "zero-shot"], score=SCORE, n_contexts=10)
    code, _, err = _gate(["--baseline", str(base.path), "--candidate", str(two.path)], capsys)
    assert code == 2 and "several systems" in err
