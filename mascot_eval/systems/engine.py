"""The conversation engine: rounds of one user turn followed by the system's agent turns."""

from __future__ import annotations

import datetime as _dt
import time

from ..backends.client import ClientSettings
from ..data.context import Context
from ..taskspec import TaskSpec
from ..transcript import Transcript, make_dialogue_id, validate
from ..records.usage import Usage
from .base import DialogueState, System
from .user_sim import UserSimulator


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def new_state(
    task: TaskSpec,
    context: Context,
    profile: str | None,
    system: System,
    *,
    seed: int,
    settings: ClientSettings | None = None,
    tally: Usage | None = None,
) -> DialogueState:
    return DialogueState(
        task=task,
        context=context,
        profile=profile,
        dialogue_id=make_dialogue_id(task.name, context.id, profile, system.config.name),
        seed=seed,
        rounds=task.rounds,
        settings=settings,
        tally=tally,
    )


async def run_dialogue(
    system: System,
    user: UserSimulator,
    task: TaskSpec,
    context: Context,
    profile: str | None,
    *,
    seed: int = 0,
    config_hash: str | None = None,
    settings: ClientSettings | None = None,
    tally: Usage | None = None,
) -> Transcript:
    state = new_state(task, context, profile, system, seed=seed, settings=settings, tally=tally)
    started, t0 = _now(), time.perf_counter()
    ended_by = "rounds"
    try:
        for r in range(1, task.rounds + 1):
            state.round = r
            uturn = await user.turn(state)
            state.turns.append(uturn)
            if uturn.meta.get("ended"):
                ended_by = "user"
                break
            await system.respond(state)
    except BaseException as exc:  # the calls this attempt paid for are recorded with the failure
        exc.dialogue_calls = list(state.calls)  # type: ignore[attr-defined]
        raise
    stats = dict(state.stats)
    stats["usage"] = {role: u.to_dict() for role, u in state.usage.items()}
    t = Transcript(
        dialogue_id=state.dialogue_id,
        task=task.name,
        task_version=task.version,
        split=task.split,
        domain=context.domain,  # the context's own (a task may mix emotional and workplace contexts)
        context_id=context.id,
        system=system.config.name,
        system_config_hash=config_hash or system.config_hash(),
        persona_group=system.group,
        agents=system.agents,
        turns=state.turns,
        user_profile=profile,
        context=context.to_dict(),
        seeds={
            "run": seed,
            "calls": "per call: hash(run seed, dialogue_id, round, turn index, role, sample index); "
            "user calls: hash(run seed, pair_key, round, sample index)",
        },
        timing={"started": started, "ended": _now(), "seconds": round(time.perf_counter() - t0, 3)},
        stats=stats,
        ended_by=ended_by,
        personas=system.played_personas(),
        system_info=system.system_info(config_hash),
        calls=state.calls,
        usage=Usage.total(c.usage for c in state.calls),
    )
    validate(t, where=f"system '{system.config.name}'")
    return t
