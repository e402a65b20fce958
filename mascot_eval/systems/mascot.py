"""MASCOT: a Director picks who speaks next, with what action and tone; speakers answer in persona.

Ablations are configs of this kind (``baselines/mascot-p.yaml``, ``baselines/mascot-c.yaml``):
``order: random`` drops the Director (a fresh seeded random order of the group each round);
MASCOT-P swaps the persona-aligned speaker prompt for a plain one and uses no persona adapters.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import UserError
from ..fileio import stable_hash
from ..transcript import Turn
from .base import DialogueState, System
from .config import Decoding
from .director import Director
from .speak import speak


class MascotOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    order: Literal["director", "random", "fixed"] = "director"
    min_speakers: int = Field(default=1, ge=1)
    max_speakers: int | None = Field(default=None, ge=1)  # None = every agent of the group
    allow_repeat: bool = False  # may the Director pick an agent twice in one round
    structured: bool = True  # pass the directive JSON schema to backends that support it
    director: Decoding = Field(default_factory=lambda: Decoding(max_tokens=60, temperature=0.0, top_p=1.0))


class Mascot(System):
    kind = "mascot"
    template_roles = {"agent": "mascot_agent.j2", "director": "director.j2"}
    Options = MascotOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        o = self.options
        self.max_speakers = o.max_speakers or len(self.cards)
        if not o.allow_repeat:
            self.max_speakers = min(self.max_speakers, len(self.cards))
        if o.min_speakers > self.max_speakers:
            raise UserError(f"{self.config.file or self.config.name}: options.min_speakers ({o.min_speakers}) exceeds "
                            f"max_speakers ({self.max_speakers})")
        self.director = None
        if o.order == "director":
            self.director = Director(
                self.cards, self.models["director"], self.templates, self.template("director"), o.director,
                min_speakers=o.min_speakers, max_speakers=self.max_speakers, allow_repeat=o.allow_repeat,
                structured=o.structured, tag=f"system:{self.config.name}:director",
            )

    def used_templates(self) -> list[str]:
        return [self.template("agent")] + ([self.template("director")] if self.director else [])

    def preflight(self, state: DialogueState) -> None:
        directive = {"speaker": self.cards[0].name, "action": "validate", "tone": "calm"}
        self.templates.render(self.template("agent"), **self.prompt_vars(state, self.cards[0], directive=directive))
        if self.director:
            self.templates.render(self.director.template, **self.director.variables(self.prompt_vars(state), [], []))

    def _order(self, state: DialogueState) -> list[str]:
        names = list(self.agents)
        if self.options.order == "random":
            random.Random(int(stable_hash([state.seed, state.dialogue_id, state.round], 8), 16)).shuffle(names)
        return names[: self.max_speakers]

    async def respond(self, state: DialogueState) -> list[Turn]:
        out: list[Turn] = []
        spoken: list[str] = []
        plan: list[dict[str, Any]] = []
        order = None if self.director else self._order(state)
        while len(spoken) < self.max_speakers:
            directive: dict[str, Any] | None = None
            meta: dict[str, Any] = {}
            if self.director is not None:
                d, record = await self.director.next(state, self.prompt_vars(state), spoken, plan)
                if d.speaker is None:
                    state.stats["director"].setdefault("speakers_per_round", []).append(len(spoken))
                    break
                directive = d.to_dict()
                meta["director"] = record
                card = self.by_name[d.speaker]
            else:
                assert order is not None
                if len(spoken) >= len(order):
                    break
                card = self.by_name[order[len(spoken)]]
                meta["order"] = order
            turn = await speak(self, state, card, directive=directive, meta=meta)
            state.turns.append(turn)
            out.append(turn)
            spoken.append(card.name)
            if directive is not None:
                plan.append(directive)
        else:
            if self.director is not None:
                state.stats["director"].setdefault("speakers_per_round", []).append(len(spoken))
        return out
