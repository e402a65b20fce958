"""Run integrity (issue 13): the run directory tells the truth on its own.

Cards are read from the transcript; the manifest's cost equals the sum of the rows' costs (every
step, retries and failures included); status and exit codes say what happened; one writer per run
directory; a refused command changes nothing; metrics merge; the report escapes what models wrote;
every artifact validates against the exported JSON Schemas.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from mascot_eval.records.usage import round_cost
from mascot_eval.runs.rundir import RunDir
from tests.cli_helpers import run_cli
from tests.judge_helpers import criteria_in, scores_json
from tests.scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parent.parent


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def _gen_text(messages) -> str:
    last = messages[-1]["content"]
    return f"I hear you about {_h(last) % 97} things; what matters most to you right now?"


def _judge_text(messages) -> str:
    prompt = messages[-1]["content"]
    crit = criteria_in(prompt) if '{"rationale"' in prompt else []
    return scores_json(crit, 2 + _h(prompt) % 4) if crit else "no json"


@pytest.fixture
def no_backoff(monkeypatch):
    monkeypatch.setattr("mascot_eval.backends.client.backoff_delay", lambda *a, **k: 0.0)


@pytest.fixture
def prices(tmp_path, monkeypatch):
    p = tmp_path / "prices.yaml"
    p.write_text(
        "currency: USD\nper: 1000000\nmodels:\n"
        '  "openai-compatible/gen@*": {input: 0.5, output: 1.5}\n'
        '  "openai-compatible/j1@*": {input: 2.0, output: 8.0}\n'
        '  "openai-compatible/j2@*": {input: 3.0, output: 15.0}\n',
        encoding="utf-8",
    )
    monkeypatch.setattr("mascot_eval.backends.prices.prices_path", lambda: p)
    return p


def _row_costs(rd: RunDir) -> list[float]:
    """Every dollar a row of the run directory says was paid: transcript calls, failed attempts, judge units."""
    out = [c.usage.cost_usd for t in rd.transcripts(all_lines=True) for c in t.calls]
    out += [c["usage"]["cost_usd"] for f in rd.failures() for c in f.get("calls", [])]
    out += [r["usage"]["cost_usd"] for r in rd.judgments() if r.get("usage")]
    out += [r["usage"]["cost_usd"] for r in rd.comparisons()]
    return out


def _files(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_priced_judges_with_injected_errors_cost_status_and_resume(tmp_path, tmp_cache, no_backoff, prices, capsys):
    """Two priced judges, 20% injected 500s: manifest total == sum of rows, retries listed per step, the
    calls that failed for good make the run complete_with_failures (exit 1); a rerun pays nothing twice."""
    failing_units = set()
    attempts: dict[str, int] = {}

    def respond(model, messages, n):
        from tests.scripted_server import request_key

        key = request_key(model, messages)
        attempts[key] = attempts.get(key, 0) + 1
        if int(key, 16) % 5 == 0 and attempts[key] == 1:
            return 500  # a fifth of the requests fail once (the retry succeeds)
        if model == "gen":
            return _gen_text(messages)
        prompt = messages[-1]["content"]
        # which units fail for good must not depend on the data-block nonces: they hash the dialogue, whose
        # model spec carries the server's port, so with them in the hash a run could draw no failing unit at all
        stable = re.sub(r"id=[0-9a-f]+", "id=-", prompt)
        if model == "j2" and "Beacon" in prompt.split("Agent to score")[-1][:200] and _h(stable) % 3 == 0:
            failing_units.add(_h(stable))
            return 503  # some j2 units fail for good (every attempt)
        return _judge_text(messages)

    srv = ScriptedServer(respond)
    try:
        out = tmp_path / "run"
        args = [
            "run",
            "--task",
            "demo",
            "--limit",
            "4",
            "--system",
            "zero-shot",
            "--model",
            srv.spec("gen"),
            "--judges",
            f"{srv.spec('j1')},{srv.spec('j2')}",
            "--metrics",
            "distinct_1",
            "--n-boot",
            "100",
            "--no-progress",
            "--no-report",
            "--max-retries",
            "2",
            "--out",
            str(out),
        ]
        code, stdout, err = run_cli(args, capsys)
        rd = RunDir(out)
        m = rd.read_manifest()
        # the ledger: every step, totals equal to the rows exactly
        assert set(m["usage"]) == {"generate", "judge"}
        assert m["cost_usd"] == round_cost(math.fsum(_row_costs(rd))) and m["cost_usd"] > 0
        assert m["usage"]["generate"]["total"]["retries"] > 0 and m["usage"]["judge"]["total"]["retries"] > 0
        assert m["usage"]["judge"]["total"]["cost_usd"] > m["usage"]["generate"]["total"]["cost_usd"]
        assert set(m["usage"]["judge"]["by_tag"]) == {f"judge:{srv.spec('j1')}", f"judge:{srv.spec('j2')}"}
        failed = [r for r in rd.judgments() if r["status"] == "call_failed"]
        if failing_units:
            assert failed and code == 1, err
            assert m["status"] == "complete_with_failures"
            assert "judge:" in err and "failed for good" in err and "HTTP 503" in err
            assert m["usage"]["judge"]["total"]["failures"] == len({(r["dialogue_id"], r["agent"]) for r in failed})
        else:  # pragma: no cover - the script makes some units fail
            pytest.fail("the scripted server failed no unit for good")
        paid = {r["key"] for r in srv.requests if r.get("status") == 200}
        n_first = len(srv.requests)
        tot = {step: m["usage"][step]["total"] for step in ("generate", "judge")}
        with capsys.disabled():  # the figures, past the CLI's captured output
            print(
                f"\npriced run: exit {code}, status {m['status']}, manifest ${m['cost_usd']} = sum of rows; "
                + "; ".join(
                    f"{k}: {v['calls']} calls, {v['retries']} retries, {v['failures']} failed, ${v['cost_usd']}"
                    for k, v in tot.items()
                )
                + f"; server requests {n_first}"
            )

        # rerun: only the calls that failed for good are sent again; nothing answered before is paid twice
        code2, _, err2 = run_cli(args, capsys)
        again = srv.requests[n_first:]
        assert again and all(r["key"] not in paid for r in again)
        assert {r["model"] for r in again} == {"j2"}
        m2 = RunDir(out).read_manifest()
        assert m2["cost_usd"] == round_cost(math.fsum(_row_costs(RunDir(out))))
        assert len(m2["invocations"]) == 2 and m2["invocations"][-1]["status"] == m2["status"]
        assert code2 == (1 if m2["status"] == "complete_with_failures" else 0)
        print(f"rerun: {len(again)} requests, all j2 units that failed for good, none answered before; exit {code2}")
    finally:
        srv.close()


def test_every_judge_call_failing_is_not_complete(tmp_path, tmp_cache, fake_model, capsys):
    from mascot_eval.backends.base import BackendError
    from tests import fakes

    gen = fake_model("int-gen", fakes.default_responder)

    def broken(req):
        raise BackendError("judge endpoint is down", retryable=False, status=404)

    judge = fake_model("int-judge", broken)
    out = tmp_path / "run"
    code, _, err = run_cli(
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
            "--judges",
            judge,
            "--metrics",
            "none",
            "--no-report",
            "--no-progress",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 1, err
    m = RunDir(out).read_manifest()
    assert m["status"] == "complete_with_failures"
    assert "judge: 8 of 8 new judge call(s) failed for good" in err and "judge endpoint is down" in err


def test_every_dialogue_failing_exits_1_with_the_causes(tmp_path, tmp_cache, fake_model, capsys):
    def broken(req):
        raise RuntimeError("generation backend exploded")

    gen = fake_model("int-gen-broken", broken)
    out = tmp_path / "run"
    code, _, err = run_cli(
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
            "--judges",
            "none",
            "--metrics",
            "none",
            "--no-progress",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 1, err
    assert "generate: 2 of 2 dialogue(s) failed" in err and "generation backend exploded" in err
    m = RunDir(out).read_manifest()
    assert m["status"] == "failed" and len(RunDir(out).failures()) == 2


def _subprocess_run(args, env):
    return subprocess.Popen(
        [sys.executable, "-m", "mascot_eval.cli.main", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_processes_on_one_run_directory_one_writes(tmp_path):
    """The second process stops at once (exit 2, naming the holder's PID) and writes and pays nothing."""
    srv = ScriptedServer(lambda model, messages, n: _gen_text(messages))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    args = [
        "run",
        "--task",
        "demo",
        "--limit",
        "2",
        "--system",
        "zero-shot",
        "--model",
        srv.spec("gen"),
        "--judges",
        "none",
        "--metrics",
        "none",
        "--no-report",
        "--no-progress",
    ]
    try:
        # a reference run of the same command: how many requests one run makes
        ref = _subprocess_run([*args, "--out", str(tmp_path / "ref")], {**env, "MASCOT_RESPONSE_CACHE_DIR": str(tmp_path / "c0")})
        assert ref.wait(timeout=300) == 0, ref.stderr.read()
        one_run = len(srv.requests)
        srv.requests.clear()
        srv.seen.clear()
        srv.gate.clear()  # the first writer's first call hangs until released
        env1 = {**env, "MASCOT_RESPONSE_CACHE_DIR": str(tmp_path / "c1")}
        out = tmp_path / "run"
        a = _subprocess_run([*args, "--out", str(out)], env1)
        assert srv.seen.wait(timeout=300)
        assert RunDir(out).read_manifest()["status"] == "running"  # reset when the run starts
        before = _files(out)
        b = _subprocess_run([*args, "--out", str(out)], env1)
        assert b.wait(timeout=300) == 2
        err = b.stderr.read()
        assert f"PID {a.pid}" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert _files(out) == before
        srv.gate.set()
        assert a.wait(timeout=300) == 0, a.stderr.read()
        assert len(srv.requests) == one_run
        print(f"\ntwo processes on one --out: the server saw {len(srv.requests)} requests, one run's worth ({one_run})")
        assert len(RunDir(out).transcripts(all_lines=True)) == 2
    finally:
        srv.gate.set()
        srv.close()


def test_a_refused_run_leaves_the_run_directory_byte_identical(tmp_path, tmp_cache, fake_model, capsys):
    from tests import fakes

    gen = fake_model("int-refuse", fakes.default_responder)
    out = tmp_path / "run"
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
        "distinct_1",
        "--no-progress",
        "--out",
        str(out),
    ]
    assert run_cli(base, capsys)[0] == 0
    before = _files(out)
    code, _, err = run_cli([*base, "--seed", "5"], capsys)
    assert code == 2 and "different system config, model, user simulator or seed" in err
    assert _files(out) == before
    code, _, err = run_cli([*base[:-2], "--judges", "no-such-judge", "--out", str(out)], capsys)
    assert code == 2 and _files(out) == before


def test_metrics_subset_merges_into_the_table(tmp_path, tmp_cache, fake_model, capsys):
    from tests import fakes

    gen = fake_model("int-metrics", fakes.default_responder)
    out = tmp_path / "run"
    assert (
        run_cli(
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
                "--judges",
                "none",
                "--metrics",
                "distinct_1,turn_length_tokens",
                "--no-report",
                "--no-progress",
                "--out",
                str(out),
            ],
            capsys,
        )[0]
        == 0
    )
    code, _, err = run_cli(["metrics", str(out), "--metrics", "distinct_2"], capsys)
    assert code == 0, err
    df = pd.read_parquet(RunDir(out).metrics_path)
    assert set(df["metric"]) >= {"distinct_1", "turn_length_tokens", "distinct_2"}
    step = RunDir(out).read_manifest()["steps"]["metrics"]
    assert step["counts"]["computed"] == ["distinct_2"]
    # nothing changed: nothing is recomputed
    code, _, _ = run_cli(["metrics", str(out), "--metrics", "distinct_2"], capsys)
    assert code == 0 and RunDir(out).read_manifest()["steps"]["metrics"]["status"] == "skipped"


def test_every_shipped_system_is_generated_judged_and_reported(tmp_path, tmp_cache, fake_model, capsys):
    """single-agent plays a card of its own: judges, metrics and the report read it from the transcript."""
    from tests import fakes

    gen = fake_model("int-sys", fakes.default_responder)
    judge = fake_model("int-sys-judge", lambda req: _judge_text(req.messages))
    out = tmp_path / "run"
    code, stdout, err = run_cli(
        [
            "run",
            "--system",
            "mascot,single-agent,zero-shot",
            "--judges",
            judge,
            "--limit",
            "2",
            "--model",
            gen,
            "--metrics",
            "persona_similarity,distinct_1",
            "--n-boot",
            "100",
            "--no-progress",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, err
    rd = RunDir(out)
    single = [t for t in rd.transcripts() if t.system == "single-agent"]
    assert single and set(single[0].personas) == set(single[0].agents) and single[0].system_info.kind == "prompted"
    rows = [r for r in rd.judgments() if r["system"] == "single-agent"]
    assert rows and all(r["status"] == "scored" for r in rows)
    html = rd.report_path.read_text(encoding="utf-8")
    for s in ("mascot", "single-agent", "zero-shot"):
        assert f"<td class=\"l\">{s}" in html
    df = pd.read_parquet(rd.metrics_path)
    assert "single-agent" in set(df[df["metric"] == "persona_similarity"]["system"])


def test_judges_read_the_cards_the_agents_played(tmp_path, tmp_cache, fake_model, capsys, monkeypatch):
    """Editing a persona card after a run does not change how the run is judged."""
    import shutil

    from mascot_eval import paths
    from mascot_eval.personas import _load_all
    from tests import fakes

    tasks = tmp_path / "project" / "tasks"
    shutil.copytree(REPO / "tasks", tasks)
    for d in ("judges", "baselines"):
        (tmp_path / "project" / d).symlink_to(REPO / d)
    monkeypatch.setattr(paths, "tasks_dir", lambda: tasks)
    monkeypatch.setattr(paths, "personas_dir", lambda: tasks / "personas")
    _load_all.cache_clear()
    gen = fake_model("int-cards", fakes.default_responder)
    out = tmp_path / "run"
    assert (
        run_cli(
            [
                "run",
                "--system",
                "zero-shot",
                "--limit",
                "1",
                "--model",
                gen,
                "--judges",
                "none",
                "--metrics",
                "none",
                "--no-report",
                "--no-progress",
                "--out",
                str(out),
            ],
            capsys,
        )[0]
        == 0
    )
    card = tasks / "personas" / "anchor.yaml"
    card.write_text(card.read_text(encoding="utf-8").replace("emotional validator", "EDITED ROLE"), encoding="utf-8")
    _load_all.cache_clear()
    judge = fake_model("int-cards-judge", lambda req: _judge_text(req.messages))
    assert run_cli(["judge", str(out), "--judges", judge, "--levels", "agent", "--no-progress"], capsys)[0] == 0
    prompts = " ".join(r.messages[-1]["content"] for r in fakes.CALLS["int-cards-judge"])
    assert "emotional validator" in prompts and "EDITED ROLE" not in prompts
    _load_all.cache_clear()


def test_report_escapes_what_models_wrote(tmp_path, tmp_cache, fake_model, capsys):
    payload = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'"> ok'
    gen = fake_model("int-xss", lambda req: payload)
    judge = fake_model(
        "int-xss-judge",
        lambda req: _judge_text(req.messages).replace('"rationale": "fine"', '"rationale": "<script>x()</script>"'),
    )
    out = tmp_path / "run"
    code, _, err = run_cli(
        [
            "run",
            "--system",
            "zero-shot",
            "--limit",
            "1",
            "--model",
            gen,
            "--judges",
            judge,
            "--metrics",
            "none",
            "--n-boot",
            "100",
            "--no-progress",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, err
    html = RunDir(out).report_path.read_text(encoding="utf-8")
    assert "<script>document.title" not in html and "<img src=x" not in html and "<script>x()" not in html
    assert "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;" in html
    assert html.count("<script>") == 1  # the report's own transcript filter


def test_summary_holds_every_number_and_the_report_only_renders(tmp_path, monkeypatch):
    """The report builds from summary.json alone: no statistic is computed while rendering."""
    from mascot_eval.reports.html import render_report
    from mascot_eval.runs.summary import summarize
    from tests.reportfactory import build_report_run

    rd = build_report_run(tmp_path)
    s = summarize(rd, n_boot=100)
    assert s["agreement"] and s["judge_diagnostics"] and s["threeway"]["pooled"]["systems"]
    assert s["rounds"] and s["round_changes"] and s["training"][0]["parts"]

    def computes(*a, **k):
        raise AssertionError("the report computed a statistic")

    for target in (
        "mascot_eval.judges.agreement.agreement_table",
        "mascot_eval.judges.diagnostics.diagnostics_table",
        "mascot_eval.judges.threeway.summarize_comparisons",
        "mascot_eval.stats.bootstrap.bootstrap_mean",
        "mascot_eval.runs.summary.summarize_data",
    ):
        monkeypatch.setattr(target, computes)
    path = render_report([rd], tmp_path / "r.html", n_boot=100)
    text = path.read_text(encoding="utf-8")
    assert "alpha_interval" in text and "BT rank" in text and "heldout acc" in text


def test_artifacts_validate_against_the_exported_schemas(tmp_path, tmp_cache, fake_model, capsys):
    import jsonschema

    from tests import fakes

    gen = fake_model("int-schema", fakes.default_responder)
    judge = fake_model("int-schema-judge", lambda req: _judge_text(req.messages))
    out = tmp_path / "run"
    assert (
        run_cli(
            [
                "run",
                "--system",
                "mascot",
                "--limit",
                "1",
                "--model",
                gen,
                "--judges",
                judge,
                "--metrics",
                "distinct_1",
                "--n-boot",
                "100",
                "--no-progress",
                "--out",
                str(out),
            ],
            capsys,
        )[0]
        == 0
    )
    schemas = tmp_path / "schemas"
    assert run_cli(["schema", "--out", str(schemas)], capsys)[0] == 0
    load = lambda n: json.loads((schemas / f"{n}.schema.json").read_text())  # noqa: E731
    for line in (out / "transcripts.jsonl").read_text().splitlines():
        jsonschema.validate(json.loads(line), load("transcript"))
    for line in (out / "judgments.jsonl").read_text().splitlines():
        jsonschema.validate(json.loads(line), load("judgment"))
    jsonschema.validate(json.loads((out / "manifest.json").read_text()), load("manifest"))
    jsonschema.validate(json.loads((out / "summary.json").read_text()), load("summary"))
    for row in pd.read_csv(out / "metrics.csv").to_dict("records"):
        row = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        if row["round"] is not None:
            row["round"] = int(row["round"])
        jsonschema.validate(row, load("metric"))


def test_cost_limit_counts_every_step_and_holds_across_a_resume(tmp_path, tmp_cache, prices, capsys):
    srv = ScriptedServer(lambda model, messages, n: _gen_text(messages) if model == "gen" else _judge_text(messages))
    try:
        out = tmp_path / "run"
        args = [
            "run",
            "--task",
            "demo",
            "--limit",
            "3",
            "--system",
            "zero-shot",
            "--model",
            srv.spec("gen"),
            "--judges",
            srv.spec("j2"),
            "--metrics",
            "none",
            "--no-report",
            "--no-progress",
            "--max-connections",
            "1",
            "--out",
            str(out),
        ]
        code, _, err = run_cli([*args, "--cost-limit", "0.01"], capsys)
        assert code == 3 and "cost limit reached" in err
        m = RunDir(out).read_manifest()
        assert m["status"] == "stopped" and m["cost_usd"] >= 0.01 and "judge" in m["usage"]
        n = len(srv.requests)
        code, _, err = run_cli([*args, "--cost-limit", "0.01"], capsys)  # the same limit: already spent
        assert code == 3 and len(srv.requests) == n
    finally:
        srv.close()


def test_a_fully_cached_resume_calls_nothing_and_recomputes_nothing(tmp_path, tmp_cache, fake_model, capsys):
    from tests import fakes

    gen = fake_model("int-resume", fakes.default_responder)
    judge = fake_model("int-resume-judge", lambda req: _judge_text(req.messages))
    out = tmp_path / "run"
    args = [
        "run",
        "--system",
        "mascot",
        "--limit",
        "2",
        "--model",
        gen,
        "--judges",
        judge,
        "--metrics",
        "distinct_1,inter_agent_selfbleu",
        "--n-boot",
        "100",
        "--no-progress",
        "--out",
        str(out),
    ]
    assert run_cli(args, capsys)[0] == 0
    report = (out / "report.html").read_bytes()
    fakes.CALLS.clear()
    assert run_cli(args, capsys)[0] == 0
    assert not fakes.CALLS  # no model call, not even a cached one
    m = RunDir(out).read_manifest()
    steps = m["invocations"][-1]["steps"]
    assert steps["generate"]["counts"]["new"] == 0 and steps["judge"]["counts"]["new_units"] == 0
    assert {k: steps[k]["status"] for k in ("metrics", "summary", "report")} == {
        "metrics": "skipped",
        "summary": "skipped",
        "report": "skipped",
    }
    assert (out / "report.html").read_bytes() == report
