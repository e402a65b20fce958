"""The metric type, its units and the rows metrics produce.

A metric is a named, documented function of a list of transcripts. It returns *rows*: one value
for one owner (a dialogue, or a system x task corpus), optionally for one agent and one round.
Every metric has exactly one unit, so a row is identified by ``metric`` alone:

- ``turn``: one value per agent turn (``agent`` and ``round`` set),
- ``round``: one value per round of a dialogue (``round`` set),
- ``agent``: one value per agent per dialogue (``agent`` set),
- ``dialogue``: one value per dialogue,
- ``corpus``: one value per system x task (``dialogue_id`` null), optionally per agent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .context import MetricContext

UNITS = ("turn", "round", "agent", "dialogue", "corpus")


@dataclass
class Rows:
    """Column lists of metric values.

    ``owner`` is a transcript index (>= 0) into the context's transcripts, or ``-(g + 1)`` for
    corpus group ``g`` (see :attr:`MetricContext.groups`).
    """

    owner: list[int] = field(default_factory=list)
    agent: list[str | None] = field(default_factory=list)
    round: list[int | None] = field(default_factory=list)
    value: list[float] = field(default_factory=list)

    def add(self, owner: int, value: float, *, agent: str | None = None, round: int | None = None) -> None:
        self.owner.append(owner)
        self.agent.append(agent)
        self.round.append(round)
        self.value.append(float(value))

    def extend(self, owners, values, agents=None, rounds=None) -> None:  # type: ignore[no-untyped-def]
        n = len(values)
        self.owner.extend(int(o) for o in owners)
        self.value.extend(float(v) for v in values)
        self.agent.extend(agents if agents is not None else [None] * n)
        self.round.extend(rounds if rounds is not None else [None] * n)

    def __len__(self) -> int:
        return len(self.value)


@dataclass(frozen=True)
class Metric:
    """One automatic metric.

    ``description`` defines the value precisely (what is compared, tokenisation, aggregation,
    range); ``higher`` says what a larger value means (e.g. "more redundant").
    """

    name: str
    unit: str
    description: str
    higher: str
    fn: Callable[[MetricContext], Rows]
    needs_embeddings: bool = False
    range: tuple[float | None, float | None] = (None, None)

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"metric {self.name}: unit {self.unit!r} not in {UNITS}")

    def __call__(self, ctx: MetricContext) -> Rows:
        return self.fn(ctx)
