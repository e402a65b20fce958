"""Probability-weighted judging for small local judge models (``judge_overrides.mode: logprob``).

A 135M model cannot write the judge's JSON verdict (the `local` judge leaves nearly every candidate
unscored), so the tiny preset reads the verdict from the judge model's next-token probabilities
instead: the judge's own system prompt, response template and agent rubric are rendered as for a
normal call, the assistant turn is forced to the JSON skeleton of ``_output.j2``
(``{"rationale": "", "emotion": <d>, "empathy": <d>, ...}``) and, at each criterion, the score is
the expected digit under the model's distribution over the tokens 1-5 (renormalised), as in
G-Eval-style probability-weighted scoring. One forward pass per candidate (batched): the digits
already written in the skeleton are a neutral 3, so every criterion is read in the same context. Only for local transformers judges (``embedded``,
``hf/<path>``); scores are continuous, so pair such a judge with a small ``stage1.delta``.
"""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..judges.specs import JudgeSpec
from ..personas import PersonaCard


class LogprobJudge:
    def __init__(self, spec: JudgeSpec) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        from ..criteria import criteria_for
        from ..judges.score import Judge
        from .basemodel import load_tokenizer, resolve_base

        if not (spec.model == "embedded" or spec.model.startswith("hf/")):
            raise UserError(
                f"judge '{spec.name}': judge_overrides.mode 'logprob' needs a local transformers judge model "
                f"('embedded' or 'hf/<path>'), not '{spec.model}'; remove judge_overrides.mode for API judges"
            )
        self.judge = Judge(spec)
        path = resolve_base(spec.model)
        self.tok = load_tokenizer(path, spec.model)
        self.tok.padding_side = "right"
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        self.criteria = list(criteria_for("agent"))
        self.digits = [self._single(str(d)) for d in range(1, 6)]

    def _single(self, text: str) -> int:
        ids = self.tok.encode(text, add_special_tokens=False)
        if len(ids) != 1:
            raise UserError(f"judge '{self.judge.spec.name}': its tokenizer splits the digit {text!r}; logprob mode needs single-token digits")
        return ids[0]

    def prompt(self, card: PersonaCard, history: list[dict[str, str]], response: str) -> list[dict[str, str]]:
        from ..judges import prompts

        j = self.judge
        user = j.render(
            j.spec.templates.response,
            [card.id, prompts.history_text(history), response],
            agent=card.name,
            card=prompts.card_text(card),
            history=prompts.history_text(history),
            response=response,
            rubric=j.rubric("agent").for_template(),
        )
        return [{"role": "system", "content": j.system_prompt()}, {"role": "user", "content": user}]

    def _encode(self, messages: list[dict[str, str]]) -> tuple[list[int], list[int]]:
        """Token ids of the prompt + forced skeleton with placeholder digits, and the positions whose
        next-token distribution scores each criterion."""
        text = self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = self.tok.encode(text, add_special_tokens=False)
        positions = []
        for i, c in enumerate(self.criteria):
            head = '{"rationale": "", ' if i == 0 else ", "
            ids += self.tok.encode(f'{head}"{c}": ', add_special_tokens=False)
            positions.append(len(ids) - 1)
            ids.append(self.digits[2])  # neutral placeholder for the criteria that follow
        return ids, positions

    def score(self, items: list[tuple[PersonaCard, list[dict[str, str]], str]], batch: int = 4) -> list[dict[str, float]]:
        """Expected 1-5 score per agent criterion for each (card, history, response)."""
        import torch

        out: list[dict[str, float]] = []
        encoded = [self._encode(self.prompt(*it)) for it in items]
        for start in range(0, len(encoded), batch):
            chunk = encoded[start : start + batch]
            probs = self._digit_probs([ids for ids, _ in chunk], [pos for _, pos in chunk])
            for r in range(len(chunk)):
                out.append({c: float((probs[r][k] * torch.arange(1, 6)).sum()) for k, c in enumerate(self.criteria)})
        return out

    def _digit_probs(self, rows: list[list[int]], positions: list[list[int]]) -> list[Any]:
        import torch

        width = max(len(r) for r in rows)
        pad = self.tok.pad_token_id
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        keep = sorted({p for pos in positions for p in pos})  # only these positions' logits (not seq x vocab)
        index = {p: i for i, p in enumerate(keep)}
        with torch.inference_mode():
            logits = self.model(input_ids=ids, attention_mask=mask, logits_to_keep=torch.tensor(keep)).logits
        out = []
        for r, pos in enumerate(positions):
            sel = logits[r, [index[p] for p in pos]][:, self.digits].float()  # (criteria, 5)
            out.append(torch.softmax(sel, dim=-1))
        return out
