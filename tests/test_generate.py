"""generate(): resume after a kill, determinism, conflicts, checkpoints, bad input and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mascot_eval.errors import UserError
from mascot_eval.runs.rundir import RunDir
from mascot_eval.fileio import repair_jsonl_tail as repair_tail
from mascot_eval.systems.generate import generate
from mascot_eval.taskspec import load_task
from tests.test_engine import emo_context, responder
from tests.cli_helpers import run_cli

REPO = Path(__file__).resolve().parent.parent


def task(rounds=1):
    return load_task("demo").model_copy(update={"rounds": rounds})


def pairs(n):
    return {"demo": [(emo_context(i), None) for i in range(n)]}


def strip_volatile(t):
    """A transcript without wall-clock fields and usage (a rerun is served from the cache: free, no tokens)."""
    d = t.to_dict()
    d.pop("timing")
    d.pop("usage")
    d["calls"] = [{k: v for k, v in c.items() if k != "usage"} for c in d["calls"]]
    for turn in d["turns"]:
        turn["latency_s"] = None
        turn["usage"] = None
        (turn["meta"].get("director") or {}).pop("usage", None)
    d["stats"].pop("usage", None)
    return d


def test_rerun_reuses_finished_dialogues(tmp_path, fake_model, tmp_cache):
    from tests import fakes

    spec = fake_model("g", responder())
    rd = RunDir(tmp_path / "run", create=True)
    r1 = generate(rd, [task()], ["zero-shot"], model=spec, pairs=pairs(4), limit=2, progress=False)
    assert (r1.new, r1.reused, r1.failed) == (2, 0, 0)
    n_calls = len(fakes.CALLS["g"])
    r2 = generate(rd, [task()], ["zero-shot"], model=spec, pairs=pairs(4), progress=False)
    assert (r2.new, r2.reused) == (2, 2)
    assert len(fakes.CALLS["g"]) == 2 * n_calls  # only the two missing dialogues were generated
    r3 = generate(rd, [task()], ["zero-shot"], model=spec, pairs=pairs(4), progress=False)
    assert (r3.new, r3.reused) == (0, 4)
    assert len(rd.transcripts()) == 4
    m = rd.read_manifest()
    assert m["steps"]["generate"]["counts"]["reused"] == 4 and m["steps"]["generate"]["status"] == "done"
    assert m["systems"]["zero-shot"]["kind"] == "prompted" and m["seeds"] == {"generate": 0}
    assert m["tasks"]["demo"]["contexts"] == 4 and m["models"]["default"] == spec


def test_same_seed_same_transcript_different_seed_differs(tmp_path, fake_model, tmp_cache):
    from tests.fakes import default_responder

    spec = fake_model("d", default_responder)  # text depends on the request's seed and sample index
    out = []
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        rd = RunDir(tmp_path / name, create=True)
        generate(rd, [task(2)], ["mascot-c", "self-consistency"], model=spec, pairs=pairs(2), seed=seed, progress=False)
        out.append({t.dialogue_id: strip_volatile(t) for t in rd.transcripts()})
    assert out[0] == out[1]
    assert out[0] != out[2]
    assert out[0].keys() == out[2].keys()


def test_rerun_with_other_model_or_seed_is_refused(tmp_path, fake_model, tmp_cache):
    spec = fake_model("x", responder())
    other = fake_model("y", responder())
    rd = RunDir(tmp_path / "run", create=True)
    generate(rd, [task()], ["zero-shot"], model=spec, pairs=pairs(1), progress=False)
    before = rd.transcripts_path.read_bytes()
    with pytest.raises(UserError, match="different system config, model, user simulator or seed"):
        generate(rd, [task()], ["zero-shot"], model=other, pairs=pairs(1), progress=False)
    with pytest.raises(UserError, match="seed 0 vs 5"):
        generate(rd, [task()], ["zero-shot"], model=spec, pairs=pairs(1), seed=5, progress=False)
    assert rd.transcripts_path.read_bytes() == before


def test_truncated_tail_is_repaired_before_appending(tmp_path, fake_model, tmp_cache):
    spec = fake_model("r", responder())
    rd = RunDir(tmp_path / "run", create=True)
    generate(rd, [task()], ["zero-shot"], model=spec, pairs=pairs(1), progress=False)
    with open(rd.transcripts_path, "a") as fh:
        fh.write('{"schema": "mascot-transcript/1", "dialogue_id": "demo:c1:-:zero-sh')  # killed mid-write
    r = generate(rd, [task()], ["zero-shot"], model=spec, pairs=pairs(2), progress=False)
    assert (r.new, r.reused) == (1, 1)
    assert len(rd.transcripts_path.read_text().splitlines()) == 2
    assert {t.context_id for t in rd.transcripts()} == {"c0", "c1"}
    assert repair_tail(rd.transcripts_path) is False


KILL_SCRIPT = textwrap.dedent('''
    import asyncio, sys
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from tests import fakes
    from tests.test_engine import emo_context
    from mascot_eval.runs.rundir import RunDir
    from mascot_eval.systems.generate import generate
    from mascot_eval.taskspec import load_task

    OUT = Path({out!r})

    answer = fakes.FakeBackend.generate

    async def gated(self, request):
        """Answers until two dialogues are on disk, then blocks every call until the test kills us."""
        lines = OUT / "transcripts.jsonl"
        if lines.exists() and len(lines.read_text().splitlines()) >= 2:
            (OUT.parent / "blocked").write_text("")
            await asyncio.Event().wait()
        return await answer(self, request)

    fakes.FakeBackend.generate = gated  # this child only; the same spec as the resuming parent
    fakes.script("slow", lambda req: "Anchor is here." if req.tag != "user-sim" else "still sad")
    t = load_task("demo").model_copy(update={{"rounds": 1}})
    generate(RunDir(OUT, create=True), [t], ["zero-shot"], model="fake/slow", progress=False, concurrency=1,
             pairs={{"demo": [(emo_context(i), None) for i in range(40)]}})
''')


def wait_for(path: Path, proc: subprocess.Popen) -> None:
    """Until the child writes ``path``; fails (never guesses) if it exits first. Not a timing window:
    the child blocks until killed once it wrote the file, however slow the machine."""
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the child exited ({proc.returncode}) before writing {path}")
        time.sleep(0.05)


def test_killed_generate_resumes_without_regenerating(tmp_path, fake_model, tmp_cache):
    out = tmp_path / "run"
    script = tmp_path / "gen.py"
    script.write_text(KILL_SCRIPT.format(repo=str(REPO), out=str(out)))
    env = {**os.environ, "MASCOT_RESPONSE_CACHE_DIR": str(tmp_path / "cache-sub")}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, cwd=REPO)
    try:
        wait_for(tmp_path / "blocked", proc)
    finally:
        proc.kill()
        proc.wait()
    rd = RunDir(out)
    done_before = {t.dialogue_id: strip_volatile(t) for t in rd.transcripts()}
    assert 2 <= len(done_before) < 40  # every call after the second written dialogue blocked
    from tests import fakes

    spec = fake_model("slow", responder(agent=lambda r: "Anchor is here.", user=lambda r: "still sad"))
    r = generate(
        rd, [task()], ["zero-shot"], model=spec, progress=False, pairs={"demo": [(emo_context(i), None) for i in range(40)]}
    )
    assert r.reused == len(done_before) and r.new == 40 - len(done_before) and r.failed == 0
    after = {t.dialogue_id: strip_volatile(t) for t in rd.transcripts()}
    assert len(after) == 40
    assert all(after[k] == v for k, v in done_before.items())  # finished dialogues untouched
    assert len(fakes.CALLS["slow"]) == 3 * r.new  # 3 agent turns per new dialogue, nothing for reused ones


def test_empty_task_and_unknown_system_write_nothing(tmp_path, fake_model, tmp_cache):
    spec = fake_model("e", responder())
    rd = RunDir(tmp_path / "run", create=True)
    with pytest.raises(UserError, match="task 'demo': no contexts"):
        generate(rd, [task()], ["zero-shot"], model=spec, pairs={"demo": []}, progress=False)
    with pytest.raises(UserError, match="unknown system 'zero-shoot'.*did you mean 'zero-shot'"):
        generate(rd, [task()], ["zero-shoot"], model=spec, pairs=pairs(1), progress=False)
    with pytest.raises(UserError, match="no system given"):
        generate(rd, [task()], [], model=spec, pairs=pairs(1), progress=False)
    assert list(rd.path.iterdir()) == []


def test_model_failure_loses_only_that_dialogue(tmp_path, fake_model, tmp_cache):
    def agent(req):
        if "(1)" in req.messages[-1]["content"]:
            raise RuntimeError("backend exploded")
        return "fine"

    spec = fake_model("f", responder(agent=agent))
    rd = RunDir(tmp_path / "run", create=True)
    r = generate(rd, [task()], ["zero-shot"], model=spec, pairs=pairs(3), progress=False)
    assert (r.new, r.failed) == (2, 1)
    assert "backend exploded" in r.failures[0]["error"] and r.failures[0]["id"] == "demo:c1:-:zero-shot"
    assert rd.read_manifest()["steps"]["generate"]["status"] == "done_with_failures"


def make_checkpoint(root: Path, adapters=("anchor", "catalyst", "beacon", "director"), base="fake/ck") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for a in adapters:
        (root / "adapters" / a).mkdir(parents=True, exist_ok=True)
        (root / "adapters" / a / "adapter_config.json").write_text("{}")
    (root / "checkpoint.json").write_text(
        json.dumps(
            {
                "schema": "mascot-checkpoint/1",
                "base_model": base,
                "persona_group": "emotional",
                "adapters": {a: f"adapters/{a}" for a in adapters},
            }
        )
    )
    return root


def test_checkpoint_routes_each_role_to_its_adapter(tmp_path, fake_model, tmp_cache):
    from mascot_eval.systems.checkpoint import load_checkpoint
    from mascot_eval.systems.factory import build_system

    ck = make_checkpoint(tmp_path / "ck", adapters=("anchor", "catalyst", "beacon", "director", "sft"))
    c = load_checkpoint(ck)
    m = build_system("mascot", task(), model="fake/plain", checkpoint=c).models
    assert m["agent:catalyst"] == f"fake/ck#lora={ck.resolve()}/adapters/catalyst"
    assert m["director"] == f"fake/ck#lora={ck.resolve()}/adapters/director"
    mp = build_system("mascot-p", task(), model="fake/plain", checkpoint=c).models
    assert mp["agent:anchor"] == "fake/ck" and mp["director"].endswith("adapters/director")
    mc = build_system("mascot-c", task(), model="fake/plain", checkpoint=c).models
    assert mc["agent:beacon"].endswith("adapters/beacon")
    sft = build_system("sft", task(), model="fake/plain", checkpoint=c).models
    assert sft["agent:anchor"].endswith("adapters/sft") and sft["agent:beacon"].endswith("adapters/sft")
    zs = build_system("zero-shot", task(), model="fake/plain", checkpoint=c).models
    assert zs["agent:anchor"] == "fake/plain"  # the checkpoint is not used by the prompted baselines


def test_checkpoint_errors(tmp_path):
    from mascot_eval.systems.checkpoint import load_checkpoint
    from mascot_eval.systems.factory import build_system

    with pytest.raises(UserError, match="no checkpoint.json"):
        load_checkpoint(tmp_path)
    ck = make_checkpoint(tmp_path / "ck", adapters=("anchor", "beacon", "director"))
    with pytest.raises(UserError, match="no adapter 'catalyst' \\(needed by system 'mascot'\\)"):
        build_system("mascot", task(), checkpoint=load_checkpoint(ck))
    with pytest.raises(UserError, match="no adapter 'sft'"):
        build_system("sft", task(), checkpoint=load_checkpoint(ck))
    (ck / "adapters" / "anchor" / "adapter_config.json").unlink()
    ck2 = make_checkpoint(tmp_path / "ck2")
    (ck2 / "adapters" / "beacon" / "adapter_config.json").unlink()
    with pytest.raises(UserError, match="adapter 'beacon' folder .* has no adapter_config.json"):
        build_system("mascot", task(), checkpoint=load_checkpoint(ck2))
    (ck2 / "checkpoint.json").write_text('{"schema": "other"}')
    with pytest.raises(UserError, match="expected 'mascot-checkpoint/1'"):
        load_checkpoint(ck2)


def test_generate_with_checkpoint_records_adapter_specs(tmp_path, fake_model, tmp_cache):
    ck = make_checkpoint(tmp_path / "ck")
    spec = fake_model("plain", responder())
    rd = RunDir(tmp_path / "run", create=True)
    generate(rd, [task()], ["mascot"], model=spec, checkpoint=str(ck), pairs=pairs(1), progress=False)
    t = rd.transcripts()[0]
    assert t.agent_turns[0].model.startswith("fake/ck#lora=") and t.agent_turns[0].model.endswith("adapters/anchor")
    m = rd.read_manifest()["models"]
    assert m["checkpoint"] == str(ck.resolve()) and m["checkpoint_base_model"] == "fake/ck" and m["checkpoint_hash"]


def test_cli_generate_and_resume(tmp_path, fake_model, tmp_cache, capsys):
    spec = fake_model("cli", responder(director=lambda r: '{"speaker": "none"}'))
    out = tmp_path / "run"
    args = [
        "generate",
        "--task",
        "demo",
        "--system",
        "mascot,zero-shot",
        "--model",
        spec,
        "--limit",
        "2",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert run_cli(args)[0] == 0
    assert "4 new, 0 reused, 0 failed" in capsys.readouterr().out
    assert run_cli(args)[0] == 0
    assert "0 new, 4 reused" in capsys.readouterr().out
    ts = RunDir(out).transcripts()
    assert {t.system for t in ts} == {"mascot", "zero-shot"} and len(ts) == 4


def test_cli_bad_input_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_cli(["generate", "--system", "nope", "--out", str(out), "--no-progress"])[0] == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown system 'nope'") and len(err.splitlines()) == 1
    assert not (out / "transcripts.jsonl").exists()
    assert run_cli(["generate", "--system", "mascot", "--checkpoint", str(tmp_path), "--out", str(out), "--no-progress"])[0] == 2
    assert "no checkpoint.json" in capsys.readouterr().err
