"""Persona cards (``tasks/personas/<id>.yaml``) and persona groups (``tasks/personas/groups.yaml``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from . import paths
from .errors import UserError, did_you_mean
from .yamlfile import read_yaml, validate


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


RESERVED_NAMES = frozenset({"user"})  # speaker names the transcript format gives another meaning


@lru_cache(maxsize=8)
def _load_all(roots: tuple[str, ...]) -> tuple[dict[str, PersonaCard], dict[str, PersonaGroup]]:
    """Cards and groups of the persona folders ``roots`` (highest priority first; a higher folder's card
    or group overrides a lower one's of the same id or name)."""
    cards: dict[str, PersonaCard] = {}
    card_files: dict[str, Path] = {}
    raw_groups: dict[str, tuple[Path, Any, Any]] = {}  # name -> (file, body, parsed document)
    for root in map(Path, reversed(roots)):
        for path in sorted(root.glob("*.yaml")):
            if path.name == "groups.yaml":
                continue
            doc = read_yaml(path, what="a persona card")
            card = validate(PersonaCard, doc.data, path, doc=doc)
            if card.id != path.stem:
                raise UserError(f"{path}: field 'id' is {card.id!r} but the file is named {path.stem!r}; make them equal")
            check_card_name(card, path, doc.line_of(("name",)))
            cards[card.id] = card
            card_files[card.id] = path
        gpath = _groups_file(root)
        gdoc = read_yaml(gpath, what="the persona groups file") if gpath.exists() else None
        raw = gdoc.data if gdoc is not None else {}
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise UserError(f"{gpath}: expected a mapping of group name -> group")
        raw_groups.update({name: (gpath, body, gdoc) for name, body in raw.items()})
    names: dict[str, Path] = {}
    for cid, card in cards.items():
        key = card.name.strip().casefold()
        if key in names:
            raise UserError(
                f"{card_files[cid]}: field 'name': {card.name!r} is also the name of {names[key]}; every "
                "persona needs its own speaker name"
            )
        names[key] = card_files[cid]
    root = Path(roots[0])
    groups: dict[str, PersonaGroup] = {}
    for name, (gpath, body, gdoc) in raw_groups.items():
        line = gdoc.line_of((name,)) if gdoc is not None else None
        at = f"{gpath}:{line}" if line else str(gpath)
        if not isinstance(body, dict):
            raise UserError(f"{at}: group '{name}' must be a mapping with 'members'")
        if not isinstance(name, str):
            raise UserError(f"{at}: group name {name!r} must be a string")
        groups[name] = validate(PersonaGroup, {"name": name, **body}, gpath, doc=gdoc, prefix=(name,))
        seen: set[str] = set()
        for i, m in enumerate(groups[name].members):
            mline = gdoc.line_of((name, "members", i)) if gdoc is not None else None
            mat = f"{gpath}:{mline}" if mline else str(gpath)
            if m in seen:
                raise UserError(f"{mat}: group '{name}' lists persona '{m}' twice; each persona speaks once per group")
            seen.add(m)
            if m not in cards:
                raise UserError(
                    f"{mat}: group '{name}' names persona '{m}'{did_you_mean(m, cards)} but there is no {root / (m + '.yaml')}"
                )
    return cards, groups


def check_card_name(card: PersonaCard, where: str | Path, line: int | None = None) -> None:
    """A persona's speaker name must not be a reserved transcript speaker ('user') or blank."""
    at = f"{where}:{line}" if line else str(where)
    if not card.name.strip():
        raise UserError(f"{at}: field 'name': empty; give the persona a speaker name")
    if card.name.strip().casefold() in RESERVED_NAMES:
        raise UserError(
            f"{at}: field 'name': {card.name!r} is reserved for the person seeking support; pick another speaker name"
        )


def load_personas(root: str | Path | None = None) -> tuple[dict[str, PersonaCard], dict[str, PersonaGroup]]:
    """Cards and groups of ``root``, or by default of tasks/personas/ in the user folder and the shipped data."""
    return _load_all((str(Path(root)),) if root else tuple(str(d) for d in paths.personas_dirs()))


def get_group(name: str, root: str | Path | None = None) -> tuple[PersonaGroup, list[PersonaCard]]:
    cards, groups = load_personas(root)
    if name not in groups:
        raise UserError(f"unknown persona group '{name}'{did_you_mean(name, groups)}; groups: {', '.join(sorted(groups))}")
    g = groups[name]
    return g, [cards[m] for m in g.members]
