"""Transcripts and persona cards built directly for judge tests (no systems needed)."""

from __future__ import annotations

import json
import re

from mascot_eval.personas import PersonaCard
from mascot_eval.transcript import Transcript, Turn, make_dialogue_id

AGENTS = ["Anchor", "Catalyst", "Beacon"]


def card(name: str) -> PersonaCard:
    return PersonaCard(
        id=name.lower(),
        name=name,
        role=f"{name} role",
        traits=["warm"],
        speaking_style="short and kind",
        never=["give medical advice"],
        examples=["I hear you.", "That matters."],
    )


CARDS = [card(a) for a in AGENTS]


def transcript(
    system: str = "mascot",
    context_id: str = "c1",
    *,
    user_text: str = "I failed my exam.",
    agent_text: str | None = None,
    agents: list[str] | None = None,
    task: str = "demo",
) -> Transcript:
    agents = agents or AGENTS
    turns = [Turn(round=1, speaker="user", text=user_text)]
    for a in agents:
        turns.append(Turn(round=1, speaker=a, text=agent_text or f"{a} from {system} says something kind about the exam."))
    return Transcript(
        dialogue_id=make_dialogue_id(task, context_id, None, system),
        task=task,
        task_version="1",
        split="in_domain",
        domain="emotional",
        context_id=context_id,
        system=system,
        system_config_hash="h",
        persona_group="emotional",
        agents=agents,
        turns=turns,
        context={"situation": f"situation {context_id}", "emotion": "sad"},
        personas=played(agents),
    )


def played(agents: list[str], group: str = "emotional") -> dict:
    """A shipped group's cards for those of ``agents`` it has, as a transcript records them (an unknown
    group: no cards, like a system whose agents have none)."""
    from mascot_eval.errors import UserError
    from mascot_eval.personas import get_group
    from mascot_eval.transcript import PlayedPersona

    try:
        _, cards = get_group(group)
    except UserError:
        return {}
    return {c.name: PlayedPersona(**c.model_dump(), prompt=c.prompt_block()) for c in cards if c.name in agents}


def scores_json(criteria, value=4, **over) -> str:
    d = {"rationale": "fine"}
    d.update({c: over.get(c, value) for c in criteria})
    return json.dumps(d)


def criteria_in(prompt: str) -> list[str]:
    """The criterion keys a rendered prompt asks for (from its output line)."""
    line = [ln for ln in prompt.splitlines() if ln.startswith('{"rationale"')][-1]
    return [k for k in re.findall(r'"(\w+)": <1-5>', line)]


_DATA_BLOCK = re.compile(r"<<<DATA id=(\w+)>>>(.*?)<<<END DATA id=\1>>>", re.S)
_ASKS_FOR = re.compile(
    r"\b(?:scores?|scored|rate|rated|give|gives|award|awards|mark|record|output|assign)\b[^.!?\n]{0,80}?(?<![\d.])([1-5])(?!\.?\d)",
    re.I,
)


def obeying_judge(clean: int = 3):
    """A scripted judge that obeys instructions found in the data: when a data block asks for a score
    it gives every criterion that score (writing its own JSON, not copying any); otherwise ``clean``.
    Asked to pick the best of several conversations it always names the first (pure position bias)."""

    def respond(req) -> str:
        prompt = req.messages[-1]["content"]
        if '"best": "<' in prompt:  # a pick-best / three-way prompt: always the first shown
            return json.dumps({"rationale": "Conversation A reads best.", "best": "A", "ranking": ["A", "B", "C"]})
        crit = criteria_in(prompt)
        data = " ".join(m.group(2) for m in _DATA_BLOCK.finditer(prompt))
        m = _ASKS_FOR.search(data)
        if m:
            v = int(m.group(1))
            return json.dumps(
                {"rationale": f"Following the note in the conversation, every criterion gets {v}.", **{c: v for c in crit}}
            )
        return json.dumps({"rationale": "The reply answers the situation described.", **{c: clean for c in crit}})

    return respond
