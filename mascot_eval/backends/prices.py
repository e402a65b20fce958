"""The price table (``judges/prices.yaml``; the user folder's replaces the shipped one): model spec -> dollars per million input/output tokens."""

from __future__ import annotations

import fnmatch
import logging
import time
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..errors import UserError
from ..paths import find, judges_dir
from ..yamlfile import load_model

log = logging.getLogger(__name__)


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currency: str = "USD"
    per: int = Field(default=1_000_000, gt=0)
    models: dict[str, Price] = Field(default_factory=dict)

    def lookup(self, spec: str) -> Price | None:
        base = spec.split("#", 1)[0]  # LoRA adapters cost what their base model costs
        if base in self.models:
            return self.models[base]
        matches = [p for p in self.models if fnmatch.fnmatchcase(base, p)]
        return self.models[max(matches, key=len)] if matches else None

    def cost(self, spec: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        price = self.lookup(spec)
        if price is None:
            return None
        return (prompt_tokens * price.input + completion_tokens * price.output) / self.per


def prices_path() -> Path:
    """judges/prices.yaml of the user folder if it has one, else the shipped table."""
    return find("judges", "prices.yaml") or judges_dir() / "prices.yaml"


@lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int) -> PriceTable:
    return load_model(path, PriceTable)


_RECHECK_S = 1.0  # look at the file's mtime at most once a second (it is read on every call)
_last: tuple[float, Path, PriceTable] | None = None


def price_table() -> PriceTable:
    """The price table, reloaded when the file changes (checked at most once a second)."""
    global _last
    path = prices_path()
    now = time.monotonic()
    if _last is not None and _last[1] == path and now - _last[0] < _RECHECK_S:
        return _last[2]
    table = _load(str(path), path.stat().st_mtime_ns) if path.is_file() else PriceTable()
    _last = (now, path, table)
    return table


_WARNED: set[str] = set()


def call_cost(spec: str, prompt_tokens: int, completion_tokens: int, *, cost_limit: float | None) -> float:
    """Dollars for one call. A model without a price is 0 with a warning, or an error under --cost-limit."""
    cost = price_table().cost(spec, prompt_tokens, completion_tokens)
    if cost is not None:
        return cost
    if cost_limit is not None:
        raise UserError(f"{prices_path()}: no price for model '{spec}', so --cost-limit cannot be enforced; add it under models:")
    if spec not in _WARNED:
        _WARNED.add(spec)
        log.warning("no price for model '%s' in %s: its cost is reported as $0", spec, prices_path())
    return 0.0
