"""The System interface, the dialogue state it reads, and the model-call helper with usage accounting."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ..backends.base import BackendError, ChatResponse, GenerationParams
from ..backends.client import ClientSettings, get_client
from ..data.context import Context
from ..errors import UserError
from ..fileio import stable_hash
from ..personas import PersonaCard
from ..records.usage import CallRecord, Usage
from ..taskspec import TaskSpec
from ..transcript import AgentInfo, PlayedPersona, SystemInfo, Turn
from ..yamlfile import validation_message
from .config import Decoding, SystemConfig
from .templates import Templates


def new_usage() -> Usage:
    return Usage()


def add_usage(total: Usage, resp: ChatResponse | Usage) -> Usage:
    """Add one answered call (or another usage) into ``total``; returns ``total``."""
    return total.add(resp if isinstance(resp, Usage) else Usage.of_response(resp))


@dataclass
class DialogueState:
    """What a system sees when it produces a round's agent turns."""

    task: TaskSpec
    context: Context
    profile: str | None
    dialogue_id: str
    seed: int
    rounds: int
    turns: list[Turn] = field(default_factory=list)
    round: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Usage] = field(default_factory=dict)  # role kind -> usage
    calls: list[CallRecord] = field(default_factory=list)  # every call of the dialogue, failures included
    settings: ClientSettings | None = None
    tally: Usage | None = None  # run-wide counters for the progress display

    def history(self, n: int) -> list[dict[str, Any]]:
        return [{"speaker": t.speaker, "text": t.text, "round": t.round} for t in self.turns[-n:]]

    def round_turns(self) -> list[Turn]:
        return [t for t in self.turns if t.round == self.round]

    def last_user_text(self) -> str:
        for t in reversed(self.turns):
            if t.is_user:
                return t.text
        return ""

    def count(self, group: str, key: str, n: int = 1) -> None:
        g = self.stats.setdefault(group, {})
        g[key] = g.get(key, 0) + n

    @property
    def pair_key(self) -> str:
        """The (task, context, profile) key every system's dialogue on this context shares."""
        return f"{self.task.name}:{self.context.id}:{self.profile or '-'}"

    def call_seed(self, role: str, index: int = 0) -> int:
        """Seed of one model call. The simulated user's calls (role ``user``) are seeded by the run seed,
        the pair key (task, context, profile), the round and the sample index only, never by the system
        or the number of agent turns: every system's user gets the same seed in a round (identical
        prompts, such as the opener, then give identical turns). Every other role is seeded per dialogue:
        run seed, dialogue id, round, turn index, role and sample index."""
        if role == "user":
            return int(stable_hash([self.seed, "user", self.pair_key, self.round, index], 8), 16)
        return int(stable_hash([self.seed, self.dialogue_id, self.round, len(self.turns), role, index], 8), 16)

    async def call(
        self,
        spec: str,
        messages: list[dict[str, str]],
        decoding: Decoding,
        *,
        role: str,
        tag: str,
        index: int = 0,
        json_schema: dict[str, Any] | None = None,
        turn_usage: Usage | None = None,
        choices: tuple[str, ...] = (),
        prefill: tuple[str, ...] = (),
    ) -> ChatResponse:
        params = GenerationParams(
            max_tokens=decoding.max_tokens,
            temperature=decoding.temperature,
            top_p=decoding.top_p,
            seed=None if choices else self.call_seed(role, index),  # choice scoring is deterministic
            sample_index=index,
            json_schema=json_schema,
            choices=choices,  # choice scoring (systems/decide.py): nothing is generated
            prefill=prefill,
        )
        try:
            resp = await get_client(spec, self.settings).chat(messages, params, tag=tag)
        except BackendError as exc:  # failed for good: the attempt is recorded, then the dialogue fails
            used = Usage.of_failure(exc)
            self.calls.append(CallRecord(role=role, tag=tag, spec=spec, round=self.round, usage=used, error=str(exc)[:300]))
            if self.tally is not None:
                self.tally.add(used)
            raise
        used = Usage.of_response(resp)
        self.calls.append(CallRecord(role=role, tag=tag, spec=spec, round=self.round, usage=used))
        self.usage.setdefault(role.split(":")[0], Usage()).add(used)
        if turn_usage is not None:
            turn_usage.add(used)
        if self.tally is not None:
            self.tally.add(used)
        return resp


def card_vars(card: PersonaCard) -> dict[str, Any]:
    return {**card.model_dump(), "prompt": card.prompt_block()}


def context_vars(ctx: Context) -> dict[str, Any]:
    d = ctx.to_dict()
    d["opening"] = ctx.opening
    return d


class System:
    """A system turns a dialogue state into the agent turns of the current round.

    Subclasses set ``kind``, an ``Options`` pydantic model for ``config.options``, the template
    roles they render (``template_roles`` with defaults) and implement :meth:`respond`.
    """

    kind: ClassVar[str] = "base"
    template_roles: ClassVar[dict[str, str]] = {}
    default_decoding: ClassVar[dict[str, Any]] = {}

    class _NoOptions(BaseModel):
        model_config = ConfigDict(extra="forbid")

    # the kind's options model; a subclass sets its own and declares ``options`` with that type
    Options: ClassVar[type[BaseModel]] = _NoOptions
    options: BaseModel

    def __init__(self, config: SystemConfig, cards: list[PersonaCard], group: str, models: dict[str, str]) -> None:
        self.config = config
        self.cards = cards
        self.group = group
        self.models = models  # role -> concrete model spec ("agent:<id>", "director", ...)
        where = config.file or f"system '{config.name}'"
        try:
            self.options = self.Options.model_validate(config.options)
        except ValidationError as exc:
            raise UserError(validation_message(f"{where} (options)", exc).replace("field '", "field 'options.", 1)) from None
        unknown = set(config.templates) - set(self.template_roles)
        if unknown:
            raise UserError(
                f"{where}: templates has unknown role(s) {', '.join(sorted(unknown))}; "
                f"kind '{self.kind}' uses {', '.join(sorted(self.template_roles)) or 'none'}"
            )
        self.templates = Templates(config.file)
        self.by_name = {c.name: c for c in cards}

    # names
    @property
    def agents(self) -> list[str]:
        return [c.name for c in self.cards]

    def template(self, role: str) -> str:
        return self.config.templates.get(role, self.template_roles[role])

    def model_for(self, card: PersonaCard) -> str:
        return self.models[f"agent:{card.id}"]

    def used_templates(self) -> list[str]:
        return [self.template(r) for r in sorted(self.template_roles)]

    def config_hash(self) -> str:
        return stable_hash(
            {
                "config": self.config.model_dump(mode="json"),
                "templates": {t: self.templates.hash(t) for t in self.used_templates()},
                "models": self.models,
                "cards": [c.model_dump() for c in self.cards],
            }
        )

    def system_info(self, config_hash: str | None = None) -> SystemInfo:
        """What this system is, as the transcript records it: config, template hashes, each role's model."""
        agent_template = self.template("agent") if "agent" in self.template_roles else None
        t_hash = self.templates.hash(agent_template) if agent_template else None
        return SystemInfo(
            name=self.config.name,
            kind=self.kind,
            file=self.config.file,
            config_hash=config_hash or self.config_hash(),
            templates={t: self.templates.hash(t) for t in self.used_templates()},
            models=dict(self.models),
            agents={
                c.name: AgentInfo(model=self.model_for(c), template=agent_template, template_hash=t_hash) for c in self.cards
            },
        )

    def played_personas(self) -> dict[str, PlayedPersona]:
        """Each agent's card exactly as played, with its rendered prompt block."""
        return {c.name: PlayedPersona(**c.model_dump(), prompt=c.prompt_block()) for c in self.cards}

    def prompt_vars(self, state: DialogueState, card: PersonaCard | None = None, **extra: Any) -> dict[str, Any]:
        v: dict[str, Any] = {
            "context": context_vars(state.context),
            "profile": state.profile,
            "history": state.history(self.config.history_turns),
            "round": state.round,
            "rounds": state.rounds,
            "task": {"name": state.task.name, "domain": state.task.domain, "split": state.task.split},
            "agents": [card_vars(c) for c in self.cards],
            "user_text": state.last_user_text(),
        }
        if card is not None:
            v["agent"] = card_vars(card)
            v["others"] = [c.name for c in self.cards if c.name != card.name]
        v.update(extra)
        return v

    def preflight(self, state: DialogueState) -> None:
        """Render every template once so a broken template fails before any dialogue is written."""
        for role in sorted(self.template_roles):
            self.templates.render(self.template(role), **self.prompt_vars(state, self.cards[0], directive=None))

    async def respond(self, state: DialogueState) -> list[Turn]:
        raise NotImplementedError(f"system kind '{self.kind}' does not implement respond()")
