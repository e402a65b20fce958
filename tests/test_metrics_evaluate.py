"""The bundled `evaluate` modules load by path offline and return our numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mascot_eval.errors import UserError
from mascot_eval.metrics.bleu import nltk_sentence_bleu
from mascot_eval.metrics.compute import compute
from mascot_eval.metrics.evaluate_modules import available, module_path
from mascot_eval.metrics.table import system_means
from mascot_eval.metrics.tokenize import tokenize
from tests.conftest import REPO
from tests.runfactory import make_transcript

evaluate = pytest.importorskip("evaluate")


def _transcripts():
    return [make_transcript("t", i, "s", rounds=2 + i % 2) for i in range(4)]


def test_module_paths():
    assert available() == ["mascot_metrics", "mascot_redundancy"]
    assert module_path().endswith("mascot_metrics/mascot_metrics.py") and os.path.isfile(module_path())
    with pytest.raises(UserError, match="mascot_metrics"):
        module_path("nope")


def test_mascot_metrics_module_matches_compute(tmp_path):
    ts = _transcripts()
    names = ["distinct_2", "inter_agent_selfbleu", "self_repetition_bleu", "distinct_2_corpus", "turn_length_tokens"]
    expected = system_means(compute(ts, names))["s"]
    one = evaluate.load(module_path("mascot_metrics"), "inter_agent_selfbleu", cache_dir=str(tmp_path))
    got = one.compute(transcripts=[json.dumps(t.to_dict()) for t in ts])
    assert got == {"inter_agent_selfbleu": pytest.approx(expected["inter_agent_selfbleu"], abs=1e-12), "n_dialogues": 4}
    every = evaluate.load(module_path("mascot_metrics"), cache_dir=str(tmp_path))
    every.add_batch(transcripts=[t.to_dict() for t in ts[:2]])
    every.add_batch(transcripts=[t.to_dict() for t in ts[2:]])
    got = every.compute(metrics=names, return_rows=True)
    for n in names:
        assert got[n] == pytest.approx(expected[n], abs=1e-12)
    assert len(got["rows"]) == len(compute(ts, names))
    assert {r["metric"] for r in got["rows"]} == set(names)
    bad = evaluate.load(module_path("mascot_metrics"), "distinct2", cache_dir=str(tmp_path))
    with pytest.raises(UserError, match="did you mean"):
        bad.compute(transcripts=[json.dumps(ts[0].to_dict())])


def test_mascot_redundancy_module_matches_nltk_and_rouge(tmp_path):
    from rouge_score import rouge_scorer

    groups = [["I hear you, that is hard.", "I hear you, that is so hard!", "Have you tried a walk?"], ["a b c d", "a b c e"]]
    r = evaluate.load(module_path("mascot_redundancy"), cache_dir=str(tmp_path))
    got = r.compute(predictions=groups, embeddings=False)
    assert "cosine" not in got and got["n_groups"] == 2
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    for g, sb, rl in zip(groups, got["per_group"]["selfbleu"], got["per_group"]["rougeL"]):
        toks = [tokenize(x) for x in g]
        exp = np.mean([nltk_sentence_bleu(toks[i], [toks[j] for j in range(len(g)) if j != i]) for i in range(len(g))])
        assert sb == pytest.approx(exp, abs=1e-9)
        pairs = [(a, b) for i, a in enumerate(g) for b in g[i + 1 :]]
        assert rl == pytest.approx(np.mean([scorer.score(a, b)["rougeL"].fmeasure for a, b in pairs]), abs=1e-12)
    assert got["selfbleu"] == pytest.approx(np.mean(got["per_group"]["selfbleu"]))
    assert got["per_group"]["selfbleu"][1] == pytest.approx(0.3976353643835253)
    with pytest.raises(ValueError, match="at least two"):
        r.compute(predictions=[["alone"]], embeddings=False)


@pytest.mark.slow
def test_evaluate_load_by_path_offline_in_a_fresh_process(tmp_path):
    """A new process with an empty Hugging Face home and every hub switch offline."""
    code = (
        "import json, evaluate\n"
        "from mascot_eval.metrics.evaluate_modules import module_path\n"
        "from tests.runfactory import make_transcript\n"
        "ts = [json.dumps(make_transcript('t', i, 's').to_dict()) for i in range(3)]\n"
        "m = evaluate.load(module_path('mascot_metrics'), 'distinct_2')\n"
        "r = evaluate.load(module_path('mascot_redundancy'))\n"
        "print(json.dumps([m.compute(transcripts=ts), r.compute(predictions=[['a b c d', 'a b c e']])]))\n"
    )
    env = {
        **os.environ,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_EVALUATE_OFFLINE": "1",
        "MASCOT_CACHE_DIR": str(tmp_path / "cache"),
    }
    env.pop("HF_MODULES_CACHE", None)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    ts = [make_transcript("t", i, "s") for i in range(3)]
    assert got[0]["distinct_2"] == pytest.approx(system_means(compute(ts, ["distinct_2"]))["s"]["distinct_2"], abs=1e-12)
    assert got[1]["selfbleu"] == pytest.approx(0.3976353643835253)
    assert 0 < got[1]["cosine"] <= 1
    assert (tmp_path / "hf").exists()  # the module was copied into the fresh HF home, nothing downloaded
