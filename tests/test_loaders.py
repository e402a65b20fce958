"""Context loaders on the real dataset files in ../shared/data, including each raw-format quirk."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from mascot_eval.data.context import Context
from mascot_eval.data.ed import HEADER, clean_field, parse_ed_csv
from mascot_eval.data.loaders import LOADERS, get_loader, load_contexts, read_source
from mascot_eval.data.select import assign_profiles
from mascot_eval.data.valence import load_valence_table
from mascot_eval.errors import UserError
from mascot_eval.taskspec import MBTI_TYPES, TaskSpec

ED_LABELS = {
    "afraid",
    "angry",
    "annoyed",
    "anticipating",
    "anxious",
    "apprehensive",
    "ashamed",
    "caring",
    "confident",
    "content",
    "devastated",
    "disappointed",
    "disgusted",
    "embarrassed",
    "excited",
    "faithful",
    "furious",
    "grateful",
    "guilty",
    "hopeful",
    "impressed",
    "jealous",
    "joyful",
    "lonely",
    "nostalgic",
    "prepared",
    "proud",
    "sad",
    "sentimental",
    "surprised",
    "terrified",
    "trusting",
}


def make_task(loader: str, *, path=None, filters=None, options=None, size=None, seed=13, file=None, **kw) -> TaskSpec:
    domain = "workplace" if loader == "qmsum" else "emotional"
    spec = TaskSpec(
        name="t",
        split="in_domain",
        domain=domain,
        personas="emotional",
        source={"loader": loader, "path": path, "filters": filters or {}, "options": options or {}},
        sample={"size": size, "seed": seed},
        **kw,
    )
    spec.file = file
    return spec


@pytest.fixture(scope="module")
def ed(data_dir) -> dict[str, Context]:
    _, loaded = read_source(make_task("empathetic_dialogues"), data_dir)
    return {c.id: c for c in loaded.contexts}


# ---- registry ---------------------------------------------------------------------------------------


def test_registry_has_every_builtin_loader():
    assert {"empathetic_dialogues", "qmsum", "esconv", "jsonl", "demo"} <= set(LOADERS.names())
    with pytest.raises(UserError, match="did you mean 'qmsum'"):
        get_loader("qmsun")


# ---- EmpatheticDialogues ------------------------------------------------------------------------------


def test_ed_counts_match_the_paper(ed):
    assert len(ed) == 2547  # naive conv_id count, as the reference loaders and the paper
    assert {c.emotion for c in ed.values()} == ED_LABELS
    by_valence = {v: sum(1 for c in ed.values() if c.valence == v) for v in ("positive", "negative", "neutral")}
    assert by_valence == {"positive": 1022, "negative": 1230, "neutral": 295}
    assert all(c.source == "empathetic_dialogues" and c.domain == "emotional" for c in ed.values())


def test_ed_quote_aware_csv_reader_would_merge_lines(data_dir):
    # the reason for the line-split parser: csv/pandas/HF see 10,943 records and 2,542 conversations
    with open(data_dir / "empathetic_dialogues" / "test.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 10943 and len({r["conv_id"] for r in rows}) == 2542


def test_ed_every_quirk_is_met_and_counted(data_dir):
    path = data_dir / "empathetic_dialogues" / "test.csv"
    _, quirks = parse_ed_csv(path, load_valence_table(), "table")
    assert quirks == {"crlf": 10943, "lf_only": 30, "quoted": 122, "stray_quote": 4, "extra_fields": 17}


def test_ed_crlf_and_comma_escapes_are_gone(ed):
    for c in ed.values():
        for text in [c.situation] + [t.text for t in c.turns]:
            assert "\r" not in text and "_comma_" not in text
    first = ed["hit:0_conv:0"]
    assert first.emotion == "guilty" and first.valence == "negative"
    assert first.situation.startswith(
        "I felt guilty when I was driving home one night and a person tried to fly into my lane, and"
    )


def test_ed_doubled_quotes_are_unquoted(ed):
    c = ed["hit:175_conv:351"]  # test line 91
    assert c.situation.endswith('listening to your "gut".') and '""' not in c.situation
    assert not c.situation.startswith('"')
    assert c.turns[2].text.startswith('It is a "knowing" -- and a flowing!')


def test_ed_stray_quote_and_extra_fields(ed):
    c = ed["hit:2772_conv:5545"]  # lines 2108 (stray quote, LF only) and 2109 (extra candidate fields)
    assert [t.speaker for t in c.turns] == ["speaker", "listener", "speaker", "listener"]
    assert c.turns[0].text == "My grandpa is coming to visit!"
    assert c.turns[1].text == "That sounds like you are excited for sure! When is he coming and what are yall going to do?"
    assert all("|" not in t.text for t in c.turns)
    assert ed["hit:2773_conv:5546"].turns[0].text.startswith("I ate a gas station burrito")


def test_opening_is_the_support_seekers_first_line(ed, data_dir):
    assert ed["hit:2772_conv:5545"].opening == "My grandpa is coming to visit!"
    esconv = read_source(make_task("esconv"), data_dir)[1].contexts[0]
    assert esconv.turns[0].speaker == "sys" and esconv.opening == "hi i am okay, a little bit sad though"
    qmsum = read_source(make_task("qmsum"), data_dir)[1].contexts[0]
    assert qmsum.turns and qmsum.opening is None  # the user is not in the meeting transcript
    demo = {c.id: c for c in load_contexts(make_task("demo"))}
    assert demo["demo-w01-missed-deadline"].opening.startswith("I'm the one who has to tell the client")
    assert Context.from_dict(esconv.to_dict()).opening == esconv.opening


def test_ed_turns_are_ordered_and_alternate(ed):
    for c in ed.values():
        assert c.turns and c.turns[0].speaker == "speaker"
        assert all(t.speaker == ("speaker" if i % 2 == 0 else "listener") for i, t in enumerate(c.turns))
        assert c.metadata["split"] == "test" and len(c.metadata["speaker_ids"]) <= 2


def test_ed_full_parse(data_dir):  # its speed is a benchmark's business, not a test's
    path = data_dir / "empathetic_dialogues" / "test.csv"
    contexts, _ = parse_ed_csv(path, load_valence_table(), "table")
    assert len(contexts) == 2547 and len({c.id for c in contexts}) == 2547


def test_clean_field_cases():
    assert clean_field('"a ""b"" c"') == ('a "b" c', "quoted")
    assert clean_field('"stray start') == ("stray start", "stray_quote")
    assert clean_field("x_comma_ y") == ("x, y", None)


# ---- valence table --------------------------------------------------------------------------------------


def test_valence_table_is_the_documented_three_way_mapping():
    table = load_valence_table()
    assert set(table) == ED_LABELS and len(table) == 32
    assert {k for k, v in table.items() if v == "neutral"} == {"surprised", "sentimental", "nostalgic"}
    assert sum(v == "positive" for v in table.values()) == 13
    assert sum(v == "negative" for v in table.values()) == 16
    assert table["anticipating"] == "positive" and table["guilty"] == "negative"


def test_valence_table_can_be_swapped(tmp_path, data_dir):
    rows = load_valence_table()
    rows.update({"surprised": "positive", "sentimental": "negative", "nostalgic": "negative"})  # binary mapping
    table = tmp_path / "binary.csv"
    table.write_text("label,valence\n" + "".join(f"{k},{v}\n" for k, v in rows.items()))
    beside = {"file": str(tmp_path / "t.yaml")}  # the table sits beside the task file
    task = make_task("empathetic_dialogues", options={"valence_table": "binary.csv"}, filters={"valence": "neutral"}, **beside)
    with pytest.raises(UserError, match="no context has valence 'neutral'"):
        load_contexts(task, data_dir)
    task = make_task("empathetic_dialogues", options={"valence_table": "binary.csv"}, filters={"valence": "positive"}, **beside)
    assert len(load_contexts(task, data_dir)) == 1022 + sum(
        1 for c in read_source(make_task("empathetic_dialogues"), data_dir)[1].contexts if c.emotion == "surprised"
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("emotion,valence\nsad,negative\n", "expected 'label,valence'"),
        ("label,valence\nsad,gloomy\n", "must be one of positive, negative, neutral"),
        ("label,valence\nsad,negative\nsad,negative\n", "appears twice"),
        ("label,valence\nsad\n", "expected 2 fields"),
    ],
)
def test_bad_valence_tables(tmp_path, text, message):
    p = tmp_path / "v.csv"
    p.write_text(text)
    with pytest.raises(UserError, match=message) as exc:
        load_valence_table(p)
    assert str(p) in str(exc.value) and "\n" not in str(exc.value)


def test_valence_table_missing_a_label_names_the_data_line(tmp_path, data_dir):
    p = tmp_path / "v.csv"
    p.write_text("label,valence\nsad,negative\n")
    task = make_task("empathetic_dialogues", options={"valence_table": "v.csv"}, file=str(tmp_path / "t.yaml"))
    with pytest.raises(UserError, match=r"test\.csv:2: emotion 'guilty' is not in the valence table"):
        read_source(task, data_dir)


# ---- QMSum ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def qmsum(data_dir) -> list[Context]:
    loader, loaded = read_source(make_task("qmsum"), data_dir)
    return loaded.contexts


def test_qmsum_counts(qmsum):
    assert len(qmsum) == 281
    stats = get_loader("qmsum").stats(qmsum)
    assert stats["meetings"] == 35 and stats["queries"] == 281
    assert stats["by_domain"] == {
        "Academic": {"meetings": 9, "queries": 58},
        "Committee": {"meetings": 6, "queries": 72},
        "Product": {"meetings": 20, "queries": 151},
    }
    assert stats["query_types"] == {"general": 37, "specific": 244}
    assert len({c.id for c in qmsum}) == 281


def test_qmsum_excerpt_follows_the_inclusive_span(qmsum, data_dir):
    raw = json.loads((data_dir / "qmsum/Committee/jsonl/test.jsonl").read_text().splitlines()[0])
    q = raw["specific_query_list"][0]
    ((start, end),) = q["relevant_text_span"][:1]
    ctx = next(c for c in qmsum if c.id == "qmsum-committee-test-m01-s01")
    assert ctx.query == q["query"].strip() and ctx.meeting_domain == "Committee" and ctx.domain == "workplace"
    assert ctx.metadata["spans"][0] == [int(start), int(end)]
    first = raw["meeting_transcripts"][int(start)]
    assert ctx.turns[0].speaker == first["speaker"]
    n_span = sum(int(e) - int(s) + 1 for s, e in q["relevant_text_span"])
    assert ctx.metadata["excerpt_turns_total"] <= n_span
    assert 0 < len(ctx.turns) <= min(40, ctx.metadata["excerpt_turns_total"])
    assert ctx.turns[0].text == " ".join(first["content"].replace("{vocalsound}", " ").replace("{disfmarker}", " ").split())
    assert ctx.participants == list(dict.fromkeys(t.speaker for t in ctx.turns))
    assert ctx.metadata["reference_answer"] == q["answer"]


def test_qmsum_markup_removed_and_excerpt_capped(qmsum, data_dir):
    assert not any("{vocalsound}" in t.text or "{disfmarker}" in t.text for c in qmsum for t in c.turns)
    general = [c for c in qmsum if c.metadata["query_type"] == "general"]
    assert len(general) == 37 and all(len(c.turns) == 40 and c.metadata["excerpt_turns_total"] > 40 for c in general)
    task = make_task("qmsum", filters={"domain": "product"}, options={"excerpt_turns": 5, "clean_markup": False})
    ctxs = load_contexts(task, data_dir)
    assert len(ctxs) == 151 and all(len(c.turns) <= 5 for c in ctxs)
    assert any("{" in t.text for c in ctxs for t in c.turns)


# ---- ESConv -----------------------------------------------------------------------------------------------


def test_esconv_counts_and_turns(data_dir):
    _, loaded = read_source(make_task("esconv"), data_dir)
    ctxs = loaded.contexts
    assert len(ctxs) == 195
    turns = [t for c in ctxs for t in c.turns]
    assert len(turns) == 6039
    assert sum(t.speaker == "usr" for t in turns) == 3144 and sum(t.speaker == "sys" for t in turns) == 2895
    assert sum(a.speaker == b.speaker for c in ctxs for a, b in zip(c.turns, c.turns[1:])) == 1287
    assert min(len(c.turns) for c in ctxs) == 16 and max(len(c.turns) for c in ctxs) == 94
    stats = get_loader("esconv").stats(ctxs)
    assert stats["emotions"]["anxiety"] == 52 and stats["emotions"]["nervousness"] == 2
    first = ctxs[0]
    assert first.emotion == "depression" and first.problem == "ongoing depression"
    assert first.situation.startswith("I am always depressed")
    assert first.turns[0].speaker == "sys" and first.metadata["strategies"][0] == "Others"
    assert first.metadata["strategies"][1] is None
    job = load_contexts(make_task("esconv", filters={"problem": "Job Crisis"}), data_dir)
    assert job and all(c.problem.lower() == "job crisis" for c in job)


# ---- jsonl and demo ---------------------------------------------------------------------------------------


def test_jsonl_loader_reads_the_documented_schema(tmp_path):
    f = tmp_path / "mine.jsonl"
    rows = [
        {
            "id": "a",
            "situation": "My team lead keeps cancelling our one-to-ones.",
            "domain": "workplace",
            "turns": [{"speaker": "user", "text": "Third cancellation this month."}],
        },
        {"id": "b", "situation": "I passed my driving test.", "emotion": "proud", "valence": "positive"},
    ]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ctxs = load_contexts(make_task("jsonl", path="mine.jsonl", filters={"domain": "workplace"}, file=str(tmp_path / "t.yaml")))
    assert [c.id for c in ctxs] == ["a"] and ctxs[0].source == "jsonl" and ctxs[0].opening == "Third cancellation this month."
    both = load_contexts(make_task("jsonl", path="mine.jsonl", file=str(tmp_path / "t.yaml")))
    assert {c.id: c.domain for c in both} == {"a": "workplace", "b": "emotional"}  # task domain fills the gap


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"id": "a"}\n', r"mine\.jsonl:1: field 'situation': required field is missing"),
        ('{"id": "a", "situation": "x", "mood": 1}\n', r"mine\.jsonl:1: field 'mood': unknown field"),
        ('{"id": "a", "situation": "x", "valence": "meh"}\n', r"mine\.jsonl:1: field 'valence'"),
        ('{"id": "a", "situation": "x"}\n{"id": "a", "situation": "y"}\n', r"mine\.jsonl:2: id 'a' appears twice"),
        ('{"id": "a", "situation": "x"}\n{"id": "b", "situ', r"mine\.jsonl:2: last line is cut off \(file truncated\)"),
        ('{"id": "a", "situation": "x"}\nnot json\n', r"mine\.jsonl:2: not valid JSON"),
    ],
)
def test_jsonl_bad_records(tmp_path, content, message):
    f = tmp_path / "mine.jsonl"
    f.write_text(content)
    with pytest.raises(UserError, match=message) as exc:
        load_contexts(make_task("jsonl", path="mine.jsonl", file=str(tmp_path / "t.yaml")))
    assert "\n" not in str(exc.value)


def test_jsonl_needs_a_path():
    with pytest.raises(UserError, match="field 'source.path'"):
        load_contexts(make_task("jsonl"))


def test_demo_needs_no_dataset(monkeypatch):
    monkeypatch.delenv("MASCOT_DATA_DIR", raising=False)
    ctxs = load_contexts(make_task("demo"))
    assert len(ctxs) >= 24 and len({c.id for c in ctxs}) == len(ctxs)
    domains = {c.domain for c in ctxs}
    assert domains == {"emotional", "workplace"}
    assert sum(c.domain == "workplace" for c in ctxs) >= 8 and sum(c.domain == "emotional" for c in ctxs) >= 8
    assert all(c.situation and c.turns and c.source == "demo" for c in ctxs)


# ---- filters, sampling, profiles --------------------------------------------------------------------------


def test_sampling_is_seeded_and_limit_is_a_prefix(data_dir):
    t = make_task("empathetic_dialogues", filters={"valence": "positive"}, size=100, seed=13)
    a = load_contexts(t, data_dir)
    b = load_contexts(t, data_dir)
    assert [c.id for c in a] == [c.id for c in b] and len(a) == 100
    assert all(c.valence == "positive" for c in a)
    assert [c.id for c in load_contexts(t, data_dir, limit=7)] == [c.id for c in a[:7]]
    other = load_contexts(make_task("empathetic_dialogues", filters={"valence": "positive"}, size=100, seed=14), data_dir)
    assert [c.id for c in other] != [c.id for c in a]
    a[0].turns.clear()  # callers get copies: the parsed source is not changed
    assert load_contexts(t, data_dir)[0].turns


def test_filter_lists_and_case(data_dir):
    t = make_task("empathetic_dialogues", filters={"emotion": ["Sad", "lonely"]})
    ctxs = load_contexts(t, data_dir)
    assert {c.emotion for c in ctxs} == {"sad", "lonely"}


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"filters": {"valance": "positive"}}, r"source\.filters\.valance': unknown filter .*did you mean 'valence'"),
        ({"filters": {"valence": "postive"}}, r"no context has valence 'postive' \(did you mean 'positive'\?\)"),
        ({"options": {"valence_tabel": "x.csv"}}, r"source\.options\.valence_tabel': unknown option"),
        ({"filters": {"valence": "neutral"}, "size": 1000}, r"sample\.size': 1000 is more than the 295 contexts"),
    ],
)
def test_bad_filters_options_and_sizes(data_dir, kw, message):
    with pytest.raises(UserError, match=message):
        load_contexts(make_task("empathetic_dialogues", file="/x/task.yaml", **kw), data_dir)


def test_limit_must_be_positive(data_dir):
    with pytest.raises(UserError, match="--limit"):
        load_contexts(make_task("demo"), limit=0)


def test_assign_profiles_cycle_all_and_none():
    ctxs = load_contexts(make_task("demo", user={"profiles": ["mbti16"]}))
    pairs = assign_profiles(make_task("demo", user={"profiles": ["mbti16"]}), ctxs)
    assert [p for _, p in pairs[:16]] == list(MBTI_TYPES) and pairs[16][1] == MBTI_TYPES[0]
    assert [c.id for c, _ in pairs] == [c.id for c in ctxs]
    allp = assign_profiles(make_task("demo", user={"profiles": ["INTJ", "esfp"], "assignment": "all"}), ctxs[:3])
    assert [(c.id, p) for c, p in allp][:2] == [(ctxs[0].id, "INTJ"), (ctxs[0].id, "ESFP")] and len(allp) == 6
    assert {p for _, p in assign_profiles(make_task("demo"), ctxs)} == {None}


# ---- data location, offline errors and downloads ----------------------------------------------------------


def test_missing_file_in_data_dir_names_the_variable(tmp_path):
    with pytest.raises(UserError, match=r"test\.csv: data file not found; MASCOT_DATA_DIR") as exc:
        read_source(make_task("empathetic_dialogues"), tmp_path)
    assert "\n" not in str(exc.value)


def test_offline_without_data_dir_is_one_line(monkeypatch, tmp_path):
    monkeypatch.delenv("MASCOT_DATA_DIR", raising=False)
    monkeypatch.setenv("MASCOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    for loader in ("empathetic_dialogues", "qmsum", "esconv"):
        with pytest.raises(UserError, match="not available offline.*set MASCOT_DATA_DIR") as exc:
            read_source(make_task(loader))
        assert "\n" not in str(exc.value)
    assert not (tmp_path / "cache").exists()  # nothing written


def test_cached_copy_is_used_offline(monkeypatch, tmp_path, data_dir):
    monkeypatch.delenv("MASCOT_DATA_DIR", raising=False)
    monkeypatch.setenv("MASCOT_CACHE_DIR", str(tmp_path / "cache"))
    dst = tmp_path / "cache" / "datasets" / "esconv" / "test.txt"
    dst.parent.mkdir(parents=True)
    shutil.copy(data_dir / "esconv" / "test.txt", dst)
    _, loaded = read_source(make_task("esconv"))
    assert len(loaded.contexts) == 195 and loaded.origin == "cache"


def test_truncated_and_wrong_header_files(tmp_path, data_dir):
    ed_dir = tmp_path / "empathetic_dialogues"
    ed_dir.mkdir()
    raw = (data_dir / "empathetic_dialogues" / "test.csv").read_bytes()
    (ed_dir / "test.csv").write_bytes(raw[:50_000])
    with pytest.raises(UserError, match=r"test\.csv:\d+: \d comma-separated fields, expected 8 .*the file is truncated"):
        read_source(make_task("empathetic_dialogues"), tmp_path)
    (ed_dir / "test.csv").write_bytes(raw.replace(HEADER.encode(), b"id,idx,emotion,prompt,speaker,text,eval,tags", 1))
    with pytest.raises(UserError, match=r"test\.csv:1: header is 'id,idx,emotion"):
        read_source(make_task("empathetic_dialogues"), tmp_path)
    q = tmp_path / "qmsum" / "Academic" / "jsonl"
    q.mkdir(parents=True)
    for d in ("Committee", "Product"):
        (tmp_path / "qmsum" / d / "jsonl").mkdir(parents=True)
        shutil.copy(data_dir / "qmsum" / d / "jsonl" / "test.jsonl", tmp_path / "qmsum" / d / "jsonl" / "test.jsonl")
    (q / "test.jsonl").write_bytes((data_dir / "qmsum/Academic/jsonl/test.jsonl").read_bytes()[:300_000])
    with pytest.raises(UserError, match=r"Academic/jsonl/test\.jsonl:\d+: last line is cut off \(file truncated\)"):
        read_source(make_task("qmsum"), tmp_path)
    (tmp_path / "esconv").mkdir()
    (tmp_path / "esconv" / "test.txt").write_bytes((data_dir / "esconv/test.txt").read_bytes()[:10_000])
    with pytest.raises(UserError, match=r"esconv/test\.txt:\d+: last line is cut off"):
        read_source(make_task("esconv"), tmp_path)


# ---- downloads (a local HTTP server stands in for the public sources) --------------------------------------


@pytest.fixture
def http_root(tmp_path, monkeypatch):
    import functools
    import http.server
    import threading

    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    for var in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "MASCOT_OFFLINE", "MASCOT_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MASCOT_CACHE_DIR", str(tmp_path / "cache"))
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_qmsum_downloads_into_the_cache_and_checks_the_blob(http_root, monkeypatch, data_dir, tmp_path):
    from mascot_eval.data import sources

    root, url = http_root
    for d in ("Academic", "Committee", "Product"):
        (root / d / "jsonl").mkdir(parents=True)
        real = (data_dir / "qmsum" / d / "jsonl" / "test.jsonl").read_bytes()
        (root / d / "jsonl" / "test.jsonl").write_bytes(real)
        for split in ("train", "val"):
            (root / d / "jsonl" / f"{split}.jsonl").write_bytes(real.split(b"\n")[0] + b"\n")
    monkeypatch.setattr(sources, "QMSUM_RAW", url)
    _, loaded = read_source(make_task("qmsum"))
    assert loaded.origin == "download" and len(loaded.contexts) == 281
    assert (tmp_path / "cache" / "datasets" / "qmsum" / "Product" / "jsonl" / "test.jsonl").is_file()
    _, again = read_source(make_task("qmsum", options={"excerpt_turns": 10}))
    assert again.origin == "cache"
    # a tampered release is refused, nothing replaces the cache
    shutil.rmtree(tmp_path / "cache")
    (root / "Academic" / "jsonl" / "test.jsonl").write_bytes(b"{}\n")
    with pytest.raises(UserError, match="do not match the pinned release"):
        read_source(make_task("qmsum", options={"excerpt_turns": 11}))
    assert not (tmp_path / "cache" / "datasets" / "qmsum" / "Academic").exists()


def test_ed_downloads_from_the_release_tarball(http_root, monkeypatch, data_dir, tmp_path):
    import io
    import tarfile

    from mascot_eval.data import sources

    root, url = http_root
    real = (data_dir / "empathetic_dialogues" / "test.csv").read_bytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for split, data in (("train", real[:5000]), ("valid", real[:5000]), ("test", real)):
            info = tarfile.TarInfo(f"empatheticdialogues/{split}.csv")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (root / "ed.tar.gz").write_bytes(buf.getvalue())
    monkeypatch.setattr(sources, "ED_TARBALL", f"{url}/ed.tar.gz")
    _, loaded = read_source(make_task("empathetic_dialogues"))
    assert loaded.origin == "download" and len(loaded.contexts) == 2547
    assert (tmp_path / "cache" / "datasets" / "empathetic_dialogues" / "test.csv").read_bytes() == real


def test_download_failure_is_one_line(http_root, monkeypatch):
    from mascot_eval.data import sources

    _, url = http_root
    monkeypatch.setattr(sources, "ESCONV_RAW", f"{url}/missing/ESConv.json")
    with pytest.raises(UserError, match=r"could not download .*ESConv\.json.*set MASCOT_DATA_DIR") as exc:
        read_source(make_task("esconv"))
    assert "\n" not in str(exc.value)


def test_esconv_split_rebuild_follows_the_official_script(http_root, monkeypatch, tmp_path):
    from mascot_eval.data import sources

    root, url = http_root
    original = [
        {
            "emotion_type": "anxiety",
            "problem_type": f"p{i}",
            "situation": f"s{i}",
            "experience_type": "x",
            "dialog": [
                {"speaker": "seeker", "content": f"  hi   {i} ", "annotation": {}},
                {"speaker": "supporter", "content": "hello", "annotation": {"strategy": "Question"}},
            ],
        }
        for i in range(40)
    ]
    splits = sources.esconv_official_split(original)
    assert [len(splits[s]) for s in ("valid", "test", "train")] == [6, 6, 28]
    assert splits == sources.esconv_official_split(original)  # seeded: the same every time
    assert splits["test"][0]["dialog"][0] == {"text": splits["test"][0]["dialog"][0]["text"], "speaker": "usr"}
    assert splits["test"][0]["dialog"][0]["text"].startswith("hi ")
    assert splits["test"][0]["dialog"][1] == {"text": "hello", "speaker": "sys", "strategy": "Question"}
    raw = json.dumps(original).encode()
    (root / "ESConv.json").write_bytes(raw)
    test_bytes = "".join(json.dumps(e) + "\n" for e in splits["test"]).encode()
    monkeypatch.setattr(sources, "ESCONV_RAW", f"{url}/ESConv.json")
    monkeypatch.setitem(sources.KNOWN_BLOBS, "esconv/ESConv.json", sources.git_blob_id(raw))
    monkeypatch.setitem(sources.KNOWN_BLOBS, "esconv/test.txt", sources.git_blob_id(test_bytes))
    _, loaded = read_source(make_task("esconv"))
    assert len(loaded.contexts) == 6 and loaded.origin == "download"
    assert (tmp_path / "cache" / "datasets" / "esconv" / "train.txt").is_file()


def test_esconv_rebuild_that_differs_from_the_official_split_is_refused(http_root, monkeypatch, tmp_path):
    from mascot_eval.data import sources

    root, url = http_root
    raw = json.dumps(
        [
            {
                "emotion_type": "a",
                "problem_type": "b",
                "situation": "c",
                "dialog": [{"speaker": "seeker", "content": "x", "annotation": {}}],
            }
        ]
        * 20
    ).encode()
    (root / "ESConv.json").write_bytes(raw)
    monkeypatch.setattr(sources, "ESCONV_RAW", f"{url}/ESConv.json")
    monkeypatch.setitem(sources.KNOWN_BLOBS, "esconv/ESConv.json", sources.git_blob_id(raw))
    with pytest.raises(UserError, match="differs from the official one"):
        read_source(make_task("esconv"))
    assert not (tmp_path / "cache" / "datasets" / "esconv").exists()


def test_git_blob_id_matches_the_data_readme(data_dir):
    from mascot_eval.data.sources import KNOWN_BLOBS, git_blob_id

    assert git_blob_id((data_dir / "esconv" / "test.txt").read_bytes()) == KNOWN_BLOBS["esconv/test.txt"]
    for d in ("Academic", "Committee", "Product"):
        rel = f"qmsum/{d}/jsonl/test.jsonl"
        assert git_blob_id((data_dir / rel).read_bytes()) == KNOWN_BLOBS[rel]


def test_a_plugin_loader_plugs_in(monkeypatch):
    from mascot_eval.data.loaders import LoadedSource, Loader

    class Tiny(Loader):
        name = "tiny"
        filters = {"emotion": ("emotion", lambda c: c.emotion)}

        def read(self, ref):
            self.check_options(ref)
            return LoadedSource(
                [
                    Context(id=f"t{i}", source="tiny", domain="emotional", situation=f"s{i}", emotion="sad" if i % 2 else "proud")
                    for i in range(6)
                ]
            )

    monkeypatch.setitem(LOADERS._items, "tiny", Tiny)
    ctxs = load_contexts(make_task("tiny", filters={"emotion": "sad"}, size=2, seed=0))
    assert len(ctxs) == 2 and all(c.emotion == "sad" for c in ctxs)
    with pytest.raises(UserError, match="unknown option"):
        load_contexts(make_task("tiny", options={"x": 1}))
