"""Anchored 1-5 rubrics (``judges/rubrics/<level>.yaml``): every criterion describes every level."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import paths
from ..criteria import criteria_for
from ..errors import UserError
from ..fileio import confined_path
from ..yamlfile import load_model


class Criterion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    question: str
    anchors: dict[int, str]

    @field_validator("anchors")
    @classmethod
    def _five_levels(cls, v: dict[int, str]) -> dict[int, str]:
        if sorted(v) != [1, 2, 3, 4, 5]:
            raise ValueError(f"anchors must describe exactly the levels 1-5, got {sorted(v)}")
        if any(not str(t).strip() for t in v.values()):
            raise ValueError("every anchor needs a description")
        return v


class Rubric(BaseModel):
    model_config = ConfigDict(extra="forbid")

    level: Literal["agent", "group"]
    criteria: dict[str, Criterion] = Field(min_length=1)

    def keys(self) -> tuple[str, ...]:
        return tuple(self.criteria)

    def for_template(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "criteria": [
                {"key": k, "title": c.title, "question": c.question, "anchors": sorted(c.anchors.items())}
                for k, c in self.criteria.items()
            ],
        }


@lru_cache(maxsize=16)
def _load(path_str: str, mtime: float) -> Rubric:
    path = Path(path_str)
    rubric = load_model(path, Rubric)
    expected = criteria_for(rubric.level)
    if tuple(rubric.criteria) != expected:
        raise UserError(
            f"{path}: criteria are {list(rubric.criteria)} but level '{rubric.level}' needs exactly {list(expected)} "
            "in that order (see mascot_eval/criteria.py)"
        )
    return rubric


def rubric_path(root: Path, filename: str, *, where: str = "judge spec", field: str = "rubrics") -> Path:
    """``rubrics/<filename>`` in ``root`` if it is a folder given by path, then in the user folder's and the
    shipped judges/ (the first that holds it); refused when it would leave those folders."""
    return confined_path(
        [d / "rubrics" for d in paths.search("judges", root)], filename, field=field, where=where, what="rubric file"
    )


def load_rubric(root: Path, filename: str, level: str, *, where: str = "judge spec") -> Rubric:
    path = rubric_path(root, filename, where=where, field=f"rubrics.{level}")
    if not path.is_file():
        raise UserError(f"{path}: rubric file not found; judge specs name rubrics relative to {path.parent}")
    rubric = _load(str(path), path.stat().st_mtime)
    if rubric.level != level:
        raise UserError(f"{path}: field 'level' is '{rubric.level}' but it is used as the {level}-level rubric")
    return rubric
