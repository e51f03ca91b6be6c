"""The keyring of a running control plane: its KEK providers and its cache of subject keys.

The KEK providers (``kek_providers.py``: local key ring or AWS KMS) wrap and unwrap the
tenants' subject keys; the keys domain (``control_plane/keys``) decides which KEK wraps
which subject key, and seals objects under them.

Unwrapped subject keys are cached in memory (bounded LRU with a time limit) so the hot path
does not call the KMS. Every read still looks the subject key's row up, so a key shredded by
another process is refused at once, cached or not.
"""

from __future__ import annotations

import fnmatch
import threading
import time
import uuid
from collections import OrderedDict

from ..errors import KeyServiceUnavailable
from ..settings import Settings
from .kek_providers import AwsKms, KekProvider, LocalKeyRing


class KeyCache:
    """Unwrapped subject keys by id: least recently used out first, each for ``ttl`` seconds."""

    def __init__(self, size: int, ttl: float) -> None:
        self.size, self.ttl = size, ttl
        self._items: OrderedDict[uuid.UUID, tuple[float, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key_id: uuid.UUID) -> bytes | None:
        # Read without the lock (one dictionary lookup is atomic; the lock orders changes):
        # every read of a batch asks for its subject's key, and queueing on the lock under
        # load cost more than the lookup. A key forgotten before the lookup is not found.
        item = self._items.get(key_id)
        if item is None:
            return None
        if item[0] < time.monotonic():
            with self._lock:
                if self._items.get(key_id) is item:
                    del self._items[key_id]
            return None
        if self._lock.acquire(blocking=False):  # recency is best effort: a hit never waits
            try:
                if key_id in self._items:
                    self._items.move_to_end(key_id)
            finally:
                self._lock.release()
        return item[1]

    def put(self, key_id: uuid.UUID, key: bytes) -> None:
        if self.size == 0 or self.ttl == 0:
            return
        with self._lock:
            self._items[key_id] = (time.monotonic() + self.ttl, key)
            self._items.move_to_end(key_id)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def forget(self, key_ids: list[uuid.UUID]) -> None:
        with self._lock:
            for key_id in key_ids:
                self._items.pop(key_id, None)

    def __len__(self) -> int:
        return len(self._items)


class Keyring:
    """The providers and the key cache of one running control plane (API, CLI or worker)."""

    def __init__(self, settings: Settings) -> None:
        self.enabled = settings.encryption
        self.default_provider = settings.kek_provider
        self._settings = settings
        self._providers: dict[str, KekProvider] = {}
        self._lock = threading.Lock()
        self.cache = KeyCache(settings.key_cache_size, settings.key_cache_seconds)

    def allows_key_ref(self, tenant_id: uuid.UUID, key_ref: str) -> bool:
        """Whether a tenant may move its KEK to this KMS key: the operator's allow-list
        (MEMPLANE_KEK_AWS_ALLOWED_KEY_REFS: exact refs or ``*`` patterns, ``{tenant_id}``
        standing for the tenant's own id), by default only the server's own key."""
        for pattern in self._settings.allowed_kms_key_refs:
            if fnmatch.fnmatchcase(key_ref, pattern.replace("{tenant_id}", str(tenant_id))):
                return True
        return False

    def provider(self, name: str) -> KekProvider:
        with self._lock:
            found = self._providers.get(name)
            if found is None:
                found = self._providers[name] = self._build(name)
            return found

    def _build(self, name: str) -> KekProvider:
        s = self._settings
        if name == "local":
            return LocalKeyRing(s.resolved_keyring_path)
        if name == "aws-kms" and s.kek_aws_key_id:
            secret = s.kek_aws_secret_access_key
            return AwsKms(s.kek_aws_key_id, region=s.kek_aws_region,
                          endpoint_url=s.kek_aws_endpoint_url,
                          access_key_id=s.kek_aws_access_key_id,
                          secret_access_key=secret.get_secret_value() if secret else None)
        raise KeyServiceUnavailable(
            f"the KEK provider {name!r} is not configured on this server; set "
            f"MEMPLANE_KEK_PROVIDER and its MEMPLANE_KEK_* settings"
        )
