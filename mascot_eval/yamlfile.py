"""Read a user-edited YAML file into a pydantic model with one-line errors naming file, line and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import UserError

M = TypeVar("M", bound=BaseModel)


def load_yaml(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; save it as UTF-8") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{where}: malformed YAML ({problem}); fix the syntax on that line") from None


def validation_message(path: str | Path, exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown field; remove it or check its spelling"
    elif err["type"] == "missing":
        msg = "required field is missing; add it"
    more = f" (+{len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{path}: field '{loc}': {msg}{more}"


def load_model(path: str | Path, model: type[M]) -> M:
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of fields at the top level, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UserError(validation_message(path, exc)) from None
