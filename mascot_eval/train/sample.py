"""Training contexts, rollouts of the evaluated system, and K candidate replies per state.

Contexts: ``data.contexts`` per task, disjoint from every evaluation sample named (the data tasks'
own samples and ``data.holdout_tasks``), each with the simulated user's profile as the task assigns it.

Rollouts (``stage1/rollouts.jsonl``, one transcript per line, resumable per dialogue): the evaluated
system plays each training context as in evaluation (its Director, its templates, the simulated user),
with pi_SFT speakers. Every agent turn is a Stage-1 *state*: the conversation before it and the
directive it followed, i.e. the directive-conditioned, mid-dialogue situations evaluation produces.

Candidates (``stage1/candidates.jsonl``, resumable per row): K replies per state from pi_SFT, with the
speaker prompt rendered by the system (:mod:`.view`), through the model client (cached, counted).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backends.base import BackendError, GenerationParams
from ..backends.client import ClientSettings, get_client
from ..data.context import Context
from ..errors import UserError
from ..fileio import append_jsonl, read_jsonl, stable_hash
from ..aio import run_sync
from ..taskspec import TaskSpec
from ..transcript import Transcript
from .config import TrainConfig
from .view import State, SystemView, states_of


@dataclass
class TrainContext:
    task: TaskSpec
    context: Context
    profile: str | None

    @property
    def key(self) -> str:
        return f"{self.task.name}:{self.context.id}"


def eval_sample_ids(task: TaskSpec, data_dir: str | Path | None) -> set[str]:
    from ..data.loaders import load_contexts

    return {c.id for c in load_contexts(task, data_dir)}


def pool_of(
    cfg: TrainConfig, task: TaskSpec, data_dir: str | Path | None, *, exclude: bool, path: str | None = None
) -> list[Context]:
    """Every context of the task's source (filters applied, no sample), minus the held-out samples."""
    from ..data.loaders import load_contexts
    from ..taskspec import SampleSpec, load_task

    src = task.source if path is None else task.source.model_copy(update={"path": path})
    pool = load_contexts(
        task.model_copy(update={"sample": SampleSpec(size=None, seed=task.sample.seed), "source": src}), data_dir
    )
    if exclude:
        held = eval_sample_ids(task, data_dir)
        for other in cfg.data.holdout_tasks:
            ot = load_task(cfg.path_in_config(other))
            if ot.source.loader == task.source.loader:
                held |= eval_sample_ids(ot, data_dir)
        pool = [c for c in pool if c.id not in held]
    pool.sort(key=lambda c: c.id)
    return pool


def training_contexts(cfg: TrainConfig, data_dir: str | Path | None = None) -> list[TrainContext]:
    """``data.contexts`` contexts per task (seeded), each with the profile the task's user settings assign."""
    import random

    from ..data.select import assign_profiles
    from ..taskspec import load_task

    out: list[TrainContext] = []
    for name in cfg.data.tasks:
        task = load_task(cfg.path_in_config(name))
        pool = pool_of(cfg, task, data_dir, exclude=cfg.data.exclude_eval_contexts)
        random.Random(stable_hash([cfg.data.seed, task.name])).shuffle(pool)
        chosen = pool[: cfg.data.contexts]
        if not chosen:
            why = (
                " after leaving out the evaluation samples (set data.exclude_eval_contexts: false for a smoke test)"
                if cfg.data.exclude_eval_contexts
                else ""
            )
            raise UserError(f"{cfg.file or 'config'}: field 'data.tasks': task '{task.name}' has no contexts to train on{why}")
        if cfg.stage1.rollouts.rounds:
            task = task.model_copy(update={"rounds": cfg.stage1.rollouts.rounds})
        out.extend(TrainContext(task, c, p) for c, p in assign_profiles(task, chosen))
    return out


# -- rollouts ---------------------------------------------------------------------------------------


def run_rollouts(
    cfg: TrainConfig,
    contexts: list[TrainContext],
    views: dict[str, SystemView],
    user_model: str,
    out: Path,
    *,
    settings: ClientSettings,
    seed: int,
) -> dict[str, int]:
    """Dialogues of the system on each context (one transcript per line); returns {new, reused, failed}."""
    from ..systems.engine import run_dialogue
    from ..systems.user_sim import UserSimulator

    done = {r["dialogue_id"] for r in read_jsonl(out)}
    counts = {"new": 0, "reused": len(done), "failed": 0}
    todo = []
    for tc in contexts:
        view = views[tc.task.name]
        did = f"{tc.task.name}:{tc.context.id}:{tc.profile or '-'}:{view.system.config.name}"
        if did not in done:
            todo.append((tc, view))
    errors: list[str] = []

    async def one(tc: TrainContext, view: SystemView) -> None:
        user = UserSimulator(tc.task, user_model, agents=view.system.agents)
        try:
            t = await run_dialogue(view.system, user, tc.task, tc.context, tc.profile, seed=seed, settings=settings)
        except BackendError as exc:  # counted and retried on the next run, never written
            counts["failed"] += 1
            errors.append(str(exc)[:200])
            return
        append_jsonl(out, t.to_dict())
        counts["new"] += 1

    async def all_() -> None:
        await asyncio.gather(*(one(tc, v) for tc, v in todo))

    if todo:
        run_sync(all_())
    if counts["failed"]:
        raise UserError(
            f"stage1 rollouts: {counts['failed']} dialogues failed ({errors[0]}); rerun the same command to retry them",
            exit_code=1,
        )
    return counts


def rollout_states(rollouts: Path, contexts: list[TrainContext], names: set[str]) -> list[State]:
    """The states of the rollouts of ``contexts`` (context order) where one of ``names`` spoke."""
    rows = {(r["task"], r["context_id"], r.get("user_profile")): r for r in read_jsonl(rollouts)}
    out: list[State] = []
    for tc in contexts:
        r = rows.get((tc.task.name, tc.context.id, tc.profile))
        if r is None:
            continue
        t = Transcript.from_dict(r, where=str(rollouts))
        out.extend(st for st in states_of(t, tc.task, tc.context) if st.speaker in names)
    return out


# -- candidates -------------------------------------------------------------------------------------


def candidate_key(st: State, persona: str, k: int) -> str:
    return f"{st.key}:{persona}:{k}"


def sample_candidates(
    cfg: TrainConfig,
    states: list[State],
    view: SystemView,
    sampler: str,
    out: Path,
    *,
    settings: ClientSettings | None = None,
) -> dict[str, int]:
    """Fill ``out`` with K candidates per state from ``sampler`` (pi_SFT); returns {new, reused, failed}."""
    done = {r["key"] for r in read_jsonl(out)}
    s1 = cfg.stage1
    client = get_client(sampler, settings or ClientSettings(max_connections=cfg.max_connections))
    todo: list[tuple[State, Any, int]] = []
    for st in states:
        card = view.speaker_card(st)
        for k in range(s1.candidates):
            if candidate_key(st, card.id, k) not in done:
                todo.append((st, card, k))
    counts = {"new": 0, "reused": len(done), "failed": 0}

    async def one(st: State, card: Any, k: int) -> None:
        messages = view.speaker_messages(st, card, st.directive)
        params = GenerationParams(
            max_tokens=s1.sampling.max_tokens,
            temperature=s1.sampling.temperature,
            top_p=s1.sampling.top_p,
            seed=int(stable_hash([cfg.seed, st.key, card.id, k], 8), 16),
            sample_index=k,
        )
        try:
            resp = await client.chat(messages, params, tag="train:sample")
        except BackendError:  # a failed call is counted and retried on the next run, never written
            counts["failed"] += 1
            return
        row: dict[str, Any] = {
            "key": candidate_key(st, card.id, k),
            "state": st.key,
            "task": st.task.name,
            "context_id": st.context.id,
            "dialogue_id": st.dialogue_id,
            "round": st.round,
            "persona": card.id,
            "agent": card.name,
            "k": k,
            "directive": st.directive,
            "text": view.clean(resp.text, card),
            "raw": resp.text,
            "finish_reason": resp.finish_reason,
            "model": sampler,
            "messages": messages,
            "history": st.history(),
        }
        append_jsonl(out, row)
        counts["new"] += 1

    async def all_() -> None:
        await asyncio.gather(*(one(*t) for t in todo))

    if todo:
        run_sync(all_())
    return counts
