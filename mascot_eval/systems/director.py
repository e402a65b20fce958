"""The MASCOT Director: reads the dialogue state and emits directives ``{speaker, action, tone, source}``.

How it decides is ``options.decision`` (see :mod:`.decide`): ``choices`` (local models) picks the
speaker, then the action and the tone, each by choice scoring over numbered options (speakers left
this round plus "nobody" once ``min_speakers`` spoke; the action and tone *repertoires* of the
options), so every directive is valid by construction; ``schema`` asks for one JSON directive
under a JSON schema whose speaker is an ``enum``; ``text`` parses free text. ``auto`` takes the
best the backend supports. In schema and text modes the action and tone are the model's own words.

Parsing (schema, text) is tolerant (small models): the *last* JSON object in the reply is used;
keys are matched case-insensitively (``speaker``/``agent``/``next``, ``action``, ``tone``); if
there is no JSON, the paper's plain format ``Agent: X / Action: ... / Tone: ...`` is accepted.
Speaker names map to the group's agents case-insensitively (display name or persona id, with or
without "the"). ``"speaker": "none"`` ends the round once ``min_speakers`` agents have spoken.

An invalid directive (no JSON, unknown speaker, a speaker who already spoke this round, a missing
action or tone, ending too early) is re-asked once with the reason. If the second answer is
invalid too, the **fallback** applies: the next agent in the group's order who has not spoken this
round (with ``order: random``: the next in the round's random order), with action "respond to the
user as the <role>" and tone "<first trait>" (without persona information, ``personas: false``:
"respond to the user" and the first tone of the repertoire); when every agent has spoken, the
round ends. Every directive records its ``source`` (constrained, parsed, reasked, fallback) and
every decision is counted in ``transcript.stats["director"]``: ``decisions``, ``valid_first``,
``reasked``, ``valid_after_reask``, ``fallbacks``, ``round_ends``, ``invalid_reasons`` (reason ->
count), ``mode`` and ``sources`` (source -> count, round ends included); ``round_end_sources``
counts how the round ends were decided.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..personas import PersonaCard
from .base import DialogueState, new_usage
from .config import Decoding
from .decide import choose, neutral_vars, new_counts, resolve_mode, rounded
from .templates import Templates
from ..jsontext import last_json_object

# The Director's repertoire in choices mode (options.actions / options.tones; at most 9 each).
# Generic on purpose: no persona card's wording, so it carries no persona information.
DEFAULT_ACTIONS = [
    "acknowledge and validate what the user feels",
    "ask one open question to understand more",
    "reflect back what the user said in their own words",
    "offer a different way to look at the situation",
    "point out a strength or some progress the user showed",
    "suggest one small, concrete next step",
    "share brief encouragement and hope",
    "summarise what has been said and check in",
]
DEFAULT_TONES = [
    "calm and gentle",
    "warm and caring",
    "curious and open",
    "encouraging",
    "direct and practical",
    "light and upbeat",
]
END_OPTION = "nobody: let the user talk now"

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

    source: str = "parsed"  # constrained, parsed, reasked, fallback

    def to_dict(self) -> dict[str, Any]:
        return {"speaker": self.speaker, "action": self.action, "tone": self.tone, "source": self.source}


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


def fallback(
    cards: list[PersonaCard], spoken: list[str], *, personas: bool = True, tone: str = "", order: list[str] | None = None
) -> Directive:
    """The documented fallback: the next unspoken agent after the last speaker in group order (or in
    ``order``); none left ends the round. Without persona information (``personas=False``) the action
    is generic and the tone is ``tone`` (the repertoire's first)."""
    names = order or [c.name for c in cards]
    by = {c.name: c for c in cards}
    start = (names.index(spoken[-1]) + 1) if spoken and spoken[-1] in names and order is None else 0
    for k in range(len(names)):
        c = by[names[(start + k) % len(names)]]
        if c.name not in spoken:
            if personas:
                return Directive(
                    speaker=c.name, action=f"respond to the user as the {c.role}", tone=c.traits[0], source="fallback"
                )
            return Directive(speaker=c.name, action="respond to the user", tone=tone or DEFAULT_TONES[0], source="fallback")
    return Directive(speaker=None, source="fallback")


def directive_schema(names: list[str], *, can_end: bool = True) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "speaker": {"enum": list(names) + (["none"] if can_end else [])},
            "action": {"type": "string"},
            "tone": {"type": "string"},
        },
        "required": ["speaker", "action", "tone"],
    }


def new_stats() -> dict[str, Any]:
    return {
        "decisions": 0,
        "valid_first": 0,
        "reasked": 0,
        "valid_after_reask": 0,
        "fallbacks": 0,
        "round_ends": 0,
        "invalid_reasons": {},
        "mode": None,
        "sources": new_counts(),
        "round_end_sources": new_counts(),
    }


class Director:
    def __init__(
        self,
        cards: list[PersonaCard],
        model: str,
        templates: Templates,
        template: str,
        decoding: Decoding,
        *,
        min_speakers: int,
        max_speakers: int,
        allow_repeat: bool,
        tag: str,
        decision: str = "auto",
        debias: str = "rotate",
        actions: list[str] | None = None,
        tones: list[str] | None = None,
        personas: bool = True,
        where: str = "director",
        calibrate: bool = True,
    ) -> None:
        self.cards = cards
        self.model = model
        self.templates = templates
        self.template = template
        self.decoding = decoding
        self.min_speakers = min_speakers
        self.max_speakers = max_speakers
        self.allow_repeat = allow_repeat
        self.decision = decision
        self.debias = debias
        self.actions = list(actions or DEFAULT_ACTIONS)
        self.tones = list(tones or DEFAULT_TONES)
        self.personas = personas
        self.calibrate = calibrate
        self.tag = tag
        self.where = where
        self._modes: dict[Any, str] = {}

    def mode(self, settings: Any = None) -> str:
        """The decision mode for this Director's model (``auto`` resolved; checked once per settings)."""
        if settings not in self._modes:
            self._modes[settings] = resolve_mode(self.decision, self.model, settings, where=self.where)
        return self._modes[settings]

    def variables(self, base: dict[str, Any], spoken: list[str], plan: list[dict[str, Any]], **ask: Any) -> dict[str, Any]:
        return {
            **base,
            "spoken": spoken,
            "remaining": [c.name for c in self.cards if c.name not in spoken],
            "directives": plan,
            "can_end": len(spoken) >= self.min_speakers,
            "max_speakers": self.max_speakers,
            "ask": "directive",
            "options": [],
            "speaker": None,
            "action": None,
            **ask,
        }

    def candidates(self, spoken: list[str]) -> list[PersonaCard]:
        return [c for c in self.cards if self.allow_repeat or c.name not in spoken]

    def speaker_option(self, c: PersonaCard) -> str:
        return f"{c.name} ({c.role})" if self.personas else c.name

    async def next(
        self,
        state: DialogueState,
        base_vars: dict[str, Any],
        spoken: list[str],
        plan: list[dict[str, Any]],
        *,
        order: list[str] | None = None,
    ) -> tuple[Directive, dict[str, Any]]:
        """The next directive (speaker None = end the round) and a record for the turn's meta.

        With ``order`` (MASCOT-C's random speaking order) the Director still decides whether the round
        goes on and which action and tone, but the speaker is the next agent of ``order``."""
        st = state.stats.setdefault("director", new_stats())
        for k, v in new_stats().items():
            st.setdefault(k, v)
        mode = self.mode(state.settings)
        st["mode"] = mode
        st["decisions"] += 1
        usage = new_usage()
        record: dict[str, Any] = {"mode": mode, "fallback": False, "usage": usage, "model": self.model}
        if mode == "choices":
            d = await self._choose(state, base_vars, spoken, plan, record, order=order)
        else:
            d = await self._generate(state, base_vars, spoken, plan, record, mode, order=order)
        record["source"] = d.source
        st["sources"][d.source] += 1
        if d.source == "fallback":
            st["fallbacks"] += 1
            record["fallback"] = True
        elif d.source == "reasked":
            st["valid_after_reask"] += 1
        else:
            st["valid_first"] += 1
        if d.speaker is None:
            st["round_ends"] += 1
            st["round_end_sources"][d.source] += 1
        return d, record

    def _forced(self, order: list[str] | None, spoken: list[str]) -> str | None:
        if order is None:
            return None
        return next((n for n in order if n not in spoken), None)

    async def _choose(
        self,
        state: DialogueState,
        base_vars: dict[str, Any],
        spoken: list[str],
        plan: list[dict[str, Any]],
        record: dict[str, Any],
        *,
        order: list[str] | None,
    ) -> Directive:
        cands = self.candidates(spoken)
        can_end = len(spoken) >= self.min_speakers
        options = [self.speaker_option(c) for c in cands] + ([END_OPTION] if can_end else [])
        usage = record["usage"]

        def render(ask: str, *, neutral: bool = False, **extra: Any):
            base = neutral_vars(base_vars) if neutral else base_vars
            return lambda shown: self.templates.render(
                self.template, **self.variables(base, spoken, plan, ask=ask, options=shown, **extra)
            )

        async def pick(ask: str, opts: list[str], **extra: Any):
            c = await choose(
                state,
                self.model,
                render(ask, **extra),
                opts,
                self.decoding,
                role=f"director:{ask}",
                tag=self.tag,
                turn_usage=usage,
                debias=self.debias,
                neutral=render(ask, neutral=True, **extra) if self.calibrate else None,
            )
            record.setdefault("probs", {})[ask] = rounded(opts, c.probs)
            if c.prior is not None:
                record.setdefault("prior", {})[ask] = rounded(opts, c.prior)
            return c

        c = await pick("speaker", options)
        if c.index >= len(cands):
            return Directive(speaker=None, source="constrained")
        speaker = cands[c.index].name
        forced = self._forced(order, spoken)
        if forced is not None:
            record["picked"] = speaker
            speaker = forced
        a = await pick("action", self.actions, speaker=speaker)
        action = self.actions[a.index]
        t = await pick("tone", self.tones, speaker=speaker, action=action)
        return Directive(speaker=speaker, action=action, tone=self.tones[t.index], source="constrained")

    async def _generate(
        self,
        state: DialogueState,
        base_vars: dict[str, Any],
        spoken: list[str],
        plan: list[dict[str, Any]],
        record: dict[str, Any],
        mode: str,
        *,
        order: list[str] | None,
    ) -> Directive:
        st = state.stats["director"]
        names = [c.name for c in self.candidates(spoken)]
        can_end = len(spoken) >= self.min_speakers
        schema = directive_schema(names, can_end=can_end) if mode == "schema" else None
        messages = self.templates.render(self.template, **self.variables(base_vars, spoken, plan))
        record["attempts"] = []
        for attempt in range(2):
            resp = await state.call(
                self.model,
                messages,
                self.decoding,
                role=f"director:{attempt}",
                tag=self.tag,
                json_schema=schema,
                turn_usage=record["usage"],
            )
            d, reason = parse_directive(
                resp.text, self.cards, spoken=spoken, min_speakers=self.min_speakers, allow_repeat=self.allow_repeat
            )
            record["attempts"].append({"raw": resp.text, "invalid": reason})
            if d is not None:
                d.source = "reasked" if attempt else ("constrained" if mode == "schema" else "parsed")
                forced = self._forced(order, spoken)
                if d.speaker is not None and forced is not None:
                    record["picked"] = d.speaker
                    d.speaker = forced
                return d
            assert reason is not None  # parse_directive gives a reason whenever it gives no directive
            st["invalid_reasons"][reason] = st["invalid_reasons"].get(reason, 0) + 1
            if attempt == 0:
                st["reasked"] += 1
                messages = [
                    *messages,
                    {"role": "assistant", "content": resp.text},
                    {
                        "role": "user",
                        "content": (
                            f"Invalid: {REASONS_TEXT[reason]}. Reply with one JSON object only, e.g. "
                            f'{{"speaker": "{names[0] if names else self.cards[0].name}", '
                            f'"action": "...", "tone": "..."}}. Speakers: {", ".join(names)}.'
                        ),
                    },
                ]
        return fallback(self.cards, spoken, personas=self.personas, tone=self.tones[0], order=order)
