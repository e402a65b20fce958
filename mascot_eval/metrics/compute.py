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
    timings: dict[str, float] | None = None,
) -> pd.DataFrame:
    """All requested metrics (default: every registered one) for ``transcripts``, long format.

    ``embedder`` replaces the MiniLM embedder (tests); ``timings`` receives seconds per metric (the
    first embedding metric includes the wait for the embeddings, which start in a background thread
    at once and overlap the metrics that need none; those run first).
    """
    names = resolve_metrics(metrics)
    ctx = MetricContext(transcripts, embedder=embedder)
    if not transcripts:
        df = empty_frame()
        df.attrs["notes"] = {}
        return df
    meta: list[tuple[str | None, str | None, str, str, str, str]] = [
        (t.dialogue_id, t.pair_key, t.system, t.task, t.split, t.domain) for t in transcripts
    ]
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


def implementation_hash() -> str:
    """Hash of the metric code (this package's metric modules): changed code recomputes every metric."""
    import hashlib
    from pathlib import Path

    h = hashlib.sha256()
    for p in sorted(Path(__file__).parent.rglob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def read_table(rundir) -> pd.DataFrame | None:  # type: ignore[no-untyped-def]
    """The run's metrics table, or None when there is none; a table with other columns is a one-line error."""
    path = rundir.metrics_path
    if not path.exists():
        return None
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # a truncated or foreign file
        raise UserError(
            f"{path}: not a readable metrics table ({type(exc).__name__}); delete it and rerun `mascot-eval metrics`"
        ) from None
    if set(df.columns) != set(COLUMNS):
        raise UserError(f"{path}: columns {sorted(df.columns)} are not the metric table's {COLUMNS}; delete it and rerun")
    return df[COLUMNS]


def compute_rundir(rundir, metrics: list[str] | None = None, **kw: Any) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """Compute metrics for a run directory's transcripts into metrics.parquet + metrics.csv (atomically).

    A metric already in the table and computed from the same transcripts with the same code is kept,
    not recomputed; the others are computed and merged in (``--metrics X`` adds or refreshes X and
    keeps every other metric). The manifest's ``metrics`` records, per metric, the hash of what it
    was computed from; ``steps.metrics`` what this call did."""
    from ..fileio import sha256_file, stable_hash
    from ..records.manifest import StepRecord

    transcripts = rundir.transcripts()
    if not transcripts:
        raise UserError(f"{rundir.transcripts_path}: no transcripts to compute metrics on; run `mascot-eval generate` first")
    names = resolve_metrics(metrics)
    existing = read_table(rundir)
    manifest = rundir.manifest()
    info_old = dict(manifest.metrics) if manifest is not None else {}
    inputs = stable_hash(
        {
            "transcripts": sha256_file(rundir.transcripts_path),
            "code": implementation_hash(),
            "embedder": None if kw.get("embedder") is None else repr(kw["embedder"]),
        }
    )
    computed_old: dict[str, str] = dict(info_old.get("computed") or {}) if existing is not None else {}
    present = set(existing["metric"].unique()) if existing is not None else set()
    fresh = [n for n in names if computed_old.get(n) == inputs and (n in present or n in (info_old.get("empty") or []))]
    todo = [n for n in names if n not in fresh]
    with rundir.lock():
        started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        t0 = time.perf_counter()
        new = compute(transcripts, todo, **kw) if todo else empty_frame()
        seconds = time.perf_counter() - t0
        notes = {k: v for k, v in (info_old.get("notes") or {}).items() if k.split(":")[0] not in todo}
        notes.update(new.attrs.get("notes", {}))
        if existing is not None:
            kept = existing[~existing["metric"].isin(todo)]
            df = pd.concat([kept, new], ignore_index=True) if len(new) else kept.reset_index(drop=True)
        else:
            df = new
        df.attrs["notes"] = dict(sorted(notes.items()))
        if todo:
            write_table(df, rundir.metrics_path, rundir.metrics_path.with_suffix(".csv"))
        computed = {**computed_old, **{n: inputs for n in todo}}
        all_names = list(dict.fromkeys([*(n for n in info_old.get("names") or [] if n in set(df["metric"])), *names]))
        info: dict[str, Any] = {
            "names": all_names,
            "rows": int(len(df)),
            "transcripts": len(transcripts),
            "notes": df.attrs["notes"],
            "computed": computed,
            "empty": sorted((set(info_old.get("empty") or []) - set(todo)) | {n for n in todo if n not in set(new["metric"])}),
            "seconds": round(seconds, 3),
            "computed_at": started if todo else info_old.get("computed_at", started),
            "files": ["metrics.parquet", "metrics.csv"],
        }
        if any(METRICS.get(n).needs_embeddings for n in todo) and kw.get("embedder") is None:
            from .embeddings import embedding_info

            info["embeddings"] = embedding_info()
        elif info_old.get("embeddings"):
            info["embeddings"] = info_old["embeddings"]
        rundir.update_manifest(
            metrics=info,
            steps={
                "metrics": StepRecord(
                    status="done" if todo else "skipped",
                    started=started,
                    ended=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                    seconds=round(seconds, 3),
                    counts={"computed": todo, "reused": fresh, "rows": int(len(df))},
                    inputs_hash=inputs,
                ).model_dump()
            },
        )
    return df
