"""The installable package: data folders ship inside the wheel, a user folder overrides them by name.

The slow test builds an sdist from the tracked files (setuptools' PEP 517 hook, what
``python -m build --sdist --no-isolation`` calls), builds the wheel from that sdist with
``pip wheel --no-deps --no-build-isolation``, installs it non-editable into a fresh venv and runs the
console script from an unrelated folder. The fast tests check the search order in this checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from mascot_eval import paths
from mascot_eval.errors import UserError
from tests.cli_helpers import run_cli

REPO = Path(__file__).resolve().parent.parent
DATA_FOLDERS = {"tasks": "tasks", "judges": "judges", "baselines": "baselines", "paper": "results/paper"}


def _git_files(*pathspec: str) -> list[str]:
    """Tracked and untracked-but-not-ignored files (what a commit of this working tree would hold)."""
    r = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *pathspec],
        capture_output=True,
        text=True,
        check=True,
    )
    return sorted(f for f in r.stdout.split("\0") if f and (REPO / f).is_file())


def _shipped_data_files() -> dict[str, str]:
    """{path inside the wheel: path in the repository} for every data file that must ship."""
    out = {}
    for dest, src in DATA_FOLDERS.items():
        for f in _git_files(src):
            out[f"mascot_eval/_data/{dest}/{f[len(src) + 1 :]}"] = f
    return out


# ------------------------------------------------------------------------------------------ fast tests


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty user folder via MASCOT_HOME (and no default user folder)."""
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("MASCOT_HOME", str(h))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return h


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_checkout_reads_the_top_level_folders_and_no_data_copy_is_tracked(monkeypatch, tmp_path):
    monkeypatch.delenv("MASCOT_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    monkeypatch.chdir(tmp_path)  # the current directory plays no part
    assert paths.checkout_dir() == REPO
    assert [layer.source for layer in paths.layers()] == ["checkout"]
    assert paths.tasks_dir() == REPO / "tasks" and paths.judges_dir() == REPO / "judges"
    assert paths.baselines_dir() == REPO / "baselines" and paths.paper_dir() == REPO / "results" / "paper"
    assert paths.results_dir() == REPO / "results"
    assert paths.evaluate_modules_dir() == REPO / "mascot_eval" / "metrics" / "evaluate_modules"
    assert not _git_files("mascot_eval/_data")  # the data folders exist once in git


def test_user_folder_adds_and_overrides_by_name(home, capsys):
    demo = (REPO / "tasks" / "demo.yaml").read_text()
    _write(home / "tasks" / "mine.yaml", demo.replace("name: demo", "name: mine"))  # data path resolves to the shipped file
    _write(home / "tasks" / "demo.yaml", demo.replace("sample: {size: 8, seed: 13}", "sample: {size: 3, seed: 13}"))
    card = (REPO / "tasks" / "personas" / "anchor.yaml").read_text()
    _write(home / "tasks" / "personas" / "anchor.yaml", card.replace("name: Anchor", "name: Rock"))
    _write(home / "tasks" / "personas" / "groups.yaml", "duo:\n  members: [anchor, beacon]\n")
    _write(home / "judges" / "gpt.yaml", "name: gpt\nmodel: openai/gpt-4o-mini\n")
    _write(home / "judges" / "templates" / "system.j2", "You are a careful judge (user template).\n")
    _write(home / "judges" / "prices.yaml", "models:\n  openai/gpt-4o-mini: {input: 1.0, output: 2.0}\n")
    zs = (REPO / "baselines" / "zero-shot.yaml").read_text()
    _write(home / "baselines" / "zero-shot.yaml", zs.replace("description:", "description: (mine)", 1))
    _write(home / "baselines" / "templates" / "_history.j2", "history (user template)\n")
    tiny = (REPO / "baselines" / "train" / "tiny.yaml").read_text()
    _write(home / "baselines" / "train" / "mine.yaml", tiny.replace("name: tiny", "name: mine"))

    from mascot_eval.backends.prices import price_table
    from mascot_eval.data.loaders import load_contexts
    from mascot_eval.judges.score import Judge
    from mascot_eval.judges.specs import resolve_judge
    from mascot_eval.personas import get_group
    from mascot_eval.systems.config import load_system_config
    from mascot_eval.systems.templates import Templates
    from mascot_eval.taskspec import load_task, task_files

    files = task_files()
    assert files["demo"] == home / "tasks" / "demo.yaml" and files["mine"] == home / "tasks" / "mine.yaml"
    assert files["ed-positive"] == REPO / "tasks" / "ed-positive.yaml"
    assert len(load_contexts(load_task("mine"))) == 8 and len(load_contexts(load_task("demo"))) == 3
    _, cards = get_group("emotional")  # a shipped group over the user's card
    assert [c.name for c in cards] == ["Rock", "Catalyst", "Beacon"]
    assert [c.name for c in get_group("duo")[1]] == ["Rock", "Beacon"]
    gpt = resolve_judge("gpt")
    assert gpt.model == "openai/gpt-4o-mini" and paths.source_of(gpt.file) == "user"
    j = Judge(gpt)
    assert j.system_prompt().startswith("You are a careful judge (user template).")  # user template, shipped rubrics
    assert "emotion" in j.rubrics["agent"].criteria
    assert price_table().cost("openai/gpt-4o-mini", 1_000_000, 0) == 1.0
    assert load_system_config("zero-shot").description.startswith("(mine)")
    t = Templates(load_system_config("zero-shot").file)
    assert t.path("_history.j2") == home / "baselines" / "templates" / "_history.j2"
    assert t.path("agent_prompted.j2") == REPO / "baselines" / "templates" / "agent_prompted.j2"

    code, out, err = run_cli(["tasks", "list"], capsys)
    assert code == 0, err
    src = {ln.split()[0]: ln.split()[-1] for ln in out.splitlines()[1:-1]}
    assert src["demo"] == "user" and src["mine"] == "user" and src["esconv"] == "checkout"
    last = out.splitlines()[-1]
    assert last.startswith("data search order: user ") and str(home) in last and "(MASCOT_HOME)" in last
    assert last.index("user ") < last.index("checkout ")

    code, out, err = run_cli(["systems", "list"], capsys)
    assert code == 0, err
    rows = {ln.split()[0]: ln for ln in out.splitlines()}
    assert " user " in rows["zero-shot"] and " checkout " in rows["mascot"] and " builtin " in rows["prompted"]

    code, out, err = run_cli(["models", "list", "--json"], capsys)
    assert code == 0, err
    aliases = {a["name"]: a for a in json.loads(out)["aliases"]}
    assert aliases["gpt"]["source"] == "user" and aliases["gpt"]["spec"] == "openai/gpt-4o-mini"
    assert aliases["local"]["source"] == "checkout"

    from mascot_eval.cli.train import _config_file

    assert _config_file("mine") == home / "baselines" / "train" / "mine.yaml"
    assert _config_file("tiny") == REPO / "baselines" / "train" / "tiny.yaml"
    with pytest.raises(UserError, match="no preset of that name; presets: gpu-smoke, mine, paper, tiny"):
        _config_file("nope")


def test_default_user_folder_is_the_xdg_config_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("MASCOT_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert paths.user_layer() is None  # only used when it exists
    assert "no user folder (set MASCOT_HOME or create" in paths.describe()
    _write(tmp_path / "mascot-eval" / "judges" / "mine.yaml", "name: mine\nmodel: fake/mine\n")
    layer = paths.user_layer()
    assert layer is not None and layer.root == (tmp_path / "mascot-eval").resolve() and layer.why == "default user folder"
    from mascot_eval.judges.specs import load_judge_specs

    assert paths.source_of(load_judge_specs()["mine"].file) == "user"


def test_missing_mascot_home_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MASCOT_HOME", str(tmp_path / "nope"))
    code, out, err = run_cli(["tasks", "list"], capsys)
    assert code == 2 and not out
    assert (
        err.strip() == f"error: MASCOT_HOME={tmp_path / 'nope'}: no such folder; create it (with tasks/, judges/ "
        "or baselines/) or unset MASCOT_HOME"
    )


def test_installed_layout_without_a_checkout(tmp_path, monkeypatch):
    """Outside a checkout the package's own _data is read and results go to ./results; git is not asked."""
    monkeypatch.delenv("MASCOT_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    monkeypatch.setattr(paths, "checkout_dir", lambda: None)
    monkeypatch.chdir(tmp_path)
    assert paths.results_dir() == tmp_path / "results"
    from mascot_eval.runs.manifest import git_info

    assert git_info() is None
    monkeypatch.setattr(paths, "_package_data", lambda: None)
    with pytest.raises(UserError, match="the installed package has no data folders"):
        paths.tasks_dir()
    data = tmp_path / "_data"
    for d in ("tasks", "judges", "baselines", "paper"):
        (data / d).mkdir(parents=True)
    monkeypatch.setattr(paths, "_package_data", lambda: data)
    assert paths.tasks_dir() == data / "tasks" and paths.paper_dir() == data / "paper"
    assert paths.layers()[0].source == "package"


def test_package_data_from_a_zip_is_extracted(tmp_path):
    """A zip import (no real folder) is copied out once; the tree and bytes are preserved."""
    z = tmp_path / "pkg.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("mascot_eval/_data/tasks/demo.yaml", "name: demo\n")
        zf.writestr("mascot_eval/_data/judges/templates/a.j2", b"\xe2\x9c\x93 {{ x }}\n")
    dest = tmp_path / "out"
    paths._materialize(zipfile.Path(z, "mascot_eval/_data/"), dest)
    assert (dest / "tasks" / "demo.yaml").read_text() == "name: demo\n"
    assert (dest / "judges" / "templates" / "a.j2").read_bytes() == b"\xe2\x9c\x93 {{ x }}\n"


# ------------------------------------------------------------------------------------------ wheel test


def _run(args, *, cwd, env=None, timeout=300):
    r = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return r


def _ok(r):
    assert r.returncode == 0, f"{r.args}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(sdist, wheel) built from a copy of the tracked files: sdist first, the wheel from the unpacked sdist."""
    root = tmp_path_factory.mktemp("pkg")
    src = root / "src"
    for f in _git_files():
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, src / f)
    dist = root / "dist"
    hook = f"from setuptools import build_meta as b; print(b.build_sdist({str(dist)!r}))"
    sdist = dist / _ok(_run([sys.executable, "-c", hook], cwd=src)).stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tf:
        tf.extractall(root / "sdist", filter="data")
    (unpacked,) = (root / "sdist").iterdir()
    _ok(
        _run(
            [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "--no-index", "-w", dist],
            cwd=unpacked,
        )
    )
    (wheel,) = dist.glob("mascot_eval-*.whl")
    return sdist, wheel


@pytest.mark.slow
def test_sdist_and_wheel_hold_every_data_file(built):
    sdist, wheel = built
    expected = _shipped_data_files()
    with tarfile.open(sdist) as tf:
        top = tf.getnames()[0].split("/")[0]
        in_sdist = {n[len(top) + 1 :] for n in tf.getnames()}
    assert set(expected.values()) <= in_sdist, sorted(set(expected.values()) - in_sdist)
    assert {"setup.py", "MANIFEST.in", "pyproject.toml"} <= in_sdist
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        data = {n for n in names if n.startswith("mascot_eval/_data/") and not n.endswith("/")}
        assert data == set(expected), (sorted(set(expected) - data), sorted(data - set(expected)))
        for inside, repo_path in expected.items():
            assert zf.read(inside) == (REPO / repo_path).read_bytes(), inside
    # every file of the package (code, templates, evaluate modules, py.typed) is in the wheel
    package = set(_git_files("mascot_eval"))
    assert package <= names, sorted(package - names)
    assert not {n for n in names if n.split("/")[0] in ("tasks", "judges", "baselines", "results")}


@pytest.fixture(scope="module")
def venv(built, tmp_path_factory):
    """A fresh venv with the wheel installed non-editable; third-party packages come from this venv via a .pth."""
    _, wheel = built
    v = tmp_path_factory.mktemp("venv") / "v"
    _ok(_run([sys.executable, "-m", "venv", "--without-pip", v], cwd=v.parent))
    py = v / "bin" / "python"
    # install first, before the .pth exists, so pip never sees this venv's editable mascot-eval
    _ok(
        _run(
            [sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index", "--no-compile", "-q", wheel],
            cwd=v.parent,
        )
    )
    site = Path(_ok(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=v.parent)).stdout.strip())
    main_site = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_mascot_main_venv.pth").write_text("".join(f"{p}\n" for p in sorted(main_site)))
    return v, site


def _env(tmp: Path, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MASCOT_HOME", "MASCOT_DATA_DIR")}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        XDG_CONFIG_HOME=str(tmp / "xdg"),
        MASCOT_RESPONSE_CACHE_DIR=str(tmp / "response-cache"),
        **extra,
    )
    return env


def _chat_server():
    from tests.test_backends_http import _serve

    seen = []

    def reply(handler, body):
        seen.append(body)
        n = len(seen)
        return (
            200,
            {
                "id": f"c{n}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": f"That sounds hard; tell me more about it ({n})."},
                    }
                ],
                "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
            },
            {},
        )

    return _serve(reply), seen


@pytest.mark.slow
def test_installed_wheel_runs_from_an_unrelated_folder(venv, tmp_path):
    v, site = venv
    exe = v / "bin" / "mascot-eval"
    work = tmp_path / "work"
    work.mkdir()
    env = _env(tmp_path)

    r = _ok(
        _run(
            [
                v / "bin" / "python",
                "-c",
                "import mascot_eval, mascot_eval.paths as p; print(mascot_eval.__file__); "
                "print(p.shipped_layer().source, p.tasks_dir())",
            ],
            cwd=work,
            env=env,
        )
    )
    file, layer = r.stdout.strip().splitlines()
    assert Path(file).resolve() == (site / "mascot_eval" / "__init__.py").resolve()  # the wheel, not the checkout
    assert layer == f"package {site / 'mascot_eval' / '_data' / 'tasks'}"

    r = _ok(_run([exe, "tasks", "list"], cwd=work, env=env))
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["NAME", "SPLIT", "DOMAIN", "LOADER"] and lines[0].split()[-1] == "SOURCE"
    rows = {ln.split()[0]: ln.split() for ln in lines[1:-1]}
    assert {"demo", "ed-positive", "esconv", "qmsum-product"} <= set(rows) and all(r[-1] == "package" for r in rows.values())
    assert lines[-1].startswith(f"data search order: package {site / 'mascot_eval' / '_data'}")

    r = _ok(_run([exe, "systems", "list"], cwd=work, env=env))
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines()}
    assert {"mascot", "zero-shot", "single-agent", "multiagentesc"} <= set(rows) and " package " in rows["mascot"]

    r = _ok(_run([exe, "models", "list"], cwd=work, env=env))
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln.strip()}
    assert "openai/gpt-4o" in rows["gpt"] and " package " in rows["gpt"] and " package " in rows["local"]

    # a user folder adds a task and overrides a judge, also for the installed package
    home = tmp_path / "home"
    _write(home / "tasks" / "mine.yaml", (REPO / "tasks" / "demo.yaml").read_text().replace("name: demo", "name: mine"))
    _write(home / "judges" / "gpt.yaml", "name: gpt\nmodel: openai/gpt-4o-mini\n")
    r = _ok(_run([exe, "tasks", "list"], cwd=work, env={**env, "MASCOT_HOME": str(home)}))
    rows = {ln.split()[0]: ln.split() for ln in r.stdout.splitlines()[1:-1]}
    assert rows["mine"][-1] == "user" and rows["demo"][-1] == "package"
    r = _ok(_run([exe, "models", "list", "--json"], cwd=work, env={**env, "MASCOT_HOME": str(home)}))
    gpt = next(a for a in json.loads(r.stdout)["aliases"] if a["name"] == "gpt")
    assert gpt["source"] == "user" and gpt["spec"] == "openai/gpt-4o-mini"

    srv, seen = _chat_server()
    try:
        model = f"openai-compatible/x@http://127.0.0.1:{srv.server_address[1]}/v1"
        r = _run(
            [
                exe,
                "run",
                "--task",
                "demo",
                "--system",
                "zero-shot",
                "--model",
                model,
                "--judges",
                "none",
                "--metrics",
                "distinct_2",
                "--limit",
                "1",
                "--no-progress",
            ],
            cwd=work,
            env=env,
        )
    finally:
        srv.shutdown()
    _ok(r)
    (run_dir,) = (work / "results" / "runs").iterdir()  # default output: ./results/runs for an installed package
    transcripts = (run_dir / "transcripts.jsonl").read_text().splitlines()
    assert len(transcripts) == 1 and seen
    t = json.loads(transcripts[0])
    assert t["system"] == "zero-shot" and "tell me more about it" in json.dumps(t)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["provenance"]["git"] is None
    assert (run_dir / "summary.json").is_file() and (run_dir / "report.html").is_file()
    assert not (REPO / "results" / "runs" / run_dir.name).exists()
