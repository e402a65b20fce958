"""Registries by name for systems, judges, metrics and model backends.

Built-ins register with the :meth:`Registry.register` decorator. Users plug in their own without
editing ours through Python entry points (group ``mascot_eval.<kind>``, e.g.
``[project.entry-points."mascot_eval.systems"] mine = "my_pkg.systems:MySystem"``), loaded lazily
the first time a registry is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from .errors import UserError, did_you_mean

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object map with entry-point plug-ins and did-you-mean errors."""

    def __init__(self, kind: str, *, builtins_module: str | None = None) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._builtins_module = builtins_module
        self._loaded = False

    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            self.add(name, obj, replace=replace)
            return obj

        return deco

    def add(self, name: str, obj: T, *, replace: bool = False) -> None:
        if name in self._items and not replace and self._items[name] is not obj:
            raise ValueError(f"{self.kind} '{name}' is already registered")
        self._items[name] = obj

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if self._builtins_module:
            __import__(self._builtins_module)
        for ep in entry_points(group=f"mascot_eval.{self.kind}s"):
            if ep.name not in self._items:
                try:
                    self._items[ep.name] = ep.load()
                except Exception as exc:  # a broken plug-in is the user's to fix
                    raise UserError(
                        f"entry point '{ep.name}' ({ep.value}) in group mascot_eval.{self.kind}s failed to load: {exc}"
                    ) from exc

    def get(self, name: str) -> T:
        self._load()
        try:
            return self._items[name]
        except KeyError:
            raise UserError(
                f"unknown {self.kind} '{name}'{did_you_mean(name, self._items)}; "
                f"known: {', '.join(sorted(self._items)) or '(none)'}"
            ) from None

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def items(self) -> Iterator[tuple[str, T]]:
        self._load()
        yield from sorted(self._items.items())
