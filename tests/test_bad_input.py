"""Hostile and broken input, through the real CLI: one table of cases over the eight surfaces.

Every case writes its bad input into a fresh sandbox (a copy of the project's tasks/, judges/ and
baselines/, a data dir, caches, a prepared run directory, a human-evaluation export), snapshots
every file there, runs `mascot-eval ...` in-process and checks:

* exit code 2, at most 3 output lines, no traceback;
* the message names the file or field at fault (``expect``) and quotes nothing from a file outside
  the allowed folders (the ``outside/`` secret never appears);
* every file in the sandbox is byte-identical afterwards (run dir, caches, data dir, project copy);
* no template payload ran (it would create ``MARKER``).

Only scripted fake models are used.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import tests.fakes  # noqa: F401  (registers the fake/ backend)
from mascot_eval.cli.main import main

REPO = Path(__file__).resolve().parent.parent
SECRET = "TOPSECRET-7f3a"

SURFACES = ("task", "persona", "judge", "system", "contexts", "cli", "rundir", "sheet")


# ------------------------------------------------------------------------------------------ the sandbox


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = root / "project"
        self.case = root / "case"
        self.outside = root / "outside"
        self.marker = root / "MARKER"
        self.data = root / "data"
        self.run = root / "run"
        self.human = root / "h"
        self.gen = root / "gen"

    # files
    def write(self, rel: str | Path, text: str | bytes, base: Path | None = None) -> Path:
        p = (base or self.case) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text, encoding="utf-8")
        return p

    def edit(self, rel: str, old: str, new: str, base: Path | None = None) -> Path:
        p = (base or self.project) / rel
        text = p.read_text(encoding="utf-8")
        assert old in text, (rel, old)
        p.write_text(text.replace(old, new, 1), encoding="utf-8")
        return p

    def payload(self, name: str) -> str:
        return PAYLOADS[name].replace("MARKER", str(self.marker))

    def task(self, extra: str = "", *, name: str = "t", body: str | None = None, rel: str | None = None) -> Path:
        text = body if body is not None else TASK.replace("name: t\n", f"name: {name}\n") + extra
        return self.write(rel or f"{name}.yaml", text)

    def system(self, body: str, *, name: str = "s", templates: dict[str, str] | None = None) -> Path:
        for fname, text in (templates or {}).items():
            self.write(Path("sys") / "templates" / fname, text)
        return self.write(Path("sys") / f"{name}.yaml", body)

    def generated(self) -> Path:
        """A run directory with one real transcript (scripted model), for run-dir compatibility cases."""
        if not self.gen.exists():
            t = self.task()
            code, out = invoke(
                [
                    "generate",
                    "--task",
                    str(t),
                    "--system",
                    "zero-shot",
                    "--model",
                    "fake/bad-input",
                    "--limit",
                    "1",
                    "--out",
                    str(self.gen),
                    "--no-progress",
                ]
            )
            assert code == 0, out
        return self.gen

    # checks
    def snapshot(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for p in sorted(self.root.rglob("*")):
            rel = str(p.relative_to(self.root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                st = p.stat()
                out[rel] = (
                    f"big:{st.st_size}:{st.st_mtime_ns}" if st.st_size > 1 << 20 else hashlib.sha256(p.read_bytes()).hexdigest()
                )
        return out


TASK = """\
name: t
split: in_domain
domain: emotional
source: {loader: demo, path: ctx.yaml}
sample: {size: 2, seed: 1}
personas: emotional
user: {profiles: [none]}
rounds: 1
judging: {judges: [fake/judge]}
metrics: [distinct_1]
"""

CONTEXTS_YAML = """\
contexts:
  - {id: c1, situation: "I failed my driving test again.", emotion: ashamed, turns: [{speaker: user, text: "I failed again."}]}
  - {id: c2, situation: "My friend forgot my birthday.", emotion: sad, turns: [{speaker: user, text: "Nobody called."}]}
"""

GOOD_JSONL = (
    '{"id": "c1", "situation": "I failed my driving test again."}\n{"id": "c2", "situation": "My friend forgot my birthday."}\n'
)

PAYLOADS = {
    "cycler": "{{ cycler.__init__.__globals__.os.popen('touch MARKER').read() }}",
    "self": "{{ self.__init__.__globals__.__builtins__.__import__('os').system('touch MARKER') }}",
    "mro": "{{ ''.__class__.__mro__[1].__subclasses__()[0]('touch MARKER') }}",
    "lipsum": "{{ lipsum.__globals__['os'].popen('touch MARKER').read() }}",
    "range": "{{ range.__init__.__globals__['__builtins__']['__import__']('os').system('touch MARKER') }}",
    "format": "{{ '{0.__class__.__mro__}'.format('') }}{{ ''|attr('__cla' ~ 'ss__') }}",
}
PAYLOAD_NAMES = tuple(PAYLOADS)

SYSTEM = "name: s\nkind: prompted\ntemplates: {agent: a.j2}\n"
AGENT_TEMPLATE = "[system]\n{{ agent.prompt }}\n[user]\n{{ user_text }}\n"


def _ed_subset(n_convs: int = 12) -> bytes:
    real = REPO.parent / "shared" / "data" / "empathetic_dialogues" / "test.csv"
    env = os.environ.get("MASCOT_DATA_DIR")
    if env:
        real = Path(env) / "empathetic_dialogues" / "test.csv"
    if not real.is_file():
        return b"conv_id,utterance_idx,context,prompt,speaker_idx,utterance,selfeval,tags\n"
    lines = real.read_bytes().split(b"\n")
    out, convs = [lines[0]], []
    for line in lines[1:]:
        conv = line.split(b",", 1)[0]
        if conv not in convs:
            if len(convs) == n_convs:
                break
            convs.append(conv)
        out.append(line)
    return b"\n".join(out) + b"\n"


_PREPARED: dict[str, Path] = {}


def _prepared(tmp_root: Path) -> Path:
    """A template sandbox built once per session and copied into each case."""
    if "root" in _PREPARED:
        return _PREPARED["root"]
    from mascot_eval.judges.human import export
    from tests.runfactory import build_run, noisy_scores

    root = tmp_root / "prepared"
    proj = root / "project"
    for d in ("tasks", "judges", "baselines"):
        shutil.copytree(REPO / d, proj / d)
    (root / "outside").mkdir(parents=True)
    for ext in ("txt", "jsonl", "yaml", "csv", "j2"):
        (root / "outside" / f"secret.{ext}").write_text(f"{SECRET}\n")
    (root / "data" / "empathetic_dialogues").mkdir(parents=True)
    (root / "data" / "empathetic_dialogues" / "test.csv").write_bytes(_ed_subset())
    (root / "cache").mkdir()
    (root / "rcache").mkdir()
    rd = build_run(
        root / "run",
        systems=["mascot", "zero-shot", "multiagentesc"],
        score=noisy_scores({"mascot": 0.5, "zero-shot": 0.0, "multiagentesc": -0.3}),
        n_contexts=3,
        judges=("gpt",),
        metric_value=lambda s, i: 0.1 * i,
    )
    export([rd], root / "h", seed=0)
    (root / "case").mkdir()
    (root / "case" / "ctx.yaml").write_text(CONTEXTS_YAML)
    _PREPARED["root"] = root
    return root


@pytest.fixture
def env(tmp_path, tmp_path_factory, monkeypatch) -> Env:
    src = _prepared(tmp_path_factory.getbasetemp())
    root = tmp_path / "sb"
    shutil.copytree(src, root, symlinks=True)
    monkeypatch.setenv(
        "MASCOT_HOME", str(root / "project")
    )  # the project copy is the user folder: it overrides the shipped files
    monkeypatch.setenv("MASCOT_DATA_DIR", str(root / "data"))
    monkeypatch.setenv("MASCOT_CACHE_DIR", str(root / "cache"))
    monkeypatch.setenv("MASCOT_RESPONSE_CACHE_DIR", str(root / "rcache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("MASCOT_OFFLINE", "1")
    monkeypatch.chdir(root / "case")
    return Env(root)


def invoke(args: list[str]) -> tuple[int | str, str]:
    """Run the CLI in-process; (exit code or 'traceback', stdout+stderr)."""
    import contextlib
    import io

    buf = io.StringIO()
    code: int | str = 0
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # anything but SystemExit escaping main() is a traceback for the user
            code = "traceback"
            buf.write(traceback.format_exc())
    return code, buf.getvalue()


# ------------------------------------------------------------------------------------------ the table


@dataclass
class Case:
    surface: str
    id: str
    setup: Callable[[Env], list[str]]
    expect: tuple[str, ...]  # each must appear in the output (file, field, ...); "{root}" = the sandbox
    xfail: str | None = None


CASES: list[Case] = []


def case(surface: str, id: str, *expect: str, xfail: str | None = None):
    assert surface in SURFACES

    def deco(fn: Callable[[Env], list[str]]) -> Callable[[Env], list[str]]:
        CASES.append(Case(surface, id, fn, expect, xfail))
        return fn

    return deco


def _tv(path: Path) -> list[str]:
    return ["tasks", "validate", str(path)]


def _check(*extra: str, task: str | None = None, system: str = "zero-shot", judges: str | None = "none") -> list[str]:
    args = ["check", "--system", system, "--model", "fake/bad-input"]
    if task is not None:
        args += ["--task", task]
    if judges is not None:
        args += ["--judges", judges]
    return args + list(extra)


def _run(env: Env, *extra: str, task: str | None = None, system: str = "zero-shot", judges: str = "none") -> list[str]:
    args = [
        "run",
        "--task",
        task or str(env.task()),
        "--system",
        system,
        "--model",
        "fake/bad-input",
        "--judges",
        judges,
        "--metrics",
        "none",
        "--no-report",
        "--no-progress",
        "--out",
        str(env.root / "newrun"),
    ]
    return args + list(extra)


def _gen(env: Env, *extra: str, task: str | None = None, system: str = "zero-shot") -> list[str]:
    return [
        "generate",
        "--task",
        task or str(env.task()),
        "--system",
        system,
        "--model",
        "fake/bad-input",
        "--no-progress",
        "--out",
        str(env.root / "newrun"),
        *extra,
    ]


# ---- 1. task files -----------------------------------------------------------------------------------


@case("task", "malformed-yaml", "t.yaml:7", "malformed YAML")
def _(e):
    return _tv(e.task(body=TASK.replace("personas: emotional", "personas: [emotional")))


@case("task", "duplicate-key", "t.yaml:11", "field 'rounds'", "duplicate key")
def _(e):
    return _tv(e.task("rounds: 3\n"))


@case("task", "duplicate-nested-key", "t.yaml:", "source.loader", "duplicate key")
def _(e):
    return _tv(e.task(body=TASK.replace("source: {loader: demo,", "source: {loader: demo, loader: jsonl,")))


@case("task", "rounds-true", "t.yaml:8", "field 'rounds'", "boolean")
def _(e):
    return _tv(e.task(body=TASK.replace("rounds: 1", "rounds: true")))


@case("task", "rounds-string", "t.yaml:8", "field 'rounds'", "string")
def _(e):
    return _tv(e.task(body=TASK.replace("rounds: 1", 'rounds: "3"')))


@case("task", "rounds-float", "t.yaml:8", "field 'rounds'")
def _(e):
    return _tv(e.task(body=TASK.replace("rounds: 1", "rounds: 2.5")))


@case("task", "sample-size-true", "t.yaml:5", "sample.size")
def _(e):
    return _tv(e.task(body=TASK.replace("size: 2", "size: true")))


@case("task", "sample-seed-float", "t.yaml:5", "sample.seed")
def _(e):
    return _tv(e.task(body=TASK.replace("seed: 1", "seed: 1.5")))


@case("task", "sample-size-zero", "t.yaml:5", "sample.size")
def _(e):
    return _tv(e.task(body=TASK.replace("size: 2", "size: 0")))


@case("task", "unknown-field", "t.yaml:11", "field 'temprature'", "unknown field")
def _(e):
    return _tv(e.task("temprature: 0.2\n"))


@case("task", "name-mismatch", "other.yaml", "field 'name'")
def _(e):
    return _tv(e.task(body=TASK, rel="other.yaml"))


@case("task", "not-a-mapping", "t.yaml", "mapping")
def _(e):
    return _tv(e.task(body="- name: t\n- split: ood\n"))


@case("task", "empty-file", "t.yaml", "mapping")
def _(e):
    return _tv(e.task(body=""))


@case("task", "latin-1", "t.yaml", "UTF-8")
def _(e):
    return _tv(e.write("t.yaml", TASK.replace("demo", "démo").encode("latin-1")))


@case("task", "over-size-limit", "t.yaml", "limit")
def _(e):
    return _tv(e.write("t.yaml", TASK + ("# padding padding padding padding\n" * 12000)))


@case("task", "alias-bomb", "t.yaml", "aliases")
def _(e):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    return _tv(e.task(body=TASK + "\n".join(lines).replace("a", "z") + "\n"))


@case("task", "path-etc-passwd", "t.yaml:4", "source.path", "absolute")
def _(e):
    return _tv(
        e.task(
            body=TASK.replace(
                "source: {loader: demo, path: ctx.yaml}", "source: {loader: empathetic_dialogues, path: /etc/passwd}"
            )
        )
    )


@case("task", "path-dotdot", "t.yaml:4", "source.path", "..")
def _(e):
    return _tv(e.task(body=TASK.replace("path: ctx.yaml", "path: ../../../../../../etc/passwd")))


@case("task", "dataset-path-dotdot", "t.yaml:4", "source.path")
def _(e):
    return _tv(
        e.task(
            body=TASK.replace("source: {loader: demo, path: ctx.yaml}", "source: {loader: esconv, path: ../outside/secret.txt}")
        )
    )


@case("task", "jsonl-absolute-outside", "t.yaml:4", "source.path", "absolute")
def _(e):
    return _tv(e.task(body=TASK.replace("loader: demo, path: ctx.yaml", f"loader: jsonl, path: {e.outside / 'secret.jsonl'}")))


@case("task", "jsonl-symlink-outside", "source.path", "link")
def _(e):
    (e.case / "link.jsonl").symlink_to(e.outside / "secret.jsonl")
    return _tv(e.task(body=TASK.replace("loader: demo, path: ctx.yaml", "loader: jsonl, path: link.jsonl")))


@case("task", "demo-symlinked-folder", "source.path", "link")
def _(e):
    (e.case / "d").symlink_to(e.outside)
    return _tv(e.task(body=TASK.replace("path: ctx.yaml", "path: d/secret.yaml")))


@case("task", "valence-table-absolute", "source.options.valence_table", "absolute")
def _(e):
    return _tv(
        e.task(
            body=TASK.replace(
                "source: {loader: demo, path: ctx.yaml}",
                "source: {loader: empathetic_dialogues, options: {valence_table: /etc/passwd}}",
            )
        )
    )


@case("task", "valence-table-dotdot", "source.options.valence_table")
def _(e):
    return _tv(
        e.task(
            body=TASK.replace(
                "source: {loader: demo, path: ctx.yaml}",
                "source: {loader: empathetic_dialogues, options: {valence_table: ../outside/secret.csv}}",
            )
        )
    )


@case("task", "qmsum-split-escape", "source.path")
def _(e):
    return _tv(
        e.task(
            body=TASK.replace(
                "source: {loader: demo, path: ctx.yaml}", "source: {loader: qmsum, options: {split: ../../../../outside/secret}}"
            ).replace("domain: emotional", "domain: workplace")
        )
    )


@case("task", "user-template-dotdot", "t.yaml:7", "user.template", "..")
def _(e):
    return _tv(e.task(body=TASK.replace("user: {profiles: [none]}", "user: {profiles: [none], template: ../../../etc/passwd}")))


@case("task", "user-template-absolute", "t.yaml:7", "user.template", "absolute")
def _(e):
    return _tv(e.task(body=TASK.replace("user: {profiles: [none]}", "user: {profiles: [none], template: /etc/passwd}")))


@case("task", "unknown-persona-group", "t.yaml", "personas", "nobody")
def _(e):
    return _tv(e.task(body=TASK.replace("personas: emotional", "personas: nobody")))


@case("task", "bad-profile", "t.yaml", "user.profiles", "INTX")
def _(e):
    return _tv(e.task(body=TASK.replace("profiles: [none]", "profiles: [INTX]")))


@case("task", "unknown-judge", "t.yaml", "judging.judges", "lokal")
def _(e):
    return _tv(e.task(body=TASK.replace("judges: [fake/judge]", "judges: [lokal]")))


@case("task", "task-is-a-folder", "t.yaml", "folder")
def _(e):
    (e.case / "t.yaml").mkdir()
    return _check(task=str(e.case / "t.yaml"))


@case("task", "two-files-same-name", "--task", "both task 't'")
def _(e):
    return _check(task=f"{e.task()},{e.task(body=TASK, rel='sub/t.yaml')}")


@case("task", "check-rounds-true", "t.yaml:8", "field 'rounds'")
def _(e):
    return _check(task=str(e.task(body=TASK.replace("rounds: 1", "rounds: true"))))


@case("task", "run-duplicate-key", "t.yaml:11", "duplicate key")
def _(e):
    return _run(e, task=str(e.task("rounds: 3\n")))


@case("task", "run-path-etc-passwd", "t.yaml:4", "source.path")
def _(e):
    return _run(
        e,
        task=str(
            e.task(
                body=TASK.replace(
                    "source: {loader: demo, path: ctx.yaml}", "source: {loader: empathetic_dialogues, path: /etc/passwd}"
                )
            )
        ),
    )


@case("task", "run-missing-context-file", "nope.yaml", "source.path")
def _(e):
    return _run(e, task=str(e.task(body=TASK.replace("path: ctx.yaml", "path: nope.yaml"))))


@case("task", "generate-filter-matches-nothing", "t.yaml", "source.filters")
def _(e):
    return _gen(
        e,
        task=str(
            e.task(
                body=TASK.replace(
                    "source: {loader: demo, path: ctx.yaml}", "source: {loader: demo, path: ctx.yaml, filters: {emotion: joyful}}"
                )
            )
        ),
    )


# ---- 2. persona cards and groups -----------------------------------------------------------------------

GROUPS = "tasks/personas/groups.yaml"


@case("persona", "duplicate-member", "groups.yaml:", "anchor", "twice")
def _(e):
    e.edit(GROUPS, "members: [anchor, catalyst, beacon]", "members: [anchor, catalyst, anchor]")
    return ["tasks", "validate", "demo"]


@case("persona", "card-named-user", "anchor.yaml:", "field 'name'", "reserved")
def _(e):
    e.edit("tasks/personas/anchor.yaml", "name: Anchor", "name: user")
    return ["tasks", "validate", "demo"]


@case("persona", "card-named-User-space", "anchor.yaml:", "field 'name'", "reserved")
def _(e):
    e.edit("tasks/personas/anchor.yaml", "name: Anchor", "name: 'User '")
    return _check(task="demo")


@case("persona", "two-cards-same-name", "catalyst.yaml", "field 'name'", "anchor.yaml")
def _(e):
    e.edit("tasks/personas/catalyst.yaml", "name: Catalyst", "name: anchor")
    return ["tasks", "validate", "demo"]


@case("persona", "card-id-mismatch", "beacon.yaml", "field 'id'")
def _(e):
    e.edit("tasks/personas/beacon.yaml", "id: beacon", "id: beacon2")
    return ["tasks", "validate", "demo"]


@case("persona", "card-three-examples", "anchor.yaml", "field 'examples'")
def _(e):
    e.edit("tasks/personas/anchor.yaml", "examples:\n", "examples:\n  - a third example line\n")
    return ["tasks", "validate", "demo"]


@case("persona", "card-duplicate-key", "anchor.yaml:", "field 'role'", "duplicate key")
def _(e):
    p = e.project / "tasks/personas/anchor.yaml"
    p.write_text(p.read_text() + "role: another role\n")
    return ["tasks", "validate", "demo"]


@case("persona", "card-traits-bool", "anchor.yaml:4", "field 'traits'")
def _(e):
    e.edit("tasks/personas/anchor.yaml", "traits:\n  - warm and steady\n", "traits: true\nold_traits:\n  - warm and steady\n")
    return ["tasks", "validate", "demo"]


@case("persona", "group-names-missing-card", "groups.yaml:", "nobody")
def _(e):
    e.edit(GROUPS, "members: [anchor, catalyst, beacon]", "members: [anchor, nobody]")
    return ["tasks", "validate", "demo"]


@case("persona", "groups-not-a-mapping", "groups.yaml", "mapping")
def _(e):
    (e.project / GROUPS).write_text("- emotional\n- workplace\n")
    return _check(task="demo")


@case("persona", "groups-duplicate-group", "groups.yaml:", "field 'full'", "duplicate key")
def _(e):
    p = e.project / GROUPS
    p.write_text(p.read_text() + "full:\n  members: [anchor]\n")
    return ["tasks", "validate", "demo"]


@case("persona", "group-members-empty", "groups.yaml", "members")
def _(e):
    e.edit(GROUPS, "members: [anchor, catalyst, beacon]", "members: []")
    return ["tasks", "validate", "demo"]


@case("persona", "card-latin-1", "beacon.yaml", "UTF-8")
def _(e):
    p = e.project / "tasks/personas/beacon.yaml"
    p.write_bytes(p.read_text().replace("role:", "note: caf\u00e9\nrole:", 1).encode("latin-1"))
    return ["tasks", "validate", "demo"]


@case("persona", "card-over-size-limit", "beacon.yaml", "limit")
def _(e):
    p = e.project / "tasks/personas/beacon.yaml"
    p.write_text(p.read_text() + "# pad pad pad pad pad pad pad pad pad pad pad pad pad pad pad\n" * 5000)
    return ["tasks", "validate", "demo"]


@case("persona", "system-card-named-user", "s.yaml", "field 'name'", "reserved")
def _(e):
    return _check(
        task="demo",
        system=str(
            e.system(
                "name: s\nkind: prompted\ncard: {id: me, name: User, role: helper, traits: [kind], speaking_style: plain,\n"
                "  never: [lie], examples: [hi, hello]}\n"
            )
        ),
    )


@case("persona", "run-duplicate-member", "groups.yaml", "twice")
def _(e):
    e.edit(GROUPS, "members: [anchor, catalyst, beacon]", "members: [anchor, catalyst, anchor]")
    return _run(e)


# ---- 3. judge specs and templates ----------------------------------------------------------------------


def _judge_cmd(e: Env, judge: str = "evil") -> list[str]:
    return ["judge", str(e.run), "--judges", judge, "--no-progress"]


def _evil_judge(e: Env, extra: str = "", body: str | None = None) -> None:
    e.write("evil.yaml", body if body is not None else "name: evil\nmodel: fake/evil\n" + extra, base=e.project / "judges")


for _p in PAYLOAD_NAMES:

    @case("judge", f"payload-agent-template-{_p}", "agent.j2", "sandbox")
    def _(e, _p=_p):
        e.write("agent.j2", e.payload(_p), base=e.project / "judges" / "templates")
        return _judge_cmd(e, "fake/j")


@case("judge", "payload-system-template-check", "system.j2", "sandbox")
def _(e):
    e.write("system.j2", e.payload("cycler"), base=e.project / "judges" / "templates")
    return _check(task=str(e.task()), judges="fake/j")


@case("judge", "payload-threeway-template-compare", "threeway.j2", "sandbox")
def _(e):
    e.write("threeway.j2", e.payload("lipsum"), base=e.project / "judges" / "templates")
    return ["compare", str(e.run), "--judges", "fake/j", "--no-progress"]


@case("judge", "payload-partial-include", "_rubric.j2", "sandbox")
def _(e):
    e.write("_rubric.j2", e.payload("self"), base=e.project / "judges" / "templates")
    return _judge_cmd(e, "fake/j")


@case("judge", "payload-human-form", "human_form.html.j2", "sandbox")
def _(e):
    e.write("human_form.html.j2", e.payload("cycler"), base=e.project / "judges" / "templates")
    return ["human", "export", str(e.run), "--out", str(e.root / "h2")]


@case("judge", "template-name-dotdot", "evil.yaml:", "templates.agent", "..")
def _(e):
    _evil_judge(e, "templates: {agent: ../../outside/secret.j2}\n")
    return _judge_cmd(e)


@case("judge", "template-name-absolute", "evil.yaml:", "templates.agent", "absolute")
def _(e):
    _evil_judge(e, f"templates: {{agent: {e.outside / 'secret.j2'}}}\n")
    return _judge_cmd(e)


@case("judge", "template-symlink-escape", "link.j2", "outside")
def _(e):
    (e.project / "judges" / "templates" / "link.j2").symlink_to(e.outside / "secret.j2")
    _evil_judge(e, "templates: {agent: link.j2}\n")
    return _judge_cmd(e)


@case("judge", "include-dotdot", "agent.j2", "..")
def _(e):
    e.write("agent.j2", "{% include '../../outside/secret.j2' %}", base=e.project / "judges" / "templates")
    return _judge_cmd(e, "fake/j")


@case("judge", "template-missing", "nope.j2", "not found")
def _(e):
    _evil_judge(e, "templates: {agent: nope.j2}\n")
    return _judge_cmd(e)


@case("judge", "template-syntax-error", "bad.j2:1", "syntax")
def _(e):
    e.write("bad.j2", "{% if %}", base=e.project / "judges" / "templates")
    _evil_judge(e, "templates: {group: bad.j2}\n")
    return _judge_cmd(e)


@case("judge", "template-undefined-variable", "undef.j2", "no_such_thing")
def _(e):
    e.write("undef.j2", "{{ no_such_thing.x }}", base=e.project / "judges" / "templates")
    _evil_judge(e, "templates: {reask: undef.j2}\n")
    return _judge_cmd(e)


@case("judge", "template-expression-error", "div.j2", "ZeroDivisionError")
def _(e):
    e.write("div.j2", "{{ 1 / 0 }}", base=e.project / "judges" / "templates")
    _evil_judge(e, "templates: {threeway: div.j2}\n")
    return _judge_cmd(e)


@case("judge", "template-huge-repeat", "big.j2", "sandbox")
def _(e):
    e.write("big.j2", "{{ 'x' * 1000000000 }}", base=e.project / "judges" / "templates")
    _evil_judge(e, "templates: {system: big.j2}\n")
    return _judge_cmd(e)


@case("judge", "rubric-dotdot", "evil.yaml:", "rubrics", "..")
def _(e):
    _evil_judge(e, "rubrics: {agent: ../../outside/secret.yaml, group: group.yaml}\n")
    return _judge_cmd(e)


@case("judge", "rubric-absolute", "evil.yaml:", "rubrics", "absolute")
def _(e):
    _evil_judge(e, "rubrics: {agent: /etc/passwd, group: group.yaml}\n")
    return _judge_cmd(e)


@case("judge", "rubric-symlink-escape", "rubrics.agent", "link")
def _(e):
    (e.project / "judges" / "rubrics" / "link.yaml").symlink_to(e.outside / "secret.yaml")
    _evil_judge(e, "rubrics: {agent: link.yaml, group: group.yaml}\n")
    return _judge_cmd(e)


@case("judge", "rubric-missing", "nope.yaml", "rubric file not found")
def _(e):
    _evil_judge(e, "rubrics: {agent: nope.yaml, group: group.yaml}\n")
    return _judge_cmd(e)


@case("judge", "rubric-wrong-level", "group.yaml", "level")
def _(e):
    _evil_judge(e, "rubrics: {agent: group.yaml, group: group.yaml}\n")
    return _judge_cmd(e)


@case("judge", "rubric-anchor-missing", "agent.yaml", "anchors")
def _(e):
    e.edit("judges/rubrics/agent.yaml", "      5: Vivid", "      6: Vivid")
    return _judge_cmd(e, "fake/j")


@case("judge", "rubric-duplicate-key", "agent.yaml:", "duplicate key")
def _(e):
    e.edit("judges/rubrics/agent.yaml", "level: agent", "level: agent\nlevel: group")
    return _judge_cmd(e, "fake/j")


@case("judge", "spec-duplicate-key", "evil.yaml:3", "field 'model'", "duplicate key")
def _(e):
    _evil_judge(e, "model: fake/other\n")
    return _judge_cmd(e)


@case("judge", "spec-logprob-api-model", "evil.yaml", "field 'mode'")
def _(e):
    _evil_judge(e, body="name: evil\nmodel: openai/gpt-4o\nmode: logprob\n")
    return _judge_cmd(e)


@case("judge", "spec-temperature-true", "evil.yaml:3", "decoding.temperature", "boolean")
def _(e):
    _evil_judge(e, "decoding: {temperature: true}\n")
    return _judge_cmd(e)


@case("judge", "spec-reask-true", "evil.yaml:3", "field 'reask'", "boolean")
def _(e):
    _evil_judge(e, "reask: true\n")
    return _judge_cmd(e)


@case("judge", "spec-max-tokens-string", "evil.yaml:3", "decoding.max_tokens")
def _(e):
    _evil_judge(e, 'decoding: {max_tokens: "400"}\n')
    return _judge_cmd(e)


@case("judge", "spec-unknown-field", "evil.yaml:3", "field 'temprature'")
def _(e):
    _evil_judge(e, "temprature: 0\n")
    return _judge_cmd(e)


@case("judge", "spec-unknown-backend", "evil.yaml", "field 'model'", "nope")
def _(e):
    _evil_judge(e, body="name: evil\nmodel: nope/x\n")
    return _judge_cmd(e)


@case("judge", "spec-name-mismatch", "evil.yaml", "field 'name'")
def _(e):
    _evil_judge(e, body="name: devil\nmodel: fake/evil\n")
    return _judge_cmd(e)


@case("judge", "ad-hoc-spec-unknown-backend", "nope/x", "backend")
def _(e):
    return _judge_cmd(e, "nope/x")


@case("judge", "run-judge-payload", "agent.j2", "sandbox")
def _(e):
    e.write("agent.j2", e.payload("cycler"), base=e.project / "judges" / "templates")
    return _run(e, judges="fake/j")


# ---- 4. system configs and templates -------------------------------------------------------------------

for _p in PAYLOAD_NAMES:

    @case("system", f"payload-agent-template-{_p}", "a.j2", "sandbox")
    def _(e, _p=_p):
        return _check(task=str(e.task()), system=str(e.system(SYSTEM, templates={"a.j2": "[user]\n" + e.payload(_p)})))


@case("system", "payload-user-simulator-template", "user_simulator.j2", "sandbox")
def _(e):
    e.write("user_simulator.j2", e.payload("cycler"), base=e.project / "baselines" / "templates")
    return _check(task=str(e.task()))


@case("system", "payload-director-template", "director.j2", "sandbox")
def _(e):
    e.write("director.j2", e.payload("lipsum"), base=e.project / "baselines" / "templates")
    return _check(task=str(e.task()), system="mascot")


@case("system", "payload-shared-partial", "_history.j2", "sandbox")
def _(e):
    e.write("_history.j2", e.payload("mro"), base=e.project / "baselines" / "templates")
    return _check(task=str(e.task()))


@case("system", "generate-payload", "a.j2", "sandbox")
def _(e):
    return _gen(e, system=str(e.system(SYSTEM, templates={"a.j2": "[user]\n" + e.payload("cycler")})))


@case("system", "run-payload", "a.j2", "sandbox")
def _(e):
    return _run(e, system=str(e.system(SYSTEM, templates={"a.j2": "[user]\n" + e.payload("cycler")})))


@case("system", "template-name-dotdot", "s.yaml:3", "templates.agent", "..")
def _(e):
    return _check(task=str(e.task()), system=str(e.system(SYSTEM.replace("a.j2", "../../outside/secret.j2"))))


@case("system", "template-name-absolute", "s.yaml:3", "templates.agent", "absolute")
def _(e):
    return _check(task=str(e.task()), system=str(e.system(SYSTEM.replace("a.j2", str(e.outside / "secret.j2")))))


@case("system", "template-symlink-escape", "templates.agent", "outside")
def _(e):
    cfg = e.system(SYSTEM)
    (cfg.parent / "templates").mkdir(exist_ok=True)
    (cfg.parent / "templates" / "a.j2").symlink_to(e.outside / "secret.j2")
    return _check(task=str(e.task()), system=str(cfg))


@case("system", "include-escape", "a.j2", "..")
def _(e):
    return _check(
        task=str(e.task()), system=str(e.system(SYSTEM, templates={"a.j2": "{% include '../../../outside/secret.j2' %}"}))
    )


@case("system", "run-template-name-dotdot", "s.yaml:3", "templates.agent")
def _(e):
    return _run(e, system=str(e.system(SYSTEM.replace("a.j2", "../../outside/secret.j2"))))


@case("system", "template-missing", "s.yaml:3", "templates.agent", "not found")
def _(e):
    return _check(task=str(e.task()), system=str(e.system(SYSTEM)))


@case("system", "template-syntax-error", "a.j2:2", "syntax")
def _(e):
    return _check(task=str(e.task()), system=str(e.system(SYSTEM, templates={"a.j2": "[user]\n{% for %}"})))


@case("system", "generate-template-syntax-error", "a.j2:2", "syntax")
def _(e):
    return _gen(e, system=str(e.system(SYSTEM, templates={"a.j2": "[user]\n{% for %}"})))


@case("system", "template-undefined-variable", "a.j2", "no_such_var")
def _(e):
    return _check(task=str(e.task()), system=str(e.system(SYSTEM, templates={"a.j2": "[user]\n{{ no_such_var }}"})))


@case("system", "generate-template-undefined-variable", "a.j2", "no_such_var")
def _(e):
    return _gen(e, system=str(e.system(SYSTEM, templates={"a.j2": "[user]\n{{ no_such_var }}"})))


@case("system", "template-renders-nothing", "a.j2", "no user message")
def _(e):
    return _check(task=str(e.task()), system=str(e.system(SYSTEM, templates={"a.j2": "{# nothing #}"})))


@case("system", "template-over-size-limit", "a.j2", "limit")
def _(e):
    return _check(task=str(e.task()), system=str(e.system(SYSTEM, templates={"a.j2": "[user]\n" + "x" * 300_000})))


@case("system", "template-latin-1", "a.j2", "UTF-8")
def _(e):
    cfg = e.system(SYSTEM)
    e.write(cfg.parent / "templates" / "a.j2", "[user]\ncaf\u00e9".encode("latin-1"))
    return _check(task=str(e.task()), system=str(cfg))


@case("system", "unknown-template-role", "s.yaml:3", "templates", "directorr")
def _(e):
    return _check(
        task=str(e.task()),
        system=str(e.system(SYSTEM.replace("agent: a.j2", "agent: a.j2, directorr: d.j2"), templates={"a.j2": AGENT_TEMPLATE})),
    )


@case("system", "options-unknown-field", "s.yaml:4", "options.reasonning")
def _(e):
    return _check(
        task=str(e.task()), system=str(e.system(SYSTEM + "options: {reasonning: true}\n", templates={"a.j2": AGENT_TEMPLATE}))
    )


@case("system", "options-n-examples-true", "s.yaml:4", "options.n_examples", "boolean")
def _(e):
    return _check(
        task=str(e.task()), system=str(e.system(SYSTEM + "options: {n_examples: true}\n", templates={"a.j2": AGENT_TEMPLATE}))
    )


@case("system", "run-options-reasoning-string", "s.yaml:4", "options.reasoning")
def _(e):
    return _run(e, system=str(e.system(SYSTEM + "options: {reasoning: 'yes'}\n", templates={"a.j2": AGENT_TEMPLATE})))


@case("system", "history-turns-true", "s.yaml:4", "history_turns", "boolean")
def _(e):
    return _check(task=str(e.task()), system=str(e.system(SYSTEM + "history_turns: true\n", templates={"a.j2": AGENT_TEMPLATE})))


@case("system", "decoding-max-tokens-string", "s.yaml:4", "decoding.max_tokens")
def _(e):
    return _check(
        task=str(e.task()), system=str(e.system(SYSTEM + 'decoding: {max_tokens: "80"}\n', templates={"a.j2": AGENT_TEMPLATE}))
    )


@case("system", "models-unknown-backend", "s.yaml:4", "models.agents", "nope")
def _(e):
    return _check(
        task=str(e.task()), system=str(e.system(SYSTEM + "models: {agents: nope/x}\n", templates={"a.j2": AGENT_TEMPLATE}))
    )


@case("system", "run-models-unknown-backend", "s.yaml:4", "models.agents")
def _(e):
    return _run(e, system=str(e.system(SYSTEM + "models: {agents: nope/x}\n", templates={"a.j2": AGENT_TEMPLATE})))


@case("system", "models-malformed-spec", "s.yaml:4", "models.director", "embedded")
def _(e):
    return _check(
        task=str(e.task()),
        system=str(e.system(SYSTEM + "models: {director: embedded/foo}\n", templates={"a.j2": AGENT_TEMPLATE})),
    )


@case("system", "models-unknown-role", "s.yaml", "models.agnets", "role")
def _(e):
    return _check(
        task=str(e.task()), system=str(e.system(SYSTEM + "models: {agnets: fake/x}\n", templates={"a.j2": AGENT_TEMPLATE}))
    )


@case("system", "unknown-kind", "s.yaml:2", "field 'kind'", "promted")
def _(e):
    return _check(task=str(e.task()), system=str(e.system(SYSTEM.replace("kind: prompted", "kind: promted"))))


@case("system", "name-mismatch", "s.yaml", "field 'name'")
def _(e):
    return _check(task=str(e.task()), system=str(e.system(SYSTEM.replace("name: s", "name: other"))))


@case("system", "duplicate-key", "s.yaml:4", "field 'kind'", "duplicate key")
def _(e):
    return _check(task=str(e.task()), system=str(e.system(SYSTEM + "kind: mascot\n")))


@case("system", "examples-file-absolute", "s.yaml", "options.examples_file", "absolute")
def _(e):
    return _check(
        task=str(e.task()),
        system=str(e.system(SYSTEM + "options: {examples_file: /etc/passwd}\n", templates={"a.j2": AGENT_TEMPLATE})),
    )


@case("system", "examples-file-dotdot", "s.yaml", "options.examples_file")
def _(e):
    return _check(
        task=str(e.task()),
        system=str(
            e.system(SYSTEM + "options: {examples_file: ../../outside/secret.yaml}\n", templates={"a.j2": AGENT_TEMPLATE})
        ),
    )


@case("system", "examples-file-symlink", "s.yaml", "options.examples_file", "link")
def _(e):
    cfg = e.system(SYSTEM + "options: {examples_file: ex.yaml}\n", templates={"a.j2": AGENT_TEMPLATE})
    (cfg.parent / "ex.yaml").symlink_to(e.outside / "secret.yaml")
    return _check(task=str(e.task()), system=str(cfg))


@case("system", "examples-file-wrong-shape", "ex.yaml", "user")
def _(e):
    cfg = e.system(SYSTEM + "options: {examples_file: ex.yaml}\n", templates={"a.j2": AGENT_TEMPLATE})
    e.write(cfg.parent / "ex.yaml", "- {user: hi}\n")
    return _check(task=str(e.task()), system=str(cfg))


@case("system", "config-over-size-limit", "s.yaml", "limit")
def _(e):
    return _check(task=str(e.task()), system=str(e.system(SYSTEM + "# pad pad pad pad pad pad pad pad\n" * 9000)))


@case("system", "self-consistency-greedy", "s.yaml", "temperature")
def _(e):
    return _check(task=str(e.task()), system=str(e.system("name: s\nkind: self-consistency\ndecoding: {temperature: 0}\n")))


@case("system", "mascot-min-above-max", "s.yaml", "min_speakers")
def _(e):
    return _check(
        task=str(e.task()), system=str(e.system("name: s\nkind: mascot\noptions: {min_speakers: 9, max_speakers: 2}\n"))
    )


@case("system", "system-file-missing", "nope.yaml", "not found")
def _(e):
    return _check(task=str(e.task()), system=str(e.case / "nope.yaml"))


# ---- 5. user JSONL contexts ----------------------------------------------------------------------------


def _jsonl_task(e: Env, content: str | bytes | None, *, via_check: bool = False) -> list[str]:
    if content is not None:
        e.write("ctx.jsonl", content)
    t = e.task(body=TASK.replace("loader: demo, path: ctx.yaml", "loader: jsonl, path: ctx.jsonl"))
    return _check(task=str(t)) if via_check else _tv(t)


@case("contexts", "latin-1", "ctx.jsonl:3", "UTF-8")
def _(e):
    return _jsonl_task(e, (GOOD_JSONL + '{"id": "c3", "situation": "caf\u00e9"}\n').encode("latin-1"))


@case("contexts", "latin-1-check", "ctx.jsonl", "UTF-8")
def _(e):
    return _jsonl_task(e, '{"id": "c1", "situation": "d\u00e9j\u00e0 vu"}\n'.encode("latin-1"), via_check=True)


@case("contexts", "line-not-an-object", "ctx.jsonl:2", "object")
def _(e):
    return _jsonl_task(e, GOOD_JSONL.splitlines()[0] + '\n["c2", "x"]\n')


@case("contexts", "unknown-key", "ctx.jsonl:1", "field 'mood'")
def _(e):
    return _jsonl_task(e, '{"id": "c1", "situation": "x", "mood": 1}\n')


@case("contexts", "duplicate-id", "ctx.jsonl:2", "twice")
def _(e):
    return _jsonl_task(e, '{"id": "c1", "situation": "x"}\n{"id": "c1", "situation": "y"}\n')


@case("contexts", "missing-id", "ctx.jsonl:1", "field 'id'")
def _(e):
    return _jsonl_task(e, '{"situation": "x"}\n')


@case("contexts", "id-is-a-number", "ctx.jsonl:1", "field 'id'")
def _(e):
    return _jsonl_task(e, '{"id": 7, "situation": "x"}\n')


@case("contexts", "situation-is-a-number", "ctx.jsonl:1", "field 'situation'")
def _(e):
    return _jsonl_task(e, '{"id": "c1", "situation": 5}\n')


@case("contexts", "turns-not-a-list", "ctx.jsonl:1", "field 'turns'")
def _(e):
    return _jsonl_task(e, '{"id": "c1", "situation": "x", "turns": "hello"}\n')


@case("contexts", "empty-file", "ctx.jsonl", "empty")
def _(e):
    return _jsonl_task(e, "")


@case("contexts", "only-blank-lines", "ctx.jsonl", "empty")
def _(e):
    return _jsonl_task(e, "\n\n  \n", via_check=True)


@case("contexts", "truncated-last-line", "ctx.jsonl:3", "cut off")
def _(e):
    return _jsonl_task(e, GOOD_JSONL + '{"id": "c3", "situ')


@case("contexts", "invalid-json-mid-file", "ctx.jsonl:2", "not valid JSON")
def _(e):
    return _jsonl_task(e, '{"id": "c1", "situation": "x"}\n{id: c2}\n{"id": "c3", "situation": "z"}\n')


@case("contexts", "over-size-limit", "ctx.jsonl", "limit")
def _(e):
    with open(e.case / "ctx.jsonl", "wb") as fh:
        fh.truncate(65 * 1024 * 1024)  # sparse: refused by size before a byte is read
    return _jsonl_task(e, None)


@case("contexts", "is-a-folder", "ctx.jsonl", "folder")
def _(e):
    (e.case / "ctx.jsonl").mkdir()
    (e.case / "ctx.jsonl" / "x").write_text("{}")
    return _jsonl_task(e, None)


@case("contexts", "filter-matches-nothing", "t.yaml", "source.filters.emotion")
def _(e):
    e.write("ctx.jsonl", GOOD_JSONL)
    return _tv(
        e.task(body=TASK.replace("loader: demo, path: ctx.yaml", "loader: jsonl, path: ctx.jsonl, filters: {emotion: joyful}"))
    )


@case("contexts", "sample-larger-than-file", "t.yaml", "sample.size")
def _(e):
    e.write("ctx.jsonl", GOOD_JSONL)
    return _tv(
        e.task(body=TASK.replace("loader: demo, path: ctx.yaml", "loader: jsonl, path: ctx.jsonl").replace("size: 2", "size: 5"))
    )


@case("contexts", "demo-yaml-duplicate-key", "ctx.yaml:", "duplicate key")
def _(e):
    e.write("ctx.yaml", "contexts:\n  - id: c1\n    situation: x\n    situation: y\n")
    return _tv(e.task())


@case("contexts", "demo-yaml-not-a-list", "ctx.yaml", "contexts")
def _(e):
    e.write("ctx.yaml", "contexts: {id: c1}\n")
    return _check(task=str(e.task()))


@case("contexts", "run-bad-jsonl", "ctx.jsonl:1", "field 'mood'")
def _(e):
    e.write("ctx.jsonl", '{"id": "c1", "situation": "x", "mood": 1}\n')
    return _run(e, task=str(e.task(body=TASK.replace("loader: demo, path: ctx.yaml", "loader: jsonl, path: ctx.jsonl"))))


# ---- 6. CLI arguments ----------------------------------------------------------------------------------


@case("cli", "judge-judges-empty", "--judges")
def _(e):
    return ["judge", str(e.run), "--judges", ""]


@case("cli", "judge-judges-comma", "--judges")
def _(e):
    return ["judge", str(e.run), "--judges", " , "]


@case("cli", "judge-levels-bogus", "--levels", "bogus")
def _(e):
    return ["judge", str(e.run), "--judges", "fake/j", "--levels", "bogus"]


@case("cli", "judge-levels-empty", "--levels")
def _(e):
    return ["judge", str(e.run), "--judges", "fake/j", "--levels", ""]


@case("cli", "check-judges-empty", "--judges", "empty")
def _(e):
    return _check(task=str(e.task()), judges="")


@case("cli", "run-judges-empty", "--judges", "empty")
def _(e):
    return _run(e, judges="")


@case("cli", "run-metrics-empty", "--metrics", "empty")
def _(e):
    args = _run(e)
    args[args.index("--metrics") + 1] = ""
    return args


@case("cli", "check-metrics-empty", "--metrics")
def _(e):
    return [*_check(task=str(e.task())), "--metrics", ""]


@case("cli", "check-metrics-all-plus", "--metrics", "all")
def _(e):
    return [*_check(task=str(e.task())), "--metrics", "all,distinct_1"]


@case("cli", "check-judges-none-plus", "--judges", "none")
def _(e):
    return _check(task=str(e.task()), judges="none,fake/j")


@case("cli", "check-unknown-metric", "distinkt_1")
def _(e):
    return [*_check(task=str(e.task())), "--metrics", "distinkt_1"]


@case("cli", "check-model-unknown", "--model", "nope")
def _(e):
    return ["check", "--task", str(e.task()), "--system", "zero-shot", "--model", "nope/x", "--judges", "none"]


@case("cli", "check-user-model-malformed", "--user-model", "embedded")
def _(e):
    return [*_check(task=str(e.task())), "--user-model", "embedded/foo"]


@case("cli", "run-model-unknown", "nope")
def _(e):
    return [a if a != "fake/bad-input" else "nope/x" for a in _run(e)]


@case("cli", "run-user-model-malformed", "embedded/foo")
def _(e):
    return [*_run(e), "--user-model", "embedded/foo"]


@case("cli", "metrics-empty", "--metrics")
def _(e):
    return ["metrics", str(e.run), "--metrics", ""]


@case("cli", "metrics-unknown", "distinkt_1")
def _(e):
    return ["metrics", str(e.run), "--metrics", "distinkt_1"]


@case("cli", "compare-two-systems", "--systems", "three")
def _(e):
    return ["compare", str(e.run), "--judges", "fake/j", "--systems", "mascot,zero-shot"]


@case("cli", "check-checkpoint-missing", "--checkpoint")
def _(e):
    return [*_check(task=str(e.task())), "--checkpoint", str(e.case / "nockpt")]


@case("cli", "check-checkpoint-bad-json", "checkpoint.json", "JSON")
def _(e):
    e.write("ck/checkpoint.json", "{not json")
    return [*_check(task=str(e.task()), system="mascot"), "--checkpoint", str(e.case / "ck")]


@case("cli", "check-checkpoint-wrong-schema", "checkpoint.json", "schema")
def _(e):
    e.write("ck/checkpoint.json", '{"schema": "other/1"}')
    return [*_check(task=str(e.task()), system="mascot"), "--checkpoint", str(e.case / "ck")]


@case("cli", "check-checkpoint-missing-adapter", "checkpoint", "anchor")
def _(e):
    e.write("ck/checkpoint.json", '{"schema": "mascot-checkpoint/1", "base_model": "fake/b", "adapters": {}}')
    return [*_check(task=str(e.task()), system="mascot"), "--checkpoint", str(e.case / "ck")]


@case("cli", "run-checkpoint-bad-json", "checkpoint.json")
def _(e):
    e.write("ck/checkpoint.json", "{not json")
    return [*_run(e, system="mascot"), "--checkpoint", str(e.case / "ck")]


@case("cli", "check-data-dir-missing", "data directory")
def _(e):
    return [*_check(task=str(e.task())), "--data-dir", str(e.case / "nodata")]


@case("cli", "check-task-empty", "--task")
def _(e):
    return _check(task="")


@case("cli", "run-task-empty", "--task")
def _(e):
    return [*_run(e)[:2], "", *_run(e)[3:]]


@case("cli", "check-system-empty", "--system")
def _(e):
    return _check(task=str(e.task()), system="")


@case("cli", "check-levels-bogus", "--levels")
def _(e):
    return [*_check(task=str(e.task())), "--levels", "agent,everything"]


@case("cli", "check-limit-zero", "--limit")
def _(e):
    return [*_check(task=str(e.task())), "--limit", "0"]


@case("cli", "report-two-runs-no-out", "--out")
def _(e):
    shutil.copytree(e.run, e.root / "run2")
    return ["report", str(e.run), str(e.root / "run2")]


@case("cli", "report-out-is-a-folder", "--out", "directory")
def _(e):
    return ["report", str(e.run), "--out", str(e.case)]


@case("cli", "leaderboard-out-is-a-folder", "--out", "directory")
def _(e):
    return ["leaderboard", str(e.run), "--out", str(e.case)]


@case("cli", "leaderboard-markdown-parent-is-a-file", "--markdown")
def _(e):
    return ["leaderboard", str(e.run), "--out", str(e.case / "lb.csv"), "--markdown", str(e.case / "ctx.yaml" / "lb.md")]


@case("cli", "agreement-unknown-judge", "--judges", "claude")
def _(e):
    return ["agreement", str(e.run), "--judges", "claude"]


@case("cli", "human-export-out-is-a-file", "--out")
def _(e):
    return ["human", "export", str(e.run), "--out", str(e.case / "ctx.yaml")]


@case("cli", "human-export-bad-levels", "--levels")
def _(e):
    return ["human", "export", str(e.run), "--out", str(e.root / "h3"), "--levels", "agents"]


@case("cli", "compare-out-is-a-file", "--out")
def _(e):
    return ["compare", str(e.run), "--judges", "fake/j", "--out", str(e.case / "ctx.yaml")]


# ---- 7. run directories --------------------------------------------------------------------------------


def _break(e: Env, name: str, content: str | bytes) -> Path:
    return e.write(name, content, base=e.run)


@case("rundir", "judge-missing-dir", "does not exist")
def _(e):
    return ["judge", str(e.root / "nope"), "--judges", "fake/j"]


@case("rundir", "judge-a-file", "ctx.yaml", "file")
def _(e):
    return ["judge", str(e.case / "ctx.yaml"), "--judges", "fake/j"]


@case("rundir", "judge-empty-folder", "empty", "not a run directory")
def _(e):
    (e.case / "empty").mkdir()
    return ["judge", str(e.case / "empty"), "--judges", "fake/j"]


@case("rundir", "metrics-empty-folder", "not a run directory")
def _(e):
    (e.case / "empty").mkdir()
    return ["metrics", str(e.case / "empty")]


@case("rundir", "report-empty-folder", "not a run directory")
def _(e):
    (e.case / "empty").mkdir()
    return ["report", str(e.case / "empty")]


@case("rundir", "leaderboard-empty-folder", "not a run directory")
def _(e):
    (e.case / "empty").mkdir()
    return ["leaderboard", str(e.case / "empty"), "--out", str(e.case / "lb.csv")]


@case("rundir", "agreement-empty-folder", "not a run directory")
def _(e):
    (e.case / "empty").mkdir()
    return ["agreement", str(e.case / "empty")]


@case("rundir", "human-export-empty-folder", "not a run directory")
def _(e):
    (e.case / "empty").mkdir()
    return ["human", "export", str(e.case / "empty"), "--out", str(e.root / "h3")]


@case("rundir", "compare-empty-folder", "not a run directory")
def _(e):
    (e.case / "empty").mkdir()
    return ["compare", str(e.case / "empty"), "--judges", "fake/j"]


@case("rundir", "report-no-transcripts", "transcripts.jsonl", "no transcripts")
def _(e):
    e.write("m/transcripts.jsonl", "")
    return ["report", str(e.case / "m")]


@case("rundir", "manifest-not-json", "manifest.json", "JSON")
def _(e):
    _break(e, "manifest.json", "{not json")
    return ["metrics", str(e.run)]


@case("rundir", "manifest-a-list", "manifest.json", "object")
def _(e):
    _break(e, "manifest.json", "[1, 2, 3]")
    return ["metrics", str(e.run)]


@case("rundir", "manifest-systems-a-list", "manifest.json")
def _(e):
    _break(e, "manifest.json", '{"systems": [1]}')
    return ["judge", str(e.run), "--judges", "fake/j"]


@case("rundir", "manifest-invocations-an-object", "manifest.json")
def _(e):
    _break(e, "manifest.json", '{"invocations": {"a": 1}}')
    return ["report", str(e.run)]


@case("rundir", "manifest-latin-1", "manifest.json", "UTF-8")
def _(e):
    _break(e, "manifest.json", '{"run_id": "caf\u00e9"}'.encode("latin-1"))
    return ["leaderboard", str(e.run), "--out", str(e.case / "lb.csv")]


@case("rundir", "manifest-empty", "manifest.json", "empty")
def _(e):
    _break(e, "manifest.json", "")
    return ["compare", str(e.run), "--judges", "fake/j"]


@case("rundir", "transcripts-latin-1", "transcripts.jsonl", "UTF-8")
def _(e):
    p = e.run / "transcripts.jsonl"
    p.write_bytes(p.read_bytes() + '{"x": "caf\u00e9"}\n'.encode("latin-1"))
    return ["report", str(e.run)]


@case("rundir", "transcripts-line-a-list", "transcripts.jsonl:", "object")
def _(e):
    p = e.run / "transcripts.jsonl"
    p.write_text(p.read_text() + "[1, 2]\n")
    return ["metrics", str(e.run)]


@case("rundir", "transcripts-missing-fields", "transcripts.jsonl:", "transcript")
def _(e):
    p = e.run / "transcripts.jsonl"
    p.write_text(p.read_text() + '{"schema": "mascot-transcript/1", "dialogue_id": "x"}\n')
    return ["judge", str(e.run), "--judges", "fake/j"]


@case("rundir", "transcripts-bad-json-mid-file", "transcripts.jsonl:2", "not valid JSON")
def _(e):
    p = e.run / "transcripts.jsonl"
    lines = p.read_text().splitlines()
    p.write_text("\n".join([lines[0], "{oops", *lines[1:]]) + "\n")
    return ["metrics", str(e.run)]


@case("rundir", "transcripts-round-a-string", "transcripts.jsonl:", "transcript")
def _(e):
    p = e.run / "transcripts.jsonl"
    p.write_text(p.read_text().replace('"round": 1', '"round": "one"', 1))
    return ["metrics", str(e.run)]


@case("rundir", "transcripts-wrong-schema", "transcripts.jsonl:", "schema")
def _(e):
    p = e.run / "transcripts.jsonl"
    text = p.read_text()
    assert "mascot-transcript/2" in text
    p.write_text(text.replace("mascot-transcript/2", "mascot-transcript/0", 1))
    return ["human", "export", str(e.run), "--out", str(e.root / "h3")]


@case("rundir", "judgments-garbage-line", "judgments.jsonl:", "not valid JSON")
def _(e):
    p = e.run / "judgments.jsonl"
    p.write_text("garbage\n" + p.read_text())
    return ["agreement", str(e.run)]


@case("rundir", "judgments-row-missing-keys", "judgments.jsonl:", "not a judgment row")
def _(e):
    p = e.run / "judgments.jsonl"
    p.write_text(p.read_text() + '{"judge": "gpt"}\n')
    return ["report", str(e.run)]


@case("rundir", "judgments-row-a-list", "judgments.jsonl:", "object")
def _(e):
    p = e.run / "judgments.jsonl"
    p.write_text(p.read_text() + '["gpt"]\n')
    return ["leaderboard", str(e.run), "--out", str(e.case / "lb.csv")]


@case("rundir", "judgments-scored-without-score", "judgments.jsonl:", "score_100")
def _(e):
    p = e.run / "judgments.jsonl"
    p.write_text(p.read_text().replace('"score_100": ', '"score_100": "x", "old": ', 1))
    return ["judge", str(e.run), "--judges", "fake/j"]


@case("rundir", "comparisons-bad-row", "comparisons.jsonl:1", "comparison")
def _(e):
    _break(e, "comparisons.jsonl", '{"judge": "gpt", "order": "abc"}\n')
    return ["report", str(e.run)]


@case("rundir", "metrics-parquet-corrupt", "metrics.parquet", "readable")
def _(e):
    _break(e, "metrics.parquet", b"PAR1 this is not parquet")
    return ["report", str(e.run)]


@case("rundir", "metrics-csv-wrong-columns", "metrics.csv", "column")
def _(e):
    (e.run / "metrics.parquet").unlink()
    _break(e, "metrics.csv", "a,b\n1,2\n")
    return ["leaderboard", str(e.run), "--out", str(e.case / "lb.csv")]


@case("rundir", "check-out-other-seed", "transcripts.jsonl", "seed")
def _(e):
    gen = e.generated()
    return [*_check(task=str(e.case / "t.yaml")), "--limit", "1", "--out", str(gen), "--seed", "5"]


@case("rundir", "check-out-task-changed", "manifest.json", "task 't'")
def _(e):
    gen = e.generated()
    e.task(body=TASK.replace("rounds: 1", "rounds: 2"))
    return [*_check(task=str(e.case / "t.yaml")), "--limit", "1", "--out", str(gen)]


@case("rundir", "run-out-other-seed", "transcripts.jsonl", "seed")
def _(e):
    gen = e.generated()
    return [*_run(e, task=str(e.case / "t.yaml"))[:-1], str(gen), "--limit", "1", "--seed", "5"]


@case("rundir", "check-out-is-a-file", "--out", "file")
def _(e):
    return [*_check(task=str(e.task())), "--out", str(e.case / "ctx.yaml")]


@case("rundir", "check-out-foreign-folder", "--out", "not a run directory")
def _(e):
    return [*_check(task=str(e.task())), "--out", str(e.case)]


@case("rundir", "compare-out-foreign-folder", "not a run directory")
def _(e):
    return ["compare", str(e.run), "--judges", "fake/j", "--out", str(e.project)]


# ---- 8. human-rating sheets ----------------------------------------------------------------------------


def _sheet(
    e: Env,
    transform: Callable[[list[list[str]]], list[list[str]]] | None = None,
    *,
    raw: bytes | None = None,
    name: str = "filled.csv",
) -> Path:
    import csv
    import io

    path = e.human / name
    if raw is not None:
        path.write_bytes(raw)
        return path
    rows = list(csv.reader(io.StringIO((e.human / "sheet.csv").read_text())))
    header = rows[0]
    for r in rows[1:]:
        r[header.index("annotator")] = "ann"
        crits = (
            ["emotion", "empathy", "consistency", "relevance", "contribution"]
            if r[header.index("level")] == "agent"
            else ["fidelity", "originality", "relevance", "engagement"]
        )
        for c in crits:
            r[header.index(c)] = "4"
    rows = transform(rows) if transform else rows
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path.write_text(buf.getvalue())
    return path


def _import(p: Path) -> list[str]:
    return ["human", "import", str(p), "--out", str(p.parent / "ratings.jsonl")]


def _drop_col(name: str) -> Callable[[list[list[str]]], list[list[str]]]:
    def t(rows):
        i = rows[0].index(name)
        return [r[:i] + r[i + 1 :] for r in rows]

    return t


def _set(row: int, col: str, value: str) -> Callable[[list[list[str]]], list[list[str]]]:
    def t(rows):
        rows[row][rows[0].index(col)] = value
        return rows

    return t


@case("sheet", "latin-1", "filled.csv", "UTF-8")
def _(e):
    p = _sheet(e)
    p.write_bytes(p.read_bytes().replace(b"ann", "Zo\u00e9".encode("latin-1")))
    return _import(p)


@case("sheet", "missing-criterion-column", "filled.csv:1", "missing column", "engagement")
def _(e):
    return _import(_sheet(e, _drop_col("engagement")))


@case("sheet", "missing-item-id-column", "filled.csv:1", "item_id")
def _(e):
    return _import(_sheet(e, _drop_col("item_id")))


@case("sheet", "empty-file", "filled.csv", "empty")
def _(e):
    return _import(_sheet(e, raw=b""))


@case("sheet", "header-only", "filled.csv", "no ratings")
def _(e):
    return _import(_sheet(e, lambda rows: rows[:1]))


@case("sheet", "rating-six", "filled.csv:2", "1-5")
def _(e):
    return _import(_sheet(e, lambda rows: [rows[0], *[[("6" if c == "4" else c) for c in r] for r in rows[1:2]], *rows[2:]]))


@case("sheet", "rating-word", "filled.csv:3", "1-5")
def _(e):
    return _import(_sheet(e, lambda rows: [*rows[:2], [("good" if c == "4" else c) for c in rows[2]], *rows[3:]]))


@case("sheet", "rating-half", "filled.csv:2", "1-5")
def _(e):
    return _import(_sheet(e, lambda rows: [rows[0], [("3.5" if c == "4" else c) for c in rows[1]], *rows[2:]]))


@case("sheet", "item-not-in-key", "filled.csv:2", "not in the key")
def _(e):
    return _import(_sheet(e, _set(1, "item_id", "Ifake")))


@case("sheet", "key-missing", "key.json", "not found")
def _(e):
    p = _sheet(e)
    (e.human / "key.json").unlink()
    return _import(p)


@case("sheet", "key-not-json", "key.json", "JSON")
def _(e):
    p = _sheet(e)
    (e.human / "key.json").write_text("{nope")
    return _import(p)


@case("sheet", "key-wrong-schema", "key.json", "schema")
def _(e):
    p = _sheet(e)
    (e.human / "key.json").write_text('{"schema": "other", "items": {}}')
    return _import(p)


@case("sheet", "key-items-a-list", "key.json", "items")
def _(e):
    p = _sheet(e)
    (e.human / "key.json").write_text('{"schema": "mascot-human-key/1", "items": [1, 2]}')
    return _import(p)


@case("sheet", "key-a-list", "key.json", "object")
def _(e):
    p = _sheet(e)
    (e.human / "key.json").write_text("[1]")
    return _import(p)


@case("sheet", "duplicate-rating", "twice")
def _(e):
    return _import(_sheet(e, lambda rows: [*rows, rows[1]]))


@case("sheet", "annotator-empty", "filled.csv:2", "annotator")
def _(e):
    return _import(_sheet(e, _set(1, "annotator", "")))


@case("sheet", "wrong-level-criterion", "filled.csv:", "do not apply")
def _(e):
    def t(rows):
        h = rows[0]
        for r in rows[1:]:
            if r[h.index("level")] == "agent":
                r[h.index("fidelity")] = "3"
                break
        return rows

    return _import(_sheet(e, t))


@case("sheet", "unknown-column", "filled.csv:1", "comments")
def _(e):
    return _import(_sheet(e, lambda rows: [rows[0] + ["comments"], *[r + ["nice"] for r in rows[1:]]]))


@case("sheet", "duplicate-column", "filled.csv:1", "twice")
def _(e):
    return _import(_sheet(e, lambda rows: [rows[0] + ["emotion"], *[r + [""] for r in rows[1:]]]))


@case("sheet", "extra-cells", "filled.csv:2", "cells")
def _(e):
    return _import(_sheet(e, lambda rows: [rows[0], rows[1] + ["5", "5"], *rows[2:]]))


@case("sheet", "over-size-limit", "filled.csv", "limit")
def _(e):
    p = e.human / "filled.csv"
    with open(p, "wb") as fh:
        fh.truncate(33 * 1024 * 1024)
    return _import(p)


@case("sheet", "a-folder", "filled.csv")
def _(e):
    (e.human / "filled.csv").mkdir()
    return _import(e.human / "filled.csv")


@case("sheet", "agreement-with-bad-sheet", "filled.csv:1", "missing column")
def _(e):
    return ["agreement", str(e.run), "--human", str(_sheet(e, _drop_col("relevance")))]


@case("sheet", "agreement-with-non-human-jsonl", "judgments.jsonl", "human")
def _(e):
    return ["agreement", str(e.run), "--human", str(e.run / "judgments.jsonl")]


@case("sheet", "agreement-with-truncated-ratings-row", "ratings.jsonl:1", "human rating row")
def _(e):
    e.write("ratings.jsonl", '{"judge": "human:ann", "level": "agent"}\n', base=e.human)
    return ["agreement", str(e.run), "--human", str(e.human / "ratings.jsonl")]


@case("sheet", "import-out-is-a-folder", "--out", "directory")
def _(e):
    return ["human", "import", str(_sheet(e)), "--out", str(e.human)]


# ------------------------------------------------------------------------------------------ the test


@pytest.mark.parametrize(
    "c",
    [
        pytest.param(c, id=f"{c.surface}:{c.id}", marks=[pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else [])
        for c in CASES
    ],
)
def test_bad_input(c: Case, env: Env) -> None:
    args = c.setup(env)
    before = env.snapshot()
    code, output = invoke(args)
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert code != "traceback", output
    assert "Traceback" not in output, output
    assert code == 2, f"exit {code}: {output}"
    assert len(lines) <= 3, output
    for part in c.expect:
        assert part in output, f"{part!r} not in {output!r}"
    assert SECRET not in output, output
    assert not env.marker.exists(), "a template payload ran"
    after = env.snapshot()
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"files written or changed: {changed[:10]}"


def test_the_table_covers_every_surface_with_at_least_100_cases():
    per = Counter(c.surface for c in CASES)
    assert set(per) == set(SURFACES), per
    assert sum(per.values()) >= 100, per
    assert len({(c.surface, c.id) for c in CASES}) == len(CASES)


# ------------------------------------------------------------------------------------------ tolerated input


def test_bom_is_accepted_everywhere(env, capsys):
    """UTF-8 with a byte-order mark reads like UTF-8 without one: task YAML, JSONL contexts, sheets."""
    bom = b"\xef\xbb\xbf"
    env.write("ctx.jsonl", bom + GOOD_JSONL.encode())
    t = env.task(body=TASK.replace("loader: demo, path: ctx.yaml", "loader: jsonl, path: ctx.jsonl"))
    t.write_bytes(bom + t.read_bytes())
    code, out = invoke(["tasks", "validate", str(t)])
    assert code == 0, out
    sheet = _sheet(env)
    sheet.write_bytes(bom + sheet.read_bytes())
    code, out = invoke(["human", "import", str(sheet), "--out", str(env.root / "r.jsonl")])
    assert code == 0 and "imported" in out, out
    m = env.run / "manifest.json"
    m.write_bytes(bom + m.read_bytes())
    tr = env.run / "transcripts.jsonl"
    tr.write_bytes(bom + tr.read_bytes())
    code, out = invoke(["metrics", str(env.run), "--metrics", "distinct_1"])
    assert code == 0, out


def test_truncated_jsonl_tail_is_dropped_with_one_warning(env):
    p = env.run / "transcripts.jsonl"
    p.write_text(p.read_text() + '{"schema": "mascot-transcript/1", "dialogue_id": "cut')
    code, out = invoke(["metrics", str(env.run), "--metrics", "distinct_1"])
    assert code == 0, out
    warnings = [ln for ln in out.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "transcripts.jsonl" in warnings[0] and "1 line ignored" in warnings[0], out


def test_persona_and_context_text_that_looks_like_a_template_is_inert(env):
    """Card and context text are data: a payload in them goes into prompts as text and is never rendered."""
    import json

    p = env.project / "tasks/personas/anchor.yaml"
    text = p.read_text()
    start, end = text.index("speaking_style:"), text.index("never:")
    p.write_text(text[:start] + "speaking_style: " + json.dumps(env.payload("cycler")) + "\n" + text[end:])
    env.write("ctx.jsonl", json.dumps({"id": "c1", "situation": env.payload("lipsum")}) + "\n")
    t = env.task(
        body=TASK.replace("loader: demo, path: ctx.yaml", "loader: jsonl, path: ctx.jsonl").replace("size: 2", "size: 1")
    )
    code, out = invoke(_check(task=str(t)))
    assert code == 0, out
    assert not env.marker.exists()
