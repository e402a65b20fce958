"""Decisions that are valid by construction: the Director's and MultiAgentESC's choices.

A *decision* picks one (or the best few) of an enumerated list of options. How the model is asked
depends on what its backend can do (``decision`` in a system's options):

* ``choices``: choice scoring. The options are listed numbered 1..n in the prompt and one forward
  pass reads the next-token probabilities of the digits ``1``..``n`` (``GenerationParams.choices``,
  backends with ``supports_choices``: ``embedded``, ``hf/``); nothing is generated, so the answer is
  always one of the options. Small models prefer the first listed option whatever it says, so by
  default (``debias: rotate``) the list is shown in all n cyclic rotations (n calls, batched
  together) and each option's probability is averaged over the positions it was shown in: every
  option is shown once in every position, so a position preference adds the same to all of them.
* ``schema``: JSON-schema constrained generation (``supports_json_schema``: OpenAI, Anthropic tool
  mode, in-process vLLM); enumerated fields are ``enum`` in the schema.
* ``text``: free text, parsed, re-asked once with the reason, then the documented fallback.
* ``auto``: the first of choices, schema, text the backend supports.

Every decision records its *source*: ``constrained`` (choices or schema, valid at once),
``parsed`` (text, valid at once), ``reasked`` (valid after the re-ask) or ``fallback``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..backends.client import get_client
from ..errors import UserError
from ..records.usage import Usage
from .base import DialogueState
from .config import Decoding

DecisionMode = Literal["auto", "choices", "schema", "text"]
Debias = Literal["rotate", "none"]
SOURCES = ("constrained", "parsed", "reasked", "fallback")
MAX_OPTIONS = 9  # digits 1-9 are single tokens in every tokenizer we use
DIGITS = tuple(str(i) for i in range(1, MAX_OPTIONS + 1))


def capabilities(spec: str, settings: Any = None) -> dict[str, bool]:
    """What the backend of ``spec`` can do for decisions."""
    backend = get_client(spec, settings).backend
    return {
        "choices": bool(getattr(backend, "supports_choices", False)),
        "schema": bool(getattr(backend, "supports_json_schema", False)),
    }


def resolve_mode(requested: str, spec: str, settings: Any = None, *, where: str, field: str = "options.decision") -> str:
    """The concrete mode for ``spec``: ``auto`` -> the best the backend supports; an explicit mode
    the backend cannot serve is a UserError naming the file and field."""
    caps = capabilities(spec, settings)
    if requested == "auto":
        return "choices" if caps["choices"] else "schema" if caps["schema"] else "text"
    if requested in ("choices", "schema") and not caps[requested]:
        what = (
            "score choices from next-token probabilities (local transformers models: embedded, hf/<path>)"
            if requested == "choices"
            else "constrain generation with a JSON schema (openai/, anthropic/, vllm/)"
        )
        raise UserError(f"{where}: field '{field}' is {requested}, but model '{spec}' cannot {what}; use decision: auto or text")
    return requested


def new_counts() -> dict[str, int]:
    return {s: 0 for s in SOURCES}


@dataclass
class Choice:
    index: int  # the chosen option (index into the options list)
    probs: list[float]  # per option, averaged over the rotations shown (and calibrated)
    calls: int
    prior: list[float] | None = None  # the content-free probabilities, when calibrated


NEUTRAL = "N/A"


def neutral_vars(v: dict[str, Any]) -> dict[str, Any]:
    """Template variables of a content-free dialogue: the context's text fields and the history are
    "N/A"; who spoke this round, the options and the agents stay."""
    ctx = dict(v.get("context") or {})
    for k in ("situation", "emotion", "query", "problem", "opening", "prompt"):
        if ctx.get(k):
            ctx[k] = NEUTRAL
    ctx["turns"] = []
    out = {
        **v,
        "context": ctx,
        "history": [{"speaker": "user", "text": NEUTRAL, "round": 1}],
        "user_text": NEUTRAL,
        "profile": None,
    }
    if "analysis" in v:
        out["analysis"] = NEUTRAL
    return out


def rotations(n: int, debias: str) -> list[list[int]]:
    """Display orders: rotation r shows option (k + r) mod n at position k."""
    if debias == "none" or n == 1:
        return [list(range(n))]
    return [[(k + r) % n for k in range(n)] for r in range(n)]


async def choose(
    state: DialogueState,
    spec: str,
    render: Callable[[list[dict[str, str]]], list[dict[str, str]]],
    options: list[str],
    decoding: Decoding,
    *,
    role: str,
    tag: str,
    turn_usage: Usage | None = None,
    debias: str = "rotate",
    prefill: str = "",
    neutral: Callable[[list[dict[str, str]]], list[dict[str, str]]] | None = None,
) -> Choice:
    """Choice scoring over ``options``. ``render(shown)`` gets the options in display order as
    ``[{"label": "1", "text": ...}, ...]`` and returns the chat messages; the model's next token
    after ``prefill`` is read over the labels. Temperature 0 takes the most probable option
    (ties: the earliest); above 0 it samples from the probabilities sharpened by 1/temperature with
    the call's seed, so reruns repeat it. ``neutral`` renders the content-free prompt for calibration."""
    n = len(options)
    if not 1 <= n <= MAX_OPTIONS:
        raise UserError(f"{tag}: a decision needs 1 to {MAX_OPTIONS} options, got {n}; shorten the option list")
    orders = rotations(n, debias)
    labels = DIGITS[:n]

    async def one(r: int, order: list[int], how: Callable[..., list[dict[str, str]]], who: str) -> dict[str, float]:
        shown = [{"label": labels[pos], "text": options[k]} for pos, k in enumerate(order)]
        resp = await state.call(
            spec,
            how(shown),
            decoding,
            role=f"{who}:r{r}",
            tag=tag,
            turn_usage=turn_usage,
            choices=labels,
            prefill=(prefill,) if prefill else (),
        )
        if not resp.choice_probs:
            raise UserError(f"model '{spec}' returned no choice probabilities for {tag}; use decision: text")
        return resp.choice_probs[0]

    def average(rows: list[dict[str, float]]) -> list[float]:
        out = [0.0] * n
        for order, row in zip(orders, rows):
            for pos, k in enumerate(order):
                out[k] += float(row.get(labels[pos], 0.0)) / len(orders)
        return out

    jobs = [one(r, order, render, role) for r, order in enumerate(orders)]
    if neutral is not None:
        jobs += [one(r, order, neutral, f"{role}:prior") for r, order in enumerate(orders)]
    rows = await asyncio.gather(*jobs)
    probs = average(rows[: len(orders)])
    prior = None
    if neutral is not None:
        prior = average(rows[len(orders) :])
        ratio = [p / max(q, 1e-9) for p, q in zip(probs, prior)]
        total = sum(ratio)
        probs = [x / total for x in ratio] if total > 0 else probs
    if decoding.temperature > 0:
        w = [p ** (1.0 / decoding.temperature) for p in probs]
        rng = random.Random(state.call_seed(role))
        index = rng.choices(range(n), weights=w if sum(w) > 0 else None)[0]
    else:
        index = max(range(n), key=lambda k: (probs[k], -k))
    return Choice(index=index, probs=probs, calls=len(jobs), prior=prior)


async def choose_many(
    state: DialogueState,
    spec: str,
    render: Callable[[list[dict[str, str]]], list[dict[str, str]]],
    options: list[str],
    m: int,
    decoding: Decoding,
    **kw: Any,
) -> tuple[list[int], list[float]]:
    """The ``m`` most probable options (ties: the earliest), best first."""
    c = await choose(state, spec, render, options, decoding.model_copy(update={"temperature": 0.0}), **kw)
    best = sorted(range(len(options)), key=lambda k: (-c.probs[k], k))[:m]
    return best, c.probs


def rounded(options: list[str], probs: list[float]) -> dict[str, float]:
    return {o: round(p, 4) for o, p in zip(options, probs)}
