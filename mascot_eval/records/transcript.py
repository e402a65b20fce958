"""The transcript record (``transcripts.jsonl``, schema ``mascot-transcript/2``).

One transcript per line: what was played (the persona cards in full, the context, the system's
config, template and model of each agent), every turn, and every model call the dialogue made.
Judges, metrics, human export, the report and the trainer read cards and context from here, never
from ``tasks/``: editing a card later cannot change how an old run is judged. Version 1
transcripts (written before the calls and system info were recorded) are read and upgraded.
"""

from __future__ import annotations

from typing import Any, Literal, Final

from pydantic import Field, field_validator

from ..errors import UserError
from ..personas import PersonaCard
from .base import Record
from .usage import CallRecord, Usage

SCHEMA: Final = "mascot-transcript/2"
OLD_SCHEMAS = ("mascot-transcript/1",)
USER = "user"


class Turn(Record):
    """One utterance. ``speaker`` is "user" or an agent name from the persona group."""

    round: int  # 1-based; a round is one user turn followed by the system's agent turns
    speaker: str
    text: str
    directive: dict[str, Any] | None = None  # the Director's {speaker, action, tone, source}, if any
    model: str | None = None  # model spec that produced the text
    usage: Usage | None = None  # the calls that produced this turn (the Director's are in meta.director)
    latency_s: float | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_user(self) -> bool:
        return self.speaker == USER


class PlayedPersona(PersonaCard):
    """A persona card exactly as an agent played it, with the prompt block it was given."""

    prompt: str = ""

    def card(self) -> PersonaCard:
        return PersonaCard.model_validate(self.model_dump(exclude={"prompt"}))


class AgentInfo(Record):
    model: str  # the agent's model spec (LoRA adapter included)
    template: str | None = None  # the agent template it was prompted with
    template_hash: str | None = None


class SystemInfo(Record):
    """The system as it was run: its config file, config hash, templates and the model of each role."""

    name: str
    kind: str
    file: str | None = None
    config_hash: str
    templates: dict[str, str] = Field(default_factory=dict)  # template name -> content hash
    models: dict[str, str] = Field(default_factory=dict)  # role -> model spec
    agents: dict[str, AgentInfo] = Field(default_factory=dict)  # agent name -> model and template


class Transcript(Record):
    """One dialogue: what was played (cards, context, system), every turn and every model call."""

    schema_: Literal["mascot-transcript/2"] = Field(default=SCHEMA, alias="schema")
    dialogue_id: str  # unique within a run: "<task>:<context_id>:<profile>:<system>"
    task: str
    task_version: str
    split: str  # in_domain / ood
    domain: str  # the context's domain (emotional / workplace)
    context_id: str
    system: str
    system_config_hash: str
    persona_group: str
    agents: list[str]
    turns: list[Turn]
    user_profile: str | None = None  # e.g. an MBTI type
    context: dict[str, Any] = Field(default_factory=dict)  # the Context as a dict (situation, emotion, ...)
    seeds: dict[str, Any] = Field(default_factory=dict)
    timing: dict[str, Any] = Field(default_factory=dict)  # started, ended (ISO), seconds
    stats: dict[str, Any] = Field(default_factory=dict)  # per-system counters (Director decisions, user simulator)
    ended_by: Literal["rounds", "user"] = "rounds"
    personas: dict[str, PlayedPersona] = Field(default_factory=dict)  # agent name -> the card it played
    system_info: SystemInfo | None = None
    calls: list[CallRecord] = Field(default_factory=list)  # every model call of this dialogue
    usage: Usage = Field(default_factory=Usage)  # the sum of ``calls``

    @field_validator("split")
    @classmethod
    def _split(cls, v: str) -> str:
        if v not in ("in_domain", "ood"):
            raise ValueError(f"split {v!r} must be 'in_domain' or 'ood'")
        return v

    @property
    def schema(self) -> str:  # type: ignore[override]
        return self.schema_

    @property
    def pair_key(self) -> str:
        """Key shared by transcripts of different systems on the same context and user profile."""
        return f"{self.task}:{self.context_id}:{self.user_profile or '-'}"

    @property
    def agent_turns(self) -> list[Turn]:
        return [t for t in self.turns if not t.is_user]

    def rounds(self) -> dict[int, list[Turn]]:
        out: dict[int, list[Turn]] = {}
        for t in self.turns:
            out.setdefault(t.round, []).append(t)
        return out

    def turns_of(self, agent: str) -> list[Turn]:
        return [t for t in self.turns if t.speaker == agent]

    def cards(self) -> dict[str, PersonaCard]:
        """Agent name -> the persona card it played (agents without a card are absent)."""
        return {name: p.card() for name, p in self.personas.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "transcript") -> Transcript:
        if not isinstance(d, dict):
            raise UserError(f"{where}: expected a JSON object (a transcript), got {type(d).__name__}")
        if d.get("schema") in OLD_SCHEMAS:
            d = upgrade_v1(d)
        elif d.get("schema") != SCHEMA:
            raise UserError(f"{where}: schema is {d.get('schema')!r}, expected {SCHEMA!r}; regenerate with this version")
        t = cls.load(d, where=where)
        validate(t, where=where)
        return t


def upgrade_v1(d: dict[str, Any]) -> dict[str, Any]:
    """A ``mascot-transcript/1`` dict as version 2: no call records (usage = the turns' usage)."""
    d = {**d, "schema": SCHEMA}
    turns = [dict(t) for t in d.get("turns", [])]
    for t in turns:
        if isinstance(t.get("usage"), dict):
            t["usage"] = {k: v for k, v in t["usage"].items() if k in Usage.model_fields}
    d["turns"] = turns
    d["usage"] = Usage.total(Usage(**t["usage"]) for t in turns if isinstance(t.get("usage"), dict)).model_dump()
    return d


def make_dialogue_id(task: str, context_id: str, profile: str | None, system: str) -> str:
    return f"{task}:{context_id}:{profile or '-'}:{system}"


def validate(t: Transcript, *, where: str = "transcript") -> None:
    """Check the invariants the types cannot; raise UserError naming the first violation."""
    if not t.dialogue_id or not t.system or not t.task:
        raise UserError(f"{where}: dialogue_id, task and system must be non-empty")
    if not t.turns:
        raise UserError(f"{where} ({t.dialogue_id}): has no turns")
    allowed = set(t.agents) | {USER}
    last_round = 0
    for i, turn in enumerate(t.turns):
        if turn.speaker not in allowed:
            raise UserError(f"{where} ({t.dialogue_id}): turn {i} speaker {turn.speaker!r} is not 'user' or one of {t.agents}")
        if turn.round < last_round or turn.round < 1:
            raise UserError(f"{where} ({t.dialogue_id}): turn {i} round {turn.round} goes backwards")
        last_round = turn.round
    unknown = set(t.personas) - set(t.agents)
    if unknown:
        raise UserError(f"{where} ({t.dialogue_id}): personas {sorted(unknown)} are not agents of the dialogue")
