"""memplane as LangGraph's long-term store and thread checkpointer.

Example (not run as a doctest)::

    from memplane.integrations.langgraph import MemplaneCheckpointer, MemplaneStore

    client = memplane.Client(url, api_key)
    graph = builder.compile(checkpointer=MemplaneCheckpointer(client, user_id="u-42"),
                            store=MemplaneStore(client))

Importing this package imports nothing of LangGraph: the classes are loaded on first
access, and a missing ``langgraph-checkpoint`` raises an ImportError that says to
``pip install 'memplane[langgraph]'``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checkpointer import MemplaneCheckpointer
    from .store import MemplaneStore

__all__ = ["MemplaneCheckpointer", "MemplaneStore"]

_WHERE = {"MemplaneCheckpointer": ".checkpointer", "MemplaneStore": ".store"}
INSTALL_HINT = ("memplane's LangGraph integration needs langgraph-checkpoint: "
                "pip install 'memplane[langgraph]'")


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(where, __name__)
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] in ("langgraph", "langchain_core"):
            raise ImportError(INSTALL_HINT, name=exc.name) from exc
        raise
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
