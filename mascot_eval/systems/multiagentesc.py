"""MultiAgentESC (Xu et al., EMNLP 2025), training-free, adapted to the task's persona group.

Per round: (1) an analyst reads the dialogue (emotion, cause, what the user wants); then for each
agent of the group, in group order: (2) strategy deliberation picks ``candidates`` strategies from
the ESConv strategy set; (3) one strategy-conditioned candidate reply per strategy, in persona;
(4) selection by agent collaboration: every other agent votes for one candidate; the most votes
win, ties and a vote-less round go to the deliberation's first choice.

The two decisions (strategies, votes) follow ``options.decision`` (see :mod:`.decide`): in
``choices`` mode (local models) the strategies are the ``candidates`` most probable of the numbered
list and each vote the most probable candidate number, read from next-token probabilities (every
rotation of the list, ``debias: rotate``), so both are valid by construction; ``schema`` asks for
JSON under a schema with ``enum`` fields; ``text`` parses the reply, re-asks once with the reason,
then falls back (strategies filled from the list order; an invalid vote abstains). Each decision's
source (constrained, parsed, reasked, fallback) is in the turn's meta (``strategy_source``,
``vote_sources``) and counted in ``stats["multiagentesc"]`` (``strategy_sources``, ``vote_sources``,
``mode``, and ``strategy_fallbacks``, ``invalid_votes``, ``selection_fallbacks``).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..records.usage import Usage
from ..transcript import Turn
from .base import DialogueState, System, new_usage
from .config import Decoding
from .decide import Debias, DecisionMode, choose, choose_many, neutral_vars, new_counts, resolve_mode, rounded
from .speak import make_turn
from ..jsontext import last_json_object
from .text import clean_reply

ESCONV_STRATEGIES = [
    "Question",
    "Restatement or Paraphrasing",
    "Reflection of feelings",
    "Self-disclosure",
    "Affirmation and Reassurance",
    "Providing Suggestions",
    "Information",
    "Others",
]


class MultiAgentESCOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    strategies: list[str] = Field(default_factory=lambda: list(ESCONV_STRATEGIES), min_length=1, max_length=9)
    candidates: int = Field(default=2, ge=1, le=8)  # strategies (and candidate replies) per agent turn
    analysis: Decoding = Field(default_factory=lambda: Decoding(max_tokens=64, temperature=0.0, top_p=1.0))
    deliberation: Decoding = Field(default_factory=lambda: Decoding(max_tokens=32, temperature=0.0, top_p=1.0))
    vote: Decoding = Field(default_factory=lambda: Decoding(max_tokens=8, temperature=0.0, top_p=1.0))
    decision: DecisionMode = "auto"  # choices on local models, schema on JSON-schema backends, else text
    debias: Debias = "rotate"
    calibrate: bool = True  # choices mode: strategies relative to a content-free dialogue (systems/decide.py)


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


def strategies_schema(strategies: list[str], m: int) -> dict[str, Any]:
    k = min(m, len(strategies))
    return {
        "type": "object",
        "properties": {"strategies": {"type": "array", "items": {"enum": list(strategies)}, "minItems": k, "maxItems": k}},
        "required": ["strategies"],
    }


def vote_schema(n: int) -> dict[str, Any]:
    return {"type": "object", "properties": {"vote": {"enum": list(range(1, n + 1))}}, "required": ["vote"]}


def parse_strategies(text: str, strategies: list[str], m: int) -> list[str] | None:
    """The m strategies a reply names (JSON ``strategies`` list first, else names in the text); None if fewer."""
    k = min(m, len(strategies))
    obj = last_json_object(text)
    if obj is not None and isinstance(obj.get("strategies"), list):
        got = [s for s in dict.fromkeys(obj["strategies"]) if s in strategies][:k]
        if len(got) == k:
            return got
    chosen, filled = pick_strategies(text, strategies, m)
    return None if filled else chosen


def parse_vote_any(text: str, n: int) -> int | None:
    obj = last_json_object(text)
    if obj is not None and "vote" in obj:
        try:
            k = int(obj["vote"]) - 1
        except (TypeError, ValueError):
            return None
        return k if 0 <= k < n else None
    return parse_vote(text, n)


class MultiAgentESC(System):
    kind = "multiagentesc"
    template_roles = {
        "analysis": "mesc_analysis.j2",
        "deliberation": "mesc_strategy.j2",
        "agent": "mesc_candidate.j2",
        "vote": "mesc_vote.j2",
    }
    Options = MultiAgentESCOptions
    options: MultiAgentESCOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._modes: dict[Any, str] = {}

    def mode(self, spec: str, settings: Any = None) -> str:
        key = (spec, settings)
        if key not in self._modes:
            self._modes[key] = resolve_mode(
                self.options.decision, spec, settings, where=self.config.file or f"system '{self.config.name}'"
            )
        return self._modes[key]

    def preflight(self, state: DialogueState) -> None:
        c = self.cards[0]
        for card in self.cards:
            self.mode(self.model_for(card), state.settings)
        self.templates.render(self.template("analysis"), **self.prompt_vars(state))
        v = self.prompt_vars(
            state,
            c,
            analysis="-",
            strategies=self.options.strategies,
            m=self.options.candidates,
            strategy="Question",
            candidates=["a", "b"],
            voter=self.cards[-1].name,
            speaker=c.name,
            options=[],
        )
        for role in ("deliberation", "agent", "vote"):
            self.templates.render(self.template(role), **v)
        self.templates.render(self.template("deliberation"), **{**v, "options": [{"label": "1", "text": "Question"}]})

    async def _strategies(
        self,
        state: DialogueState,
        spec: str,
        base: dict[str, Any],
        usage: Usage,
        card_id: str,
        tag: str,
        meta: dict[str, Any],
    ) -> tuple[list[str], str]:
        o = self.options
        mode = self.mode(spec, state.settings)
        if mode == "choices":

            def render_with(v: dict[str, Any]):
                return lambda shown: self.templates.render(self.template("deliberation"), **{**v, "options": shown})

            best, probs = await choose_many(
                state,
                spec,
                render_with(base),
                o.strategies,
                o.candidates,
                o.deliberation,
                role=f"strategy:{card_id}",
                tag=tag,
                turn_usage=usage,
                debias=o.debias,
                neutral=render_with(neutral_vars(base)) if o.calibrate else None,
            )
            meta["strategy_probs"] = rounded(o.strategies, probs)
            return [o.strategies[k] for k in best], "constrained"
        schema = strategies_schema(o.strategies, o.candidates) if mode == "schema" else None
        messages = self.templates.render(self.template("deliberation"), **base)
        for attempt in range(2):
            d = await state.call(
                spec,
                messages,
                o.deliberation,
                role=f"strategy:{card_id}:{attempt}" if attempt else f"strategy:{card_id}",
                tag=tag,
                turn_usage=usage,
                json_schema=schema,
            )
            got = parse_strategies(d.text, o.strategies, o.candidates)
            if got is not None:
                return got, "reasked" if attempt else ("constrained" if mode == "schema" else "parsed")
            messages = [
                *messages,
                {"role": "assistant", "content": d.text},
                {
                    "role": "user",
                    "content": (
                        f"Invalid: name {min(o.candidates, len(o.strategies))} different strategies from this list, "
                        f"best first: {', '.join(o.strategies)}."
                    ),
                },
            ]
        return pick_strategies(d.text, o.strategies, o.candidates)[0], "fallback"

    async def _vote(
        self,
        state: DialogueState,
        voter: Any,
        cands: list[str],
        variables: dict[str, Any],
        usage: Usage,
        role: str,
        tag: str,
    ) -> tuple[int | None, str, dict[str, float] | None]:
        o = self.options
        spec = self.model_for(voter)
        mode = self.mode(spec, state.settings)
        if mode == "choices":

            def render(shown: list[dict[str, str]]) -> list[dict[str, str]]:
                return self.templates.render(self.template("vote"), **{**variables, "candidates": [x["text"] for x in shown]})

            c = await choose(state, spec, render, cands, o.vote, role=role, tag=tag, turn_usage=usage, debias=o.debias)
            return c.index, "constrained", {str(i + 1): round(p, 4) for i, p in enumerate(c.probs)}
        schema = vote_schema(len(cands)) if mode == "schema" else None
        messages = self.templates.render(self.template("vote"), **variables)
        for attempt in range(2):
            r = await state.call(
                spec,
                messages,
                o.vote,
                role=role if not attempt else f"{role}:{attempt}",
                tag=tag,
                turn_usage=usage,
                json_schema=schema,
            )
            k = parse_vote_any(r.text, len(cands))
            if k is not None:
                return k, "reasked" if attempt else ("constrained" if mode == "schema" else "parsed"), None
            messages = [
                *messages,
                {"role": "assistant", "content": r.text},
                {"role": "user", "content": (f"Invalid: answer with one number from 1 to {len(cands)} only.")},
            ]
        return None, "fallback", None

    async def respond(self, state: DialogueState) -> list[Turn]:
        o = self.options
        tag = f"system:{self.config.name}"
        st = state.stats.setdefault("multiagentesc", {"strategy_fallbacks": 0, "invalid_votes": 0, "selection_fallbacks": 0})
        st.setdefault("strategy_sources", new_counts())
        st.setdefault("vote_sources", new_counts())
        aux = self.models["aux"]
        usage_a = new_usage()
        a = await state.call(
            aux,
            self.templates.render(self.template("analysis"), **self.prompt_vars(state)),
            o.analysis,
            role="analyst",
            tag=tag,
            turn_usage=usage_a,
        )
        analysis = a.text.strip()
        out: list[Turn] = []
        for card in self.cards:
            spec = self.model_for(card)
            st["mode"] = self.mode(spec, state.settings)
            usage = new_usage()
            meta: dict[str, Any] = {"analysis": analysis}
            base = self.prompt_vars(state, card, analysis=analysis, strategies=o.strategies, m=o.candidates, options=[])
            strategies, s_source = await self._strategies(state, spec, base, usage, card.id, tag, meta)
            st["strategy_sources"][s_source] += 1
            st["strategy_fallbacks"] += int(s_source == "fallback")
            resps = await asyncio.gather(
                *[
                    state.call(
                        spec,
                        self.templates.render(self.template("agent"), **{**base, "strategy": s}),
                        self.config.decoding,
                        role=f"agent:{card.id}",
                        tag=tag,
                        index=i,
                        turn_usage=usage,
                    )
                    for i, s in enumerate(strategies)
                ]
            )
            others = [n for n in self.agents if n != card.name]
            cands = [clean_reply(r.text, card.name, others) for r in resps]
            voters = [c for c in self.cards if c.name != card.name] or [card]
            results = await asyncio.gather(
                *[
                    self._vote(
                        state,
                        v,
                        cands,
                        {
                            **self.prompt_vars(state, v),
                            "candidates": cands,
                            "speaker": card.name,
                            "voter": v.name,
                            "analysis": analysis,
                        },
                        usage,
                        f"vote:{card.id}:{v.id}",
                        tag,
                    )
                    for v in voters
                ]
            )
            votes = [k for k, _, _ in results]
            for _, source, _ in results:
                st["vote_sources"][source] += 1
            st["invalid_votes"] += sum(v is None for v in votes)
            tally = [sum(v == i for v in votes) for i in range(len(cands))]
            if not any(tally):
                st["selection_fallbacks"] += 1
            best = max(range(len(cands)), key=lambda i: (tally[i], -i))
            meta.update(
                {
                    "strategies": strategies,
                    "strategy_source": s_source,
                    "candidates": cands,
                    "strategy": strategies[best],
                    "votes": {v.name: (x + 1 if x is not None else None) for v, x in zip(voters, votes)},
                    "chosen": best,
                    "vote_sources": {v.name: src for v, (_, src, _) in zip(voters, results)},
                }
            )
            if any(p is not None for _, _, p in results):
                meta["vote_probs"] = {v.name: p for v, (_, _, p) in zip(voters, results)}
            if not out:
                meta["analysis_usage"] = usage_a
            turn = make_turn(
                self, state, card, resps[best].text, spec=spec, usage=usage, latency=resps[best].latency_s, meta=meta
            )
            state.turns.append(turn)
            out.append(turn)
        return out
