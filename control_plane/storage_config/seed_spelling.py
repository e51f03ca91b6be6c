"""The seed's camelCase spelling of a storage configuration.

The seed configures a bucket with ``{"storageType": "gcs", "connectionConfig": {...}}``;
v1 documents ``{"storage_type", "connection_config"}``. Both are accepted: the camelCase
names are renamed to the documented ones before the body is validated, so every rule and
every error sentence is the documented schema's (an unknown key, camelCase or not, is
refused by name). A name given in both spellings is refused, never silently chosen.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# The body's own fields (PUT /v1/storage/config and POST /v1/storage/configs).
BODY_FIELDS = ("storage_type", "connection_config", "make_default", "name")


def camel(name: str) -> str:
    """``access_key_id`` -> ``accessKeyId``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def snake_keys(data: Any, fields: Iterable[str]) -> Any:
    """``data`` with the camelCase form of each of ``fields`` renamed to the field; anything
    else (unknown keys included) is left for the schema to judge. Raises ``ValueError`` when
    a field is given in both spellings."""
    if not isinstance(data, dict):
        return data
    renamed = dict(data)
    for field in fields:
        alias = camel(field)
        if alias == field or alias not in renamed:
            continue
        if field in renamed:
            raise ValueError(f"give {field} or {alias}, not both")
        renamed[field] = renamed.pop(alias)
    return renamed


def snake_body(data: Any) -> Any:
    """A storage configuration body in the seed's spelling, as the documented one."""
    return snake_keys(data, BODY_FIELDS)
