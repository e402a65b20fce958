"""The conversation engine: rounds of one user turn followed by the system's agent turns."""

from __future__ import annotations

import datetime as _dt
import time

from ..backends.client import ClientSettings
from ..data.context import Context
from ..taskspec import TaskSpec
from ..transcript import Transcript, make_dialogue_id, validate
from .base import DialogueState, System, Tally
from .user_sim import UserSimulator


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def new_state(
    task: TaskSpec, context: Context, profile: str | None, system: System, *, seed: int,
    settings: ClientSettings | None = None, tally: Tally | None = None,
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
    tally: Tally | None = None,
) -> Transcript:
    state = new_state(task, context, profile, system, seed=seed, settings=settings, tally=tally)
    started, t0 = _now(), time.perf_counter()
    ended_by = "rounds"
    for r in range(1, task.rounds + 1):
        state.round = r
        uturn = await user.turn(state)
        state.turns.append(uturn)
        if uturn.meta.get("ended"):
            ended_by = "user"
            break
        await system.respond(state)
    stats = dict(state.stats)
    stats["usage"] = state.usage
    t = Transcript(
        dialogue_id=state.dialogue_id,
        task=task.name,
        task_version=task.version,
        split=task.split,
        domain=task.domain,
        context_id=context.id,
        system=system.config.name,
        system_config_hash=config_hash or system.config_hash(),
        persona_group=system.group,
        agents=system.agents,
        turns=state.turns,
        user_profile=profile,
        context=context.to_dict(),
        seeds={"run": seed, "calls": "per call: hash(run seed, dialogue_id, round, turn index, role, sample index); "
                                      "user calls: hash(run seed, pair_key, round, sample index)"},
        timing={"started": started, "ended": _now(), "seconds": round(time.perf_counter() - t0, 3)},
        stats=stats,
        ended_by=ended_by,
        personas={c.name: c.model_dump() for c in system.cards},
    )
    validate(t, where=f"system '{system.config.name}'")
    return t
