"""Judge specs (``judges/<name>.yaml``): which model judges, how it decodes, which rubric and templates.

A user adds or edits a judge by writing a YAML file; no code changes. Built-in aliases are plain
files: ``gpt`` (openai/gpt-4o), ``claude`` (anthropic/claude-sonnet-4-5), ``local`` (embedded).
Plug-ins may register further specs under the entry-point group ``mascot_eval.judges`` (a
:class:`JudgeSpec` or a mapping of its fields). A bare model spec with a slash
(``openai-compatible/m@http://host/v1``, ``fake/x``) is also accepted as an ad-hoc judge with the
default rubric and templates.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .. import paths
from ..backends.base import GenerationParams
from ..errors import UserError, did_you_mean
from ..fileio import sha256_file, stable_hash
from ..registry import Registry
from ..templating import check_name
from ..yamlfile import read_yaml, validate
from .guards import Guards, patterns_path
from .rules import RulesSpec

JUDGES: Registry[Any] = Registry("judge")

NOT_JUDGE_FILES = {"prices.yaml"}  # the backends' price table lives in judges/ too


class Decoding(BaseModel):
    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = 0  # where the provider allows one
    max_tokens: int = Field(default=400, ge=16, le=8192)
    top_logprobs: int = Field(default=0, ge=0, le=20)  # >0: ask for log-probabilities (weighted score)


def _template_name(v: str) -> str:
    try:
        return check_name(v, what="judge template")
    except UserError as exc:
        raise ValueError(f"{exc.message} (judge templates live in judges/templates/)") from None


class Templates(BaseModel):
    model_config = ConfigDict(extra="forbid")

    system: str = "system.j2"
    agent: str = "agent.j2"
    group: str = "group.j2"
    response: str = "response.j2"
    threeway: str = "threeway.j2"
    reask: str = "reask.j2"
    pick_best: str = "pick_best.j2"  # judges validate: position bias on triples of validation dialogues

    @field_validator("system", "agent", "group", "response", "threeway", "reask", "pick_best")
    @classmethod
    def _names(cls, v: str) -> str:
        return _template_name(v)


class JudgeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/@#=+-]*$")
    model: str = Field(min_length=1, description="model spec, e.g. openai/gpt-4o, anthropic/..., embedded")
    description: str = ""
    decoding: Decoding = Field(default_factory=Decoding)
    structured_output: bool = True  # pass a JSON schema to providers that support structured output
    reask: int = Field(default=1, ge=0, le=3)  # re-asks after an unparseable reply
    # generate: the judge writes its JSON verdict, which is parsed. logprob (local transformers models
    # only): no text is generated; the verdict's JSON is prefilled and each criterion's score is read
    # from the model's next-token probabilities over the digits 1-5 (score = most probable digit,
    # weighted_score = expected digit); three-way comparisons read the probabilities of A/B/C. For
    # small models that cannot write the verdict.
    mode: Literal["generate", "logprob", "rules"] = "generate"
    # rules: no model is called; scores are deterministic checks of the text (see judges/rules.py)
    rules: RulesSpec | None = None
    rubrics: dict[str, str] = Field(default_factory=lambda: {"agent": "agent.yaml", "group": "group.yaml"})
    templates: Templates = Field(default_factory=Templates)
    # degenerate verdicts, judge-directed text in the data, verdicts that follow it (judges/guards.py)
    guards: Guards = Field(default_factory=Guards)

    @field_validator("rubrics")
    @classmethod
    def _rubric_names(cls, v: dict[str, str]) -> dict[str, str]:
        for level, name in v.items():
            if level not in ("agent", "group"):
                raise ValueError(f"unknown level {level!r}; rubrics are given for agent and group")
            try:
                check_name(name, what="rubric")
            except UserError as exc:
                raise ValueError(f"{exc.message} (rubrics live in judges/rubrics/)") from None
        return v

    # set by the loader
    file: str | None = Field(default=None, exclude=True)
    root: str | None = Field(default=None, exclude=True)

    @property
    def judges_root(self) -> Path:
        return Path(self.root) if self.root else paths.judges_dir()

    def params(self, json_schema: dict[str, Any] | None = None) -> GenerationParams:
        d = self.decoding
        return GenerationParams(
            max_tokens=d.max_tokens,
            temperature=d.temperature,
            seed=d.seed,
            logprobs=d.top_logprobs > 0,
            top_logprobs=d.top_logprobs,
            json_schema=json_schema if self.structured_output else None,
        )

    @property
    def spec_hash(self) -> str:
        """Hash of the spec and the rubric and guard-pattern files it uses (changes when scoring would change)."""
        from .rubrics import rubric_path

        rub = {}
        for level, fname in sorted(self.rubrics.items()):
            p = rubric_path(self.judges_root, fname, where=self.file or f"judge '{self.name}'", field=f"rubrics.{level}")
            rub[level] = sha256_file(p) if p.is_file() else None
        g = patterns_path(self.judges_root, self.guards)
        return stable_hash({"spec": self.model_dump(), "rubrics": rub, "guards": sha256_file(g) if g.is_file() else None})


def check_mode(spec: JudgeSpec) -> None:
    """One line, before anything runs, when ``mode: logprob`` names a model that cannot score choices,
    or when ``mode: rules`` and the ``rules`` field do not come together."""
    where = spec.file or f"judge '{spec.name}'"
    if (spec.mode == "rules") != (spec.rules is not None):
        raise UserError(f"{where}: field 'rules' is required with mode: rules and allowed only there; see judges/checks.yaml")
    if spec.mode != "logprob":
        return
    from ..backends.client import make_backend

    if not make_backend(spec.model).supports_choices:
        raise UserError(
            f"{where}: field 'mode' is logprob but model '{spec.model}' cannot score from next-token probabilities; "
            "use a local transformers model (embedded or hf/<path>) or set mode: generate"
        )


def _spec_files(root: Path) -> list[Path]:
    return [p for p in sorted(root.glob("*.yaml")) if p.name not in NOT_JUDGE_FILES]


def load_judge_specs(root: str | os.PathLike[str] | None = None) -> dict[str, JudgeSpec]:
    """All judge specs in ``judges/*.yaml`` (plus plug-ins), by name."""
    # by default the user folder's judges/*.yaml override the shipped ones by name
    files = _spec_files(Path(root)) if root else [p for p in paths.entries("judges").values() if p.name not in NOT_JUDGE_FILES]
    out: dict[str, JudgeSpec] = {}
    for path in files:
        doc = read_yaml(path, what="a judge spec")
        spec = validate(JudgeSpec, doc.data, path, doc=doc)
        if spec.name != path.stem:
            raise UserError(f"{path}: field 'name' is {spec.name!r} but the file is named {path.stem!r}; make them equal")
        spec.file = str(path)
        spec.root = str(path.parent)
        out[spec.name] = spec
    for name, obj in JUDGES.items():
        if name in out:
            continue
        if isinstance(obj, JudgeSpec):
            out[name] = obj
        elif isinstance(obj, dict):
            out[name] = JudgeSpec.model_validate({"name": name, **obj})
        else:
            raise UserError(f"judge plug-in '{name}' is a {type(obj).__name__}; register a JudgeSpec or a dict of its fields")
    return out


def resolve_judge(alias: str, root: str | Path | None = None) -> JudgeSpec:
    """A judge name from ``judges/`` (gpt, claude, local, ...) or a bare model spec -> JudgeSpec."""
    alias = alias.strip()
    specs = load_judge_specs(root)
    if alias in specs:
        return specs[alias]
    if "/" in alias:  # the model spec itself is checked by parse_judges (check_model)
        try:
            spec = JudgeSpec(name=alias, model=alias, description="ad-hoc judge from a model spec")
        except ValidationError:
            raise UserError(f"judge '{alias}': not a usable judge name; use letters, digits and _.:/@#=+-") from None
        spec.root = str(Path(root) if root else paths.judges_dir())
        return spec
    raise UserError(
        f"unknown judge '{alias}'{did_you_mean(alias, specs)}; known: {', '.join(sorted(specs)) or '(none)'} "
        f"(or pass a model spec such as openai/gpt-4o; add judges as YAML files in {root or paths.dirs('judges')[0]})"
    )


def check_model(spec: JudgeSpec) -> None:
    """The judge's model spec names a backend and is well formed (no call is made); a ``mode: rules``
    judge calls no model (its ``model`` is a label)."""
    from ..backends.client import make_backend

    if spec.mode == "rules":
        return

    try:
        make_backend(spec.model)
    except UserError as exc:
        raise UserError(f"{spec.file or 'judge ' + repr(spec.name)}: field 'model': {exc.message}") from None


def parse_judges(value: str | list[str] | tuple[str, ...], *, check: bool = True) -> list[JudgeSpec]:
    """``"gpt,claude,local"`` -> specs, in order, without repeats; errors name the bad alias.

    With ``check`` (default) every judge is checked before anything runs: model spec, mode, rubrics
    and templates (inside judges/, rendered once with a sample dialogue; see
    :func:`mascot_eval.checks.check_judge`)."""
    names = [v.strip() for v in (value.split(",") if isinstance(value, str) else value) if v.strip()]
    if not names:
        raise UserError("--judges: give at least one judge, e.g. --judges local or --judges gpt,claude")
    out: dict[str, JudgeSpec] = {}
    for n in names:
        spec = resolve_judge(n)
        check_model(spec)
        check_mode(spec)
        if check:
            from ..checks import check_judge

            check_judge(spec)
        out.setdefault(spec.name, spec)
    return list(out.values())
