"""Token counts with a real tokenizer (``bpe_openai``: OpenAI's BPE tables, bundled, no
download at run time).

A model maps to its encoding (``gpt-4o*``, ``gpt-4.1*`` → ``o200k_base``; ``gpt-4``,
``gpt-3.5-turbo`` → ``cl100k_base``); a model the tokenizer does not know is counted with
``o200k_base`` (:data:`FALLBACK_ENCODING`), and the answer says so (``encoding``).

A chat message costs its content's tokens plus :data:`MESSAGE_OVERHEAD`: OpenAI's chat format
frames each message with 3 tokens, and every role name (system, user, assistant, tool) is one
token in both encodings.
"""

from __future__ import annotations

import functools
import threading
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import Any

FALLBACK_ENCODING = "o200k_base"
MESSAGE_OVERHEAD = 4
DEFAULT_MODEL = "gpt-4o"
DEFAULT_LIMIT = 128_000

# Context windows of the models people name most; any other model gets DEFAULT_LIMIT unless
# the caller sends context_window_limit.
CONTEXT_LIMITS = {
    "gpt-4o": 128_000, "gpt-4o-mini": 128_000, "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576, "gpt-4": 8_192, "gpt-4-32k": 32_768,
    "gpt-3.5-turbo": 16_385,
}


@dataclass(frozen=True)
class Tokenizer:
    model: str
    encoding: str
    _encode: Any  # bpe_openai.Encoding

    def count(self, text: str) -> int:
        """Tokens of ``text`` (special-token lookalikes counted as plain text)."""
        return len(self._encode.encode_ordinary(text)) if text else 0

    def message(self, content: str) -> int:
        """Tokens one chat message costs: its content plus the framing."""
        return self.count(content) + MESSAGE_OVERHEAD

    def truncate(self, text: str, tokens: int) -> str:
        """The longest prefix of ``text`` within ``tokens`` tokens (on token boundaries)."""
        if tokens <= 0:
            return ""
        ids = self._encode.encode_ordinary(text)
        if len(ids) <= tokens:
            return text
        return self._encode.decode(ids[:tokens])


_LOAD = threading.Lock()


@functools.lru_cache(maxsize=1)
def _library() -> ModuleType:
    # Imported on first use (it loads its tables at import); its importlib.resources call
    # warns with DeprecationWarning on Python 3.11, which is the library's, not ours.
    with _LOAD, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return bpe_openai


@functools.lru_cache(maxsize=16)
def _encoding(name: str) -> Any:
    library = _library()
    with _LOAD, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return library.get_encoding(name)


def encoding_name(model: str) -> str:
    """The encoding ``model`` uses; :data:`FALLBACK_ENCODING` for a model not known here."""
    try:
        name = _library().encoding_name_for_model(model)
    except Exception:  # the library raises ValueError or its own error for unknown models
        return FALLBACK_ENCODING
    return name if name in ("o200k_base", "cl100k_base") else FALLBACK_ENCODING


def for_model(model: str) -> Tokenizer:
    name = encoding_name(model)
    return Tokenizer(model, name, _encoding(name))


def default_limit(model: str) -> int:
    return CONTEXT_LIMITS.get(model, DEFAULT_LIMIT)
