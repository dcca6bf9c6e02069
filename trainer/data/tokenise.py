"""Records to token ids a batch at a time, in worker processes: the fast tokenizer's batch call on a batch's texts,
the batch's ids and trainable mask built as two flat arrays, the held-out records set apart.

Token for token what trainer/data/packing.py pack() makes record by record (tests/trainer/test_data_streaming.py):
each record is [bos] prompt response [eos] with the prompt masked, or a chat record's template pieces with only the
assistant's turns trained; ids are 32 bits (vocabularies reach 152k, beyond 16 bits).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import pickletools
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from itertools import chain
from multiprocessing.context import BaseContext

import numpy as np

from trainer.base.errors import InputError
from trainer.base.pod.parent_death import end_with_owner
from trainer.data.formats import Record, render
from trainer.data.records import RecordBatch
from trainer.data.split import is_held_out
from trainer.data.tokenizer import Tokenizer

TOKEN_DTYPE = np.dtype(np.uint32)
# Beyond a few dozen workers the one process that reads the records and writes the ids is the bottleneck.
MAX_WORKERS = 32
IN_FLIGHT_PER_WORKER = 2  # batches handed out per worker: one tokenising, one queued, so none waits for work


@dataclass(frozen=True)
class TokenStream:
    """Consecutive records of the packed stream: their ids, per id whether it is learnt, and each record's length."""

    ids: np.ndarray
    trainable: np.ndarray
    record_lengths: np.ndarray
    """Tokens of each record, in order (int64; they add up to len(ids))."""

    @staticmethod
    def empty() -> TokenStream:
        return TokenStream(np.empty(0, TOKEN_DTYPE), np.empty(0, bool), np.empty(0, np.int64))


@dataclass(frozen=True)
class BatchTokens:
    """One record batch tokenised: its training records' stream and its held-out records' stream."""

    train: TokenStream
    val: TokenStream


@dataclass(frozen=True)
class Recipe:
    """How records become ids: the same in every worker."""

    tokenizer: Tokenizer
    data_format: str
    val_fraction: float = 0.0


def flatten(pieces: list[list[int]], trained: list[bool], record_pieces: list[int]) -> TokenStream:
    """Pieces of ids in stream order, each trained on or not, as two flat arrays; record_pieces[r] of them make
    record r."""
    lengths = np.fromiter((len(piece) for piece in pieces), dtype=np.int64, count=len(pieces))
    total = int(lengths.sum())
    ids = np.fromiter(chain.from_iterable(pieces), dtype=TOKEN_DTYPE, count=total)
    piece_ends = np.concatenate([[0], np.cumsum(lengths)])
    record_bounds = np.concatenate([[0], np.cumsum(np.asarray(record_pieces, dtype=np.int64))])
    record_lengths = np.diff(piece_ends[record_bounds]).astype(np.int64)
    return TokenStream(ids, np.repeat(np.asarray(trained, dtype=bool), lengths), record_lengths)


def chat_stream(records: list[Record], tokenizer: Tokenizer) -> TokenStream:
    """Each conversation's template pieces, all the batch's pieces encoded in one call."""
    texts: list[str] = []
    trained: list[bool] = []
    record_pieces: list[int] = []
    for record in records:
        if "messages" not in record:
            raise InputError(f"--dataset-format chat: a record has no field 'messages' ({sorted(record)})")
        segments = tokenizer.chat_segments(record["messages"])
        for text, learnt in segments:
            texts.append(text)
            trained.append(learnt)
        record_pieces.append(len(segments))
    return flatten(tokenizer.encode_batch(texts), trained, record_pieces)


def prompt_response_stream(records: list[Record], tokenizer: Tokenizer, data_format: str) -> TokenStream:
    """[bos] prompt (masked), response [eos] (learnt) per record; the batch's non-empty texts encoded in one call."""
    texts = [text for record in records for text in render(record, data_format)]
    wanted = [index for index, text in enumerate(texts) if text]  # a text record's prompt is empty
    encoded: list[list[int]] = [[] for _ in texts]
    for index, ids in zip(wanted, tokenizer.encode_batch([texts[i] for i in wanted]), strict=True):
        encoded[index] = ids
    bos = [tokenizer.bos_id] if tokenizer.bos_id is not None else []
    eos = [tokenizer.eos_id] if tokenizer.eos_id is not None else []
    pieces: list[list[int]] = []
    for prompt, response in zip(encoded[0::2], encoded[1::2], strict=True):
        pieces += (bos, prompt, response, eos)
    return flatten(pieces, [False, False, True, True] * len(records), [4] * len(records))


def tokenise_records(records: list[Record], recipe: Recipe) -> TokenStream:
    if not records:
        return TokenStream.empty()
    if recipe.data_format == "chat":
        return chat_stream(records, recipe.tokenizer)
    return prompt_response_stream(records, recipe.tokenizer, recipe.data_format)


def tokenise_batch(batch: RecordBatch, recipe: Recipe) -> BatchTokens:
    """The batch's records (raw lines parsed here, in the worker) tokenised, the held-out ones apart."""
    records = batch.parsed()
    if recipe.val_fraction <= 0:
        return BatchTokens(tokenise_records(records, recipe), TokenStream.empty())
    held = [is_held_out(batch.first_index + offset, recipe.val_fraction) for offset in range(len(records))]
    train = [record for record, out in zip(records, held, strict=True) if not out]
    val = [record for record, out in zip(records, held, strict=True) if out]
    return BatchTokens(tokenise_records(train, recipe), tokenise_records(val, recipe))


def worker_count(requested: int) -> int:
    """--data-workers, or one per CPU this process may run on (its affinity: a container's CPU set), at most
    MAX_WORKERS."""
    return requested if requested > 0 else max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


_recipe: Recipe | None = None  # a worker's, set once when it starts


def start_worker(recipe: Recipe, owner: int) -> None:
    global _recipe
    _recipe = recipe
    # A worker would outlive an owner killed by SIGKILL (torchrun restarting its workers, the OOM killer) for good.
    end_with_owner(owner)
    # One thread per worker: the processes are the parallelism (the Rust tokenizer would otherwise start a thread
    # per CPU in each of them; tokenizers reads this variable on every batch call, utils/parallelism.rs).
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def tokenise_in_worker(batch: RecordBatch) -> BatchTokens:
    assert _recipe is not None, "start_worker runs first"
    return tokenise_batch(batch, _recipe)


def modules_to_rebuild(recipe: Recipe) -> list[str]:
    """The modules unpickling `recipe` imports (each global its pickle names, read at protocol 2, which names them
    whole in GLOBAL opcodes: pickletools), this one first: what a worker needs before its first batch."""
    found = [
        str(arg).split(" ")[0]
        for op, arg, _ in pickletools.genops(pickle.dumps(recipe, protocol=2))
        if op.name == "GLOBAL"
    ]
    return list(dict.fromkeys([__name__, *found]))


def worker_context(recipe: Recipe) -> BaseContext:
    """Workers forked by a fork server, not by this process.

    The process that tokenises has threads by then: the Rust tokenizer's pool once it has encoded a batch here,
    torch's OpenMP pool, on rank 0 gloo's and the TCPStore's loops (their names in /proc/<pid>/task/*/comm). fork()
    copies only the calling thread, so a lock another thread held at that moment stays held in the child for good,
    and POSIX allows the child of a multi-threaded process only async-signal-safe calls until it execs (fork(2),
    pthread_atfork(3)); CPython 3.12 warns on such a fork and 3.14 makes forkserver Linux's default start method.
    The fork server is started by fork and exec (a fresh interpreter, one thread), imports the modules the recipe
    needs once (modules_to_rebuild: the tokenizer's library among them), and forks each worker from itself, so a
    worker starts without importing them again and rebuilds only the recipe from its pickle. The preload is set for
    this process's fork server, which starts with the first pool and serves every later one."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(modules_to_rebuild(recipe))
    return context


def tokenised(batches: Iterable[RecordBatch], recipe: Recipe, workers: int) -> Iterator[BatchTokens]:
    """Each batch tokenised, in order, by `workers` processes (by this one when 1, or for a single batch).

    At most IN_FLIGHT_PER_WORKER batches per worker are read ahead: Pool.imap would read the whole input at once
    (its task handler thread drains the iterable; CPython gh-64192, whose `buffersize` arrives in Python 3.15), so
    the results are taken in order from a bounded window of submitted batches instead. A ProcessPoolExecutor, not a
    Pool: a worker killed (the OOM killer, a crash in the tokenizer) breaks the executor and every pending result
    raises, where a Pool starts a new worker and the lost batch's result never comes (a wait without end). The
    workers come from a fork server (worker_context) and run only the tokenizer and numpy.
    """
    batches = iter(batches)
    head = [batch for batch in (next(batches, None), next(batches, None)) if batch is not None]
    if workers <= 1 or len(head) < 2:
        yield from (tokenise_batch(batch, recipe) for batch in chain(head, batches))
        return
    context = worker_context(recipe)
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=start_worker, initargs=(recipe, os.getpid()))
    pending: deque[Future[BatchTokens]] = deque()
    try:
        for batch in chain(head, batches):
            pending.append(pool.submit(tokenise_in_worker, batch))
            if len(pending) >= IN_FLIGHT_PER_WORKER * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BrokenProcessPool as broken:
        raise RuntimeError(
            f"a data preparation worker died (killed for memory? fewer --data-workers than {workers} need less)"
        ) from broken
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
