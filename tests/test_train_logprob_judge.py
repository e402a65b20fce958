"""Logprob judging (tiny preset): expected 1-5 digit per criterion from the local judge model."""

from __future__ import annotations

import pytest

from mascot_eval.errors import UserError

pytestmark = pytest.mark.torch


def test_logprob_scores_are_expected_digits_per_criterion():
    from mascot_eval.judges.specs import resolve_judge
    from mascot_eval.personas import get_group
    from mascot_eval.train.judging import aggregate
    from mascot_eval.train.logprob_judge import LogprobJudge

    _, cards = get_group("emotional")
    lj = LogprobJudge(resolve_judge("local"))
    ids, pos = lj._encode(lj.prompt(cards[0], [{"role": "user", "content": "I failed my exam."}], "I'm sorry."))
    # each scored position is followed by a digit token, after the criterion's JSON key
    assert len(pos) == 5 and all(ids[p + 1] in lj.digits for p in pos)
    assert lj.tok.decode(ids[pos[0] - 4 : pos[0] + 2]).endswith('"emotion": 3')
    history = [{"role": "user", "content": "I failed my driving test again today."}]
    good = "That sounds so discouraging. It makes sense to feel low after trying this hard."
    bad = "lol whatever"
    s = lj.score([(cards[0], history, good), (cards[0], history, bad), (cards[0], history, good)], batch=2)
    assert [set(x) for x in s] == [{"emotion", "empathy", "consistency", "relevance", "contribution"}] * 3
    assert all(1.0 <= v <= 5.0 for x in s for v in x.values())
    assert s[0] == pytest.approx(s[2], abs=1e-4)  # same input, same scores (batch and padding do not matter)
    assert s[0] != s[1] and aggregate(s[0]) is not None


def test_logprob_mode_needs_a_local_judge():
    from mascot_eval.judges.specs import resolve_judge
    from mascot_eval.train.logprob_judge import LogprobJudge

    with pytest.raises(UserError, match="needs a local transformers judge model"):
        LogprobJudge(resolve_judge("gpt"))
