"""Usage of model calls: one record type for a call, a dialogue, a judging unit, a step and a run.

Every model call is counted once where it was made (a transcript's ``calls``, a judgment unit's
``usage``, a comparison's ``usage``, a failed attempt in ``failures.jsonl``); the manifest's
ledger adds those rows up, so its totals equal the sum of the rows. Dollars are summed with
:func:`math.fsum` (exactly rounded, independent of order) and rounded to ``COST_DIGITS`` places.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from pydantic import Field

from .base import Record

COST_DIGITS = 10  # dollars are kept to 1e-10 (a ten-thousandth of a micro-dollar)


def round_cost(x: float) -> float:
    return round(float(x), COST_DIGITS)


class Usage(Record):
    """Calls and what they cost. ``calls`` counts finished calls: cache hits and failures included."""

    calls: int = 0
    cached: int = 0  # answered from the response cache (or shared with an identical call in flight): free
    failures: int = 0  # calls that failed for good (after their retries)
    retries: int = 0  # extra attempts made by the client (429, 5xx, timeouts), on successes and failures
    reasks: int = 0  # judge re-asks after an unparseable reply (each is also a call)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0  # summed over calls that reached a model

    def add(self, other: Usage) -> Usage:
        """Add ``other`` into this usage (in place) and return self."""
        self.calls += other.calls
        self.cached += other.cached
        self.failures += other.failures
        self.retries += other.retries
        self.reasks += other.reasks
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd = round_cost(math.fsum((self.cost_usd, other.cost_usd)))
        self.latency_s = round(self.latency_s + other.latency_s, 6)
        return self

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def total(cls, parts: Iterable[Usage | None]) -> Usage:
        """The sum of ``parts`` with dollars summed exactly (fsum) and rounded once."""
        out = cls()
        costs: list[float] = []
        latency: list[float] = []
        for p in parts:
            if p is None:
                continue
            out.calls += p.calls
            out.cached += p.cached
            out.failures += p.failures
            out.retries += p.retries
            out.reasks += p.reasks
            out.prompt_tokens += p.prompt_tokens
            out.completion_tokens += p.completion_tokens
            costs.append(p.cost_usd)
            latency.append(p.latency_s)
        out.cost_usd = round_cost(math.fsum(costs))
        out.latency_s = round(math.fsum(latency), 6)
        return out

    @classmethod
    def of_response(cls, resp: Any) -> Usage:
        """The usage of one answered call (a :class:`~mascot_eval.backends.base.ChatResponse`)."""
        cached = bool(getattr(resp, "cached", False))
        return cls(
            calls=1,
            cached=int(cached),
            retries=0 if cached else int(getattr(resp, "retries", 0) or 0),
            prompt_tokens=0 if cached else int(resp.usage.prompt_tokens),
            completion_tokens=0 if cached else int(resp.usage.completion_tokens),
            cost_usd=0.0 if cached else round_cost(getattr(resp, "cost_usd", 0.0) or 0.0),
            latency_s=0.0 if cached else round(float(getattr(resp, "latency_s", 0.0) or 0.0), 6),
        )

    @classmethod
    def of_failure(cls, exc: BaseException) -> Usage:
        """The usage of one call that failed for good (the client's BackendError carries its retries)."""
        return cls(calls=1, failures=1, retries=int(getattr(exc, "retries", 0) or 0))


class CallRecord(Record):
    """One model call made while generating a dialogue."""

    role: str  # "user", "agent:<persona id>", "director:<attempt>", "analyst", "vote:...", ...
    tag: str  # the usage tag: "system:<name>", "system:<name>:director", "user-sim"
    spec: str  # model spec
    round: int = 0
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None  # set when the call failed for good


class UsageLedger(Record):
    """Usage of one step (or a whole run): the total, and the same split by tag and by model spec."""

    total: Usage = Field(default_factory=Usage)
    by_tag: dict[str, Usage] = Field(default_factory=dict)
    by_spec: dict[str, Usage] = Field(default_factory=dict)

    @classmethod
    def of(cls, items: Iterable[tuple[str, str, Usage | None]]) -> UsageLedger:
        """Ledger of ``(tag, spec, usage)`` items; every total is an exact sum of the items."""
        kept: list[tuple[str, str, Usage]] = [(tag, spec, u) for tag, spec, u in items if u is not None]
        items = kept
        by_tag: dict[str, list[Usage]] = {}
        by_spec: dict[str, list[Usage]] = {}
        for tag, spec, u in items:
            by_tag.setdefault(tag or "(untagged)", []).append(u)
            by_spec.setdefault(spec or "(unknown)", []).append(u)
        return cls(
            total=Usage.total(u for _, _, u in items),
            by_tag={k: Usage.total(v) for k, v in sorted(by_tag.items())},
            by_spec={k: Usage.total(v) for k, v in sorted(by_spec.items())},
        )
