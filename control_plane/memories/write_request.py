"""What step 3 of the write protocol sets, decided before it runs: one ``WriteRequest`` per
memory, sent as the parameters of the single-row and the many-row write statements alike
(``hotpath_commit.py``, ``hotpath_many.py``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..addresses import MemoryAddress

__all__ = ["WriteRequest", "address_params"]


def address_params(tenant_id: uuid.UUID, address: MemoryAddress) -> dict[str, Any]:
    """The parameters naming a memory's address in the hot path's statements."""
    return {"v_tenant": tenant_id, "v_scope": address.scope, "v_scope_ref": address.scope_ref,
            "v_key": address.key, "v_user_ref": address.user_ref}


@dataclass(frozen=True)
class WriteRequest:
    """Everything step 3 of the write protocol sets, decided before it runs."""

    tenant_id: uuid.UUID
    address: MemoryAddress
    pointer_id: uuid.UUID  # the existing row's id, or the new row's
    seen_subject_user: str | None  # the row's subject at lookup (binds the object's key)
    guard_user: str | None  # the subject the row will have: the erasure guard checks it
    config_id: uuid.UUID
    path: str
    sha256: str
    size: int
    now: datetime
    memory_type: str | None
    default_memory_type: str
    tags: list[str] | None
    importance: int | None
    title: str | None
    meta_user: str | None
    agent_id: str | None
    expires_at: datetime | None
    accessor_type: str
    accessor_id: str
    operation: str
    request_id: str | None
    accessor_agent_id: str | None = None  # the audit row's agent id (agent keys)
    audit_address: str = ""  # " sealed:…": the address sealed under the subject's key
    key_id: uuid.UUID | None = None  # the subject key the object is sealed under
    source: str | None = None  # None: keep the row's (a new row: api)
    searchable: bool | None = None  # None: keep the row's (a new row: true)
    # The lookup found a row at the address: the object is sealed for that row, so if the row
    # has gone since, no new one is inserted for it (the general path binds anew).
    existed: bool = False

    @property
    def detail_head(self) -> str:
        """The audit row's detail is ``detail_head``, the new version, ``detail_tail``."""
        return f"{self.address.scope} v"

    @property
    def detail_tail(self) -> str:
        return f" {self.size} bytes{self.audit_address}"

    def params(self) -> dict[str, Any]:
        return address_params(self.tenant_id, self.address) | {
            "v_pointer_id": self.pointer_id, "v_seen_user": self.seen_subject_user,
            "v_guard_user": self.guard_user, "v_config": self.config_id, "v_path": self.path,
            "v_sha": self.sha256, "v_size": self.size, "v_now": self.now,
            "v_memory_type": self.memory_type, "v_default_type": self.default_memory_type,
            "v_tags": self.tags, "v_importance": self.importance, "v_title": self.title,
            "v_meta_user": self.meta_user, "v_agent_id": self.agent_id,
            "v_expires_at": self.expires_at, "v_accessor_type": self.accessor_type,
            "v_accessor_id": self.accessor_id, "v_operation": self.operation,
            "v_request_id": self.request_id, "v_accessor_agent": self.accessor_agent_id,
            "v_detail_head": self.detail_head, "v_detail_tail": self.detail_tail,
            "v_key_id": self.key_id, "v_source": self.source,
            "v_searchable": self.searchable, "v_new_searchable": self.searchable is not False,
            "v_existed": self.existed,
        }
