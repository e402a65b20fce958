"""Paired design by construction: the simulated user's opener for a (context, profile) is one call shared
by every system, recorded as shared in the transcript; later user turns get a system-independent seed."""

from __future__ import annotations

from mascot_eval.runs.rundir import RunDir
from mascot_eval.systems.generate import generate
from mascot_eval.taskspec import load_task


def _sampled_responder(request):
    """A user model whose answer depends on the prompt *and* the seed (as a sampled model's would)."""
    last = request.messages[-1]["content"]
    return f"opener {abs(hash((last[-60:], request.params.seed))) % 10_000} about the budget"


def test_two_systems_on_the_same_qmsum_context_start_from_identical_user_turns(tmp_path, fake_model, tmp_cache, data_dir):
    from tests import fakes

    spec = fake_model("u", _sampled_responder)
    rd = RunDir(tmp_path / "run", create=True)
    task = load_task("qmsum-product").model_copy(update={"rounds": 2})
    r = generate(rd, [task], ["zero-shot", "single-agent"], model=spec, limit=3, data_dir=data_dir, progress=False)
    assert r.failed == 0 and r.new == 6
    by_pair: dict[str, list] = {}
    for t in rd.transcripts():
        by_pair.setdefault(t.pair_key, []).append(t)
    assert len(by_pair) == 3
    for ts in by_pair.values():
        assert len(ts) == 2
        firsts = [t.turns[0] for t in ts]
        assert all(f.is_user and f.round == 1 for f in firsts)
        assert firsts[0].text == firsts[1].text and firsts[0].text  # byte-identical openers
        assert all(f.meta.get("shared") == "opener" and f.meta.get("source") == "simulator" for f in firsts)
        assert firsts[0].meta["share_key"] == firsts[1].meta["share_key"]
        # later user turns react to the agents' replies: not shared, but seeded without the system
        later = [[x for x in t.turns if x.is_user and x.round == 2] for t in ts]
        assert all(len(x) == 1 and not x[0].meta.get("shared") for x in later)
    user_prompts = [c for c in fakes.CALLS["u"] if "Start the conversation" in c.messages[-1]["content"]]
    assert len(user_prompts) == 3  # one opener call per context, not one per system
    seeds = {c.params.seed for c in fakes.CALLS["u"] if "Write your next message as the user" in c.messages[-1]["content"]}
    assert len(seeds) == 3  # round-2 user calls: one seed per context, the same for both systems


def test_ed_context_openers_are_the_human_line(tmp_path, fake_model, tmp_cache, data_dir):
    spec = fake_model("u2", _sampled_responder)
    rd = RunDir(tmp_path / "run", create=True)
    task = load_task("ed-positive").model_copy(update={"rounds": 1})
    generate(rd, [task], ["zero-shot", "single-agent"], model=spec, limit=2, data_dir=data_dir, progress=False)
    ts = rd.transcripts()
    assert len(ts) == 4
    assert all(t.turns[0].meta["source"] == "context" for t in ts)
    texts = {}
    for t in ts:
        texts.setdefault(t.pair_key, set()).add(t.turns[0].text)
    assert all(len(v) == 1 for v in texts.values())
