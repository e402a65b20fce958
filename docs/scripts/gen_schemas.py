"""mkdocs-gen-files script: writes reference/schemas.md from the record types at build time.

Each record of ``mascot_eval.records.RECORDS`` (what ``mascot-eval schema`` prints) gets its schema id,
its docstring, a table of its top-level fields and the full JSON Schema. Nothing is committed: the
page is generated from the code on every ``mkdocs build``.
"""

from __future__ import annotations

import json
from typing import Any

import mkdocs_gen_files

from mascot_eval.records import RECORDS, json_schema


def type_of(prop: dict[str, Any]) -> str:
    """A short type for a JSON Schema property: `string`, `integer | null`, `array of Turn`, ..."""
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in prop:
        return " | ".join(type_of(p) for p in prop["anyOf"])
    if "enum" in prop:
        return " | ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    t = prop.get("type", "any")
    if t == "array" and "items" in prop:
        return f"array of {type_of(prop['items'])}"
    if t == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"object of {type_of(prop['additionalProperties'])}"
    return t if isinstance(t, str) else " | ".join(t)


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def default_of(prop: dict[str, Any], required: bool) -> str:
    if required:
        return "required"
    if "default" in prop:
        return f"`{cell(json.dumps(prop['default']))}`"
    return ""


lines = [
    "# Record schemas",
    "",
    "Generated at build time from the pydantic record types in `mascot_eval/records/` (the same JSON",
    "Schemas `mascot-eval schema NAME` prints and `mascot-eval schema --out DIR` writes). What each file",
    "holds is described in [Systems](../systems.md#records-the-artifacts-a-run-writes) and",
    "[Runs and statistics](../runs.md#run-directory).",
    "",
    "| record | schema | what one record is |",
    "|---|---|---|",
]
schemas = {name: json_schema(name) for name in RECORDS}
for name, (_, schema_id) in RECORDS.items():
    lines.append(f"| [`{name}`](#{name}) | `{schema_id}` | {cell(schemas[name].get('description', ''))} |")
for name, (_, schema_id) in RECORDS.items():
    s = schemas[name]
    req = set(s.get("required", []))
    lines += [
        "",
        f"## `{name}` {{#{name}}}",
        "",
        f"Schema id `{schema_id}`. {s.get('description', '')}",
        "",
        "| field | type | default |",
        "|---|---|---|",
    ]
    for field, prop in s.get("properties", {}).items():
        lines.append(f"| `{field}` | {cell(type_of(prop))} | {default_of(prop, field in req)} |")
    lines += [
        "",
        f"Definitions: {', '.join(f'`{d}`' for d in s.get('$defs', {})) or 'none'}.",
        "",
        f'??? note "Full JSON Schema of `{name}`"',
        "",
        "    ```json",
    ]
    lines += ["    " + ln for ln in json.dumps(s, indent=2, sort_keys=True).splitlines()]
    lines += ["    ```"]

with mkdocs_gen_files.open("reference/schemas.md", "w") as f:
    f.write("\n".join(lines) + "\n")
