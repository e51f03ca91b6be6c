"""The data plane as the services see it: which adapter and prefix hold a tenant's content.

Adapters are built once per storage configuration and shared by all request threads.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters.registry import from_config, from_url

from ..db.models import StorageConfig
from ..errors import HashMismatch, InvalidInput, NotFound, StorageMisconfigured, StorageUnavailable

DEFAULT = "default"


@dataclass(frozen=True)
class Target:
    config_id: uuid.UUID
    prefix: str
    adapter: storage.StorageAdapter

    def path(self, *segments: str) -> str:
        return "/".join(s for s in (self.prefix, *segments) if s)


def no_faults(_step: str) -> None:
    return None


class DataPlane:
    def __init__(self, default_bucket_url: str,
                 checkpoint: Callable[[str], None] = no_faults) -> None:
        self._default_url = default_bucket_url
        self._default: storage.StorageAdapter | None = None
        # Configuration rows are immutable, so their targets can be kept for good.
        self._targets: dict[uuid.UUID, Target] = {}
        self._active: dict[uuid.UUID, uuid.UUID] = {}
        self._lock = threading.Lock()
        # Crash tests replace this to stop a protocol between two of its steps.
        self.checkpoint = checkpoint

    @property
    def default_adapter(self) -> storage.StorageAdapter:
        with self._lock:
            if self._default is None:
                self._default = from_url(self._default_url)
            return self._default

    def active(self, session: Session, tenant_id: uuid.UUID) -> Target:
        """Where new content of the tenant goes."""
        config_id = self._active.get(tenant_id)
        if config_id is None:
            config_id = session.scalar(
                select(StorageConfig.id)
                .where(StorageConfig.tenant_id == tenant_id, StorageConfig.is_active)
                .order_by(StorageConfig.created_at.desc()).limit(1)
            )
            if config_id is None:
                raise StorageMisconfigured("the tenant has no storage configuration")
            self._active[tenant_id] = config_id
        return self.by_id(session, config_id)

    def by_id(self, session: Session, config_id: uuid.UUID) -> Target:
        """Where content written under one (possibly older) configuration lives."""
        target = self._targets.get(config_id)
        if target is not None:
            return target
        config = session.get(StorageConfig, config_id)
        if config is None:
            raise NotFound("storage configuration not found")
        target = Target(config.id, config.prefix, self._adapter(config))
        with self._lock:
            return self._targets.setdefault(config_id, target)

    def forget_tenant(self, tenant_id: uuid.UUID) -> None:
        self._active.pop(tenant_id, None)

    def _adapter(self, config: StorageConfig) -> storage.StorageAdapter:
        if config.storage_type == DEFAULT:
            return self.default_adapter
        return from_config(config.storage_type, dict(config.connection_config))

    def close(self) -> None:
        with self._lock:
            for target in self._targets.values():
                if target.adapter is not self._default:
                    target.adapter.close()
            if self._default is not None:
                self._default.close()
            self._targets.clear()
            self._default = None


def default_config(tenant_id: uuid.UUID) -> StorageConfig:
    """The server's own bucket, each tenant confined to its own prefix."""
    return StorageConfig(tenant_id=tenant_id, storage_type=DEFAULT,
                         prefix=f"tenants/{tenant_id}", connection_config={})


@contextmanager
def storage_errors(pointer_id: uuid.UUID | None = None) -> Iterator[None]:
    """Map the adapters' error tree to API errors, in one place."""
    try:
        yield
    except storage.StorageUnavailable as exc:
        raise StorageUnavailable(
            "the tenant's bucket is unreachable right now; retry later"
        ) from exc
    except storage.StorageAuthError as exc:
        raise StorageMisconfigured(
            "the tenant's bucket rejected the configured credentials; an admin must update "
            "the storage configuration"
        ) from exc
    except storage.InvalidPath as exc:
        raise InvalidInput(f"the object path is not valid for this bucket: {exc}") from exc
    except storage.IntegrityError as exc:
        raise HashMismatch(
            "the stored object failed the bucket's own checksum",
            pointer_id=str(pointer_id) if pointer_id else None,
        ) from exc
