"""Task files (``tasks/*.yaml``): what to evaluate on, with which personas, users, judges and metrics."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from . import paths
from .errors import UserError, did_you_mean
from .fileio import sha256_file
from .templating import check_name
from .yamlfile import load_model

MBTI_TYPES: tuple[str, ...] = (
    "INTJ",
    "INTP",
    "ENTJ",
    "ENTP",
    "INFJ",
    "INFP",
    "ENFJ",
    "ENFP",
    "ISTJ",
    "ISFJ",
    "ESTJ",
    "ESFJ",
    "ISTP",
    "ISFP",
    "ESTP",
    "ESFP",
)

SUITES: dict[str, str | None] = {"in-domain": "in_domain", "ood": "ood", "all": None}


class SourceSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    loader: str  # empathetic_dialogues | qmsum | esconv | jsonl | demo (registry name)
    path: str | None = None  # file/folder: dataset loaders resolve it in the data dir, jsonl/demo beside the task file
    filters: dict[str, Any] = Field(default_factory=dict)  # e.g. {valence: positive}, {domain: Academic}
    options: dict[str, Any] = Field(default_factory=dict)  # loader-specific, e.g. {valence_table: data/ed_valence.csv}

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str | None) -> str | None:
        if v is not None:
            relative_path(
                v,
                "dataset paths are relative to the data directory (--data-dir / MASCOT_DATA_DIR), "
                "jsonl/demo paths to the task file's folder",
            )
        return v


class SampleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    size: int | None = Field(default=None, ge=1)  # None = every context
    seed: int = 13


class UserSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profiles: list[str] = Field(default_factory=lambda: ["none"])  # MBTI types, "mbti16", or "none"
    assignment: Literal["cycle", "all"] = "cycle"  # cycle: one profile per context; all: every profile per context
    template: str = "user_simulator.j2"  # in baselines/templates/

    @field_validator("template")
    @classmethod
    def _template_name(cls, v: str) -> str:
        try:
            check_name(v, what="template")
        except UserError as exc:
            raise ValueError(f"{exc.message} (templates live in baselines/templates/)") from None
        return v

    @field_validator("profiles")
    @classmethod
    def _expand(cls, v: list[str]) -> list[str]:
        out: list[str] = []
        for p in v:
            if p == "mbti16":
                out.extend(MBTI_TYPES)
            elif p == "none" or p.upper() in MBTI_TYPES:
                out.append(p if p == "none" else p.upper())
            else:
                raise ValueError(f"unknown profile {p!r}; use one of the 16 MBTI types, 'mbti16' or 'none'")
        return out


def _both_levels() -> list[Literal["agent", "group"]]:
    return ["agent", "group"]


class JudgingSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    levels: list[Literal["agent", "group"]] = Field(default_factory=_both_levels)
    judges: list[str] = Field(default_factory=lambda: ["local"])  # default aliases when --judges is not given


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    version: str = "1"
    description: str = ""
    split: Literal["in_domain", "ood"]
    domain: Literal["emotional", "workplace"]
    source: SourceSpec
    sample: SampleSpec = Field(default_factory=SampleSpec)
    personas: str  # persona group name (tasks/personas/groups.yaml)
    user: UserSpec = Field(default_factory=UserSpec)
    rounds: int = Field(default=3, ge=1, le=50)
    judging: JudgingSpec = Field(default_factory=JudgingSpec)
    metrics: list[str] = Field(default_factory=lambda: ["all"])

    # set by load_task, not by users
    file: str | None = Field(default=None, exclude=True)
    content_hash: str | None = Field(default=None, exclude=True)


def relative_path(value: str, hint: str) -> str:
    """A path a task names must be relative and stay below its base folder (checked again when used)."""
    p = PurePosixPath(value.replace("\\", "/"))
    if not value.strip() or "\x00" in value:
        raise ValueError(f"give a relative path; {hint}")
    if p.is_absolute() or value.startswith("~") or (len(value) > 1 and value[1] == ":"):
        raise ValueError(f"absolute path {value!r} is not allowed; {hint}")
    depth = 0
    for part in p.parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            raise ValueError(f"{value!r} leaves its folder ('..'); {hint}")
    return value


def task_files(root: str | Path | None = None) -> dict[str, Path]:
    if not root:
        return paths.entries("tasks")  # the user folder's tasks override the shipped ones by name
    return {p.stem: p for p in sorted(Path(root).glob("*.yaml"))}


def load_task_file(path: str | Path) -> TaskSpec:
    path = Path(path)
    spec = load_model(path, TaskSpec)
    if spec.name != path.stem:
        raise UserError(f"{path}: field 'name' is {spec.name!r} but the file is named {path.stem!r}; make them equal")
    spec.file = str(path)
    spec.content_hash = sha256_file(path)[:16]
    return spec


def load_task(name_or_path: str) -> TaskSpec:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return load_task_file(p)
    files = task_files()
    if name_or_path not in files:
        raise UserError(f"unknown task '{name_or_path}'{did_you_mean(name_or_path, files)}; see `mascot-eval tasks list`")
    return load_task_file(files[name_or_path])


def resolve_tasks(names: list[str]) -> list[TaskSpec]:
    """Task names, paths or suites (in-domain, ood, all) -> task specs, in order, without repeats.

    Two different files with the same task name are an error (one would silently replace the other)."""
    names = [n.strip() for n in names if n and n.strip()]
    if not names:
        raise UserError("--task: give at least one task name, task file or suite (see `mascot-eval tasks list`)")
    out: dict[str, TaskSpec] = {}

    def add(spec: TaskSpec) -> None:
        have = out.get(spec.name)
        if have is None:
            out[spec.name] = spec
        elif have.file and spec.file and Path(have.file).resolve() != Path(spec.file).resolve():
            raise UserError(f"--task: {have.file} and {spec.file} are both task '{spec.name}'; rename one of them")

    for n in names:
        if n in SUITES:
            split = SUITES[n]
            for stem, path in task_files().items():
                spec = load_task_file(path)
                if stem != "demo" and (split is None or spec.split == split):
                    add(spec)
        else:
            add(load_task(n))
    return list(out.values())
