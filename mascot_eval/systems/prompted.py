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
from ..fileio import confined_path
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


def examples_path(file: str, where: str) -> Path:
    """The few-shot examples file: relative to the folder of a config given by path (searched first) or to
    baselines/ of the user folder, then of the shipped data;
    absolute paths, '..' out of those folders and symlinks leading out of them are refused."""
    roots = [*([Path(where).parent] if where and paths.source_of(where) == "path" else []), *paths.dirs("baselines")]
    return confined_path(roots, file, field="options.examples_file", where=where or "system config", what="examples file")


def load_examples(file: str, domain: str, n: int, where: str) -> list[dict[str, Any]]:
    """Few-shot examples for ``domain`` (at most ``n``) from ``file`` (see :func:`examples_path`)."""
    path = examples_path(file, where)
    if not path.is_file():
        raise UserError(f"{where or 'system config'}: field 'options.examples_file': {path} not found")
    data = load_yaml(path, what="a few-shot examples file")
    if not isinstance(data, list) or not all(isinstance(e, dict) and "user" in e and "replies" in e for e in data):
        raise UserError(f"{path}: expected a list of examples, each with 'user' and 'replies' (and optional 'domain')")
    bad = [
        i
        for i, e in enumerate(data)
        if not isinstance(e["user"], str)
        or not isinstance(e["replies"], dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in e["replies"].items())
    ]
    if bad:
        raise UserError(f"{path}: example {bad[0]}: 'user' must be text and 'replies' a mapping of persona id -> text")
    chosen = [e for e in data if e.get("domain", domain) == domain][:n]
    if not chosen:
        raise UserError(f"{path}: no examples for domain '{domain}'; add some or remove the domain filter")
    return chosen


class Prompted(System):
    kind = "prompted"
    template_roles = {"agent": "agent_prompted.j2"}
    Options = PromptedOptions
    options: PromptedOptions

    @classmethod
    def check_config(cls, config: Any, doc: Any = None) -> None:
        """Static check when the YAML is loaded: the examples file stays in its folders and parses."""
        file = (config.options or {}).get("examples_file")
        if file:
            path = examples_path(file, config.file or "")
            if not path.is_file():
                raise UserError(f"{config.file or config.name}: field 'options.examples_file': {path} not found")
            data = load_yaml(path, what="a few-shot examples file")
            if not isinstance(data, list) or not data:
                raise UserError(f"{path}: expected a list of examples, each with 'user' and 'replies'")

    def extra_vars(self, state: DialogueState) -> dict[str, Any]:
        o = self.options
        if not o.examples_file:
            return {"examples": [], "reasoning": o.reasoning}
        examples = load_examples(o.examples_file, state.context.domain, o.n_examples, self.config.file or "")
        return {"examples": examples, "reasoning": o.reasoning}

    def preflight(self, state: DialogueState) -> None:
        self.templates.render(
            self.template("agent"), **self.prompt_vars(state, self.cards[0], directive=None, **self.extra_vars(state))
        )

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
    options: SelfConsistencyOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.config.decoding.temperature <= 0:
            raise UserError(
                f"{self.config.file or self.config.name}: self-consistency needs decoding.temperature > 0 "
                "(k greedy samples would be identical)"
            )

    async def respond(self, state: DialogueState) -> list[Turn]:
        out: list[Turn] = []
        extra = self.extra_vars(state)
        k = self.options.samples
        for card in self.cards:
            messages = self.templates.render(self.template("agent"), **self.prompt_vars(state, card, directive=None, **extra))
            spec = self.model_for(card)
            usage = new_usage()
            resps = await asyncio.gather(
                *[
                    state.call(
                        spec,
                        messages,
                        self.config.decoding,
                        role=f"agent:{card.id}",
                        tag=f"system:{self.config.name}",
                        index=i,
                        turn_usage=usage,
                    )
                    for i in range(k)
                ]
            )
            others = [n for n in self.agents if n != card.name]
            replies = [
                clean_reply(split_reasoning(r.text)[0] if self.options.reasoning else r.text, card.name, others) for r in resps
            ]
            best, scores = most_consistent(replies)
            meta = {"candidates": replies, "consistency": [round(s, 4) for s in scores], "chosen": best}
            turn = make_turn(
                self,
                state,
                card,
                resps[best].text,
                spec=spec,
                usage=usage,
                latency=sum(r.latency_s or 0 for r in resps),
                reasoning=self.options.reasoning,
                meta=meta,
            )
            state.turns.append(turn)
            out.append(turn)
        return out
