"""Diagnostics per judge: parse failures counted, position and length bias, cost per 100 dialogues."""

from __future__ import annotations

import asyncio

import pytest

from mascot_eval.judges.diagnostics import diagnostics_table
from mascot_eval.judges.score import judge_transcript
from tests.judge_helpers import CARDS, criteria_in, scores_json, transcript


def test_diagnostics(fake_model, tmp_cache):
    # longer replies get higher scores -> positive length bias; Beacon's unit never parses
    def r(req):
        p = req.messages[-1]["content"]
        if "Evaluate ONE agent, Beacon" in p or "could not be read" in p:
            return "no idea"
        crit = criteria_in(p)
        return scores_json(crit, 5 if "long long long" in p else 2)

    spec = fake_model("judge-diag", r)
    ts = [
        transcript(context_id="c1"),
        transcript(context_id="c2", agent_text="long long long " * 20),
        transcript(context_id="c3"),
    ]
    rows = []
    for t in ts:
        rows += asyncio.run(judge_transcript(spec, t, cards=CARDS))
    comps = [{"judge": spec, "judge_model": spec, "status": "scored", "tie": False, "best_position": p} for p in (1, 1, 1, 2)]
    d = diagnostics_table(rows, ts, comps).set_index("judge").loc[spec]
    assert d.units == 3 * 4 and d.parse_failures == 3
    assert d.parse_failure_rate == pytest.approx(3 / 12) and d.reask_rate == pytest.approx(3 / 12)
    assert d.api_calls == 9 + 3 * 2  # 9 parsed at once, 3 asked twice
    assert d.first_position_rate == 0.75 and d.first_position_n == 4
    assert d.length_bias_spearman > 0.5 and d.length_bias_n == 9
    assert d.dialogues == 3 and d.prompt_tokens_per_100 > 0
    assert d.cost_usd_per_100 == pytest.approx(0.0)
