"""The MASCOT Director: reads the dialogue state and emits directives ``{speaker, action, tone}``.

Parsing is tolerant (small models): the *last* JSON object in the reply is used; keys are matched
case-insensitively (``speaker``/``agent``/``next``, ``action``, ``tone``); if there is no JSON, the
paper's plain format ``Agent: X / Action: ... / Tone: ...`` is accepted. Speaker names map to the
group's agents case-insensitively (display name or persona id, with or without "the").
``"speaker": "none"`` ends the round once ``min_speakers`` agents have spoken.

An invalid directive (no JSON, unknown speaker, a speaker who already spoke this round, a missing
action or tone, ending too early) is re-asked once with the reason. If the second answer is
invalid too, the **fallback** applies: the next agent in the group's order who has not spoken this
round, with action "respond to the user as the <role>" and tone "<first trait>"; when every agent
has spoken, the round ends. Every decision is counted in ``transcript.stats["director"]``:
``decisions``, ``valid_first``, ``reasked``, ``valid_after_reask``, ``fallbacks``, ``round_ends``
and ``invalid_reasons`` (reason -> count); fallback turns carry ``meta.director.fallback = true``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..personas import PersonaCard
from .base import DialogueState, new_usage
from .config import Decoding
from .templates import Templates
from ..jsontext import last_json_object

STOP = {"none", "end", "stop", "done", "nobody", "no one", "user", "null", "finish"}
_KEYS = {
    "speaker": ("speaker", "agent", "next", "next_speaker", "name"),
    "action": ("action", "act", "task"),
    "tone": ("tone", "style"),
}
_LINE = re.compile(r"^\s*[-*]?\s*(agent|speaker|next speaker|action|tone)\s*[:=]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


@dataclass
class Directive:
    speaker: str | None  # agent display name; None ends the round
    action: str = ""
    tone: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"speaker": self.speaker, "action": self.action, "tone": self.tone}


def _norm(s: str) -> str:
    s = re.sub(r"[^a-z0-9 ]+", " ", s.lower()).strip()
    s = re.sub(r"^the ", "", s)
    return re.sub(r"\s+", " ", s)


def match_speaker(name: str, cards: list[PersonaCard]) -> PersonaCard | None:
    n = _norm(name)
    for c in cards:
        if n in (_norm(c.name), _norm(c.id.replace("_", " ")), _norm(c.id)):
            return c
    for c in cards:  # "Anchor (emotional validator)" -> Anchor
        if n.startswith(_norm(c.name) + " "):
            return c
    return None


def _fields(text: str) -> dict[str, Any] | None:
    obj = last_json_object(text)
    if obj is not None:
        low = {str(k).lower(): v for k, v in obj.items()}
        return {key: next((low[a] for a in aliases if a in low), None) for key, aliases in _KEYS.items()}
    found: dict[str, Any] = {}
    for m in _LINE.finditer(text):
        key = m.group(1).lower()
        key = "speaker" if key in ("agent", "speaker", "next speaker") else key
        found[key] = m.group(2).strip().strip("/").strip()
    return found if "speaker" in found else None


def parse_directive(
    text: str, cards: list[PersonaCard], *, spoken: list[str], min_speakers: int = 1, allow_repeat: bool = False
) -> tuple[Directive | None, str | None]:
    """-> (directive, None) when valid (speaker None = end the round), or (None, reason)."""
    f = _fields(text)
    if f is None:
        return None, "no_json"
    speaker = f.get("speaker")
    if speaker is None or (isinstance(speaker, str) and _norm(speaker) in STOP):
        if len(spoken) >= min_speakers:
            return Directive(speaker=None), None
        return None, "ended_too_early"
    if not isinstance(speaker, str):
        return None, "speaker_not_text"
    card = match_speaker(speaker, cards)
    if card is None:
        return None, "unknown_speaker"
    if card.name in spoken and not allow_repeat:
        return None, "repeat_speaker"
    action, tone = f.get("action"), f.get("tone")
    if not isinstance(action, str) or not action.strip():
        return None, "missing_action"
    if not isinstance(tone, str) or not tone.strip():
        return None, "missing_tone"
    return Directive(speaker=card.name, action=action.strip()[:300], tone=tone.strip()[:120]), None


REASONS_TEXT = {
    "no_json": "there was no JSON object",
    "ended_too_early": "at least one agent must speak before the round ends",
    "speaker_not_text": "speaker must be a name",
    "unknown_speaker": "the speaker must be one of the agents",
    "repeat_speaker": "that agent already spoke this round",
    "missing_action": "action is missing",
    "missing_tone": "tone is missing",
}


def fallback(cards: list[PersonaCard], spoken: list[str]) -> Directive:
    """The documented fallback: next unspoken agent in group order after the last speaker; none left ends the round."""
    names = [c.name for c in cards]
    start = (names.index(spoken[-1]) + 1) if spoken and spoken[-1] in names else 0
    for k in range(len(cards)):
        c = cards[(start + k) % len(cards)]
        if c.name not in spoken:
            return Directive(speaker=c.name, action=f"respond to the user as the {c.role}", tone=c.traits[0])
    return Directive(speaker=None)


def directive_schema(cards: list[PersonaCard]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "speaker": {"enum": [c.name for c in cards] + ["none"]},
            "action": {"type": "string"},
            "tone": {"type": "string"},
        },
        "required": ["speaker", "action", "tone"],
    }


class Director:
    def __init__(
        self, cards: list[PersonaCard], model: str, templates: Templates, template: str, decoding: Decoding, *,
        min_speakers: int, max_speakers: int, allow_repeat: bool, structured: bool, tag: str,
    ) -> None:
        self.cards = cards
        self.model = model
        self.templates = templates
        self.template = template
        self.decoding = decoding
        self.min_speakers = min_speakers
        self.max_speakers = max_speakers
        self.allow_repeat = allow_repeat
        self.schema = directive_schema(cards) if structured else None
        self.tag = tag

    def variables(self, base: dict[str, Any], spoken: list[str], plan: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            **base,
            "spoken": spoken,
            "remaining": [c.name for c in self.cards if c.name not in spoken],
            "directives": plan,
            "can_end": len(spoken) >= self.min_speakers,
            "max_speakers": self.max_speakers,
        }

    async def next(
        self, state: DialogueState, base_vars: dict[str, Any], spoken: list[str], plan: list[dict[str, Any]]
    ) -> tuple[Directive, dict[str, Any]]:
        """The next directive (speaker None = end the round) and a record for the turn's meta."""
        st = state.stats.setdefault(
            "director",
            {"decisions": 0, "valid_first": 0, "reasked": 0, "valid_after_reask": 0, "fallbacks": 0, "round_ends": 0,
             "invalid_reasons": {}},
        )
        st["decisions"] += 1
        usage = new_usage()
        messages = self.templates.render(self.template, **self.variables(base_vars, spoken, plan))
        record: dict[str, Any] = {"attempts": [], "fallback": False, "usage": usage, "model": self.model}
        for attempt in range(2):
            resp = await state.call(
                self.model, messages, self.decoding, role=f"director:{attempt}", tag=self.tag,
                json_schema=self.schema, turn_usage=usage,
            )
            d, reason = parse_directive(
                resp.text, self.cards, spoken=spoken, min_speakers=self.min_speakers, allow_repeat=self.allow_repeat
            )
            record["attempts"].append({"raw": resp.text, "invalid": reason})
            if d is not None:
                st["valid_first" if attempt == 0 else "valid_after_reask"] += 1
                if d.speaker is None:
                    st["round_ends"] += 1
                return d, record
            st["invalid_reasons"][reason] = st["invalid_reasons"].get(reason, 0) + 1
            if attempt == 0:
                st["reasked"] += 1
                names = ", ".join(c.name for c in self.cards if self.allow_repeat or c.name not in spoken)
                messages = [
                    *messages,
                    {"role": "assistant", "content": resp.text},
                    {"role": "user", "content": (
                        f"Invalid: {REASONS_TEXT[reason]}. Reply with one JSON object only, e.g. "
                        f'{{"speaker": "{names.split(", ")[0] if names else self.cards[0].name}", '
                        f'"action": "...", "tone": "..."}}. Speakers: {names}.'
                    )},
                ]
        st["fallbacks"] += 1
        record["fallback"] = True
        d = fallback(self.cards, spoken)
        if d.speaker is None:
            st["round_ends"] += 1
        return d, record
