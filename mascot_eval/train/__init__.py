"""Reference trainer for the MASCOT checkpoints (``mascot-eval train``).

Stage 1 (per persona, RLAIF): sample K replies per context -> judge them on the five agent criteria
-> preference pairs (aggregate difference >= delta) -> Bradley-Terry reward model -> GRPO on a LoRA
adapter with reward = reward-model score + format reward.

Stage 2 (group level): roll out N-turn blocks with a Director and the Stage-1 speakers -> GRPO on
the Director's LoRA adapter with reward = judges' group rubric + format - eta * redundancy.

Every step writes an artifact into the output folder and is skipped on a rerun when that artifact
exists for the same inputs; ``checkpoint.json`` (schema ``mascot-checkpoint/1``) is what
``mascot-eval run --system mascot --checkpoint DIR`` reads. Modules:

- :mod:`.config`: the YAML config (pydantic) and its checks.
- :mod:`.workdir`: the output folder, step bookkeeping, checkpoint.json and the training log.
- :mod:`.basemodel`: base-model resolution and loading, LoRA settings, trainable-parameter share.
- :mod:`.prompts`: speaker and Director prompts, directive parsing.
- :mod:`.sample`, :mod:`.judging`, :mod:`.pairs`, :mod:`.reward_model`: Stage 1 data and reward model.
- :mod:`.rewards`, :mod:`.diversity`: reward functions (format, composite, group redundancy).
- :mod:`.grpo`: the shared GRPO-on-LoRA runner (trl GRPOTrainer + peft).
- :mod:`.stage1`, :mod:`.stage2`: the two stages; :mod:`.plots`: training curves.
"""
