"""The output folder under a multi-process launcher: only rank 0 writes checkpoint.json, config.yaml and the
log; the other ranks read what rank 0 wrote."""

from __future__ import annotations

import json

from mascot_eval.train.workdir import TrainDir


def test_only_rank_0_writes_checkpoint_json(tmp_path, monkeypatch):
    td = TrainDir(tmp_path / "ck")
    td.root.mkdir()
    monkeypatch.setenv("RANK", "1")
    td.update(adapters={"anchor": "adapters/anchor"})
    td.log({"step_name": "grpo", "step": 1})
    assert not td.checkpoint_path.exists() and not td.log_path.exists()

    monkeypatch.setenv("RANK", "0")
    td.update(adapters={"anchor": "adapters/anchor"})
    td.log({"step_name": "grpo", "step": 1})
    assert json.loads(td.checkpoint_path.read_text())["adapters"] == {"anchor": "adapters/anchor"}
    assert len(td.log_rows()) == 1

    monkeypatch.setenv("RANK", "3")  # another rank reads rank 0's file and does not overwrite it
    before = td.checkpoint_path.read_bytes()
    got = td.update(steps={"x": {"inputs": "h"}})
    assert got["adapters"] == {"anchor": "adapters/anchor"} and td.checkpoint_path.read_bytes() == before
