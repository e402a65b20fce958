"""examples/ci/regression.yml runs as written: its `run:` steps are executed in order with bash (as GitHub
Actions runs them: -eo pipefail, the workflow's env, `if:` on the baseline cache), in a temp dir, on the
embedded model with a tiny task; `uses:` steps are emulated (checkout = this checkout, cache = the folder
kept or not between two runs, upload = nothing) and the install step is this venv. The gate's exit
codes reach the job result."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mascot_eval.paths import cache_dir, tasks_dir
from tests.conftest import REPO
from tests.gatefactory import jittered
from tests.runfactory import build_run, noisy_scores

WORKFLOW = REPO / "examples" / "ci" / "regression.yml"
IF_MISS = re.compile(r"^steps\.([\w-]+)\.outputs\.cache-hit != 'true'$")


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def _steps() -> list[dict]:
    return _workflow()["jobs"]["regression"]["steps"]


def _env(tmp: Path, **over: str) -> dict[str, str]:
    wf = _workflow()
    env = {**os.environ, **{k: str(v) for k, v in wf["env"].items()}}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONPATH=str(REPO),
        GITHUB_STEP_SUMMARY=str(tmp / "summary.md"),
        GITHUB_WORKSPACE=str(tmp),
        MASCOT_CACHE_DIR=str(cache_dir()),  # the converted embedded model is there already
        MASCOT_RESPONSE_CACHE_DIR=str(tmp / "responses"),
        MASCOT_TORCH_THREADS="2",
    )
    env.update(over)
    return env


def run_steps(
    tmp: Path, env: dict[str, str], *, cache_hit: dict[str, bool], only: str | None = None
) -> list[tuple[str, int, str]]:
    """Run the workflow's steps in order; stop after the first failing one (then only `if: always()` steps,
    which are all `uses:` here). Returns (name, exit code, output) of each `run:` step executed."""
    done = []
    for step in _steps():
        name = step.get("name", step.get("uses", ""))
        if only is not None and name != only:
            continue
        if "uses" in step:
            assert step["uses"].split("@")[0] in (
                "actions/checkout",
                "actions/setup-python",
                "actions/cache",
                "actions/upload-artifact",
            ), step["uses"]
            continue
        if step.get("id") == "install":
            continue  # the test runs in the project's venv
        cond = step.get("if")
        if cond is not None:
            m = IF_MISS.match(cond)
            assert m, f"unsupported if: {cond}"
            if cache_hit[m.group(1)]:
                continue
        assert "${{" not in step["run"], f"{name}: expressions in run scripts are not emulated"
        p = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        done.append((name, p.returncode, p.stdout + p.stderr))
        if p.returncode != 0:
            break
    return done


def test_workflow_shape():
    wf = _workflow()
    assert wf["name"] == "regression" and True in wf  # `on:` (YAML 1.1 reads it as True)
    names = [s.get("name", s.get("uses")) for s in _steps()]
    assert (
        names.index("Restore the baseline run")
        < names.index("Produce the baseline (cache miss)")
        < names.index("Evaluate the candidate checkpoint")
        < names.index("Regression gate")
    )
    cache = next(s for s in _steps() if s.get("id") == "baseline-cache")
    assert cache["with"]["path"] == "baseline-run" and "checkpoints/reference/**" in cache["with"]["key"]
    assert wf["jobs"]["regression"]["timeout-minutes"] <= 60
    upload = _steps()[-1]
    assert upload["uses"].startswith("actions/upload-artifact") and upload["if"] == "always()"


@pytest.fixture
def tiny(tmp_path) -> dict[str, str]:
    """A one-round demo task and a one-agent system with short replies: the whole workflow in a minute or two."""
    # a task's demo/jsonl contexts must lie beside the task file (path confinement): copy them there
    shutil.copy(tasks_dir() / "data" / "demo_contexts.yaml", tmp_path / "demo_contexts.yaml")
    task = tmp_path / "demo-1r.yaml"
    task.write_text(
        "name: demo-1r\nsplit: in_domain\ndomain: emotional\nsource: {loader: demo, path: demo_contexts.yaml}\n"
        "personas: emotional\nuser: {profiles: [INFJ]}\nrounds: 1\n"
    )
    system = tmp_path / "tiny.yaml"
    system.write_text(
        (REPO / "baselines" / "single-agent.yaml")
        .read_text()
        .replace("name: single-agent", "name: tiny")
        .replace("max_tokens: 80", "max_tokens: 24")
    )
    return {
        "TASK": str(task),
        "SYSTEM": str(system),
        "LIMIT": "8",
        "CHECKPOINT": "",
        "REFERENCE": "",
        "JUDGES": "none",
        "METRICS": "distinct_2,dialogue_agent_tokens",
        "GATE_METRICS": "metric.distinct_2:higher=0.05,metric.dialogue_agent_tokens:higher=5",
    }


@pytest.mark.slow
@pytest.mark.torch
def test_workflow_runs_as_written_on_the_embedded_model(tmp_path, tiny):
    work = tmp_path / "runner"
    work.mkdir()
    env = _env(work, **tiny)
    # fresh runner, baseline cache miss: the baseline is produced, then the candidate, then the gate
    done = run_steps(work, env, cache_hit={"baseline-cache": False})
    assert [d[0] for d in done] == [
        "Datasets (downloaded on a cache miss)",
        "Produce the baseline (cache miss)",
        "Evaluate the candidate checkpoint",
        "Regression gate",
    ], done
    gate = done[-1][2]
    assert all(code == 0 for _, code, _ in done), [(n, c, o[-1500:]) for n, c, o in done]
    # the same base model twice, same seed: per-request seeds and shared openers make the runs identical
    assert "VERDICT: PASS (exit 0)" in gate and "gate passed" in gate
    assert "user openers identical on all 8 shared dialogues" in gate
    assert (work / "candidate-run" / "regress.csv").is_file() and "VERDICT" in (work / "summary.md").read_text()
    # next job on a fresh runner: the baseline is restored from the cache, the candidate is new
    shutil.rmtree(work / "candidate-run")
    done = run_steps(work, env, cache_hit={"baseline-cache": True})
    assert [d[0] for d in done] == [
        "Datasets (downloaded on a cache miss)",
        "Evaluate the candidate checkpoint",
        "Regression gate",
    ] and all(c == 0 for _, c, _ in done), done


def test_gate_exit_codes_reach_the_job_result(tmp_path):
    """The gate step alone on constructed runs: a regression fails the job (1), an inconclusive gate fails
    it (3) unless INCONCLUSIVE=pass, incomparable runs fail it (2)."""
    gate = "Regression gate"
    drop = jittered(2, "c", p_down=0.6, p_up=0.0)

    def job(base_score, cand_score, n, **env_over):
        work = tmp_path / f"w{len(list(tmp_path.iterdir()))}"
        work.mkdir()
        build_run(work / "baseline-run", systems=["mascot"], score=base_score, n_contexts=n)
        build_run(
            work / "candidate-run",
            systems=["mascot"],
            score=cand_score,
            n_contexts=n,
            judges=tuple(env_over.pop("judges", "gpt").split(",")),
        )
        env = _env(work, GATE_METRICS="agent.overall,group.overall", MARGIN="5", **env_over)
        ((name, code, out),) = run_steps(work, env, cache_hit={"baseline-cache": True}, only=gate)
        return code, out

    same = jittered(2, "b", p_down=0.1, p_up=0.1)
    code, out = job(same, drop, 40)
    assert code == 1 and "::error::regression" in out and "VERDICT: FAIL" in out
    code, out = job(noisy_scores({"mascot": 0.5}, seed=2), noisy_scores({"mascot": 0.0}, seed=2), 3)
    assert code == 3 and "::error::gate inconclusive" in out
    code, out = job(noisy_scores({"mascot": 0.5}, seed=2), noisy_scores({"mascot": 0.0}, seed=2), 3, INCONCLUSIVE="pass")
    assert code == 0 and "::warning::gate inconclusive, counted as a pass" in out
    code, out = job(same, same, 10, judges="claude")
    assert code == 2 and "::error::unusable inputs (exit 2)" in out and "judges: baseline [gpt], candidate [claude]" in out
