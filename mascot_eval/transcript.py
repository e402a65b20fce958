"""The transcript format: what every system writes and everything downstream reads.

One JSON object per line (``transcripts.jsonl``), schema ``mascot-transcript/1``. Judges,
metrics, reports and the trainer read only this. See README, "Transcript format".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import UserError

SCHEMA = "mascot-transcript/1"
USER = "user"


@dataclass
class Turn:
    """One utterance. ``speaker`` is "user" or an agent name from the persona group."""

    round: int  # 1-based round; a round is one user turn followed by the system's agent turns
    speaker: str
    text: str
    directive: dict[str, Any] | None = None  # MASCOT Director's {speaker, action, tone}, if any
    model: str | None = None  # model spec that produced the text
    usage: dict[str, Any] | None = None  # {prompt_tokens, completion_tokens, cost_usd, calls, cached}
    latency_s: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def is_user(self) -> bool:
        return self.speaker == USER


@dataclass
class Transcript:
    dialogue_id: str  # unique within a run: "<task>:<context_id>:<profile>:<system>"
    task: str
    task_version: str
    split: str  # in_domain / ood
    domain: str
    context_id: str
    system: str
    system_config_hash: str
    persona_group: str
    agents: list[str]
    turns: list[Turn]
    user_profile: str | None = None  # e.g. an MBTI type
    context: dict[str, Any] = field(default_factory=dict)  # the Context as a dict (situation, emotion, ...)
    seeds: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)  # started, ended (ISO), seconds
    stats: dict[str, Any] = field(default_factory=dict)  # e.g. director: {directives, invalid, reasked, fallbacks}
    ended_by: str = "rounds"  # "rounds" or "user"
    schema: str = SCHEMA
    personas: dict[str, dict[str, Any]] = field(default_factory=dict)  # agent name -> the PersonaCard it played

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "transcript") -> Transcript:
        if d.get("schema") != SCHEMA:
            raise UserError(f"{where}: schema is {d.get('schema')!r}, expected {SCHEMA!r}; regenerate with this version")
        d = dict(d)
        try:
            d["turns"] = [Turn(**t) for t in d["turns"]]
            t = cls(**d)
        except (TypeError, KeyError) as exc:
            raise UserError(f"{where}: not a valid transcript ({exc}); see README 'Transcript format'") from None
        validate(t, where=where)
        return t


def make_dialogue_id(task: str, context_id: str, profile: str | None, system: str) -> str:
    return f"{task}:{context_id}:{profile or '-'}:{system}"


def validate(t: Transcript, *, where: str = "transcript") -> None:
    """Check the invariants of the schema; raise UserError naming the first violation."""
    if not t.dialogue_id or not t.system or not t.task:
        raise UserError(f"{where}: dialogue_id, task and system must be non-empty")
    if t.split not in ("in_domain", "ood"):
        raise UserError(f"{where}: split {t.split!r} must be 'in_domain' or 'ood'")
    if not t.turns:
        raise UserError(f"{where} ({t.dialogue_id}): has no turns")
    allowed = set(t.agents) | {USER}
    last_round = 0
    for i, turn in enumerate(t.turns):
        if turn.speaker not in allowed:
            raise UserError(f"{where} ({t.dialogue_id}): turn {i} speaker {turn.speaker!r} is not 'user' or one of {t.agents}")
        if turn.round < last_round or turn.round < 1:
            raise UserError(f"{where} ({t.dialogue_id}): turn {i} round {turn.round} goes backwards")
        if not isinstance(turn.text, str):
            raise UserError(f"{where} ({t.dialogue_id}): turn {i} text is not a string")
        last_round = turn.round
    if t.ended_by not in ("rounds", "user"):
        raise UserError(f"{where} ({t.dialogue_id}): ended_by must be 'rounds' or 'user'")


JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": SCHEMA,
    "type": "object",
    "required": [
        "schema", "dialogue_id", "task", "task_version", "split", "domain", "context_id", "system",
        "system_config_hash", "persona_group", "agents", "turns",
    ],
    "properties": {
        "schema": {"const": SCHEMA},
        "dialogue_id": {"type": "string", "minLength": 1},
        "task": {"type": "string"},
        "task_version": {"type": "string"},
        "split": {"enum": ["in_domain", "ood"]},
        "domain": {"type": "string"},
        "context_id": {"type": "string"},
        "system": {"type": "string"},
        "system_config_hash": {"type": "string"},
        "persona_group": {"type": "string"},
        "agents": {"type": "array", "items": {"type": "string"}},
        "user_profile": {"type": ["string", "null"]},
        "context": {"type": "object"},
        "seeds": {"type": "object"},
        "timing": {"type": "object"},
        "stats": {"type": "object"},
        "ended_by": {"enum": ["rounds", "user"]},
        "personas": {"type": "object", "additionalProperties": {"type": "object"}},
        "turns": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["round", "speaker", "text"],
                "properties": {
                    "round": {"type": "integer", "minimum": 1},
                    "speaker": {"type": "string"},
                    "text": {"type": "string"},
                    "directive": {"type": ["object", "null"]},
                    "model": {"type": ["string", "null"]},
                    "usage": {"type": ["object", "null"]},
                    "latency_s": {"type": ["number", "null"]},
                    "meta": {"type": "object"},
                },
            },
        },
    },
}
