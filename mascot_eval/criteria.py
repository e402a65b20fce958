"""The paper's judge criteria and the 1-5 -> 0-100 mapping.

Agent-level criteria are scored once per agent per dialogue; group-level criteria once per
dialogue. Scores are 1-5 and reported on the paper's 0-100 scale with ``(s - 1) / 4 * 100``.
Overall is the unweighted mean of a level's criteria.
"""

from __future__ import annotations

AGENT_CRITERIA: tuple[str, ...] = ("emotion", "empathy", "consistency", "relevance", "contribution")
GROUP_CRITERIA: tuple[str, ...] = ("fidelity", "originality", "relevance", "engagement")
LEVELS: tuple[str, ...] = ("agent", "group")

CRITERION_TITLES: dict[tuple[str, str], str] = {
    ("agent", "emotion"): "Emotional Expressiveness",
    ("agent", "empathy"): "Empathetic Support Quality",
    ("agent", "consistency"): "Persona Consistency",
    ("agent", "relevance"): "Response Relevance",
    ("agent", "contribution"): "Social Contribution",
    ("group", "fidelity"): "Persona Fidelity",
    ("group", "originality"): "Originality & Specificity",
    ("group", "relevance"): "Relevance & Coherence",
    ("group", "engagement"): "Engagement & Contribution",
}


def criteria_for(level: str) -> tuple[str, ...]:
    if level == "agent":
        return AGENT_CRITERIA
    if level == "group":
        return GROUP_CRITERIA
    raise ValueError(f"unknown level {level!r}; expected 'agent' or 'group'")


def to_100(score: float) -> float:
    """Map a 1-5 judge score to the paper's 0-100 scale: (s - 1) / 4 * 100."""
    if not 1.0 <= score <= 5.0:
        raise ValueError(f"score {score} is outside 1-5")
    return (score - 1.0) / 4.0 * 100.0
