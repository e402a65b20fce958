"""The simulated user: an LLM playing the person in the context, optionally with an MBTI profile.

Round 1 of an emotional-support context with a human opening line (EmpatheticDialogues, ESConv)
uses that line verbatim, so every system answers the same human-grounded opener; otherwise (and in
every later round) the user model writes the turn from the task's template
(``task.user.template``, default ``baselines/templates/user_simulator.j2``). The user ends the
conversation by writing ``[END]``; this is allowed from round 2 on and recorded as
``ended_by: "user"`` with the farewell (if any) as the last user turn.

Paired design. What the user says is shared across systems wherever it does not depend on what the
system said:

* the opener (round 1, before any agent speaks) reads only the context, the profile and the
  template, so it is the same request for every system: one call per (user model, prompt, decoding,
  seed), shared through :class:`SharedTurns` by every system of a run (and across runs through the
  response cache; local models also give it back byte for byte from its per-request seed). It is
  cleaned without any system's agent names and recorded with ``meta.shared = "opener"`` and a
  ``meta.share_key`` (the hash of that request), so two transcripts can be checked for the same opener;
* later user turns read the agents' replies, so they cannot be shared; they get the same seed for
  every system (``DialogueState.call_seed``: pair key and round, no system), which couples the
  sampling noise of two systems wherever their prompts agree (common random numbers).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import replace

from ..taskspec import TaskSpec
from ..transcript import USER, Turn
from ..backends.base import ChatResponse
from ..fileio import stable_hash
from .base import DialogueState, add_usage, context_vars, new_usage
from .config import Decoding
from .templates import Templates
from .text import clean_reply

END_MARK = re.compile(r"\[\s*end\s*\]|<\s*end\s*>", re.IGNORECASE)

MBTI_LETTERS = {
    "I": "introverted: reserved, shares a little at a time",
    "E": "extraverted: talkative, shares openly",
    "S": "sensing: talks about concrete facts and details",
    "N": "intuitive: talks about meanings and the big picture",
    "T": "thinking: logical, wants reasons and solutions",
    "F": "feeling: focused on feelings and people",
    "J": "judging: wants a plan and closure",
    "P": "perceiving: open-ended, keeps options open",
}

USER_DECODING = Decoding(max_tokens=64, temperature=0.7, top_p=0.95)


def profile_traits(profile: str | None) -> list[str]:
    if not profile:
        return []
    return [MBTI_LETTERS[ch] for ch in profile.upper() if ch in MBTI_LETTERS]


class SharedTurns:
    """User turns shared by the systems of one run: the first caller for a key makes the call, every
    other caller (concurrent or later) gets the same response. One instance per generate run."""

    def __init__(self) -> None:
        self._calls: dict[str, asyncio.Future[ChatResponse]] = {}

    async def get(self, key: str, make: Callable[[], Awaitable[ChatResponse]]) -> tuple[ChatResponse, bool]:
        """(response, made here); a failed call is forgotten so the next caller tries again."""
        fut = self._calls.get(key)
        owner = fut is None
        if fut is None:
            fut = self._calls[key] = asyncio.ensure_future(make())
        try:
            resp = await asyncio.shield(fut)
        except Exception:
            if self._calls.get(key) is fut:
                del self._calls[key]
            raise
        return resp, owner


class UserSimulator:
    def __init__(
        self,
        task: TaskSpec,
        model: str,
        *,
        decoding: Decoding = USER_DECODING,
        agents: list[str] | None = None,
        shared: SharedTurns | None = None,
    ):
        self.task = task
        self.model = model
        self.decoding = decoding
        self.template = task.user.template
        self.templates = Templates(None)
        self.agents = agents or []
        self.shared = shared

    def template_hash(self) -> str:
        return self.templates.hash(self.template)

    def variables(self, state: DialogueState) -> dict:
        return {
            "context": context_vars(state.context),
            "profile": state.profile,
            "profile_traits": profile_traits(state.profile),
            "history": state.history(12),
            "round": state.round,
            "rounds": state.rounds,
            "first": state.round == 1,
            "can_end": state.round >= 2,
            "task": {"name": self.task.name, "domain": self.task.domain, "split": self.task.split},
        }

    def preflight(self, state: DialogueState) -> None:
        self.templates.render(self.template, **self.variables(state))

    async def turn(self, state: DialogueState) -> Turn:
        ctx = state.context
        if state.round == 1 and ctx.domain == "emotional" and ctx.opening:
            return Turn(
                round=1, speaker=USER, text=ctx.opening.strip(), model=None, usage=new_usage(), meta={"source": "context"}
            )
        messages = self.templates.render(self.template, **self.variables(state))
        usage = new_usage()
        meta: dict = {"source": "simulator"}
        if state.round == 1:  # the opener: no agent has spoken, the same request for every system
            key = stable_hash([self.model, messages, self.decoding.model_dump(), state.call_seed("user")])
            meta.update(shared="opener", share_key=key)

            async def make() -> ChatResponse:
                return await state.call(self.model, messages, self.decoding, role="user", tag="user-sim", turn_usage=usage)

            if self.shared is not None:
                resp, made = await self.shared.get(key, make)
                if not made:  # another system's dialogue paid for it: counted like a cache hit
                    resp = replace(resp, cached=True, cost_usd=0.0, retries=0)
                    add_usage(state.usage.setdefault("user", new_usage()), resp)
                    add_usage(usage, resp)
            else:
                resp = await make()
            text = clean_reply(END_MARK.sub("", resp.text), USER, [])  # no system's agent names
            if not text:
                meta["empty"] = True
                state.count("user", "empty_turns")
            return Turn(round=1, speaker=USER, text=text, model=self.model, usage=usage, latency_s=resp.latency_s, meta=meta)
        resp = await state.call(self.model, messages, self.decoding, role="user", tag="user-sim", turn_usage=usage)
        raw = resp.text
        ended = bool(END_MARK.search(raw)) and state.round >= 2
        text = clean_reply(END_MARK.split(raw)[0] if ended else END_MARK.sub("", raw), USER, self.agents)
        if ended:
            meta["ended"] = True
        if not text:
            meta["empty"] = True
            state.count("user", "empty_turns")
        return Turn(
            round=state.round, speaker=USER, text=text, model=self.model, usage=usage, latency_s=resp.latency_s, meta=meta
        )
