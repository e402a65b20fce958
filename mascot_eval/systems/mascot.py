"""MASCOT: a Director picks who speaks next, with what action and tone; speakers answer in persona.

Ablations are configs of this kind, each removing one thing:

* MASCOT-P (``baselines/mascot-p.yaml``): ``personas: false``: no persona card reaches any prompt
  (speakers and Director see agent names only), fallback or directive; no persona adapters.
* MASCOT-C (``baselines/mascot-c.yaml``): ``order: random``: the Director is kept (it still ends
  rounds and gives each speaker an action and a tone, with the same prompts), but the speaker is the
  next agent of a fresh seeded random order of the group each round (the Director's own pick is
  kept in ``meta.director.picked``).

``order: fixed`` / ``order: random`` with ``use_director: false`` have no Director at all: the group
speaks in its order / a seeded random order, every agent once, without directives.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import UserError
from ..fileio import stable_hash
from ..personas import PersonaCard
from ..transcript import Turn
from .base import DialogueState, System
from .config import Decoding
from .decide import Debias, DecisionMode
from .director import DEFAULT_ACTIONS, DEFAULT_TONES, Director
from .speak import speak


class MascotOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    order: Literal["director", "random", "fixed"] = "director"
    min_speakers: int = Field(default=1, ge=1)
    max_speakers: int | None = Field(default=None, ge=1)  # None = every agent of the group
    allow_repeat: bool = False  # may the Director pick an agent twice in one round
    use_director: bool = True  # false: no Director at all (order fixed or random, no directives)
    # how the Director decides (systems/decide.py): auto = choices on local models, schema on
    # backends with JSON-schema output, else text + parse + re-ask
    decision: DecisionMode = "auto"
    debias: Debias = "rotate"  # choices mode: average over all rotations of the option list
    calibrate: bool = True  # choices mode: divide by the probabilities for a content-free dialogue
    actions: list[str] = Field(default_factory=lambda: list(DEFAULT_ACTIONS), min_length=1, max_length=9)
    tones: list[str] = Field(default_factory=lambda: list(DEFAULT_TONES), min_length=1, max_length=9)
    personas: bool = True  # false (MASCOT-P): prompts, fallbacks and directives carry agent names only
    director: Decoding = Field(default_factory=lambda: Decoding(max_tokens=60, temperature=0.0, top_p=1.0))


class Mascot(System):
    kind = "mascot"
    template_roles = {"agent": "mascot_agent.j2", "director": "director.j2"}
    Options = MascotOptions
    options: MascotOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        o = self.options
        self.max_speakers = o.max_speakers or len(self.cards)
        if not o.allow_repeat:
            self.max_speakers = min(self.max_speakers, len(self.cards))
        if o.min_speakers > self.max_speakers:
            raise UserError(
                f"{self.config.file or self.config.name}: options.min_speakers ({o.min_speakers}) exceeds "
                f"max_speakers ({self.max_speakers})"
            )
        where = self.config.file or f"system '{self.config.name}'"
        if o.order == "director" and not o.use_director:
            raise UserError(
                f"{where}: options.order is director but options.use_director is false; "
                "use order: random or fixed without a Director"
            )
        if o.order == "random" and o.allow_repeat:
            raise UserError(f"{where}: options.allow_repeat needs order: director (a random order has each agent once)")
        self.director = None
        if o.use_director:
            self.director = Director(
                self.cards,
                self.models["director"],
                self.templates,
                self.template("director"),
                o.director,
                min_speakers=o.min_speakers,
                max_speakers=self.max_speakers,
                allow_repeat=o.allow_repeat,
                tag=f"system:{self.config.name}:director",
                decision=o.decision,
                debias=o.debias,
                actions=o.actions,
                tones=o.tones,
                personas=o.personas,
                where=where,
                calibrate=o.calibrate,
            )

    def used_templates(self) -> list[str]:
        return [self.template("agent")] + ([self.template("director")] if self.director else [])

    def prompt_vars(self, state: DialogueState, card: PersonaCard | None = None, **extra: Any) -> dict[str, Any]:
        v = super().prompt_vars(state, card, **extra)
        if not self.options.personas:  # MASCOT-P: agent names only, nothing else from the cards
            v["agents"] = [{"name": c.name} for c in self.cards]
            if card is not None:
                v["agent"] = {"name": card.name}
        return v

    def preflight(self, state: DialogueState) -> None:
        directive = {"speaker": self.cards[0].name, "action": "validate", "tone": "calm", "source": "constrained"}
        self.templates.render(self.template("agent"), **self.prompt_vars(state, self.cards[0], directive=directive))
        if self.director:
            mode = self.director.mode(state.settings)  # an explicit mode the model cannot serve fails here
            base = self.prompt_vars(state)
            opts = [{"label": "1", "text": self.cards[0].name}]
            asks = (
                [{"ask": "directive"}]
                if mode != "choices"
                else [
                    {"ask": "speaker", "options": opts},
                    {"ask": "action", "options": opts, "speaker": self.cards[0].name},
                    {"ask": "tone", "options": opts, "speaker": self.cards[0].name, "action": self.options.actions[0]},
                ]
            )
            for ask in asks:
                self.templates.render(self.director.template, **self.director.variables(base, [], [], **ask))

    def _order(self, state: DialogueState) -> list[str]:
        names = list(self.agents)
        if self.options.order == "random":
            random.Random(int(stable_hash([state.seed, state.dialogue_id, state.round], 8), 16)).shuffle(names)
        return names[: self.max_speakers]

    async def respond(self, state: DialogueState) -> list[Turn]:
        out: list[Turn] = []
        spoken: list[str] = []
        plan: list[dict[str, Any]] = []
        order = None if self.options.order == "director" else self._order(state)
        while len(spoken) < self.max_speakers and (order is None or len(spoken) < len(order)):
            directive: dict[str, Any] | None = None
            meta: dict[str, Any] = {} if order is None else {"order": order}
            if self.director is not None:
                d, record = await self.director.next(state, self.prompt_vars(state), spoken, plan, order=order)
                if d.speaker is None:
                    break
                directive = d.to_dict()
                meta["director"] = record
                card = self.by_name[d.speaker]
            else:
                assert order is not None
                card = self.by_name[order[len(spoken)]]
            turn = await speak(self, state, card, directive=directive, meta=meta)
            state.turns.append(turn)
            out.append(turn)
            spoken.append(card.name)
            if directive is not None:
                plan.append(directive)
        if self.director is not None and "director" in state.stats:
            state.stats["director"].setdefault("speakers_per_round", []).append(len(spoken))
        return out
