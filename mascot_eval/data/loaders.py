"""Context loaders by name and :func:`load_contexts`, the one entry point the rest of the harness uses.

A loader turns one dataset's raw release files into :class:`Context` objects in source order. The
built-ins (``empathetic_dialogues``, ``qmsum``, ``esconv``, ``jsonl``, ``demo``) register in
:data:`LOADERS`; a plug-in registers a :class:`Loader` subclass (or instance) under the entry-point
group ``mascot_eval.loaders``.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from .. import paths
from ..errors import UserError
from ..registry import Registry
from .context import Context

if TYPE_CHECKING:
    from ..taskspec import SourceSpec, TaskSpec


@dataclass
class SourceRef:
    """What a loader needs from a task: the source block plus where the task file lives."""

    loader: str
    path: str | None
    options: dict[str, Any]
    task_file: Path | None = None  # for messages and task-relative paths
    data_dir: Path | None = None
    task_domain: str | None = None  # default domain for user-written records

    @property
    def where(self) -> str:
        return str(self.task_file) if self.task_file else "(task)"


@dataclass
class LoadedSource:
    contexts: list[Context]  # every context of the source, in source order, before filters
    files: list[Path] = field(default_factory=list)
    origin: str = ""  # data_dir / cache / download / task / absolute
    notes: dict[str, Any] = field(default_factory=dict)  # e.g. raw-format quirks met while parsing


class Loader(ABC):
    """Base class. Subclasses set ``name``, ``domain``, ``filters`` and ``options`` and implement ``read``."""

    name: ClassVar[str] = ""
    domain: ClassVar[str] = "emotional"
    description: ClassVar[str] = ""
    default_path: ClassVar[str | None] = None
    # filter name -> (description, accessor giving the context's value(s) to match)
    filters: ClassVar[dict[str, tuple[str, Callable[[Context], Any]]]] = {}
    # option name -> (description, default)
    options: ClassVar[dict[str, tuple[str, Any]]] = {}

    @abstractmethod
    def read(self, ref: SourceRef) -> LoadedSource:
        """Every context of the source, in source order (before filters and sampling)."""

    def stats(self, contexts: list[Context]) -> dict[str, Any]:
        """Counts describing a whole source (printed by `mascot-eval tasks validate`)."""
        return {"contexts": len(contexts)}

    def check_options(self, ref: SourceRef) -> dict[str, Any]:
        for key in ref.options:
            if key not in self.options:
                known = ", ".join(sorted(self.options)) or "(none)"
                raise UserError(
                    f"{ref.where}: field 'source.options.{key}': unknown option for loader '{self.name}'; known: {known}"
                )
        return {k: ref.options.get(k, default) for k, (_, default) in self.options.items()}


LOADERS: Registry[Any] = Registry("loader", builtins_module="mascot_eval.data.builtin")


def get_loader(name: str, where: str | None = None) -> Loader:
    try:
        obj = LOADERS.get(name)
    except UserError as exc:
        raise UserError(f"{where}: field 'source.loader': {exc.message}" if where else exc.message) from None
    return obj() if isinstance(obj, type) else obj


def source_ref(task: TaskSpec, data_dir: str | Path | None = None) -> SourceRef:
    src: SourceSpec = task.source
    return SourceRef(
        loader=src.loader,
        path=src.path,
        options=dict(src.options),
        task_file=Path(task.file) if task.file else None,
        data_dir=paths.data_dir(data_dir),
        task_domain=task.domain,
    )


_SOURCE_CACHE: dict[tuple, tuple[tuple, LoadedSource]] = {}


def _file_key(files: list[Path]) -> tuple:
    return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)


def read_source(task: TaskSpec, data_dir: str | Path | None = None) -> tuple[Loader, LoadedSource]:
    """All contexts of a task's source (before filters and sampling); parsed once per process and file."""
    ref = source_ref(task, data_dir)
    loader = get_loader(ref.loader, ref.where)
    from .sources import cache_root

    key = (
        ref.loader,
        ref.path,
        repr(sorted(ref.options.items())),
        str(ref.data_dir),
        ref.task_domain,
        str(ref.task_file.parent) if ref.task_file else None,
        str(paths.dirs("tasks")),
        None if ref.data_dir else str(cache_root()),
    )
    hit = _SOURCE_CACHE.get(key)
    if hit is not None:
        try:
            if _file_key(hit[1].files) == hit[0]:
                return loader, hit[1]
        except OSError:
            pass
    loaded = loader.read(ref)
    _SOURCE_CACHE[key] = (_file_key(loaded.files), loaded)
    return loader, loaded


def load_contexts(task: TaskSpec, data_dir: str | Path | None = None, limit: int | None = None) -> list[Context]:
    """The task's contexts: source -> filters -> seeded sample; ``limit`` keeps the first N of the sample.

    The order is deterministic (the seeded sample order), so ``limit=N`` is always a prefix of the
    full sample and reruns see the same contexts.
    """
    from .select import apply_filters, sample

    if limit is not None and limit < 1:
        raise UserError(f"--limit must be at least 1, got {limit}")
    loader, loaded = read_source(task, data_dir)
    where = task.file or task.name
    chosen = apply_filters(loaded.contexts, task.source.filters, loader, where)
    chosen = sample(chosen, task.sample.size, task.sample.seed, where)
    if limit is not None:
        chosen = chosen[:limit]
    return [copy.deepcopy(c) for c in chosen]  # callers may edit their copies; the parsed source stays intact
