"""The simulated user: an LLM playing the person in the context, optionally with an MBTI profile.

Round 1 of an emotional-support context with a human opening line (EmpatheticDialogues, ESConv)
uses that line verbatim, so every system answers the same human-grounded opener; otherwise (and in
every later round) the user model writes the turn from the task's template
(``task.user.template``, default ``baselines/templates/user_simulator.j2``). The user ends the
conversation by writing ``[END]``; this is allowed from round 2 on and recorded as
``ended_by: "user"`` with the farewell (if any) as the last user turn.
"""

from __future__ import annotations

import re

from ..taskspec import TaskSpec
from ..transcript import USER, Turn
from .base import DialogueState, context_vars, new_usage
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


class UserSimulator:
    def __init__(self, task: TaskSpec, model: str, *, decoding: Decoding = USER_DECODING, agents: list[str] | None = None):
        self.task = task
        self.model = model
        self.decoding = decoding
        self.template = task.user.template
        self.templates = Templates(None)
        self.agents = agents or []

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
            return Turn(round=1, speaker=USER, text=ctx.opening.strip(), model=None, usage=new_usage(), meta={"source": "context"})
        messages = self.templates.render(self.template, **self.variables(state))
        usage = new_usage()
        resp = await state.call(self.model, messages, self.decoding, role="user", tag="user-sim", turn_usage=usage)
        raw = resp.text
        ended = bool(END_MARK.search(raw)) and state.round >= 2
        text = clean_reply(END_MARK.split(raw)[0] if ended else END_MARK.sub("", raw), USER, self.agents)
        meta: dict = {"source": "simulator"}
        if ended:
            meta["ended"] = True
        if not text:
            meta["empty"] = True
            state.count("user", "empty_turns")
        return Turn(round=state.round, speaker=USER, text=text, model=self.model, usage=usage, latency_s=resp.latency_s, meta=meta)
