"""`mascot-eval run` end to end on the fake backend: every file of the run directory, the printed
table, the default run directory (same command -> same folder), resume after a kill, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mascot_eval.runs.rundir import RunDir
from tests.cli_helpers import run_cli as _cli
from tests.judge_helpers import criteria_in, scores_json

FAST_METRICS = "distinct_1,inter_agent_selfbleu,inter_agent_rougeL,turn_length_tokens"


def _judge(req):
    p = req.messages[-1]["content"]
    crit = criteria_in(p) if '{"rationale"' in p else []
    return scores_json(crit, 2 + len(p) % 4) if crit else "no json here"


def _args(out, gen, judge, *extra):
    return [
        "run",
        "--task",
        "demo",
        "--limit",
        "3",
        "--system",
        "mascot,zero-shot",
        "--model",
        gen,
        "--judges",
        judge,
        "--metrics",
        FAST_METRICS,
        "--n-boot",
        "200",
        "--no-progress",
        *(["--out", str(out)] if out else []),
        *extra,
    ]


def test_run_writes_the_whole_run_directory(tmp_path, fake_model, tmp_cache, capsys):
    from tests import fakes

    gen = fake_model("run-gen", fakes.default_responder)
    judge = fake_model("run-judge", _judge)
    out = tmp_path / "run"
    code, stdout, err = _cli(_args(out, gen, judge), capsys)
    assert code == 0, err
    rd = RunDir(out)
    ts = rd.transcripts()
    assert sorted({t.system for t in ts}) == ["mascot", "zero-shot"] and len(ts) == 6
    rows = list(rd.judgments())
    assert rows and all(r["judge"] == judge for r in rows)
    assert {r["level"] for r in rows} == {"agent", "group"}
    metrics = pd.read_parquet(rd.metrics_path)
    assert set(metrics["metric"]) == set(FAST_METRICS.split(","))
    assert (out / "metrics.csv").exists()
    summary = json.loads(rd.summary_path.read_text())
    est = {(e["label"], e["measure"], e["judge"]): e for e in summary["estimates"]}
    e = est[("mascot", "agent.overall", "all")]
    assert e["n"] == 3 and e["lo"] <= e["mean"] <= e["hi"]
    assert ("zero-shot", "metric.inter_agent_selfbleu", "all") in est
    assert summary["reference"] == "mascot" and summary["comparisons"]
    html = rd.report_path.read_text()
    assert "<table" in html and "data:image/png;base64," in html
    m = rd.read_manifest()
    assert m["status"] == "complete" and m["provenance"]["package"] == "mascot-eval"
    assert m["task_files"]["demo"]["content_hash"] and m["judges"][judge]["spec_hash"]
    steps = m["invocations"][-1]["steps"]
    assert steps["generate"]["counts"]["new"] == 6 and steps["judge"]["counts"]["new_units"] > 0
    assert steps["metrics"]["counts"]["rows"] > 0
    # the printed table: one row per system, judge scores with intervals and n
    assert "Results (0-100" in stdout and "mascot" in stdout and "n=3" in stdout
    assert f"report: {rd.report_path}" in stdout

    # same command again: nothing regenerated or re-judged, no model call made
    fakes.CALLS.clear()
    code, stdout, err = _cli(_args(out, gen, judge), capsys)
    assert code == 0, err
    assert "0 new, 6 reused" in err and "0 new judge calls" in err
    assert not fakes.CALLS.get("run-gen") and not fakes.CALLS.get("run-judge")
    assert len(RunDir(out).read_manifest()["invocations"]) == 2


def test_default_run_directory_is_named_after_the_settings(tmp_path, fake_model, tmp_cache, capsys, monkeypatch):
    from tests import fakes

    monkeypatch.setattr("mascot_eval.paths.results_dir", lambda: tmp_path / "results")
    gen = fake_model("run-gen2", fakes.default_responder)
    base = [
        "run",
        "--task",
        "demo",
        "--limit",
        "2",
        "--system",
        "zero-shot",
        "--model",
        gen,
        "--judges",
        "none",
        "--metrics",
        "none",
        "--no-report",
        "--no-progress",
    ]
    code, _, err = _cli(base, capsys)
    assert code == 0, err
    runs = list((tmp_path / "results" / "runs").iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("demo_zero-shot-")
    code, _, err = _cli(base, capsys)
    assert code == 0 and "0 new, 2 reused" in err
    assert len(list((tmp_path / "results" / "runs").iterdir())) == 1
    code, _, err = _cli(base[:-2] + ["--seed", "1", "--no-progress"], capsys)  # other settings: another run
    assert code == 0, err
    assert len(list((tmp_path / "results" / "runs").iterdir())) == 2
    assert not (runs[0] / "judgments.jsonl").exists() and not (runs[0] / "report.html").exists()


def test_run_resumes_after_a_kill(tmp_path, fake_model, tmp_cache, capsys):
    from tests import fakes

    gen = fake_model("run-gen3", fakes.default_responder)
    calls = {"n": 0}

    def dies_after_five(req):
        calls["n"] += 1
        if calls["n"] > 5:
            raise KeyboardInterrupt  # the process is killed while judging
        return _judge(req)

    judge = fake_model("run-judge3", dies_after_five)
    out = tmp_path / "run"
    code, _, err = _cli(_args(out, gen, judge, "--max-connections", "1"), capsys)
    assert code == 130
    rd = RunDir(out)
    assert len(rd.transcripts()) == 6
    done = len({(r["dialogue_id"], r["level"], r["agent"]) for r in rd.judgments()})
    assert 1 <= done <= 5
    assert rd.read_manifest()["status"] == "stopped"
    assert not rd.summary_path.exists()

    fake_model("run-judge3", _judge)  # the judge works again
    fakes.CALLS.clear()
    code, _, err = _cli(_args(out, gen, judge, "--max-connections", "1"), capsys)
    assert code == 0, err
    assert "0 new, 6 reused" in err and f"{done} reused" in err
    assert not fakes.CALLS.get("run-gen3")  # no dialogue regenerated
    units = {(r["dialogue_id"], r["level"], r["agent"]) for r in RunDir(out).judgments()}
    # every unit is judged once; a reply that arrived just before the kill came from the cache
    assert len(units) == 4 * 6 and len(fakes.CALLS["run-judge3"]) <= len(units) - done
    assert RunDir(out).read_manifest()["status"] == "complete" and RunDir(out).report_path.exists()


def test_run_bad_input_is_one_line_exit_2(tmp_path, fake_model, tmp_cache, capsys):
    code, out, err = _cli(["run", "--system", "mascott", "--out", str(tmp_path / "r"), "--no-progress"], capsys)
    assert code == 2
    assert err.startswith("error: ") and "mascot" in err and "Traceback" not in err
    code, out, err = _cli(["run", "--task", "no-such-task", "--out", str(tmp_path / "r2")], capsys)
    assert code == 2 and "no-such-task" in err and len(err.strip().splitlines()) == 1
    code, out, err = _cli(["run", "--model", "embeded", "--out", str(tmp_path / "r3")], capsys)
    assert code == 2 and "did you mean 'embedded'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists() and not (tmp_path / "r3").exists()  # nothing written


@pytest.mark.parametrize("flag", ["--judges", "--metrics"])
def test_run_steps_can_be_skipped(tmp_path, fake_model, tmp_cache, capsys, flag):
    from tests import fakes

    gen = fake_model("run-gen4", fakes.default_responder)
    other = "--metrics" if flag == "--judges" else "--judges"
    other_value = FAST_METRICS if other == "--metrics" else fake_model("run-judge4", _judge)
    out = tmp_path / "r"
    code, _, err = _cli(
        [
            "run",
            "--task",
            "demo",
            "--limit",
            "2",
            "--system",
            "zero-shot",
            "--model",
            gen,
            flag,
            "none",
            other,
            other_value,
            "--n-boot",
            "200",
            "--no-progress",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, err
    assert (out / "judgments.jsonl").exists() == (flag == "--metrics")
    assert (out / "metrics.parquet").exists() == (flag == "--judges")
    assert (out / "summary.json").exists() and (out / "report.html").exists()


@pytest.mark.parametrize("sigint", ["default", "ignored"])  # ignored: inherited by `cmd &`, as on CI runners
def test_sigterm_stops_the_run_cleanly_and_a_rerun_resumes(tmp_path, sigint):
    """A real process killed with SIGTERM mid-run: exit 143, manifest 'stopped', rerun completes.

    Mid-run by construction, not by timing: once the first dialogue is on disk, every model call
    blocks (awaiting an event nobody sets) and the run writes a 'blocked' file; only then is the
    signal sent. The run's last call (counted on an ungated reference run) waits for a dialogue on
    disk first, so a transcript writer that lags behind on a busy machine cannot let the run finish
    unblocked. The rerun goes without the gate."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    script = tmp_path / "gated_run.py"
    script.write_text(
        "import asyncio, os, sys\n"
        "from pathlib import Path\n"
        "from tests import fakes\n"
        "from mascot_eval.backends.base import BACKENDS\n"
        "GATE = os.environ.get('GATE_DIR')\n"
        "LAST = int(os.environ.get('GATE_LAST_CALL', '0'))\n"
        "CALLS = []\n"
        "class Gate(fakes.FakeBackend):\n"
        "    kind = 'gate'\n"
        "    async def generate(self, request):\n"
        "        CALLS.append(1)\n"
        "        done = Path(sys.argv[sys.argv.index('--out') + 1]) / 'transcripts.jsonl'\n"
        "        on_disk = lambda: done.exists() and done.read_text().strip()\n"
        "        if GATE and len(CALLS) >= LAST:  # the run's last call: not before a dialogue is on disk\n"
        "            while not on_disk():\n"
        "                await asyncio.sleep(0.02)\n"
        "        if GATE and on_disk():\n"
        "            (Path(GATE) / 'blocked').write_text('')\n"
        "            await asyncio.Event().wait()  # until SIGTERM cancels the run\n"
        "        return await super().generate(request)\n"
        "BACKENDS.add('gate', Gate)\n"
        "from mascot_eval.cli.main import main\n"
        "main(sys.argv[1:])\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
        "MASCOT_RESPONSE_CACHE_DIR": str(tmp_path / "cache"),
    }
    args = [
        sys.executable,
        str(script),
        "run",
        "--task",
        "demo",
        "--limit",
        "4",
        "--system",
        "zero-shot",
        "--model",
        "gate/sig-gen",
        "--judges",
        "none",
        "--metrics",
        "none",
        "--no-progress",
        "--max-connections",
        "1",
        "--out",
        str(out),
    ]
    ref_out = tmp_path / "ref"
    ref_args = [*args[:-1], str(ref_out)]
    ref = subprocess.run(
        ref_args,
        env={**env, "MASCOT_RESPONSE_CACHE_DIR": str(tmp_path / "ref-cache")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ref.returncode == 0, ref.stderr
    last_call = RunDir(ref_out).read_manifest()["usage"]["generate"]["total"]["calls"]
    assert last_call > 4
    gated_env = {**env, "GATE_DIR": str(tmp_path), "GATE_LAST_CALL": str(last_call)}
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint == "ignored" else None
    p = subprocess.Popen(args, env=gated_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore)
    try:
        while not (tmp_path / "blocked").exists():  # a file the run writes, not a deadline
            if p.poll() is not None:
                raise AssertionError(f"the run exited ({p.returncode}) before blocking: {p.stderr.read()}")
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143, err
    assert "interrupted: finished work is saved" in err and "Traceback" not in err
    rd = RunDir(out)
    done = len(rd.transcripts())
    assert 1 <= done < 4 and rd.read_manifest()["status"] == "stopped"
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"{4 - done} new, {done} reused" in r.stderr
    assert RunDir(out).read_manifest()["status"] == "complete"


def test_atomically_written_files_get_the_usual_permissions(tmp_path):
    import os
    import stat

    from mascot_eval.fileio import atomic_write_json

    p = tmp_path / "summary.json"
    atomic_write_json(p, {"a": 1})
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~mask


def test_run_help_states_the_exit_codes_the_docs_table_gives(capsys):
    """`run --help` and docs/errors.md name the same exit codes (0 complete, 1 failures, 2 bad input)."""
    code, out, _ = _cli(["run", "--help"], capsys)
    assert code == 0
    block = out.split("Exit codes:")[1].split("Options:")[0]
    assert [ln.split()[0] for ln in block.splitlines() if ln.strip()[:1].isdigit()] == ["0", "1", "2"]
    assert "complete_with_failures" in block and "another process holds the run directory" in block
    docs = (Path(__file__).resolve().parents[1] / "docs" / "errors.md").read_text(encoding="utf-8")
    assert "| 1 | complete_with_failures" in docs
