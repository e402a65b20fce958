"""Compute metrics over transcripts into one long table, and write it into a run directory.

Columns: dialogue_id, pair_key, system, task, split, domain, agent, round, metric, value, unit.
``agent`` / ``round`` are null when the unit has none; corpus rows (unit "corpus") have
``dialogue_id`` and ``pair_key`` null and describe one system on one task. The table's
``attrs["notes"]`` counts rows a metric could not produce and why (e.g. a round with one agent).
"""

from __future__ import annotations

import datetime as _dt
import io
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..errors import UserError
from ..fileio import atomic_write_bytes
from ..transcript import Transcript
from . import METRICS
from .context import MetricContext

COLUMNS = ["dialogue_id", "pair_key", "system", "task", "split", "domain", "agent", "round", "metric", "value", "unit"]


def resolve_metrics(metrics: list[str] | None) -> list[str]:
    if not metrics:
        return METRICS.names()
    out: list[str] = []
    for name in metrics:
        METRICS.get(name)  # UserError with did-you-mean for unknown names
        if name not in out:
            out.append(name)
    return out


def empty_frame() -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
    df["value"] = df["value"].astype("float64")
    df["round"] = df["round"].astype("Int64")
    return df


def compute(
    transcripts: list[Transcript],
    metrics: list[str] | None = None,
    *,
    embedder: Callable[[list[str]], np.ndarray] | None = None,
    persona_root: Any = None,
    timings: dict[str, float] | None = None,
) -> pd.DataFrame:
    """All requested metrics (default: every registered one) for ``transcripts``, long format.

    ``embedder`` replaces the MiniLM embedder (tests); ``timings`` receives seconds per metric (the
    first embedding metric includes the wait for the embeddings, which start in a background thread
    at once and overlap the metrics that need none; those run first).
    """
    names = resolve_metrics(metrics)
    ctx = MetricContext(transcripts, embedder=embedder, persona_root=persona_root)
    if not transcripts:
        df = empty_frame()
        df.attrs["notes"] = {}
        return df
    meta = [(t.dialogue_id, t.pair_key, t.system, t.task, t.split, t.domain) for t in transcripts]
    meta += [(None, None, g.system, g.task, g.split, g.domain) for g in ctx.groups]
    meta_cols = [np.array([m[i] for m in meta], dtype=object) for i in range(6)]
    n_t = len(transcripts)
    metrics_ = {name: METRICS.get(name) for name in names}
    if any(m.needs_embeddings for m in metrics_.values()):
        ctx.prefetch_vectors()  # embeddings in the background while the other metrics run
    frames: dict[str, pd.DataFrame] = {}
    for name in sorted(names, key=lambda n: metrics_[n].needs_embeddings):
        metric = metrics_[name]
        t0 = time.perf_counter()
        rows = metric(ctx)
        if timings is not None:
            timings[name] = time.perf_counter() - t0
        if not len(rows):
            continue
        owner = np.asarray(rows.owner, dtype=np.int64)
        idx = np.where(owner >= 0, owner, n_t + (-owner - 1))
        cols: dict[str, Any] = {c: meta_cols[i][idx] for i, c in enumerate(COLUMNS[:6])}
        cols["agent"] = np.array(rows.agent, dtype=object)
        cols["round"] = pd.array(rows.round, dtype="Int64")
        cols["metric"] = name
        cols["value"] = np.asarray(rows.value, dtype=np.float64)
        cols["unit"] = metric.unit
        frames[name] = pd.DataFrame(cols, columns=COLUMNS)
    frames_in_order = [frames[n] for n in names if n in frames]
    df = pd.concat(frames_in_order, ignore_index=True) if frames_in_order else empty_frame()
    df.attrs["notes"] = dict(sorted(ctx.notes.items()))
    return df


def write_table(df: pd.DataFrame, parquet_path, csv_path) -> None:  # type: ignore[no-untyped-def]
    """Write the table as parquet and CSV, each atomically."""
    out = df.copy()
    out.attrs = {}
    buf = io.BytesIO()
    out.to_parquet(buf, index=False)
    atomic_write_bytes(parquet_path, buf.getvalue())
    atomic_write_bytes(csv_path, out.to_csv(index=False).encode("utf-8"))


def compute_rundir(rundir, metrics: list[str] | None = None, **kw: Any) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """Compute metrics for a run directory's transcripts; write metrics.parquet + metrics.csv
    atomically and record what was computed in the manifest (key ``metrics``)."""
    transcripts = rundir.transcripts()
    if not transcripts:
        raise UserError(f"{rundir.transcripts_path}: no transcripts to compute metrics on; run `mascot-eval generate` first")
    names = resolve_metrics(metrics)
    t0 = time.perf_counter()
    df = compute(transcripts, names, **kw)
    seconds = time.perf_counter() - t0
    write_table(df, rundir.metrics_path, rundir.metrics_path.with_suffix(".csv"))
    info: dict[str, Any] = {
        "names": names,
        "rows": int(len(df)),
        "transcripts": len(transcripts),
        "notes": df.attrs.get("notes", {}),
        "seconds": round(seconds, 3),
        "computed_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "files": ["metrics.parquet", "metrics.csv"],
    }
    if any(METRICS.get(n).needs_embeddings for n in names) and kw.get("embedder") is None:
        from .embeddings import embedding_info

        info["embeddings"] = embedding_info()
    rundir.update_manifest(metrics=info)
    return df
