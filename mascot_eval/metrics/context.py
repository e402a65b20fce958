"""Shared, lazily computed views of a list of transcripts that the metrics read.

Tokens, n-gram counts, embeddings and persona cards are computed once per :func:`compute` call and
shared by every metric (e.g. the n-gram index serves distinct-n, entropy and both self-BLEUs; one
batched embedding pass serves every cosine metric).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..transcript import Transcript
from .ngrams import NgramIndex
from .rouge import RougeL
from .tokenize import tokenize


@dataclass(frozen=True)
class TurnRef:
    """One turn in the corpus: transcript index, position in its turns, and the text id."""

    ti: int
    pos: int
    round: int
    speaker: str
    text_id: int
    is_user: bool


@dataclass(frozen=True)
class Group:
    """A corpus group: all transcripts of one system on one task."""

    system: str
    task: str
    split: str
    domain: str
    members: tuple[int, ...]


class MetricContext:
    def __init__(self, transcripts: list[Transcript], *, embedder: Callable[[list[str]], np.ndarray] | None = None) -> None:
        self.transcripts = transcripts
        self._embedder = embedder
        self.notes: dict[str, int] = {}  # reason -> count, for rows a metric could not produce
        self._memo: dict[str, Any] = {}
        self._vectors_future: Any = None
        texts: dict[str, int] = {}
        turns: list[TurnRef] = []
        for ti, t in enumerate(transcripts):
            for pos, turn in enumerate(t.turns):
                tid = texts.setdefault(turn.text, len(texts))
                turns.append(TurnRef(ti, pos, turn.round, turn.speaker, tid, turn.is_user))
        self.texts: list[str] = list(texts)
        self.text_id = texts
        self.turns = turns
        starts = [0] * (len(transcripts) + 1)
        for r in turns:
            starts[r.ti + 1] += 1
        for i in range(len(transcripts)):
            starts[i + 1] += starts[i]
        self._starts = starts

    def note(self, reason: str, n: int = 1) -> None:
        self.notes[reason] = self.notes.get(reason, 0) + n

    def memo(self, key: str, fn: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    # turns
    def turns_of(self, ti: int) -> list[TurnRef]:
        return self.turns[self._starts[ti] : self._starts[ti + 1]]

    @cached_property
    def agent_turns(self) -> list[TurnRef]:
        return [r for r in self.turns if not r.is_user]

    def rounds_of(self, ti: int) -> dict[int, list[TurnRef]]:
        out: dict[int, list[TurnRef]] = {}
        for r in self.turns_of(ti):
            out.setdefault(r.round, []).append(r)
        return out

    # corpus groups
    @cached_property
    def groups(self) -> list[Group]:
        by: dict[tuple[str, str], list[int]] = {}
        for ti, t in enumerate(self.transcripts):
            by.setdefault((t.system, t.task), []).append(ti)
        out = []
        for (system, task), members in sorted(by.items()):
            t0 = self.transcripts[members[0]]
            out.append(Group(system, task, t0.split, t0.domain, tuple(members)))
        return out

    @cached_property
    def group_of(self) -> list[int]:
        g = [0] * len(self.transcripts)
        for gi, grp in enumerate(self.groups):
            for ti in grp.members:
                g[ti] = gi
        return g

    # lexical
    @cached_property
    def tokens(self) -> list[list[str]]:
        return [tokenize(t) for t in self.texts]

    @cached_property
    def ngrams(self) -> NgramIndex:
        return NgramIndex(self.tokens, max_n=4)

    @cached_property
    def rouge(self) -> RougeL:
        return RougeL()

    # embeddings
    def _embed(self, texts: list[str]) -> np.ndarray:
        if self._embedder is not None:
            return self._embedder(texts)
        from .embeddings import embed

        return embed(texts)

    @cached_property
    def card_groups(self) -> list[str]:
        """Per transcript, the key of the persona cards it played: its group name plus a hash of the cards
        (two runs that played edited cards of one group stay apart)."""
        from ..fileio import stable_hash

        return [
            f"{t.persona_group}#{stable_hash(sorted((n, p.prompt or p.card().prompt_block()) for n, p in t.personas.items()), 8)}"
            for t in self.transcripts
        ]

    def card_group(self, ti: int) -> str:
        return self.card_groups[ti]

    @cached_property
    def card_texts(self) -> dict[tuple[str, str], str]:
        """(card group key, speaker name) -> the persona card text the speaker played (from the transcript)."""
        out: dict[tuple[str, str], str] = {}
        for ti, t in enumerate(self.transcripts):
            for name, p in t.personas.items():
                out[(self.card_groups[ti], name)] = p.prompt or p.card().prompt_block()
        return out

    def _compute_vectors(self) -> np.ndarray:
        cards = sorted(set(self.card_texts.values()) - set(self.text_id))
        self._card_ids = {c: len(self.texts) + i for i, c in enumerate(cards)}
        return self._embed(self.texts + cards)

    def prefetch_vectors(self) -> None:
        """Start embedding every text (and persona card) in a background thread, so that metrics
        without embeddings run meanwhile; :attr:`vectors` waits for it (and re-raises its error)."""
        if "vectors" in self.__dict__ or self._vectors_future is not None:
            return
        import threading
        from concurrent.futures import Future

        fut: Future = Future()

        def work() -> None:
            if not fut.set_running_or_notify_cancel():
                return
            try:
                fut.set_result(self._compute_vectors())
            except BaseException as exc:  # re-raised in the thread that reads `vectors`
                fut.set_exception(exc)

        self._vectors_future = fut
        # a daemon thread: an interrupted or failed run exits without waiting for the embeddings
        threading.Thread(target=work, name="mascot-embed", daemon=True).start()

    @cached_property
    def vectors(self) -> np.ndarray:
        """Embeddings of all texts (rows = text ids), then of the persona card texts."""
        if self._vectors_future is not None:
            return self._vectors_future.result()
        return self._compute_vectors()

    def vec_id_of_text(self, text: str) -> int:
        """Row of ``text`` (a turn text or a persona card) in :attr:`vectors`."""
        _ = self.vectors
        tid = self.text_id.get(text)
        return tid if tid is not None else self._card_ids[text]

    def vec_of_text(self, text: str) -> np.ndarray:
        v = self.vectors
        tid = self.text_id.get(text)
        if tid is None:
            tid = self._card_ids[text]
        return v[tid]
