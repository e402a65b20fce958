"""Prompts the trainer renders (speaker replies, Director directives) and directive parsing.

A conversation is a list of ``{"speaker": "user" | <agent name>, "text": str}``. Speakers see their
persona card, the situation and the conversation so far; the Director sees every card and answers
with one JSON directive ``{"speaker", "action", "tone"}``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..data.context import Context
from ..personas import PersonaCard

Turns = list[dict[str, str]]


def situation(ctx: Context) -> str:
    parts = [f"Situation: {' '.join(ctx.situation.split())}"]
    if ctx.emotion:
        parts.append(f"The person feels: {ctx.emotion}")
    if ctx.query:
        parts.append(f"Meeting query: {ctx.query}")
    return "\n".join(parts)


def opening_turns(ctx: Context) -> Turns:
    """The user's first message: the context's human opening line, else its situation."""
    text = ctx.opening or ctx.query or ctx.situation
    return [{"speaker": "user", "text": " ".join(text.split())}]


def conversation(turns: Turns) -> str:
    return "\n".join(f"{'User' if t['speaker'] == 'user' else t['speaker']}: {' '.join(t['text'].split())}" for t in turns)


def speaker_messages(
    card: PersonaCard, others: list[str], ctx: Context, turns: Turns, directive: dict[str, str] | None = None
) -> list[dict[str, str]]:
    team = f" You speak alongside {', '.join(others)}." if others else ""
    system = (
        f"{card.prompt_block()}\n\n"
        f"You are one of several companions talking with a person who needs support.{team} "
        f"Write only {card.name}'s next message: one to three sentences, in {card.name}'s voice, "
        "without a name label and without writing anyone else's lines."
    )
    user = f"{situation(ctx)}\n\nConversation so far:\n{conversation(turns)}\n\n"
    if directive:
        user += f"The Director asks {card.name} to: {directive['action']} (tone: {directive['tone']}).\n"
    user += f"Write {card.name}'s next message."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def history_for_judge(turns: Turns) -> list[dict[str, str]]:
    """The conversation in the judges' ``score_response`` history format."""
    return [{"name": t["speaker"], "content": t["text"]} for t in turns]


def director_messages(cards: list[PersonaCard], ctx: Context, turns: Turns, spoken: list[str]) -> list[dict[str, str]]:
    roster = "\n".join(f"- {c.name}: the {c.role}; {', '.join(c.traits[:3])}" for c in cards)
    names = ", ".join(f'"{c.name}"' for c in cards)
    system = (
        "You are the Director of a team of companions who support one person together:\n"
        f"{roster}\n\n"
        "At each step you choose who speaks next and what they should do, so that the team's replies "
        "complement each other instead of repeating each other. Answer with one JSON object only: "
        f'{{"speaker": one of {names}, "action": "<one short sentence>", "tone": "<a few words>"}}.'
    )
    already = ", ".join(spoken) if spoken else "nobody yet"
    user = (
        f"{situation(ctx)}\n\nConversation so far:\n{conversation(turns)}\n\n"
        f"Since the person's last message, these companions have spoken: {already}.\n"
        "Give the next directive as JSON."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_OBJ = re.compile(r"\{")


def parse_directive(text: str, agents: list[str]) -> tuple[dict[str, str] | None, str | None]:
    """``(directive, None)`` for the first valid JSON directive in ``text``, else ``(None, reason)``."""
    dec = json.JSONDecoder()
    found: dict[str, Any] | None = None
    for m in _OBJ.finditer(text):
        try:
            obj, _ = dec.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            found = obj
            break
    if found is None:
        return None, "no JSON object"
    lower = {k.lower(): v for k, v in found.items() if isinstance(k, str)}
    speaker = lower.get("speaker") or lower.get("agent")
    if not isinstance(speaker, str):
        return None, "no speaker"
    by_lower = {a.lower(): a for a in agents}
    name = by_lower.get(speaker.strip().lower())
    if name is None:
        return None, f"unknown speaker {speaker!r}"
    action, tone = lower.get("action"), lower.get("tone")
    if not isinstance(action, str) or not action.strip():
        return None, "no action"
    if not isinstance(tone, str) or not tone.strip():
        return None, "no tone"
    return {"speaker": name, "action": " ".join(action.split()), "tone": " ".join(tone.split())}, None


def fallback_directive(agents: list[str], spoken: list[str]) -> dict[str, str]:
    """The rollout's stand-in for an invalid directive: the first agent not yet heard, in group order."""
    for a in agents:
        if a not in spoken:
            return {"speaker": a, "action": "respond to the person's last message in your own way", "tone": "warm"}
    return {"speaker": agents[len(spoken) % len(agents)], "action": "add something new", "tone": "warm"}


def completion_text(completion: Any) -> str:
    """trl passes conversational completions as ``[{"role": "assistant", "content": ...}]``."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


def clean_reply(text: str, name: str, others: list[str]) -> str:
    """Drop a leading "<name>:" label and cut where the model starts writing someone else's line."""
    t = text.strip()
    label = re.compile(r"^\s*\**\s*" + re.escape(name) + r"\s*\**\s*:\s*", re.IGNORECASE)
    t = label.sub("", t, count=1)
    names = [*others, "User", "Assistant"]
    cut = re.compile(r"^\s*\**\s*(" + "|".join(re.escape(n) for n in names) + r")\s*\**\s*:", re.IGNORECASE | re.MULTILINE)
    m = cut.search(t)
    if m:
        t = t[: m.start()]
    return t.strip()
