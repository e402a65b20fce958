"""MultiAgentESC (Xu et al., EMNLP 2025), training-free, adapted to the task's persona group.

Per round: (1) an analyst reads the dialogue (emotion, cause, what the user wants); then for each
agent of the group, in group order: (2) strategy deliberation picks ``candidates`` strategies from
the ESConv strategy set; (3) one strategy-conditioned candidate reply per strategy, in persona;
(4) selection by agent collaboration: every other agent votes for one candidate (a number); the
most votes win, ties and a vote-less round go to the deliberation's first choice. Unparsable
strategies and votes are counted in ``stats["multiagentesc"]`` and the fallbacks documented here.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..transcript import Turn
from .base import DialogueState, System, new_usage
from .config import Decoding
from .speak import make_turn
from .text import clean_reply

ESCONV_STRATEGIES = [
    "Question", "Restatement or Paraphrasing", "Reflection of feelings", "Self-disclosure",
    "Affirmation and Reassurance", "Providing Suggestions", "Information", "Others",
]


class MultiAgentESCOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    strategies: list[str] = Field(default_factory=lambda: list(ESCONV_STRATEGIES), min_length=1)
    candidates: int = Field(default=2, ge=1, le=8)  # strategies (and candidate replies) per agent turn
    analysis: Decoding = Field(default_factory=lambda: Decoding(max_tokens=64, temperature=0.0, top_p=1.0))
    deliberation: Decoding = Field(default_factory=lambda: Decoding(max_tokens=32, temperature=0.0, top_p=1.0))
    vote: Decoding = Field(default_factory=lambda: Decoding(max_tokens=8, temperature=0.0, top_p=1.0))


def pick_strategies(text: str, strategies: list[str], m: int) -> tuple[list[str], bool]:
    """Strategies named in ``text`` in order of first mention; filled from the list order if fewer than m."""
    low = text.lower()
    found = sorted((low.find(s.lower()), s) for s in strategies if s.lower() in low)
    chosen = [s for _, s in found][:m]
    filled = len(chosen) < min(m, len(strategies))
    for s in strategies:
        if len(chosen) >= min(m, len(strategies)):
            break
        if s not in chosen:
            chosen.append(s)
    return chosen, filled


def parse_vote(text: str, n: int) -> int | None:
    m = re.search(r"\d+", text)
    if not m:
        return None
    k = int(m.group()) - 1
    return k if 0 <= k < n else None


class MultiAgentESC(System):
    kind = "multiagentesc"
    template_roles = {
        "analysis": "mesc_analysis.j2", "deliberation": "mesc_strategy.j2",
        "agent": "mesc_candidate.j2", "vote": "mesc_vote.j2",
    }
    Options = MultiAgentESCOptions

    def preflight(self, state: DialogueState) -> None:
        c = self.cards[0]
        self.templates.render(self.template("analysis"), **self.prompt_vars(state))
        v = self.prompt_vars(state, c, analysis="-", strategies=self.options.strategies, m=self.options.candidates,
                             strategy="Question", candidates=["a", "b"], voter=self.cards[-1].name,
                             speaker=c.name)
        for role in ("deliberation", "agent", "vote"):
            self.templates.render(self.template(role), **v)

    async def respond(self, state: DialogueState) -> list[Turn]:
        o = self.options
        tag = f"system:{self.config.name}"
        st = state.stats.setdefault("multiagentesc", {"strategy_fallbacks": 0, "invalid_votes": 0, "selection_fallbacks": 0})
        aux = self.models["aux"]
        usage_a = new_usage()
        a = await state.call(aux, self.templates.render(self.template("analysis"), **self.prompt_vars(state)), o.analysis,
                             role="analyst", tag=tag, turn_usage=usage_a)
        analysis = a.text.strip()
        out: list[Turn] = []
        for card in self.cards:
            spec = self.model_for(card)
            usage = new_usage()
            base = self.prompt_vars(state, card, analysis=analysis, strategies=o.strategies, m=o.candidates)
            d = await state.call(spec, self.templates.render(self.template("deliberation"), **base), o.deliberation,
                                 role=f"strategy:{card.id}", tag=tag, turn_usage=usage)
            strategies, filled = pick_strategies(d.text, o.strategies, o.candidates)
            st["strategy_fallbacks"] += int(filled)
            resps = await asyncio.gather(*[
                state.call(spec, self.templates.render(self.template("agent"), **{**base, "strategy": s}),
                           self.config.decoding, role=f"agent:{card.id}", tag=tag, index=i, turn_usage=usage)
                for i, s in enumerate(strategies)
            ])
            others = [n for n in self.agents if n != card.name]
            cands = [clean_reply(r.text, card.name, others) for r in resps]
            voters = [c for c in self.cards if c.name != card.name] or [card]
            vote_resps = await asyncio.gather(*[
                state.call(self.model_for(v), self.templates.render(
                    self.template("vote"), **{**self.prompt_vars(state, v), "candidates": cands, "speaker": card.name,
                                              "voter": v.name, "analysis": analysis}),
                    o.vote, role=f"vote:{card.id}:{v.id}", tag=tag, turn_usage=usage)
                for v in voters
            ])
            votes = [parse_vote(r.text, len(cands)) for r in vote_resps]
            st["invalid_votes"] += sum(v is None for v in votes)
            tally = [sum(v == i for v in votes) for i in range(len(cands))]
            if not any(tally):
                st["selection_fallbacks"] += 1
            best = max(range(len(cands)), key=lambda i: (tally[i], -i))
            meta = {
                "analysis": analysis, "strategies": strategies, "candidates": cands, "strategy": strategies[best],
                "votes": {v.name: (x + 1 if x is not None else None) for v, x in zip(voters, votes)}, "chosen": best,
            }
            if not out:
                meta["analysis_usage"] = usage_a
            turn = make_turn(self, state, card, resps[best].text, spec=spec, usage=usage, latency=resps[best].latency_s,
                             meta=meta)
            state.turns.append(turn)
            out.append(turn)
        return out
