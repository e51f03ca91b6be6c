"""Adapters chosen by URL scheme or storage type, imported only when first used.

``file:///var/lib/memplane/bucket``, ``memory://name``, ``s3://bucket?region=eu-west-1``,
``gs://bucket``, ``az://container?account_url=…``. A backend whose extra is not installed
raises :class:`MissingExtra` naming the ``pip install`` that fixes it.

Two options are never read from a configuration (which may be a tenant's): whether the
cloud adapters may fall back on the server's own credential chain
(``allow_ambient_credentials``, only for the operator's default bucket) and the
``endpoint_policy`` that guards their connections (storage_adapters/netguard.py), narrowed
here to the backend's own storage endpoints (storage_adapters/cloud_hosts.py). Without
``allow_ambient_credentials`` a configuration that would send the server's identity to a
custom endpoint is refused (storage_adapters/identity.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from .base import StorageAdapter
from .identity import check_identity_endpoint
from .netguard import EndpointPolicy

# storage type -> (module, class, extra, the client library the extra installs)
_BACKENDS: dict[str, tuple[str, str, str | None, str | None]] = {
    "local": ("storage_adapters.local", "LocalAdapter", None, None),
    "memory": ("storage_adapters.memory", "MemoryAdapter", None, None),
    "s3": ("storage_adapters.s3", "S3Adapter", "s3", "boto3"),
    "gcs": ("storage_adapters.gcs", "GCSAdapter", "gcs", "google.cloud.storage"),
    "azure": ("storage_adapters.azure", "AzureAdapter", "azure", "azure.storage.blob"),
}

SCHEMES = {"file": "local", "memory": "memory", "s3": "s3", "gs": "gcs", "gcs": "gcs",
           "az": "azure", "azure": "azure"}


class MissingExtra(ImportError):
    """The backend's client library is not installed."""


class UnknownBackend(ValueError):
    """No adapter is registered for that storage type or URL scheme."""


def storage_types() -> list[str]:
    return sorted(_BACKENDS)


def adapter_class(storage_type: str) -> type[Any]:
    try:
        module_name, class_name, extra, library = _BACKENDS[storage_type]
    except KeyError:
        raise UnknownBackend(
            f"unknown storage type {storage_type!r}; use one of {', '.join(storage_types())}"
        ) from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f"pip install 'memplane[{extra}]'" if extra else "reinstall memplane"
        raise MissingExtra(
            f"the {storage_type} backend needs a library that is not installed "
            f"({library or exc.name or exc}); install it with: {hint}"
        ) from exc
    return getattr(module, class_name)  # type: ignore[no-any-return]


def from_config(storage_type: str, config: Mapping[str, Any], *,
                allow_ambient_credentials: bool = False,
                endpoint_policy: EndpointPolicy | None = None,
                call_deadline: float | None = None) -> StorageAdapter:
    """Build an adapter from a storage type and its connection settings; ``call_deadline``:
    how long one call of a network backend may take in all (storage_adapters/bounded)."""
    cls = adapter_class(storage_type)
    if _BACKENDS[storage_type][2] is None:  # local, memory: no credentials, no network
        return cls.from_config(config)  # type: ignore[no-any-return]
    if not allow_ambient_credentials:  # a tenant's: never the server's identity elsewhere
        check_identity_endpoint(storage_type, config)
    if endpoint_policy is not None:  # this backend's own storage endpoints, no other's
        endpoint_policy = endpoint_policy.for_backend(storage_type)
    return cls.from_config(  # type: ignore[no-any-return]
        config, allow_ambient_credentials=allow_ambient_credentials,
        endpoint_policy=endpoint_policy, call_deadline=call_deadline)


def from_url(url: str, *, allow_ambient_credentials: bool = False,
             endpoint_policy: EndpointPolicy | None = None, call_deadline: float | None = None,
             **options: Any) -> StorageAdapter:
    """Build an adapter from a URL; query parameters and ``options`` become its settings."""
    parts = urlsplit(url)
    try:
        storage_type = SCHEMES[parts.scheme]
    except KeyError:
        raise UnknownBackend(
            f"unknown storage URL scheme {parts.scheme!r} in {url!r}; "
            f"use one of {', '.join(sorted(SCHEMES))}"
        ) from None
    config: dict[str, Any] = dict(parse_qsl(parts.query))
    if storage_type == "local":
        config["root"] = unquote(parts.netloc + parts.path)
    else:
        config["bucket"] = parts.netloc
        if parts.path.strip("/"):
            config.setdefault("prefix", parts.path.strip("/"))
    config.update(options)
    return from_config(storage_type, config, allow_ambient_credentials=allow_ambient_credentials,
                       endpoint_policy=endpoint_policy, call_deadline=call_deadline)
