"""The documentation (README.md and docs/) stays true to the CLI, and the site builds.

* Every `mascot-eval ...` invocation written in the docs (fenced code and inline code) names a command
  that exists in the click app (`mascot_eval.cli.main:cli`, walked through its lazy groups), and every
  option it passes is an option of that very command.
* Every other `--option` the docs mention in prose belongs to some mascot-eval command, unless it is
  one of the few options of another tool listed in FOREIGN (vLLM, llm-katan, accelerate, pytest, ...)
  or sits on another tool's command line in a code block.
* `mkdocs build --strict` builds the site (broken links, anchors or nav entries fail it).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from mascot_eval.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# options of other tools that the docs mention in prose (outside their command lines), with their owner
FOREIGN = {
    "--no-auto-tool-providers": "llm-katan serve",
    "--enforce-eager": "vLLM server",
    "--default-chat-template-kwargs": "vllm serve",
}
# a code line or inline span starting with one of these is another tool's command line
FOREIGN_COMMANDS = (
    "vllm ",
    "trl ",
    "pip ",
    "python ",
    "make ",
    "mkdocs ",
    "accelerate ",
    "pytest ",
    ".venv/bin/python ",
    ".venv-vllm/bin/python ",
    "MODEL=",
    "export ",
    "unset ",
    "VLLM_",
    "CUDA_",
    "PIP_",
)
ENTRY = re.compile(r"(?:^|[\s$(`/])(?:mascot-eval|-m mascot_eval\.cli\.main)\s+(.*)")
OPTION = re.compile(r"(?<![\w/-])(--?[a-zA-Z][a-zA-Z0-9_-]*)")


@dataclass(frozen=True)
class Mention:
    file: str
    line: int
    text: str


def command_tree() -> dict[tuple[str, ...], click.Command]:
    """Every command of the app by its path: () is the group itself, ("cache", "stats") a subcommand."""
    tree: dict[tuple[str, ...], click.Command] = {}

    def walk(path: tuple[str, ...], cmd: click.Command, parent: click.Context | None) -> None:
        tree[path] = cmd
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd, info_name=path[-1] if path else "mascot-eval", parent=parent)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, f"{' '.join(path + (name,))} is listed but cannot be loaded"
                walk(path + (name,), sub, ctx)

    walk((), cli, None)
    return tree


def options_of(cmd: click.Command) -> set[str]:
    opts = {"--help", "-h"}
    for p in cmd.params:
        if isinstance(p, click.Option):
            opts.update(p.opts)
            opts.update(p.secondary_opts)
    return opts


def _spans_and_fences(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]], list[tuple[int, str]]]:
    """(fenced logical lines, inline code spans, prose lines without their code spans), each with its line number.
    Fenced lines continued with a trailing backslash are joined."""
    fenced: list[tuple[int, str]] = []
    prose: list[tuple[int, str]] = []
    in_fence, pending, start = False, "", 0
    prose_text: list[str] = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            prose_text.append("")
            continue
        if in_fence:
            prose_text.append("")
            if not pending:
                start = i
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            fenced.append((start, (pending + line).strip()))
            pending = ""
        else:
            prose_text.append(line)
    joined = "\n".join(prose_text)
    spans = []
    for m in re.finditer(r"`([^`]+)`", joined):
        spans.append((joined.count("\n", 0, m.start()) + 1, " ".join(m.group(1).split())))
    no_spans = re.sub(r"`[^`]+`", lambda m: "\n" * m.group(0).count("\n"), joined)
    prose = [(i, ln) for i, ln in enumerate(no_spans.splitlines(), 1) if ln.strip()]
    return fenced, spans, prose


def _strip_comment(code: str) -> str:
    return re.split(r"\s#\s", " " + code, maxsplit=1)[0].strip()


def invocations_and_loose_options() -> tuple[list[tuple[Mention, str]], list[tuple[Mention, str]]]:
    """(mascot-eval invocations as (where, the words after `mascot-eval`), options mentioned outside any
    command line as (where, option))."""
    invocations: list[tuple[Mention, str]] = []
    loose: list[tuple[Mention, str]] = []
    groups = {path[0] for path, cmd in command_tree().items() if len(path) == 1 and isinstance(cmd, click.Group)}
    for f in DOC_FILES:
        name = str(f.relative_to(ROOT))
        fenced, spans, prose = _spans_and_fences(f.read_text(encoding="utf-8"))
        for line, code in fenced:  # only the mascot-eval part of a code line is ours; the rest is another tool's
            code = _strip_comment(code)
            m = ENTRY.search(" " + code)
            if m:
                invocations.append((Mention(name, line, code), m.group(1).split(")")[0]))
        for line, span in spans:
            m = ENTRY.search(" " + span)
            if m:
                invocations.append((Mention(name, line, span), m.group(1)))
            elif span.split(" ")[0] in groups and re.match(r"^[a-z0-9|]+( |$)", span.split(" ", 1)[-1] + " ") and " " in span:
                invocations.append((Mention(name, line, span), span))  # `tasks list|show`, `judges validate`
            elif not span.startswith(FOREIGN_COMMANDS):
                loose += [(Mention(name, line, span), o) for o in OPTION.findall(span) if o.startswith("--")]
        for line, text in prose:
            loose += [(Mention(name, line, text), o) for o in OPTION.findall(text) if o.startswith("--")]
    return invocations, loose


def resolve(words: list[str], tree: dict[tuple[str, ...], click.Command]) -> tuple[list[tuple[str, ...]], list[str], str | None]:
    """The command paths the words name (alternatives `a|b` give several), the remaining words, or an error."""
    paths: list[tuple[str, ...]] = [()]
    rest = list(words)
    while rest and re.fullmatch(r"[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*", rest[0]):
        cmd = tree[paths[0]]
        if not isinstance(cmd, click.Group):
            break
        alts = rest[0].split("|")
        missing = [a for a in alts if paths[0] + (a,) not in tree]
        if missing:
            return paths, rest, f"no command '{' '.join(paths[0] + (missing[0],))}'"
        paths = [p + (a,) for p in paths for a in alts]
        rest.pop(0)
    if isinstance(tree[paths[0]], click.Group) and paths[0] != () and not any(w.startswith("-") for w in rest):
        return paths, rest, f"'{' '.join(paths[0])}' is a group: name one of its commands"
    return paths, rest, None


def _github_slug(heading: str) -> str:
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def test_readme_is_short_keeps_the_quick_start_and_every_link_resolves():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) < 12 * 1024, f"README.md is {len(text.encode())} bytes; move detail into docs/"
    assert "make run    # installs everything" in text and "make test   # installs everything" in text
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert len(links) >= 10
    broken = []
    for link in links:
        if re.match(r"^[a-z]+://", link):
            broken.append(f"{link}: the README links only to files of this repository")
            continue
        target, _, frag = link.partition("#")
        path = (ROOT / target) if target else ROOT / "README.md"
        if not path.is_file():
            broken.append(f"{link}: no file {target}")
        elif frag:
            slugs = {_github_slug(h) for h in re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)}
            if frag not in slugs:
                broken.append(f"{link}: no heading #{frag} in {target}")
    assert not broken, "\n".join(broken)


def test_the_command_tree_is_walked_through_the_lazy_groups():
    tree = command_tree()
    assert ("run",) in tree and ("cache", "stats") in tree and ("train", "stage2") in tree and ("judges", "validate") in tree
    assert "--max-connections" in options_of(tree[("run",)]) and "--out" in options_of(tree[("schema",)])


def test_every_command_and_option_in_the_docs_exists_in_the_cli():
    tree = command_tree()
    invocations, _ = invocations_and_loose_options()
    assert len(invocations) > 50, f"only {len(invocations)} mascot-eval invocations found in the docs"
    problems = []
    for where, after in invocations:
        words = [w.strip("[]") for w in after.split()]
        paths, rest, error = resolve(words, tree)
        if error:
            problems.append(f"{where.file}:{where.line}: {error}: {where.text}")
            continue
        for word in rest:
            m = OPTION.match(word)
            if not m or word.startswith("---"):
                continue
            opt = re.split(r"[=\[]", m.group(1))[0]
            for path in paths:
                if opt not in options_of(tree[path]):
                    problems.append(
                        f"{where.file}:{where.line}: 'mascot-eval {' '.join(path)}' has no option {opt}: {where.text}"
                    )
    assert not problems, "\n".join(problems)


def test_every_option_the_docs_mention_belongs_to_a_command_or_is_a_named_foreign_one():
    tree = command_tree()
    every = set().union(*(options_of(c) for c in tree.values()))
    assert not (set(FOREIGN) & every), "an option listed as foreign is a mascot-eval option: drop it from FOREIGN"
    _, loose = invocations_and_loose_options()
    unknown = sorted({f"{w.file}:{w.line}: {o}" for w, o in loose if o not in every and o not in FOREIGN})
    assert not unknown, "options no mascot-eval command has:\n" + "\n".join(unknown)
    used_foreign = {o for _, o in loose if o in FOREIGN}
    assert used_foreign == set(FOREIGN), f"FOREIGN lists options the docs no longer mention: {set(FOREIGN) - used_foreign}"


def test_a_wrong_command_or_option_in_the_docs_would_be_caught():
    tree = command_tree()
    assert resolve(["cache", "purge"], tree)[2] == "no command 'cache purge'"
    assert resolve(["tasks"], tree)[2] is not None
    paths, rest, err = resolve(["train", "sft|stage1", "--config", "x.yaml"], tree)
    assert err is None and paths == [("train", "sft"), ("train", "stage1")] and rest == ["--config", "x.yaml"]
    assert "--no-such-flag" not in options_of(tree[("run",)])


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None
    or importlib.util.find_spec("mkdocs_click") is None
    or importlib.util.find_spec("mkdocs_gen_files") is None
    or importlib.util.find_spec("material") is None,
    reason="mkdocs, mkdocs-material, mkdocs-click or mkdocs-gen-files is not installed (the `dev` extra)",
)
def test_mkdocs_build_strict_passes(tmp_path):
    import os

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "NO_MKDOCS_2_WARNING": "1",
        "DISABLE_MKDOCS_2_WARNING": "true",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = tmp_path / "site"
    cli_page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    tree = command_tree()
    for path in tree:  # every command and subcommand has its section in the generated CLI reference
        if path:
            assert 'id="mascot-eval-' + "-".join(path) + '"' in cli_page, path
    schemas = (site / "reference" / "schemas" / "index.html").read_text(encoding="utf-8")
    from mascot_eval.records import RECORDS

    for name, (_, schema_id) in RECORDS.items():
        assert f'id="{name}"' in schemas and schema_id in schemas
    assert not list(site.rglob("*.py")), "the generator script must not be copied into the site"
