"""The published MASCOT tables (``results/paper/*.csv``) and how our tasks/systems map onto them."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pandas as pd

from .. import paths
from ..criteria import AGENT_CRITERIA, GROUP_CRITERIA
from ..errors import UserError

PAPER_FILES = {"agent": "agent_level.csv", "group": "group_level.csv"}
PAPER_CITATION = "Wang et al., MASCOT (arXiv 2601.14230, EMNLP 2026)"


def paper_dir() -> Path:
    return paths.paper_dir()


@lru_cache(maxsize=4)
def _load(folder: str) -> dict[str, pd.DataFrame]:
    out = {}
    for level, name in PAPER_FILES.items():
        p = Path(folder) / name
        if not p.exists():
            raise UserError(f"{p}: published table missing; restore results/paper/ from the repository")
        df = pd.read_csv(p)
        need = {"dataset", "subset", "system", "overall", *(AGENT_CRITERIA if level == "agent" else GROUP_CRITERIA)}
        missing = need - set(df.columns)
        if missing:
            raise UserError(f"{p}: columns {sorted(missing)} are missing; see results/paper/README.md")
        out[level] = df
    return out


def paper_tables(folder: Path | None = None) -> dict[str, pd.DataFrame]:
    """{'agent': DataFrame, 'group': DataFrame} of the published numbers."""
    return _load(str(folder or paper_dir()))


def norm_system(name: str) -> str:
    """'Few-Shot + CoT' and 'few-shot-cot' both -> 'fewshotcot'."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


_TASK_RE = [
    (re.compile(r"^ed-(positive|negative|neutral)$"), "empathetic_dialogues"),
    (re.compile(r"^qmsum-(academic|committee|product)$"), "qmsum"),
]


def paper_subset(task: str) -> tuple[str, str] | None:
    """The paper's (dataset, subset) a task reproduces, from its source filters or its name."""
    try:
        from ..taskspec import load_task

        spec = load_task(task)
        loader = spec.source.loader
        f = {k.lower(): str(v).lower() for k, v in spec.source.filters.items()}
        if loader == "empathetic_dialogues" and "valence" in f:
            return ("empathetic_dialogues", f["valence"])
        if loader == "qmsum" and "domain" in f:
            return ("qmsum", f["domain"])
    except UserError:
        pass
    for rx, dataset in _TASK_RE:
        m = rx.match(task)
        if m:
            return (dataset, m.group(1))
    return None


def paper_rows(level: str, task: str, folder: Path | None = None) -> pd.DataFrame:
    """Published rows for the subset ``task`` reproduces (empty when the paper has none)."""
    sub = paper_subset(task)
    df = paper_tables(folder)[level]
    if sub is None:
        return df.iloc[0:0]
    return df[(df["dataset"] == sub[0]) & (df["subset"] == sub[1])]


def _csv(name: str, need: set[str], folder: Path | None = None) -> pd.DataFrame:
    p = Path(folder or paper_dir()) / name
    if not p.exists():
        raise UserError(f"{p}: published table missing; restore results/paper/ from the repository")
    df = pd.read_csv(p)
    missing = need - set(df.columns)
    if missing:
        raise UserError(f"{p}: columns {sorted(missing)} are missing; see results/paper/README.md")
    return df


ABLATION_SYSTEMS = ("MASCOT", "MASCOT-P", "MASCOT-C")


def paper_ablation(folder: Path | None = None) -> pd.DataFrame:
    """The paper's ablation table: level, criterion, MASCOT, MASCOT-P, MASCOT-C, approx."""
    return _csv("ablation.csv", {"level", "criterion", *ABLATION_SYSTEMS}, folder)


def paper_size_sensitivity(folder: Path | None = None) -> pd.DataFrame:
    """The paper's model-size study (Overall, read off its chart): factor (director / speaker), size,
    collective (group-level Overall), persona (agent-level Overall), approx."""
    return _csv("size_sensitivity.csv", {"factor", "size", "collective", "persona"}, folder)
