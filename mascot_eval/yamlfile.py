"""Read a user-edited YAML file into a pydantic model with one-line errors naming file, line and field.

Strict on purpose: a file over its size limit is refused before it is parsed; a key written twice
in one mapping is an error (YAML would silently keep the last); anchors/aliases may not expand into
more than :data:`MAX_NODES` values; and models validate in pydantic's strict mode, so ``rounds:
true`` or ``max_tokens: "96"`` is an error instead of 1 or 96. Numbers follow YAML 1.2 as well as
1.1 (``1e-5`` is a float, not a string).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import UserError
from .fileio import MAX_CONFIG_BYTES, read_text

M = TypeVar("M", bound=BaseModel)

MAX_NODES = 1_000_000  # values a file may expand to (guards against alias "billion laughs")

_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(_Base):  # type: ignore[misc, valid-type]
    """SafeLoader (libyaml when available) with YAML 1.2 floats such as ``1e-5``."""


StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


class _Problem(Exception):
    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def _key_text(node: yaml.Node) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _walk(node: yaml.Node, path: tuple[str, ...], lines: dict[tuple[str, ...], int], seen: set[int]) -> None:
    """Record the line of every key/item (by its path) and refuse duplicate keys."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first: dict[tuple[str, str], int] = {}
        for k, v in node.value:
            if k.tag == "tag:yaml.org,2002:merge":
                _walk(v, path, lines, seen)
                continue
            text = _key_text(k)
            line = k.start_mark.line + 1
            if text is not None:
                ident = (k.tag, text)
                if ident in first:
                    where = ".".join((*path, text))
                    raise _Problem(line, f"field '{where}': duplicate key (first on line {first[ident]}); keep one")
                first[ident] = line
                lines.setdefault((*path, text), line)
                _walk(v, (*path, text), lines, seen)
            else:
                _walk(v, path, lines, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines.setdefault((*path, str(i)), item.start_mark.line + 1)
            _walk(item, (*path, str(i)), lines, seen)


def _expanded_size(obj: Any, memo: dict[int, int], active: set[int]) -> int:
    if not isinstance(obj, (dict, list)):
        return 1
    key = id(obj)
    if key in memo:
        return memo[key]
    if key in active:
        raise _Problem(None, "an alias refers to itself (a recursive structure); remove the loop")
    active.add(key)
    children = obj.items() if isinstance(obj, dict) else enumerate(obj)
    total = 1
    for _, v in children:
        total += _expanded_size(v, memo, active)
        if total > MAX_NODES:
            break
    active.discard(key)
    memo[key] = total
    return total


class YamlDoc:
    """A parsed YAML file: its data and the line of each key path (for error messages)."""

    def __init__(self, path: Path, data: Any, lines: dict[tuple[str, ...], int]) -> None:
        self.path = path
        self.data = data
        self.lines = lines

    def line_of(self, loc: tuple[Any, ...] | list[Any]) -> int | None:
        parts = tuple(str(p) for p in loc)
        while parts:
            if parts in self.lines:
                return self.lines[parts]
            parts = parts[:-1]
        return None


def parse_yaml_text(text: str, where: str | Path) -> YamlDoc:
    loader = StrictLoader(text)
    try:
        try:
            node = loader.get_single_node()
            lines: dict[tuple[str, ...], int] = {}
            if node is not None:
                _walk(node, (), lines, set())
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
        if _expanded_size(data, {}, set()) > MAX_NODES:
            raise _Problem(
                None,
                f"expands to more than {MAX_NODES:,} values through anchors and aliases; "
                "write the values out or use fewer aliases",
            )
    except _Problem as exc:
        at = f"{where}:{exc.line}" if exc.line else str(where)
        raise UserError(f"{at}: {exc.message}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{where}:{mark.line + 1}" if mark is not None else str(where)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{at}: malformed YAML ({problem}); fix the syntax on that line") from None
    except RecursionError:
        raise UserError(f"{where}: nested too deeply to read; flatten the structure") from None
    return YamlDoc(Path(where), data, lines)


def read_yaml(path: str | Path, *, limit: int = MAX_CONFIG_BYTES, what: str = "a YAML file") -> YamlDoc:
    """Parse ``path`` (size checked before reading, UTF-8 with or without BOM, duplicate keys refused)."""
    path = Path(path)
    if not path.is_file() and not path.exists():
        raise UserError(f"{path}: file not found")
    text = read_text(path, what=what, limit=limit)
    return parse_yaml_text(text, path)


def load_yaml(path: str | Path, *, limit: int = MAX_CONFIG_BYTES, what: str = "a YAML file") -> Any:
    return read_yaml(path, limit=limit, what=what).data


_TYPE_NAMES = {
    bool: "a boolean",
    int: "a whole number",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "a mapping",
    type(None): "null",
}
_TYPE_ERRORS = {
    "int_type",
    "int_from_float",
    "int_parsing",
    "float_type",
    "float_parsing",
    "bool_type",
    "bool_parsing",
    "string_type",
    "list_type",
    "dict_type",
    "model_type",
    "literal_error",
}


def validation_message(
    path: str | Path, exc: ValidationError, *, doc: YamlDoc | None = None, prefix: tuple[Any, ...] = ()
) -> str:
    err = exc.errors()[0]
    loc_t = tuple(err["loc"])
    loc = ".".join(str(p) for p in (*prefix, *loc_t)) or "(top level)"
    msg = err["msg"]
    if err["type"] == "value_error":
        msg = msg.removeprefix("Value error, ")
    elif err["type"] == "extra_forbidden":
        msg = "unknown field; remove it or check its spelling"
    elif err["type"] == "missing":
        msg = "required field is missing; add it"
    elif err["type"] in _TYPE_ERRORS and "input" in err:
        got = _TYPE_NAMES.get(type(err["input"]), type(err["input"]).__name__)
        shown = (
            f" ({err['input']!r})"
            if isinstance(err["input"], (bool, int, float)) or (isinstance(err["input"], str) and len(err["input"]) <= 40)
            else ""
        )
        msg = f"{msg}, got {got}{shown}"
    more = f" (+{len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    line = doc.line_of((*prefix, *loc_t)) if doc is not None else None
    at = f"{path}:{line}" if line else str(path)
    return f"{at}: field '{loc}': {msg}{more}"


def validate(
    model: type[M], data: Any, where: str | Path, *, doc: YamlDoc | None = None, prefix: tuple[Any, ...] = (), strict: bool = True
) -> M:
    """``model.model_validate(data)`` in strict mode; a ValidationError becomes one line."""
    if not isinstance(data, dict):
        got = _TYPE_NAMES.get(type(data), type(data).__name__)
        raise UserError(f"{where}: expected a mapping of fields at the top level, got {got}")
    try:
        return model.model_validate(data, strict=strict)
    except ValidationError as exc:
        raise UserError(validation_message(where, exc, doc=doc, prefix=prefix)) from None


def load_model(path: str | Path, model: type[M], *, strict: bool = True, limit: int = MAX_CONFIG_BYTES) -> M:
    doc = read_yaml(path, limit=limit)
    return validate(model, doc.data, path, doc=doc, strict=strict)
