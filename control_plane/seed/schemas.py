"""Bodies of the seed's routes: the v1 schemas, also accepting camelCase names.

The seed's skills write ``scopeRef``, ``sourceRef``, ``occurredAt``, ``userId`` … as often as
the tables' own ``scope_ref`` … Each schema here is its v1 schema with one step in front that
renames a camelCase key to its column name; every rule about the values stays in the v1
schema, so the two routes can never accept different things.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator
from pydantic.alias_generators import to_camel

from ..entries.schemas import EntryIn, EntryOut, EntryUpdate
from ..events.schemas import EventIn, EventOut


def column_names(model: type[BaseModel], data: Any) -> Any:
    """``data`` with each camelCase key of ``model``'s fields renamed to the field's name.

    Sending a field under both names with different values is refused: which one was meant?
    """
    if not isinstance(data, dict):
        return data
    renamed = dict(data)
    for name in model.model_fields:
        camel = to_camel(name)
        if camel == name or camel not in renamed:
            continue
        value = renamed.pop(camel)
        if name in renamed and renamed[name] != value:
            raise ValueError(f"{camel} and {name} are the same field with different values; "
                             f"send one of them")
        renamed[name] = value
    return renamed


class _CamelCase(BaseModel):
    @model_validator(mode="before")
    @classmethod
    def _column_names(cls, data: Any) -> Any:
        return column_names(cls, data)


class SeedEventIn(_CamelCase, EventIn):
    """``POST /memory/events``: the v1 event, camelCase names accepted."""


class SeedEntryIn(_CamelCase, EntryIn):
    """``POST /memory``: the v1 entry, camelCase names accepted."""


class SeedEntryUpdate(_CamelCase, EntryUpdate):
    """``PUT /memory/{id}``: the v1 entry update, camelCase names accepted."""


class SeedEventOut(EventOut):
    body: str | None = Field(None, description="The Markdown body, read from the bucket and "
                             "verified; null when the list was asked for without bodies "
                             "(includeBody=false).")


class SeedEventPage(BaseModel):
    items: list[SeedEventOut] = Field(description="Events in (occurred_at, id) order.")
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on "
                                    "the last page.")


__all__ = ["EntryOut", "SeedEntryIn", "SeedEntryUpdate", "SeedEventIn", "SeedEventOut",
           "SeedEventPage", "column_names"]
