"""The batching embedder (cairn.runtime.embedder): concurrent calls share forward passes, every
caller gets its own vectors in its own order, and one bad request fails alone."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, cast

import anyio.to_thread
import numpy as np
import pytest

from cairn.runtime.embedder import BATCH_SIZE, MAX_TOKENS, PASS, Embedder, _Request, get_embedder


@pytest.fixture(scope="module")
def model() -> Embedder:
    e = get_embedder()
    e.embed(["the model thread is up and idle"])
    return e


def direct(e: Embedder, texts: list[str]) -> Any:
    return e._model.encode(texts, batch_size=BATCH_SIZE, normalize_embeddings=True, convert_to_numpy=True)


def test_requests_queued_during_a_pass_share_the_next_one(model: Embedder) -> None:
    texts = [f"question {i} about cloud costs and running plans" for i in range(BATCH_SIZE + 6)]
    before = model.passes
    with model._ready:  # the model thread cannot take anything until all are queued
        futures = [model._submit([t]) for t in texts]
    got = np.vstack([f.result() for f in futures])
    assert model.passes - before == 2  # one full batch, then the six left over
    np.testing.assert_allclose(got, direct(model, texts), atol=1e-5)


def test_a_long_call_goes_in_batches_and_keeps_its_order(model: Embedder) -> None:
    texts = [("word " * (i % 40)) + f"text {i}" for i in range(3 * BATCH_SIZE + 5)]
    before = model.passes
    got = model.embed(texts)
    assert model.passes - before == -(-len(texts) // PASS)  # passes of ``PASS`` by default
    np.testing.assert_allclose(got, direct(model, texts), atol=1e-5)
    before = model.passes
    np.testing.assert_allclose(model.embed(texts, BATCH_SIZE), got, atol=1e-5)
    assert model.passes - before == 4  # a larger pass when asked, never more than a batch


def test_concurrent_callers_each_get_their_own_vectors(model: Embedder) -> None:
    texts = [f"caller {i} asks about topic {i * 7}" for i in range(24)]
    out: dict[int, Any] = {}

    def call(i: int) -> None:
        out[i] = model.embed([texts[i], texts[-1 - i]])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = direct(model, texts)
    for i, vectors in out.items():
        np.testing.assert_allclose(vectors, expected[[i, len(texts) - 1 - i]], atol=1e-5)


def test_awaited_queries_take_no_worker_thread_and_each_get_their_own_vectors(model: Embedder) -> None:
    """docs/design.md §Embedding under load: a search awaits its vector on the event loop, so
    queries embed while every worker thread is busy, and concurrent ones share passes."""
    texts = [f"awaited query {i} about the Frankfurt region" for i in range(12)]

    async def main() -> list[Any]:
        limiter = anyio.to_thread.current_default_thread_limiter()
        holders = [object() for _ in range(int(limiter.total_tokens))]
        for holder in holders:  # every worker thread taken, as under a burst of blocking calls
            await limiter.acquire_on_behalf_of(holder)
        try:
            with anyio.fail_after(60):
                return list(await asyncio.gather(*(model.aembed([t]) for t in texts)))
        finally:
            for holder in holders:
                limiter.release_on_behalf_of(holder)

    before = model.passes
    got = asyncio.run(main())
    assert model.passes - before < len(texts)  # queued while a pass ran: they shared the next
    np.testing.assert_allclose(np.vstack(got), direct(model, texts), atol=1e-5)


def test_a_caller_that_stopped_waiting_costs_no_pass_and_fails_no_one(model: Embedder) -> None:
    with model._ready:  # queued together; the first caller gives up before the model takes it
        dropped = model._submit(["a query whose caller went away"])
        kept = model._submit(["a query still awaited"])
        assert dropped.cancel()
    np.testing.assert_allclose(kept.result(timeout=60), direct(model, ["a query still awaited"]), atol=1e-5)
    assert model.embed(["the model thread still serves"]).shape == (1, 384)


def test_a_request_that_cannot_be_embedded_fails_alone(model: Embedder) -> None:
    with model._ready:
        good = model._submit(["a fine question"])
        bad = model._submit(cast(list[str], [{"not": "a text"}]))
        also_good = model._submit(["another fine question"])
    assert good.result().shape == (1, 384)
    assert also_good.result().shape == (1, 384)
    with pytest.raises(Exception):  # noqa: B017 (whatever the tokenizer raises)
        bad.result()
    assert model.embed(["the model thread still serves"]).shape == (1, 384)


@pytest.fixture
def torch_passes(model: Embedder, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Texts per call of torch's ``encode`` on the model from now on (the tests' own references
    call it too: read it before them)."""
    counts: list[int] = []
    encode = model._model.encode

    def recording(texts: Any, *args: Any, **kwargs: Any) -> Any:
        counts.append(len(texts))
        return encode(texts, *args, **kwargs)

    monkeypatch.setattr(model._model, "encode", recording)
    return counts


def test_every_pass_runs_on_the_query_model_with_torchs_vectors(
    model: Embedder, torch_passes: list[int]
) -> None:
    """docs/design.md §Embedding under load: queries and large calls alike (an ingest's, a
    correspondence sync's) run on ONNX Runtime, one intra-op thread, at a fraction of torch's CPU;
    the vectors agree with torch's for short texts and texts at or past the 256-word-piece
    window, truncated alike."""
    short = [f"short query {i} about cloud costs" for i in range(3)]
    # word pieces: "alpha" and each number one piece; [CLS] and [SEP] two more
    window = [" ".join(f"alpha {n}" for n in range(k)) for k in (MAX_TOKENS // 2 - 1, 200, 400)]
    assert [min(c, MAX_TOKENS) for c in model.token_counts(window)] == [MAX_TOKENS] * 3
    texts = short + window + [f"an ingest's text number {i}, said once" for i in range(2 * PASS)]
    got_short = model.embed(short)
    got = model.embed(texts)  # length-sorted passes: the window-length texts share one
    assert torch_passes == []  # not torch's
    assert model._query_model is not None
    assert model._query_model.session.get_session_options().intra_op_num_threads == 1
    np.testing.assert_allclose(got_short, direct(model, short), atol=1e-5)
    np.testing.assert_allclose(got, direct(model, texts), atol=1e-5)
    np.testing.assert_allclose(model.embed(window[2:]), direct(model, window[2:]), atol=1e-5)  # alone


@pytest.fixture
def exports(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per export of the query model's graph."""
    from cairn.runtime import embedder

    counts: list[int] = []
    export = embedder._export

    def counted(*args: Any) -> None:
        counts.append(1)
        export(*args)

    monkeypatch.setattr(embedder, "_export", counted)
    return counts


def test_the_query_models_graph_is_exported_once_and_kept_by_what_it_came_from(
    model: Embedder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, exports: list[int]
) -> None:
    """The exported graph is cached under the user's cache folder, named by the weights and the
    exporting versions; a cache that cannot be written leaves the graph in memory."""
    from cairn.runtime import embedder

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    texts = ["a query about the Frankfurt region"]
    first = embedder._QueryModel(model._model, model._path)
    cached = list((tmp_path / "cairn").glob("minilm-*.onnx"))
    assert len(cached) == 1 and exports == [1]
    second = embedder._QueryModel(model._model, model._path)  # read from the cache
    assert exports == [1]
    np.testing.assert_allclose(second.run(texts)[0], first.run(texts)[0], atol=1e-6)
    monkeypatch.setattr(embedder, "EXPORT_VERSION", embedder.EXPORT_VERSION + 1)  # another export
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    in_memory = embedder._QueryModel(model._model, model._path)
    assert exports == [1, 1]
    np.testing.assert_allclose(in_memory.run(texts)[0], first.run(texts)[0], atol=1e-6)


@pytest.mark.parametrize("content", [b"", b"half a graph"], ids=["empty", "corrupt"])
def test_a_cached_graph_that_cannot_be_loaded_is_exported_again(
    model: Embedder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: bytes
) -> None:
    """A cache file left empty or cut short (a crash or a full disk after the rename, another
    program): every query pass failed for as long as the file stayed (review 35); the graph is
    exported again, over the broken file."""
    from cairn.runtime import embedder

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = tmp_path / "cairn" / f"minilm-{embedder._export_key(model._path)}.onnx"
    path.parent.mkdir()
    path.write_bytes(content)
    texts = ["a query about the Frankfurt region"]
    hidden = embedder._QueryModel(model._model, model._path).run(texts)[0]
    np.testing.assert_allclose(hidden[0].mean(axis=0), _pooled(model, texts), atol=1e-5)
    assert path.stat().st_size > 1_000_000  # the whole graph, in place of the broken one
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_a_query_model_prepared_without_export_only_loads_the_cached_graph(
    model: Embedder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, exports: list[int]
) -> None:
    """``prepare_query_model(export=False)`` (the warm CLI before its first fork,
    tests/e2e/warm_cli.py) runs no torch code: with no cached graph it builds nothing and says so;
    with one it builds the session, which a forked child's small pass then uses as it is."""
    import os

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(model, "_query_model", None)
    assert model.prepare_query_model(export=False) is False
    assert exports == [] and model._query_model is None
    assert model.prepare_query_model() is True  # exported, to the cache
    assert exports == [1]
    texts = ["a query about the Frankfurt region"]
    want = model._query_model.run(texts)[0] if model._query_model is not None else None
    monkeypatch.setattr(model, "_query_model", None)
    assert model.prepare_query_model(export=False) is True
    assert exports == [1]
    prepared = model._query_model
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child of a process that prepared the model and never ran torch's threads here
        vector = model.embed(texts)  # its own model thread, the parent's session
        os.write(write, b"1" if model._query_model is prepared and vector.shape == (1, 384) else b"0")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"
    assert prepared is not None
    np.testing.assert_allclose(prepared.run(texts)[0], want, atol=1e-6)


def _pooled(model: Embedder, texts: list[str]) -> np.ndarray:
    """torch's mean token vector of the text (one text: no padding), unnormalised."""
    rows = model._model.encode(texts, output_value="token_embeddings", show_progress_bar=False)
    return np.asarray(rows[0].mean(dim=0))


def test_a_part_is_pooled_from_the_texts_own_pass(model: Embedder) -> None:
    """``embed_with_part``: the text's vector and the normalised mean of its token vectors over the
    spans come from one pass, shared with other callers' texts, each answered as if alone."""
    text, others = "What books has Melanie read lately?", ["a plain query about cloud costs", "another"]
    spans = [(5, 10), (23, 27)]  # "books", "read"
    offsets = model._model.tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    positions = [n for n, (a, b) in enumerate(offsets) if (a, b) in {(5, 10), (23, 27)}]
    tokens = model._model.encode([text], output_value="token_embeddings")[0].numpy()
    expected = tokens[positions].mean(axis=0)
    expected /= np.linalg.norm(expected)
    before = model.passes
    with model._ready:  # all three share the next pass
        plain = model._submit(others)
        pooled = model._enqueue(_Request([text], [spans]))
    got = pooled.result()
    assert model.passes - before == 1
    np.testing.assert_allclose(plain.result(), direct(model, others), atol=1e-5)
    np.testing.assert_allclose(got, np.vstack([direct(model, [text]), [expected]]), atol=1e-5)
    vector, part = model.embed_with_part(text, spans)
    assert part is not None
    np.testing.assert_allclose(vector, got[0], atol=1e-5)
    np.testing.assert_allclose(part, expected, atol=1e-5)
    whole, none = model.embed_with_part(text, [(0, 0)])  # no token inside: no part, the vector still
    assert none is None
    np.testing.assert_allclose(whole, got[0], atol=1e-5)
