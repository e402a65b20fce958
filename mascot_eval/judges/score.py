"""Score transcripts and single replies with a judge: prompt, call, parse, re-ask once, record.

Public API:

    rows = await judge_transcript("gpt", transcript)                  # judgment rows (mascot-judgment/1)
    scores = await score_response("local", persona=card, history=h, response="...")  # {criterion: 1-5 | None}

A reply that cannot be parsed is re-asked ``spec.reask`` times (default once) and then recorded as
``status: "unscored"`` with ``reason: "parse_failed: ..."``. A call that fails after the client's
retries is ``reason: "call_failed: ..."`` (retried on the next resume). Neither ever becomes a score.
A judge with ``mode: logprob`` does not generate: its scores are read from next-token probabilities
of a prefilled verdict (:meth:`Judge.ask_logprob`). The judge's guards (``guards:`` in its YAML,
:mod:`mascot_eval.judges.guards`) neutralise judge-directed text in the material before prompting
and leave a verdict unscored as ``degenerate: ...`` (placeholder, out of schema) or ``steered: ...``
(it follows an instruction found in the material).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..backends.base import BackendError, ChatResponse, GenerationParams
from ..backends.client import ClientSettings, get_client
from ..criteria import criteria_for, to_100
from ..errors import UserError
from ..fileio import stable_hash
from ..personas import PersonaCard
from ..transcript import Transcript
from . import guards as guard
from . import prompts
from .parse import Parsed, parse_scores, weighted_scores
from .rubrics import Rubric, load_rubric
from .specs import JudgeSpec, check_mode, resolve_judge
from .templates import make_nonce, render, templates_hash

from ..records.judgment import SCHEMA
from ..records.usage import Usage

DIGITS = ("1", "2", "3", "4", "5")


def scores_schema(criteria: tuple[str, ...]) -> dict[str, Any]:
    props: dict[str, Any] = {"rationale": {"type": "string"}}
    for c in criteria:
        props[c] = {"type": "integer", "enum": [1, 2, 3, 4, 5]}
    return {
        "name": "judge_scores",
        "type": "object",
        "properties": props,
        "required": ["rationale", *criteria],
        "additionalProperties": False,
    }


@dataclass
class Material:
    """What a judge is shown of one transcript (or one candidate reply), after the guards' neutraliser.

    ``found``: judge-directed passages in the material; ``seen``: those the judge still saw (all of
    them when ``guards.neutralise`` is off, none when it is on); ``text``: the raw material, for the
    check that a rationale mentions it.
    """

    parts: dict[str, str]
    neutralised: int = 0
    found: guard.Found = field(default_factory=guard.Found)
    seen: guard.Found = field(default_factory=guard.Found)
    text: str = ""


@dataclass
class Asked:
    """The outcome of one judging call (with its re-asks)."""

    parsed: Parsed
    usage: dict[str, Any]
    weighted: dict[str, float | None] = field(default_factory=dict)
    reason: str | None = None  # set when not parsed
    call_id: str = ""
    response: ChatResponse | None = None  # the reply that parsed


def _usage(responses: list[ChatResponse], failure: BaseException | None = None) -> dict[str, Any]:
    """The unit's usage: its answered calls (re-asks included) and the call that failed for good, if any."""
    parts = [Usage.of_response(r) for r in responses]
    if failure is not None:
        parts.append(Usage.of_failure(failure))
    u = Usage.total(parts)
    u.reasks = max(0, len(responses) + (failure is not None) - 1)
    return u.model_dump()


class Judge:
    """One judge spec bound to its model client, rubrics and templates."""

    def __init__(self, spec: JudgeSpec | str, settings: ClientSettings | None = None) -> None:
        self.spec = resolve_judge(spec) if isinstance(spec, str) else spec
        check_mode(self.spec)
        self.settings = settings
        self.root = self.spec.judges_root
        self.rubrics: dict[str, Rubric] = {lvl: load_rubric(self.root, f, lvl) for lvl, f in self.spec.rubrics.items()}
        t = self.spec.templates
        self.template_hash = templates_hash(self.root, [t.system, t.agent, t.group, t.response, t.threeway, t.reask, t.pick_best])
        self.spec_hash = self.spec.spec_hash
        self.tag = f"judge:{self.spec.name}"
        self._client = None
        self.guards = self.spec.guards
        self.patterns = guard.load_patterns(self.root, self.guards)

    @property
    def client(self):
        if self._client is None:
            self._client = get_client(self.spec.model, self.settings)
        return self._client

    def rubric(self, level: str) -> Rubric:
        if level not in self.rubrics:
            raise KeyError(level)
        return self.rubrics[level]

    def system_prompt(self) -> str:
        return render(self.root, self.spec.templates.system, nonce="-")

    def render(self, template: str, nonce_parts: list[str], **ctx: Any) -> str:
        return render(self.root, template, nonce=make_nonce(self.spec.name, *nonce_parts), **ctx)

    async def ask(self, user_prompt: str, criteria: tuple[str, ...], material: Material | None = None) -> Asked:
        """Ask for scores on ``criteria``; re-ask on a parse failure; never raise for a bad reply.

        With ``material`` (what :meth:`material` built for this prompt) the guards check the verdict.
        """
        if self.spec.mode == "logprob":
            asked = await self.ask_logprob(user_prompt, criteria)
        else:
            asked = await self.ask_with(
                user_prompt, lambda text, shown: parse_scores(text, criteria, shown=shown), scores_schema(criteria)
            )
            if asked.parsed.ok and asked.response is not None:
                asked.weighted = weighted_scores(asked.response.text, asked.response.top_logprobs, asked.parsed.key_positions)
        if asked.parsed.ok and material is not None:
            why = self.check_verdict(asked.parsed, criteria, material)
            if why:
                asked.parsed = Parsed(False, asked.parsed.scores, asked.parsed.rationale, why, asked.parsed.obj)
                asked.reason = why
                asked.weighted = {}
        return asked

    def check_verdict(self, parsed: Parsed, criteria: tuple[str, ...], material: Material) -> str | None:
        """``degenerate: ...`` or ``steered: ...`` when the guards reject a parsed verdict, else None.
        A ``mode: logprob`` verdict has no rationale or free-form values: only the steered-score check applies."""
        g, pats = self.guards, self.patterns
        if self.spec.mode != "logprob":
            why = guard.degenerate_reason(
                parsed.obj,
                parsed.scores,
                parsed.rationale,
                criteria,
                guards=g,
                pats=pats,
                structured=self.spec.structured_output,
                material=material.text,
            )
            if why:
                return why
        rationale = parsed.rationale if self.spec.mode != "logprob" else None
        return guard.steered_reason(rationale, parsed.scores, criteria, material.seen, guards=g, pats=pats)

    def neutraliser(self, found: guard.Found):
        """A text transform for prompts: judge-directed sentences become the marker (guards.neutralise),
        and every passage found (replaced or not) is collected in ``found``."""
        replace = self.guards.neutralise

        def transform(text: str) -> str:
            out, f = guard.neutralise(text, self.patterns, replace=replace)
            found.hits.extend(f.hits)
            return out

        return transform

    def material(
        self, t: Transcript | None = None, *, history: list[dict[str, str]] | None = None, response: str | None = None
    ) -> Material:
        """The prompt material of a transcript (dialogue, situation) or of a candidate reply (history, response)."""
        found = guard.Found()
        tf = self.neutraliser(found)
        if t is not None:
            parts = {
                "situation": prompts.situation_text(t.context, transform=tf),
                "dialogue": prompts.dialogue_text(t, transform=tf),
            }
            raw = prompts.situation_text(t.context) + "\n" + prompts.dialogue_text(t) + "\n" + " ".join(t.agents)
        else:
            parts = {"history": prompts.history_text(history or [], transform=tf), "response": tf(response or "")}
            raw = prompts.history_text(history or []) + "\n" + (response or "")
        replaced = self.guards.neutralise and bool(found)
        n = _count_markers(parts, self.patterns.marker) if replaced else 0
        return Material(parts, n, found, guard.Found() if self.guards.neutralise else found, raw)

    async def ask_with(self, user_prompt: str, parse: Callable[[str, str], Parsed], json_schema: dict[str, Any] | None) -> Asked:
        """One judging call: system + user prompt, parse, re-ask ``spec.reask`` times, record usage."""
        if self.spec.mode != "generate":
            raise UserError(
                f"{self.spec.file or 'judge ' + repr(self.spec.name)}: field 'mode' is {self.spec.mode}, so this judge cannot "
                "write a free-form verdict for this step; use a judge with mode: generate"
            )
        messages = [{"role": "system", "content": self.system_prompt()}, {"role": "user", "content": user_prompt}]
        params = self.spec.params(json_schema)
        responses: list[ChatResponse] = []
        call_id = stable_hash({"j": self.spec.name, "h": self.spec_hash, "p": user_prompt})
        parsed = Parsed(False, reason="not asked")
        for attempt in range(self.spec.reask + 1):
            try:
                resp = await self.client.chat(messages, params, tag=self.tag)
            except BackendError as exc:
                return Asked(
                    Parsed(False, reason=str(exc)), _usage(responses, exc), reason=f"call_failed: {exc}"[:500], call_id=call_id
                )
            responses.append(resp)
            parsed = parse(resp.text, user_prompt)
            if parsed.ok:
                return Asked(parsed, _usage(responses), call_id=call_id, response=resp)
            if attempt < self.spec.reask:
                reask = render(self.root, self.spec.templates.reask, nonce="-", reason=parsed.reason)
                messages = [*messages, {"role": "assistant", "content": resp.text}, {"role": "user", "content": reask}]
        reason = f"parse_failed: {parsed.reason} (after {len(responses)} attempt{'s' if len(responses) != 1 else ''})"
        return Asked(parsed, _usage(responses), reason=reason, call_id=call_id)

    async def ask_probs(self, user_prompt: str, segments: tuple[str, ...], choices: tuple[str, ...]) -> Asked:
        """``mode: logprob``: one forward pass, nothing generated. The verdict JSON is prefilled
        segment by segment and after each segment the next-token probabilities of ``choices`` are
        read; when ok, ``parsed.obj["probs"]`` holds one {choice: probability} per segment."""
        messages = [{"role": "system", "content": self.system_prompt()}, {"role": "user", "content": user_prompt}]
        params = GenerationParams(max_tokens=1, temperature=0.0, seed=None, prefill=segments, choices=choices)
        call_id = stable_hash({"j": self.spec.name, "h": self.spec_hash, "p": user_prompt})
        try:
            resp = await self.client.chat(messages, params, tag=self.tag)
        except BackendError as exc:
            return Asked(Parsed(False, reason=str(exc)), _usage([], exc), reason=f"call_failed: {exc}"[:500], call_id=call_id)
        probs = resp.choice_probs or []
        if len(probs) != len(segments):
            why = f"logprob: {len(probs)} probability rows for {len(segments)} prefill segments"
            return Asked(Parsed(False, reason=why), _usage([resp]), reason=why, call_id=call_id)
        return Asked(Parsed(True, obj={"probs": probs}), _usage([resp]), call_id=call_id, response=resp)

    async def ask_logprob(self, user_prompt: str, criteria: tuple[str, ...]) -> Asked:
        """Scores on ``criteria`` in ``mode: logprob``: each criterion's value is read from the digit
        probabilities after ``"<criterion>": `` in the prefilled verdict; earlier criteria hold a
        neutral 3, so every criterion is read in the same context. score = the most probable digit,
        weighted = the expected digit."""
        segments = tuple(('{"rationale": "", ' if i == 0 else "3, ") + f'"{c}": ' for i, c in enumerate(criteria))
        asked = await self.ask_probs(user_prompt, segments, DIGITS)
        if asked.parsed.ok:
            assert asked.parsed.obj is not None  # ask_probs sets obj on every answer that parsed
            probs = asked.parsed.obj["probs"]
            asked.parsed.scores = {c: int(max(DIGITS, key=p.__getitem__)) for c, p in zip(criteria, probs)}
            asked.weighted = {c: sum(int(d) * p[d] for d in DIGITS) for c, p in zip(criteria, probs)}
        return asked

    # prompts
    @staticmethod
    def material_nonce(t: Transcript, m: Material) -> list[str]:
        """The nonce parts of a dialogue's agent and group prompts: one per dialogue and material, so that
        those prompts open with the same text (the material's data blocks carry the nonce) and a local
        judge computes that opening once (shared-prefix choice scoring). The nonce still changes with the
        material, so a transcript cannot guess its delimiters."""
        return [t.dialogue_id, "material", m.parts["dialogue"]]

    def agent_prompt(self, t: Transcript, agent: str, card: PersonaCard | None, material: Material | None = None) -> str:
        m = material or self.material(t)
        return self.render(
            self.spec.templates.agent,
            self.material_nonce(t, m),
            agent=agent,
            agents=t.agents,
            card=prompts.card_text(card) if card else None,
            situation=m.parts["situation"],
            dialogue=m.parts["dialogue"],
            n_rounds=len(t.rounds()),
            rubric=self.rubric("agent").for_template(),
            neutralised=m.neutralised,
            marker=self.patterns.marker,
        )

    def group_prompt(self, t: Transcript, cards: dict[str, PersonaCard], material: Material | None = None) -> str:
        m = material or self.material(t)
        return self.render(
            self.spec.templates.group,
            self.material_nonce(t, m),
            agents=t.agents,
            cards="\n\n".join(prompts.card_text(c) for c in cards.values()) if cards else None,
            situation=m.parts["situation"],
            dialogue=m.parts["dialogue"],
            n_rounds=len(t.rounds()),
            rubric=self.rubric("group").for_template(),
            neutralised=m.neutralised,
            marker=self.patterns.marker,
        )

    def response_prompt(
        self, key: str, agent: str, card: str | None, history: list[dict[str, str]], response: str
    ) -> tuple[str, Material]:
        """The prompt that scores one candidate reply (training, Stage 1) and the material it shows."""
        m = self.material(history=history, response=response)
        m.text += "\n" + agent
        prompt = self.render(
            self.spec.templates.response,
            [key, m.parts["history"], m.parts["response"]],
            agent=agent,
            card=card,
            history=m.parts["history"],
            response=m.parts["response"],
            rubric=self.rubric("agent").for_template(),
            neutralised=m.neutralised,
            marker=self.patterns.marker,
        )
        return prompt, m


def _status(asked: Asked | None) -> str:
    if asked is not None and asked.parsed.ok:
        return "scored"
    if asked is not None and (asked.reason or "").startswith("call_failed"):
        return "call_failed"
    return "unscored"


def _count_markers(parts: dict[str, str], marker: str) -> int:
    return sum(v.count(marker) for v in parts.values())


def _rows(
    judge: Judge, t: Transcript, level: str, agent: str | None, asked: Asked | None, reason: str | None
) -> list[dict[str, Any]]:
    """One JudgmentRow per criterion of the unit, in rubric order; the unit's usage on the first."""
    rows = []
    status = _status(asked)
    ok = status == "scored"
    scored = asked if ok else None  # "scored" only for an answer that parsed
    usage = Usage.model_validate(asked.usage).model_dump() if asked is not None else None
    for i, c in enumerate(criteria_for(level)):
        score = scored.parsed.scores[c] if scored is not None else None
        w = scored.weighted.get(c) if scored is not None else None
        rows.append(
            {
                "schema": SCHEMA,
                "dialogue_id": t.dialogue_id,
                "pair_key": t.pair_key,
                "system": t.system,
                "task": t.task,
                "split": t.split,
                "domain": t.domain,
                "context_id": t.context_id,
                "judge": judge.spec.name,
                "judge_model": judge.spec.model,
                "level": level,
                "agent": agent,
                "criterion": c,
                "criterion_index": i,
                "score": score,
                "score_100": to_100(score) if score is not None else None,
                "weighted_score": w,
                "status": status,
                "reason": None if ok else (asked.reason if asked is not None else reason),
                "rationale": asked.parsed.rationale if asked is not None else None,
                "usage": usage if i == 0 else None,
                "call_id": asked.call_id if asked is not None else None,
                "spec_hash": judge.spec_hash,
                "template_hash": judge.template_hash,
            }
        )
    return rows


async def judge_units(
    judge: Judge,
    t: Transcript,
    units: list[tuple[str, str | None]],
    cards: list[PersonaCard] | dict[str, PersonaCard] | None = None,
    *,
    on_unit: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[list[dict[str, Any]]]:
    """Judge the (level, agent) units of one transcript concurrently; one row list per unit.
    ``on_unit`` receives each unit's rows as soon as that unit is done (to record it at once)."""
    by_name = prompts.cards_by_name(t, cards)
    material = judge.material(t)
    if judge.spec.mode == "rules":
        groups = [rules_rows(judge, t, level, agent, by_name) for level, agent in units]
        for rows in groups:
            if on_unit is not None:
                on_unit(rows)
        return groups

    async def one(level: str, agent: str | None) -> list[dict[str, Any]]:
        if level == "agent":
            assert agent is not None
            if not t.turns_of(agent):
                return _rows(judge, t, level, agent, None, "no_turns: the agent never spoke")
            prompt = judge.agent_prompt(t, agent, by_name.get(agent), material)
        else:
            prompt = judge.group_prompt(t, by_name, material)
        asked = await judge.ask(prompt, criteria_for(level), material)
        return _rows(judge, t, level, agent, asked, None)

    async def done(level: str, agent: str | None) -> list[dict[str, Any]]:
        rows = await one(level, agent)
        if on_unit is not None:
            on_unit(rows)
        return rows

    return list(await asyncio.gather(*(done(lv, ag) for lv, ag in units)))


def rules_rows(
    judge: Judge, t: Transcript, level: str, agent: str | None, by_name: dict[str, PersonaCard]
) -> list[dict[str, Any]]:
    """``mode: rules``: the unit's rows from the deterministic checks (:mod:`.rules`); no model call."""
    from .rules import score_transcript

    assert judge.spec.rules is not None
    got = score_transcript(judge.spec.rules, t, level, agent, {n: c.id for n, c in by_name.items()})
    if got is None:
        return _rows(
            judge, t, level, agent, None, "no_turns: the agent never spoke" if level == "agent" else "no_turns: no agent spoke"
        )
    scores, why = got
    return _rows(judge, t, level, agent, _rules_asked(scores, why, [t.dialogue_id, level, agent or ""]), None)


def _rules_asked(scores: dict[str, float], why: str, key: list[str]) -> Asked:
    return Asked(
        Parsed(True, scores=dict(scores), rationale=why),
        _usage([]),
        weighted=dict(scores),
        call_id=stable_hash({"rules": key, "scores": scores}),
    )


def units_for(t: Transcript, levels: tuple[str, ...] | list[str]) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for level in levels:
        criteria_for(level)  # validates the level name
        if level == "agent":
            out.extend(("agent", a) for a in t.agents)
        else:
            out.append(("group", None))
    return out


_JUDGES: dict[tuple[str, ClientSettings | None], Judge] = {}


def get_judge(name: str | JudgeSpec, settings: ClientSettings | None = None) -> Judge:
    if isinstance(name, JudgeSpec):
        return Judge(name, settings)
    key = (name, settings)
    if key not in _JUDGES:
        _JUDGES[key] = Judge(name, settings)
    return _JUDGES[key]


async def judge_transcript(
    judge: str | JudgeSpec,
    transcript: Transcript,
    *,
    levels: tuple[str, ...] | list[str] = ("agent", "group"),
    settings: ClientSettings | None = None,
    cards: list[PersonaCard] | dict[str, PersonaCard] | None = None,
) -> list[dict[str, Any]]:
    """Judgment rows (one per criterion, per agent for the agent level) for one transcript."""
    j = get_judge(judge, settings)
    groups = await judge_units(j, transcript, units_for(transcript, levels), cards)
    return [r for rows in groups for r in rows]


async def score_response(
    judge: str | JudgeSpec,
    *,
    persona: PersonaCard,
    history: list[dict[str, str]],
    response: str,
    settings: ClientSettings | None = None,
) -> dict[str, float | None]:
    """1-5 per agent-level criterion for one candidate reply (None = unscored); for Stage 1 of training.
    A ``mode: logprob`` judge gives the expected digit (continuous), a generating judge its integer,
    a ``mode: rules`` judge its deterministic check scores (:mod:`.rules`).

    ``history`` is the conversation so far as ``[{"role" or "name": speaker, "content": text}, ...]``.
    """
    j = get_judge(judge, settings)
    if j.spec.mode == "rules":
        from .rules import score_reply

        assert j.spec.rules is not None
        return dict(score_reply(j.spec.rules, persona.id, history, response)[0])
    prompt, m = j.response_prompt(persona.id, persona.name, prompts.card_text(persona), history, response)
    asked = await j.ask(prompt, criteria_for("agent"), m)
    if not asked.parsed.ok:
        return {c: None for c in criteria_for("agent")}
    if j.spec.mode == "logprob":  # continuous expected digits: finer than the most probable digit
        return {c: asked.weighted[c] for c in criteria_for("agent")}
    return {c: asked.parsed.scores[c] for c in criteria_for("agent")}
