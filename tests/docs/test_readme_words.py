"""The README explains its words where it first uses them, and its list of the SDK's errors is
the SDK's: a new reader never meets "the seed" or "Jet's memory layer" unexplained, and the
error they get when no server answers is in the list."""

from __future__ import annotations

import re
from pathlib import Path

import memplane

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _prose(text: str) -> str:
    return " ".join(text.split())


def test_the_seed_is_explained_where_it_is_first_used() -> None:
    first = re.search(r"\bseed\b", README)
    assert first is not None
    around = _prose(README[first.start() - 20:first.start() + 200])
    assert "*The seed* is the memory API specification memplane implements (MeetLoyd's " \
           "memory API" in around


def test_jets_memory_layer_is_explained_where_it_is_first_used() -> None:
    first = README.index("Jet")
    around = _prose(README[first:first + 300])
    assert around.startswith("Jet's memory layer does (*Jet's memory layer*: the design the "
                             "seed builds on — an append-only event log, curated entries, and "
                             "a daily compactor")


def test_the_error_list_names_the_transport_error() -> None:
    sentence = _prose(README[README.index("Errors form one tree"):])
    sentence = sentence[:sentence.index("Scopes:")]
    for name in ("NotFound", "HashMismatch", "Forbidden", "Unauthorized", "Conflict",
                 "StorageUnavailable", "APIError", "TransportError", "MemplaneError"):
        assert f"`{name}`" in sentence or f"memplane.{name}" in sentence, name
        assert issubclass(getattr(memplane, name), memplane.MemplaneError)
