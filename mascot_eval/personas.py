"""Persona cards (``tasks/personas/<id>.yaml``) and persona groups (``tasks/personas/groups.yaml``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from . import paths
from .errors import UserError, did_you_mean
from .yamlfile import load_model, load_yaml


class PersonaCard(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="short id, e.g. 'anchor'")
    name: str  # display name used as the speaker in transcripts, e.g. "Anchor"
    role: str
    traits: list[str] = Field(min_length=1)
    speaking_style: str
    never: list[str] = Field(min_length=1, description="what the agent must never do")
    examples: list[str] = Field(min_length=2, max_length=2)

    def prompt_block(self) -> str:
        """The card rendered for a system prompt."""
        return (
            f"You are {self.name}, the {self.role}.\n"
            f"Traits: {', '.join(self.traits)}.\n"
            f"Speaking style: {self.speaking_style}\n"
            f"Never: {'; '.join(self.never)}.\n"
            f"Examples of your voice:\n- " + "\n- ".join(self.examples)
        )


class PersonaGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    members: list[str] = Field(min_length=1)  # persona card ids, in default speaking order


def _groups_file(root: Path) -> Path:
    return root / "groups.yaml"


@lru_cache(maxsize=8)
def _load_all(roots: tuple[str, ...]) -> tuple[dict[str, PersonaCard], dict[str, PersonaGroup]]:
    """Cards and groups of the persona folders ``roots`` (highest priority first; a higher folder's card
    or group overrides a lower one's of the same id or name)."""
    cards: dict[str, PersonaCard] = {}
    raw_groups: dict[str, tuple[Path, object]] = {}
    for root in map(Path, reversed(roots)):
        for path in sorted(root.glob("*.yaml")):
            if path.name == "groups.yaml":
                continue
            card = load_model(path, PersonaCard)
            if card.id != path.stem:
                raise UserError(f"{path}: field 'id' is {card.id!r} but the file is named {path.stem!r}; make them equal")
            cards[card.id] = card
        gpath = _groups_file(root)
        raw = load_yaml(gpath) if gpath.exists() else {}
        if not isinstance(raw, dict):
            raise UserError(f"{gpath}: expected a mapping of group name -> group")
        raw_groups.update({name: (gpath, body) for name, body in raw.items()})
    root = Path(roots[0])
    groups: dict[str, PersonaGroup] = {}
    for name, (gpath, body) in raw_groups.items():
        if not isinstance(body, dict):
            raise UserError(f"{gpath}: group '{name}' must be a mapping with 'members'")
        from pydantic import ValidationError

        try:
            groups[name] = PersonaGroup.model_validate({"name": name, **body})
        except ValidationError as exc:
            from .yamlfile import validation_message

            raise UserError(validation_message(f"{gpath} (group '{name}')", exc)) from None
        for m in groups[name].members:
            if m not in cards:
                raise UserError(
                    f"{gpath}: group '{name}' names persona '{m}'{did_you_mean(m, cards)} but there is no {root / (m + '.yaml')}"
                )
    return cards, groups


def load_personas(root: str | Path | None = None) -> tuple[dict[str, PersonaCard], dict[str, PersonaGroup]]:
    """Cards and groups of ``root``, or by default of tasks/personas/ in the user folder and the shipped data."""
    return _load_all((str(Path(root)),) if root else tuple(str(d) for d in paths.personas_dirs()))


def get_group(name: str, root: str | Path | None = None) -> tuple[PersonaGroup, list[PersonaCard]]:
    cards, groups = load_personas(root)
    if name not in groups:
        raise UserError(f"unknown persona group '{name}'{did_you_mean(name, groups)}; groups: {', '.join(sorted(groups))}")
    g = groups[name]
    return g, [cards[m] for m in g.members]
