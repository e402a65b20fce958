"""The training config (``baselines/train/*.yaml``): pydantic models and the checks that need the tree.

``load_config(path)`` validates the file (one-line errors naming file and field) and then checks
what pydantic cannot: that the persona group and personas exist, that the judge resolves, that the
tasks exist. Loading the base model is checked when training starts (:mod:`.basemodel`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import UserError, did_you_mean
from ..fileio import stable_hash
from ..yamlfile import load_model


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoraSpec(_Strict):
    """LoRA adapter settings (peft). Rank 16 on q/k/v/o of Qwen3-8B is the paper's 0.187% share."""

    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"], min_length=1)


class Sampling(_Strict):
    max_tokens: int = Field(96, ge=1)
    temperature: float = Field(0.9, ge=0.0)
    top_p: float = Field(0.95, gt=0.0, le=1.0)


class GrpoSpec(_Strict):
    """GRPO settings (trl GRPOConfig): ``steps`` optimizer steps of ``batch_size`` completions each."""

    steps: int = Field(50, ge=1)
    learning_rate: float = Field(1e-5, gt=0.0)
    num_generations: int = Field(4, ge=2, description="group size G: completions per prompt")
    batch_size: int = Field(4, ge=1, description="completions per device per step; a multiple of num_generations")
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_completion_length: int = Field(96, ge=4)
    beta: float = Field(0.04, ge=0.0, description="KL coefficient to the reference (base) policy")
    temperature: float = Field(0.9, gt=0.0)
    bf16: bool = False
    gradient_checkpointing: bool = Field(
        True, description="recompute activations in the backward pass (saves GPU memory on large models; off for tiny CPU runs)"
    )

    @model_validator(mode="after")
    def _groups(self) -> GrpoSpec:
        total = self.batch_size * self.gradient_accumulation_steps
        if total % self.num_generations:
            raise ValueError(
                f"batch_size x gradient_accumulation_steps ({total}) must be a multiple of num_generations "
                f"({self.num_generations})"
            )
        return self


class RewardModelSpec(_Strict):
    """Bradley-Terry reward model: a linear head on the (frozen or LoRA-tuned) base model's pooled states."""

    epochs: int = Field(20, ge=1)
    learning_rate: float = Field(1e-3, gt=0.0)
    weight_decay: float = Field(0.01, ge=0.0)
    batch_size: int = Field(16, ge=1)
    max_length: int = Field(384, ge=16)
    pooling: Literal["mean", "last"] = "mean"
    heldout_fraction: float = Field(0.2, ge=0.0, lt=1.0, description="share of contexts whose pairs are held out")
    lora: LoraSpec | None = Field(None, description="also tune the base with LoRA (else only the head is trained)")


class Stage1Reward(_Strict):
    rm_weight: float = 1.0
    format_weight: float = 0.5
    max_words: int = Field(120, ge=1, description="replies longer than this lose the length part of the format reward")


class Stage1Spec(_Strict):
    candidates: int = Field(4, ge=2, description="K: sampled replies per context and persona")
    sampling: Sampling = Field(default_factory=Sampling)
    delta: float = Field(0.5, ge=0.0, description="keep pairs whose aggregate scores differ by at least delta")
    min_pairs: int = Field(8, ge=1, description="fail (exit 2) with fewer preference pairs than this after the filter")
    reward_model: RewardModelSpec = Field(default_factory=RewardModelSpec)
    reward: Stage1Reward = Field(default_factory=Stage1Reward)
    grpo: GrpoSpec = Field(default_factory=GrpoSpec)
    lora: LoraSpec = Field(default_factory=LoraSpec)


class Stage2Reward(_Strict):
    judge_weight: float = Field(1.0, description="weight of the group rubric (coherence/interaction), scaled to 0-1")
    criteria: list[str] = Field(
        default_factory=lambda: ["fidelity", "originality", "relevance", "engagement"], min_length=1,
        description="group criteria averaged into the judge term",
    )
    diversity_weight: float = Field(0.5, ge=0.0, description="eta: weight of the redundancy penalty")
    format_weight: float = 0.5
    ngram: int = Field(2, ge=1, le=4, description="n for the content-overlap part of the redundancy penalty")


class Stage2Spec(_Strict):
    block_turns: int = Field(3, ge=1, description="N: agent turns per rolled-out block")
    director_sampling: Sampling = Field(default_factory=lambda: Sampling(max_tokens=64, temperature=0.7))
    speaker_sampling: Sampling = Field(default_factory=lambda: Sampling(max_tokens=96, temperature=0.7))
    reward: Stage2Reward = Field(default_factory=Stage2Reward)
    grpo: GrpoSpec = Field(default_factory=lambda: GrpoSpec(max_completion_length=64))
    lora: LoraSpec = Field(default_factory=LoraSpec)


class DataSpec(_Strict):
    tasks: list[str] = Field(min_length=1, description="task names (tasks/*.yaml) whose sources give the contexts")
    contexts: int = Field(ge=1, description="training contexts per task")
    exclude_eval_contexts: bool = Field(
        True, description="leave out each task's evaluation sample so training and evaluation contexts are disjoint"
    )
    seed: int = 0


class Launch(_Strict):
    """How the paper preset is launched (documentation for `accelerate launch`; the trainer reads the env)."""

    accelerate: bool = False
    num_processes: int = Field(1, ge=1)
    hardware: str = ""
    expected_hours: float | None = None


class JudgeOverride(_Strict):
    """Cheaper judging during training (evaluation keeps the judge file's own settings); None = the file's value."""

    max_tokens: int | None = Field(None, ge=16, le=8192)
    reask: int | None = Field(None, ge=0, le=3)
    top_logprobs: int | None = Field(None, ge=0, le=20)
    mode: Literal["generate", "logprob"] | None = Field(
        None,
        description="'generate' asks the judge for its JSON verdict; 'logprob' reads each criterion's expected 1-5 "
        "digit from a local judge model's next-token probabilities (the judge file's field 'mode'; see judges/local.yaml)",
    )


class TrainConfig(_Strict):
    name: str
    description: str = ""
    base_model: str = Field(description="model spec of the policy: embedded or hf/<path-or-id>")
    sampling_model: str | None = Field(
        None, description="spec used to sample candidates and speaker turns (default: base_model), e.g. vllm/<id>"
    )
    persona_group: str
    personas: list[str] | None = Field(None, description="subset of the group's members (default: all)")
    judge: str = Field(description="judge alias (judges/*.yaml) or model spec")
    judge_overrides: JudgeOverride = Field(default_factory=JudgeOverride)
    seed: int = 0
    max_connections: int = Field(4, ge=1)
    data: DataSpec
    stage1: Stage1Spec = Field(default_factory=Stage1Spec)
    stage2: Stage2Spec = Field(default_factory=Stage2Spec)
    launch: Launch = Field(default_factory=Launch)
    file: str | None = Field(None, exclude=True)

    @property
    def sampler(self) -> str:
        return self.sampling_model or self.base_model

    def section_hash(self, *parts: str) -> str:
        """Hash of the named top-level fields (dotted paths allowed), for per-step reuse decisions."""
        dumped = self.model_dump(mode="json")
        picked = {}
        for p in parts:
            node = dumped
            for key in p.split("."):
                node = node[key]
            picked[p] = node
        return stable_hash(picked)

    def judge_spec(self):
        """The judge as used for training: the resolved spec with ``judge_overrides`` applied."""
        from ..judges.specs import resolve_judge

        spec = resolve_judge(self.judge)
        o = self.judge_overrides
        dec = {k: v for k, v in (("max_tokens", o.max_tokens), ("top_logprobs", o.top_logprobs)) if v is not None}
        update: dict = {}
        if dec:
            update["decoding"] = spec.decoding.model_copy(update=dec)
        if o.reask is not None:
            update["reask"] = o.reask
        if o.mode is not None:
            update["mode"] = o.mode
        if not update:
            return spec
        out = spec.model_copy(update=update)
        out.file, out.root = spec.file, spec.root
        return out

    def config_hash(self) -> str:
        return stable_hash(self.model_dump(mode="json"))


def load_config(path: str | Path) -> TrainConfig:
    """Read and check a training config; every problem is one UserError line naming the file and field."""
    path = Path(path)
    cfg = load_model(path, TrainConfig)
    cfg.file = str(path)
    check_config(cfg, where=str(path))
    return cfg


def check_config(cfg: TrainConfig, *, where: str = "config") -> None:
    from ..personas import get_group

    try:
        group, _cards = get_group(cfg.persona_group)
    except UserError as exc:
        raise UserError(f"{where}: field 'persona_group': {exc.message}") from None
    if cfg.personas is not None:
        for p in cfg.personas:
            if p not in group.members:
                raise UserError(
                    f"{where}: field 'personas': unknown persona '{p}'{did_you_mean(p, group.members)}; "
                    f"group '{group.name}' has {', '.join(group.members)}"
                )
    from ..judges.specs import resolve_judge

    try:
        resolve_judge(cfg.judge)
    except UserError as exc:
        raise UserError(f"{where}: field 'judge': {exc.message}") from None
    from ..taskspec import load_task

    for t in cfg.data.tasks:
        try:
            load_task(t)
        except UserError as exc:
            raise UserError(f"{where}: field 'data.tasks': {exc.message}") from None
    bad = [c for c in cfg.stage2.reward.criteria if c not in ("fidelity", "originality", "relevance", "engagement")]
    if bad:
        raise UserError(
            f"{where}: field 'stage2.reward.criteria': unknown group criterion '{bad[0]}'; "
            "use fidelity, originality, relevance, engagement"
        )


def personas_of(cfg: TrainConfig):
    """The PersonaCards trained in Stage 1 (config order = group order)."""
    from ..personas import get_group

    group, cards = get_group(cfg.persona_group)
    if cfg.personas is None:
        return cards
    wanted = set(cfg.personas)
    return [c for c in cards if c.id in wanted]
