"""Turn transcripts and persona cards into the text that goes into judge prompts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..personas import PersonaCard
from ..transcript import Transcript


def dialogue_text(t: Transcript, *, max_chars_per_turn: int = 1500, transform: Callable[[str], str] | None = None) -> str:
    """``[round r] speaker: text`` lines; ``transform`` (e.g. the guards' neutraliser) sees each raw turn text."""
    lines = []
    for turn in t.turns:
        text = " ".join((transform(turn.text) if transform else turn.text).split())
        if len(text) > max_chars_per_turn:
            text = text[:max_chars_per_turn] + " [...]"
        lines.append(f"[round {turn.round}] {turn.speaker}: {text}")
    return "\n".join(lines)


def history_text(history: list[dict[str, str]], *, transform: Callable[[str], str] | None = None) -> str:
    lines = []
    for m in history:
        who = m.get("name") or m.get("speaker") or m.get("role", "?")
        text = str(m.get("content", ""))
        lines.append(f"{who}: {' '.join((transform(text) if transform else text).split())}")
    return "\n".join(lines) if lines else "(the conversation has not started)"


def situation_text(context: dict[str, Any], *, transform: Callable[[str], str] | None = None) -> str:
    parts = []
    for key, label in (
        ("situation", "Situation"),
        ("emotion", "Emotion"),
        ("problem", "Problem"),
        ("query", "Meeting query"),
        ("meeting_domain", "Meeting domain"),
    ):
        v = context.get(key)
        if v:
            v = transform(str(v)) if transform else str(v)
            parts.append(f"{label}: {' '.join(v.split())}")
    return "\n".join(parts) if parts else "(no situation recorded)"


def card_text(card: PersonaCard) -> str:
    return (
        f"Name: {card.name}\nRole: {card.role}\nTraits: {', '.join(card.traits)}\n"
        f"Speaking style: {card.speaking_style}\nNever: {'; '.join(card.never)}"
    )


def cards_by_name(t: Transcript, cards: list[PersonaCard] | dict[str, PersonaCard] | None = None) -> dict[str, PersonaCard]:
    """Persona cards of the transcript's agents keyed by display name: the cards the agents played,
    as the transcript records them (explicit ``cards`` win, for scoring outside a run). Agents
    without a card are absent."""
    if cards is None:
        return {a: c for a, c in t.cards().items() if a in t.agents}
    items = cards.values() if isinstance(cards, dict) else cards
    by_name = {c.name: c for c in items}
    by_id = {c.id: c for c in items}
    out = {}
    for a in t.agents:
        card = by_name.get(a) or by_id.get(a.lower())
        if card is not None:
            out[a] = card
    return out


def reply_words(t: Transcript, agent: str | None) -> int:
    turns = t.agent_turns if agent is None else t.turns_of(agent)
    return sum(len(x.text.split()) for x in turns)
