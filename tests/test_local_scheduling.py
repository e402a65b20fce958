"""How the local engine schedules its work (issue 18): decisions before generation, prefix groups that
save the most tokens, judge prompts that open with what they share, and calls in flight per backend.
These tests drive the engine's worker with its model calls replaced by recorders (no torch needed)."""

from __future__ import annotations

import asyncio
import os
import threading
from types import SimpleNamespace

import pytest

from mascot_eval.backends import local
from mascot_eval.backends.base import BACKENDS, ChatRequest, ChatResponse, GenerationParams, Usage
from mascot_eval.backends.client import ClientSettings, ModelClient, connections
from mascot_eval.judges.score import get_judge
from tests.judge_helpers import CARDS, transcript

DECIDE = GenerationParams(max_tokens=1, choices=("1", "2"))
REPLY = GenerationParams(max_tokens=8)


def _request(name: str, params: GenerationParams) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": name}], params)


class _Recorder:
    """An engine whose forward passes are recorded; each decision waits for its own gate to open."""

    def __init__(self, monkeypatch):
        self.engine = local.LocalEngine("none", "recorder")
        self.runs: list[tuple[str, list[str]]] = []
        self.gates: dict[str, threading.Event] = {}
        self.running: dict[str, threading.Event] = {}
        monkeypatch.setattr(self.engine, "load", lambda: None)
        monkeypatch.setattr(self.engine, "_run_choices", lambda jobs: self._run("decide", jobs))
        monkeypatch.setattr(self.engine, "_run_batch", lambda jobs: self._run("generate", jobs))

    def _run(self, kind: str, jobs) -> list[ChatResponse]:
        names = [j.request.messages[0]["content"] for j in jobs]
        self.runs.append((kind, names))
        for n in names:
            if n in self.running:
                self.running[n].set()
                self.gates[n].wait(10)
        return [ChatResponse(text=n, finish_reason="stop", usage=Usage(), latency_s=0.0, model="") for n in names]

    def decide(self, name: str, *, gated: bool = True):
        if gated:
            self.gates[name], self.running[name] = threading.Event(), threading.Event()
        return self.engine.submit(_request(name, DECIDE), None)

    def reply(self, name: str):
        return self.engine.submit(_request(name, REPLY), None)

    def open(self, name: str) -> None:
        self.gates[name].set()

    def wait_running(self, name: str) -> None:
        assert self.running[name].wait(10), f"{name} never ran"


def test_replies_wait_while_decisions_are_queued_and_then_share_one_generate_call(monkeypatch):
    """Two dialogues: one replies while the other still decides. The first reply is held until no decision
    is queued, so both replies run in one generate call (before: one call each)."""
    rec = _Recorder(monkeypatch)
    d1 = rec.decide("D1")
    rec.wait_running("D1")
    g1, d2 = rec.reply("G1"), rec.decide("D2")  # queued while D1 runs
    rec.open("D1")
    rec.wait_running("D2")  # the worker took G1 and D2 together: D2 runs, G1 is held
    g2 = rec.reply("G2")  # the second dialogue's reply, decided while G1 waited
    rec.open("D2")
    assert [f.result(10).text for f in (d1, g1, d2, g2)] == ["D1", "G1", "D2", "G2"]
    assert rec.runs == [("decide", ["D1"]), ("decide", ["D2"]), ("generate", ["G1", "G2"])]


def test_generation_alone_is_not_held(monkeypatch):
    rec = _Recorder(monkeypatch)
    assert rec.reply("G1").result(10).text == "G1"
    assert rec.runs == [("generate", ["G1"])]


def _held(n: int, age_s: float, now: float) -> list[SimpleNamespace]:
    return [SimpleNamespace(submitted=now - age_s) for _ in range(n)]


def test_hold_generation_ends_when_decisions_stop_and_never_past_its_limits():
    now = 1000.0
    assert local.hold_generation(_held(2, 0.1, now), True, now)  # a decision came: keep holding
    assert not local.hold_generation(_held(2, 0.1, now), False, now)  # a poll without decisions: release
    assert not local.hold_generation([], True, now)  # nothing held
    assert not local.hold_generation(_held(2, local.MAX_HOLD_S + 0.1, now), True, now)  # waited long enough
    assert not local.hold_generation(_held(local.MAX_BATCH, 0.1, now), True, now)  # a full batch waits
    assert local.hold_generation(_held(local.MAX_BATCH - 1, local.MAX_HOLD_S - 0.1, now), True, now)


def test_prefix_groups_keep_a_long_shared_prefix_whole():
    """A row that shares only a short opening with a group's last row must not cut the group's long
    prefix short (the greedy grouping before made all three share 20 tokens: 40 saved instead of 100)."""
    base = list(range(100, 200))
    a1, a2 = base + [1, 2, 3], base + [4, 5, 6]
    b = base[:20] + [7] * 12  # shares 20 tokens with the a rows
    rows = [a1, b, a2]
    marks = [[len(r) - 1] for r in rows]
    groups = local.shared_prefix_groups(rows, marks)
    assert sorted(sorted(m) for _, m in groups) == [[0, 2], [1]]
    assert dict((tuple(sorted(m)), n) for n, m in groups)[(0, 2)] == 100
    assert sorted(r for _, m in groups for r in m) == [0, 1, 2]  # every row, once


def test_prefix_groups_never_reach_a_mark_and_skip_short_openings():
    base = list(range(300, 340))
    rows = [base + [1], base + [2], base[:10] + [3], base[:10] + [4]]
    marks = [[35], [len(rows[1]) - 1], [len(rows[2]) - 1], [len(rows[3]) - 1]]
    groups = {tuple(sorted(m)): n for n, m in local.shared_prefix_groups(rows, marks)}
    assert groups[(0, 1)] == 35  # capped by row 0's first mark
    assert (2,) in groups and (3,) in groups  # 10 shared tokens are fewer than MIN_SHARED_TOKENS


def test_a_dialogues_judge_prompts_share_everything_up_to_the_agent():
    judge = get_judge("local")
    t = transcript(agent_text="a reply long enough to matter " * 5)
    cards = {c.name: c for c in CARDS}
    agents = [judge.agent_prompt(t, a, cards[a]) for a in t.agents]
    group = judge.group_prompt(t, cards)
    shared = os.path.commonprefix(agents)
    assert "a reply long enough to matter" in os.path.commonprefix([*agents, group])  # the material, with its nonce
    assert "## " in shared and shared.endswith("Agent to score: ")  # the rubric comes before the agent
    for a, p in zip(t.agents, agents):
        assert p[len(shared) :].startswith(f"{a}.")  # only the agent's name, card and the output differ
    # the nonce still follows the material: another dialogue gets other delimiters
    other = transcript(context_id="c2")
    assert judge.agent_prompt(other, "Anchor", cards["Anchor"]).split("\n")[1] != agents[0].split("\n")[1]


def test_local_models_and_api_models_get_their_own_calls_in_flight():
    from mascot_eval.systems.generate import _connections

    hf, api = BACKENDS.get("hf")("hf/some-model"), BACKENDS.get("openai-compatible")("openai-compatible/m@http://127.0.0.1:9/v1")
    assert connections(ClientSettings(), hf) == 64 and connections(ClientSettings(), api) == 8
    assert connections(ClientSettings(max_connections=3), hf) == 3 and connections(None, api) == 8
    assert _connections(None, "embedded") == 64 and _connections(ClientSettings(), "openai/gpt-4o") == 8
    assert _connections(ClientSettings(max_connections=5), "embedded") == 5

    async def sem_value(settings: ClientSettings) -> int:
        return ModelClient("hf/some-model", settings, backend=hf)._state().sem._value

    assert asyncio.run(sem_value(ClientSettings())) == 64
    assert asyncio.run(sem_value(ClientSettings(max_connections=2))) == 2
    with pytest.raises(Exception, match="at least 1"):
        ClientSettings(max_connections=0)
