"""The hosted judges (judges/gpt.yaml, judges/claude.yaml) on one small transcript, against the real APIs.

Skipped unless OPENAI_API_KEY / ANTHROPIC_API_KEY are set; costs a few cents at most.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from mascot_eval.backends import usage
from mascot_eval.backends.client import ClientSettings, close_clients
from mascot_eval.criteria import AGENT_CRITERIA, GROUP_CRITERIA
from mascot_eval.judges.score import judge_transcript
from tests.judge_helpers import CARDS, transcript

pytestmark = pytest.mark.api


@pytest.mark.parametrize("judge, var", [("gpt", "OPENAI_API_KEY"), ("claude", "ANTHROPIC_API_KEY")])
def test_hosted_judge_scores_a_transcript(judge, var, tmp_path):
    key = os.environ.get(var)
    if not key:
        pytest.skip(f"{var} is not set")
    usage.LEDGER.reset()
    t = transcript(
        user_text="I failed my driving test for the second time and I feel stupid.",
        agent_text=None,
    )
    settings = ClientSettings(cache_dir=str(tmp_path), max_connections=4, cost_limit=1.0)

    async def go():
        try:
            return await judge_transcript(judge, t, cards=CARDS, settings=settings)
        finally:
            await close_clients()

    rows = asyncio.run(go())
    assert len(rows) == len(t.agents) * len(AGENT_CRITERIA) + len(GROUP_CRITERIA)
    scored = [r for r in rows if r["status"] == "scored"]
    assert len(scored) >= len(rows) // 2, [r["reason"] for r in rows if r["status"] != "scored"]
    assert all(1 <= r["score"] <= 5 for r in scored)
    assert all(r["reason"] for r in rows if r["status"] != "scored")  # unscored always says why
    total = usage.LEDGER.snapshot()["by_tag"][f"judge:{judge}"]
    assert total["prompt_tokens"] > 100 and total["completion_tokens"] > 10 and total["cost_usd"] > 0
    assert key not in json.dumps(rows)
    assert key.encode() not in b"".join(p.read_bytes() for p in tmp_path.glob("responses.sqlite*"))
