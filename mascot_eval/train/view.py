"""Training sees what evaluation sees: prompts come from the evaluated system's own templates and code.

A :class:`SystemView` wraps a built :class:`~mascot_eval.systems.base.System` (the config's
``system``, e.g. ``mascot``) with chosen models per role. It reconstructs the
:class:`~mascot_eval.systems.base.DialogueState` of any point of a dialogue (a rollout transcript or
a human conversation) and renders

- a speaker's prompt exactly as :func:`mascot_eval.systems.speak.speak` does (``system.prompt_vars`` +
  the system's agent template, directive included),
- the Director's prompt exactly as :class:`mascot_eval.systems.director.Director` does,

and cleans replies and parses directives with the evaluation code (``systems.text.clean_reply``,
``systems.director.parse_directive``), so nothing here is a private copy of the evaluation prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..data.context import Context
from ..personas import PersonaCard
from ..systems.base import DialogueState, System
from ..taskspec import TaskSpec
from ..transcript import Transcript, Turn, make_dialogue_id


@dataclass
class State:
    """One point of a dialogue where an agent is about to speak (or the Director to decide)."""

    task: TaskSpec
    context: Context
    profile: str | None
    dialogue_id: str
    turns: list[Turn]  # everything said before this point
    round: int
    speaker: str | None = None  # the agent who spoke here in the rollout
    directive: dict[str, Any] | None = None  # the directive that agent followed (None without a Director)
    key: str = ""

    @property
    def spoken(self) -> list[str]:
        """Agents heard so far in this round, in order."""
        return [t.speaker for t in self.turns if t.round == self.round and not t.is_user]

    @property
    def plan(self) -> list[dict[str, Any]]:
        return [t.directive for t in self.turns if t.round == self.round and not t.is_user and t.directive]

    def history(self) -> list[dict[str, str]]:
        """The conversation so far in the judges' ``score_response`` history format."""
        return [{"name": t.speaker, "content": t.text} for t in self.turns]


class SystemView:
    def __init__(self, system: System) -> None:
        self.system = system
        self.cards = system.cards
        self.by_id = {c.id: c for c in system.cards}
        self.by_name = {c.name: c for c in system.cards}

    def speaker_card(self, st: State) -> PersonaCard:
        """The card of the agent who speaks at ``st`` (states are made at agent turns, so the speaker is set)."""
        assert st.speaker is not None
        return self.by_name[st.speaker]

    @classmethod
    def build(cls, ref: str, task: TaskSpec, *, models: dict[str, str] | None = None, model: str = "embedded") -> SystemView:
        """The system ``ref`` for ``task``; ``models`` (role -> spec: a persona id, 'agents', 'director') win
        over the system's own ``models`` entries, every other role uses ``model``."""
        from ..systems.config import load_system_config
        from ..systems.factory import build_system

        config = load_system_config(ref)
        if models:
            config = config.model_copy(update={"models": {**config.models, **models}, "checkpoint": []})
            config.file = load_system_config(ref).file
        return cls(build_system(config, task, model=model))

    # dialogue states
    def dialogue_state(self, st: State, seed: int = 0) -> DialogueState:
        return DialogueState(
            task=st.task,
            context=st.context,
            profile=st.profile,
            dialogue_id=st.dialogue_id,
            seed=seed,
            rounds=st.task.rounds,
            turns=list(st.turns),
            round=st.round,
        )

    def extra_vars(self, ds: DialogueState) -> dict[str, Any]:
        extra = getattr(self.system, "extra_vars", None)  # prompted kinds: few-shot examples, reasoning
        return extra(ds) if callable(extra) else {}

    def speaker_messages(self, st: State, card: PersonaCard, directive: dict[str, Any] | None) -> list[dict[str, str]]:
        ds = self.dialogue_state(st)
        variables = self.system.prompt_vars(ds, card, directive=directive, **self.extra_vars(ds))
        return self.system.templates.render(self.system.template("agent"), **variables)

    def director_messages(self, st: State) -> list[dict[str, str]]:
        director = getattr(self.system, "director", None)
        if director is None:
            raise ValueError(f"system '{self.system.config.name}' has no Director (options.order is not 'director')")
        ds = self.dialogue_state(st)
        return director.templates.render(director.template, **director.variables(self.system.prompt_vars(ds), st.spoken, st.plan))

    def clean(self, text: str, card: PersonaCard) -> str:
        from ..systems.text import clean_reply

        return clean_reply(text, card.name, [c.name for c in self.cards if c.name != card.name])

    def parse_directive(self, text: str, st: State):
        """(Directive, None) or (None, reason) with the evaluation Director's parser and its options."""
        from ..systems.director import parse_directive
        from ..systems.mascot import Mascot

        system = self.system
        # the trainer's systems are kind 'mascot' (train config) and have a Director (director_messages)
        assert isinstance(system, Mascot) and system.director is not None
        d = system.director
        return parse_directive(text, self.cards, spoken=st.spoken, min_speakers=d.min_speakers, allow_repeat=d.allow_repeat)


def states_of(t: Transcript, task: TaskSpec, context: Context) -> list[State]:
    """Every agent turn of a transcript as the state just before it (what the speaker saw)."""
    out = []
    for i, turn in enumerate(t.turns):
        if turn.is_user:
            continue
        out.append(
            State(
                task=task,
                context=context,
                profile=t.user_profile,
                dialogue_id=t.dialogue_id,
                turns=t.turns[:i],
                round=turn.round,
                speaker=turn.speaker,
                directive=turn.directive,
                key=f"{t.dialogue_id}#{i}",
            )
        )
    return out


def human_states(ctx: Context, task: TaskSpec, replies: int, system_name: str, names: list[str]) -> list[tuple[State, str]]:
    """(state, human reply) for the first ``replies`` supporter turns of a human conversation.

    The person seeking support (``ctx.user_speaker``) is the user; supporter turns before the target
    are attributed to the persona ``names`` in turn, so the prompt shows a multi-agent conversation."""
    turns: list[Turn] = []
    out: list[tuple[State, str]] = []
    rnd, k = 0, 0
    for h in ctx.turns:
        text = " ".join(h.text.split())
        if not text:
            continue
        if h.speaker == (ctx.user_speaker or "user"):
            rnd += 1
            turns.append(Turn(round=rnd, speaker="user", text=text))
            continue
        if rnd == 0:  # the supporter opened (ESConv "Hello"): not a reply to the user
            continue
        name = names[k % len(names)]
        st = State(
            task=task,
            context=ctx,
            profile=None,
            dialogue_id=make_dialogue_id(task.name, ctx.id, None, system_name),
            turns=list(turns),
            round=rnd,
            speaker=name,
            key=f"{task.name}:{ctx.id}#{len(turns)}",
        )
        out.append((st, text))
        turns.append(Turn(round=rnd, speaker=name, text=text))
        k += 1
        if len(out) >= replies:
            break
    return out
