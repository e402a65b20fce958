"""Prompted baselines: every agent of the group speaks once per round, in group order.

One kind covers zero-shot, zero-shot CoT, few-shot, few-shot CoT, SFT and the single-agent
reference (configs differ by template, ``reasoning``, examples, card and checkpoint use).
``self-consistency`` samples k candidates per turn and keeps the most consistent one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .. import paths
from ..errors import UserError
from ..transcript import Turn
from ..yamlfile import load_yaml
from .base import DialogueState, System, new_usage
from .speak import make_turn, speak, split_reasoning
from .text import clean_reply, most_consistent


class PromptedOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reasoning: bool = False  # chain of thought: the template asks for "Thoughts: ... Reply: ..."
    examples_file: str | None = None  # YAML list of example exchanges (few-shot), relative to baselines/
    n_examples: int = Field(default=2, ge=1, le=20)


def load_examples(file: str, domain: str, n: int, where: str) -> list[dict[str, Any]]:
    """Few-shot examples: ``file`` is absolute, or relative to the folder of a config given by path,
    or to baselines/ (user folder, then shipped)."""
    candidates = [Path(file)] if Path(file).is_absolute() else [
        *([Path(where).parent / file] if where and paths.source_of(where) == "path" else []),
        *(d / file for d in paths.dirs("baselines")),
    ]
    path = next((c for c in candidates if c.is_file()), candidates[-1])
    data = load_yaml(path)
    if not isinstance(data, list) or not all(isinstance(e, dict) and "user" in e and "replies" in e for e in data):
        raise UserError(f"{path}: expected a list of examples, each with 'user' and 'replies' (and optional 'domain')")
    chosen = [e for e in data if e.get("domain", domain) == domain][:n]
    if not chosen:
        raise UserError(f"{path}: no examples for domain '{domain}'; add some or remove the domain filter")
    return chosen


class Prompted(System):
    kind = "prompted"
    template_roles = {"agent": "agent_prompted.j2"}
    Options = PromptedOptions

    def extra_vars(self, state: DialogueState) -> dict[str, Any]:
        o = self.options
        if not o.examples_file:
            return {"examples": [], "reasoning": o.reasoning}
        examples = load_examples(o.examples_file, state.context.domain, o.n_examples, self.config.file or "")
        return {"examples": examples, "reasoning": o.reasoning}

    def preflight(self, state: DialogueState) -> None:
        self.templates.render(self.template("agent"), **self.prompt_vars(state, self.cards[0], directive=None, **self.extra_vars(state)))

    async def respond(self, state: DialogueState) -> list[Turn]:
        out: list[Turn] = []
        extra = self.extra_vars(state)
        for card in self.cards:
            turn = await speak(self, state, card, reasoning=self.options.reasoning, extra=extra)
            state.turns.append(turn)
            out.append(turn)
        return out


class SelfConsistencyOptions(PromptedOptions):
    samples: int = Field(default=5, ge=2, le=64)  # k candidates per turn


class SelfConsistency(Prompted):
    """k sampled candidates per agent turn (``sample_index`` 0..k-1); the most consistent one is kept:
    the candidate with the highest mean word-overlap (Jaccard) with the other k-1 (the medoid)."""

    kind = "self-consistency"
    Options = SelfConsistencyOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.config.decoding.temperature <= 0:
            raise UserError(f"{self.config.file or self.config.name}: self-consistency needs decoding.temperature > 0 "
                            "(k greedy samples would be identical)")

    async def respond(self, state: DialogueState) -> list[Turn]:
        out: list[Turn] = []
        extra = self.extra_vars(state)
        k = self.options.samples
        for card in self.cards:
            messages = self.templates.render(self.template("agent"), **self.prompt_vars(state, card, directive=None, **extra))
            spec = self.model_for(card)
            usage = new_usage()
            resps = await asyncio.gather(*[
                state.call(spec, messages, self.config.decoding, role=f"agent:{card.id}", tag=f"system:{self.config.name}",
                           index=i, turn_usage=usage)
                for i in range(k)
            ])
            others = [n for n in self.agents if n != card.name]
            replies = [
                clean_reply(split_reasoning(r.text)[0] if self.options.reasoning else r.text, card.name, others)
                for r in resps
            ]
            best, scores = most_consistent(replies)
            meta = {"candidates": replies, "consistency": [round(s, 4) for s in scores], "chosen": best}
            turn = make_turn(self, state, card, resps[best].text, spec=spec, usage=usage,
                             latency=sum(r.latency_s or 0 for r in resps), reasoning=self.options.reasoning, meta=meta)
            state.turns.append(turn)
            out.append(turn)
        return out
