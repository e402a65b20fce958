"""examples/ci/regression.yml stays true: valid YAML, and every `mascot-eval` command in it uses
options the CLI has (run with --checkpoint and --out, then regress --baseline/--candidate)."""

from __future__ import annotations

import re
import shlex

import yaml

from mascot_eval.cli.main import cli
from mascot_eval.runs.regress import SPEC_RE
from tests.conftest import REPO

WORKFLOW = REPO / "examples" / "ci" / "regression.yml"


def _commands() -> tuple[dict, list[list[str]]]:
    wf = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    env = {k: str(v) for k, v in wf["env"].items()}
    cmds = []
    for step in wf["jobs"]["regression"]["steps"]:
        script = step.get("run", "").replace("\\\n", " ")
        for line in script.splitlines():
            line = re.sub(r'"?\$(\w+)"?', lambda m: env.get(m.group(1), m.group(0)), line.strip())
            if line.startswith("mascot-eval "):
                cmds.append(shlex.split(line)[1:])
    return wf, cmds


def _options(name: str) -> set[str]:
    cmd = cli.get_command(None, name)
    assert cmd is not None, name
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}


def test_workflow_runs_the_candidate_then_regress():
    wf, cmds = _commands()
    assert wf["name"] == "regression" and True in wf  # `on:` (YAML 1.1 reads it as True)
    assert [c[0] for c in cmds] == ["run", "regress"]
    for c in cmds:
        flags = [t.split("=", 1)[0] for t in c[1:] if t.startswith("--")]
        unknown = set(flags) - _options(c[0])
        assert not unknown, f"mascot-eval {c[0]}: unknown options {unknown}"
    run, regress = cmds
    out = run[run.index("--out") + 1]
    assert "--checkpoint" in run and "--task" in run and "--limit" in run and "--seed" in run
    assert regress[regress.index("--candidate") + 1] == out
    assert regress[regress.index("--baseline") + 1] == wf["env"]["BASELINE"]
    for spec in regress[regress.index("--metrics") + 1].split(","):
        assert SPEC_RE.match(spec), spec
    float(regress[regress.index("--tolerance") + 1])
