"""One agent turn: render the agent template, call the agent's model, clean the reply."""

from __future__ import annotations

from typing import Any

from ..personas import PersonaCard
from ..records.usage import Usage
from ..transcript import Turn
from .base import DialogueState, System, new_usage
from .text import clean_reply


def split_reasoning(text: str) -> tuple[str, str | None]:
    """CoT output -> (reply, reasoning). The reply follows the last "Reply:"; None reasoning = marker missing."""
    low = text.lower()
    k = low.rfind("reply:")
    if k < 0:
        lines = [ln for ln in text.splitlines() if not ln.strip().lower().startswith(("thought", "reasoning", "think"))]
        return "\n".join(lines).strip(), None
    return text[k + len("reply:") :].strip(), text[:k].strip()


async def speak(
    system: System,
    state: DialogueState,
    card: PersonaCard,
    *,
    directive: dict[str, Any] | None = None,
    reasoning: bool = False,
    extra: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Turn:
    variables = system.prompt_vars(state, card, directive=directive, **(extra or {}))
    messages = system.templates.render(system.template("agent"), **variables)
    spec = system.model_for(card)
    usage = new_usage()
    decoding = system.config.decoding
    resp = await state.call(
        spec, messages, decoding, role=f"agent:{card.id}", tag=f"system:{system.config.name}", turn_usage=usage
    )
    turn = make_turn(
        system,
        state,
        card,
        resp.text,
        spec=spec,
        usage=usage,
        latency=resp.latency_s,
        directive=directive,
        reasoning=reasoning,
        meta=meta,
    )
    if turn.text or decoding.temperature <= 0:
        return turn
    # Nothing left after cleaning (the model wrote only someone else's turn): draw one more sample
    # (sample index 1, so it is cached and reproducible like the first); counted either way.
    state.count("agents", "resampled_empty")
    first_raw = resp.text
    resp = await state.call(
        spec, messages, decoding, role=f"agent:{card.id}", tag=f"system:{system.config.name}", index=1, turn_usage=usage
    )
    again = make_turn(
        system,
        state,
        card,
        resp.text,
        spec=spec,
        usage=usage,
        latency=resp.latency_s,
        directive=directive,
        reasoning=reasoning,
        meta={**(meta or {}), "resampled": True, "raw_first": first_raw},
    )
    state.count("agents", "empty_turns", -1)  # empty_turns counts final turns; the first attempt was replaced
    return again


def make_turn(
    system: System,
    state: DialogueState,
    card: PersonaCard,
    raw: str,
    *,
    spec: str,
    usage: Usage,
    latency: float | None,
    directive: dict[str, Any] | None = None,
    reasoning: bool = False,
    meta: dict[str, Any] | None = None,
) -> Turn:
    meta = dict(meta or {})
    text = raw
    if reasoning:
        text, thought = split_reasoning(raw)
        if thought is None:
            state.count("cot", "unparsed")
        else:
            meta["reasoning"] = thought
    others = [n for n in system.agents if n != card.name]
    cleaned = clean_reply(text, card.name, others)
    if cleaned != raw.strip():
        meta["raw"] = raw
    if not cleaned:
        meta["empty"] = True
        state.count("agents", "empty_turns")
    return Turn(
        round=state.round,
        speaker=card.name,
        text=cleaned,
        directive=directive,
        model=spec,
        usage=usage,
        latency_s=latency,
        meta=meta,
    )
