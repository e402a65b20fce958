"""The base of every artifact record: a strict, versioned pydantic model with one-line load errors."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import UserError

R = TypeVar("R", bound="Record")


class Record(BaseModel):
    """An artifact record. Unknown fields are errors, so a record written by another version of
    mascot-eval is refused with one line instead of being half understood."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False, protected_namespaces=(), populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    @classmethod
    def load(cls: type[R], data: Any, *, where: str) -> R:
        """Validate ``data`` (a dict read from JSON); a UserError naming ``where`` and the first bad field."""
        if not isinstance(data, dict):
            raise UserError(f"{where}: expected a JSON object ({cls.__name__}), got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise UserError(f"{where}: not a valid {cls.__name__} record: {first_error(exc)}") from None


def first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
    msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
    more = f" (+{len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"field '{loc}': {msg}{more}"
