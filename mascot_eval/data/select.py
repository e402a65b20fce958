"""Choosing a task's contexts: filters, the seeded sample, and the simulated user's profile per context."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from ..errors import UserError, did_you_mean
from .context import Context

if TYPE_CHECKING:
    from ..taskspec import TaskSpec
    from .loaders import Loader


def _values(v: Any) -> list[str]:
    """A context's value(s) for a filter, lower-cased; None/empty -> []."""
    if v is None:
        return []
    if isinstance(v, (list, tuple, set)):
        return [str(x).lower() for x in v if x is not None]
    return [str(v).lower()]


def apply_filters(contexts: list[Context], filters: dict[str, Any], loader: Loader, where: str) -> list[Context]:
    """Keep contexts matching every filter; a filter value is one value or a list (any of them), case-insensitive.

    An unknown filter name, or a value that no context has, is an error naming the task field, so a
    typo never yields a silently empty or unfiltered task.
    """
    out = contexts
    for key, wanted in filters.items():
        if key not in loader.filters:
            known = ", ".join(sorted(loader.filters)) or "(none)"
            raise UserError(
                f"{where}: field 'source.filters.{key}': unknown filter for loader '{loader.name}'"
                f"{did_you_mean(key, loader.filters)}; known: {known}"
            )
        accessor = loader.filters[key][1]
        wanted_list = wanted if isinstance(wanted, list) else [wanted]
        if not wanted_list or any(isinstance(w, (dict, list)) or w is None for w in wanted_list):
            raise UserError(f"{where}: field 'source.filters.{key}': give one value or a list of values")
        wanted_set = {str(w).lower() for w in wanted_list}
        present: dict[str, str] = {}
        for c in contexts:
            for v in _values(accessor(c)):
                present.setdefault(v, v)
        for w in sorted(wanted_set):
            if w not in present:
                shown = ", ".join(sorted(present)[:40]) or "(none)"
                raise UserError(
                    f"{where}: field 'source.filters.{key}': no context has {key} {w!r}"
                    f"{did_you_mean(w, present)}; values present: {shown}"
                )
        out = [c for c in out if wanted_set.intersection(_values(accessor(c)))]
    return out


def sample(contexts: list[Context], size: int | None, seed: int, where: str) -> list[Context]:
    """A seeded random sample in sample order (``size`` None: every context, shuffled with the same seed).

    The order is the shuffle order, so the first N of a sample are themselves a random sample and a
    run with ``--limit N`` sees a prefix of the full run's contexts.
    """
    if not contexts:
        raise UserError(f"{where}: the source yields no contexts after filters; check source.filters and the data file")
    if size is not None and size > len(contexts):
        raise UserError(
            f"{where}: field 'sample.size': {size} is more than the {len(contexts)} contexts "
            f"left after filters; lower it or remove it to use every context"
        )
    order = list(range(len(contexts)))
    random.Random(seed).shuffle(order)
    n = len(contexts) if size is None else size
    return [contexts[i] for i in order[:n]]


def assign_profiles(task: TaskSpec, contexts: list[Context]) -> list[tuple[Context, str | None]]:
    """Pair each context with a simulated-user profile (an MBTI type, or None for 'none').

    ``cycle``: context i gets profile i mod len(profiles) (with 16 MBTI types and a sample of 100,
    every type appears 6 or 7 times). ``all``: every context is paired with every profile.
    """
    profiles: list[str | None] = [None if p == "none" else p for p in task.user.profiles]
    if not profiles:
        raise UserError(f"{task.file or task.name}: field 'user.profiles': give at least one profile (or 'none')")
    if task.user.assignment == "all":
        return [(c, p) for c in contexts for p in profiles]
    return [(c, profiles[i % len(profiles)]) for i, c in enumerate(contexts)]
