"""Length and turn statistics (tokens from :mod:`mascot_eval.metrics.tokenize`)."""

from __future__ import annotations

from . import register
from .base import Metric, Rows
from .context import MetricContext


def _turn_length(ctx: MetricContext) -> Rows:
    rows = Rows()
    toks = ctx.tokens
    for r in ctx.agent_turns:
        rows.add(r.ti, len(toks[r.text_id]), agent=r.speaker, round=r.round)
    return rows


def _user_length(ctx: MetricContext) -> Rows:
    rows = Rows()
    toks = ctx.tokens
    for r in ctx.turns:
        if r.is_user:
            rows.add(r.ti, len(toks[r.text_id]), round=r.round)
    return rows


def _agent_turns_per_round(ctx: MetricContext) -> Rows:
    rows = Rows()
    for ti in range(len(ctx.transcripts)):
        for rnd, turns in sorted(ctx.rounds_of(ti).items()):
            rows.add(ti, sum(not r.is_user for r in turns), round=rnd)
    return rows


def _rounds(ctx: MetricContext) -> Rows:
    rows = Rows()
    for ti in range(len(ctx.transcripts)):
        rows.add(ti, len(ctx.rounds_of(ti)))
    return rows


def _agent_tokens(ctx: MetricContext) -> Rows:
    rows = Rows()
    toks = ctx.tokens
    for ti in range(len(ctx.transcripts)):
        rows.add(ti, sum(len(toks[r.text_id]) for r in ctx.turns_of(ti) if not r.is_user))
    return rows


def _participation(ctx: MetricContext) -> Rows:
    rows = Rows()
    for ti, t in enumerate(ctx.transcripts):
        rounds = ctx.rounds_of(ti)
        for agent in t.agents:
            spoke = sum(any(r.speaker == agent for r in turns) for turns in rounds.values())
            rows.add(ti, spoke / len(rounds), agent=agent)
    return rows


register(
    Metric(
        name="turn_length_tokens",
        unit="turn",
        higher="longer",
        fn=_turn_length,
        range=(0.0, None),
        description="Number of tokens (lower-cased words and punctuation) in an agent turn.",
    )
)
register(
    Metric(
        name="user_turn_length_tokens",
        unit="round",
        higher="longer",
        fn=_user_length,
        range=(0.0, None),
        description="Number of tokens in a user turn (one row per user turn, keyed by its round).",
    )
)
register(
    Metric(
        name="agent_turns_per_round",
        unit="round",
        higher="more agents speak",
        fn=_agent_turns_per_round,
        range=(0.0, None),
        description="Number of agent turns in a round.",
    )
)
register(
    Metric(
        name="dialogue_rounds",
        unit="dialogue",
        higher="longer dialogue",
        fn=_rounds,
        range=(1.0, None),
        description="Number of distinct rounds in the dialogue.",
    )
)
register(
    Metric(
        name="dialogue_agent_tokens",
        unit="dialogue",
        higher="more agent text",
        fn=_agent_tokens,
        range=(0.0, None),
        description="Total tokens over all agent turns of the dialogue.",
    )
)
register(
    Metric(
        name="agent_participation",
        unit="agent",
        higher="the agent speaks in more rounds",
        fn=_participation,
        range=(0.0, 1.0),
        description="Share of the dialogue's rounds in which the agent (from Transcript.agents) has at least one turn.",
    )
)
