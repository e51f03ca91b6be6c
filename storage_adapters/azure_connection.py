"""The Azure adapter's connection to its container (azure-storage-blob): settings,
credentials, the clients, request counting, and the error translation every call goes
through.

- Azure SDK clients are thread-safe: one per adapter, shared by request threads.
- Credentials are always the tenant's own: a connection string with AccountKey or
  SharedAccessSignature, or account_url with account_key or sas_token (a service principal
  would need azure-identity, which is not a dependency).
- With an ``endpoint_policy`` (storage_adapters/netguard.py) the account URL the client ends
  up with (a connection string's BlobEndpoint, or AccountName + EndpointSuffix) is checked
  when the adapter is built and every connection is vetted at connect time; proxies from the
  environment are not used.

Every HTTP attempt is counted in ``stats`` under the operation that caused it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any, NoReturn, Self

from azure.core.exceptions import AzureError
from azure.core.pipeline.transport import RequestsTransport
from azure.storage.blob import BlobServiceClient, LinearRetry
from urllib3.util.retry import Retry

from .azure_errors import raise_storage_error
from .base import (
    STREAM_PART_BYTES,
    EndpointRefused,
    RequestStats,
    StorageClasses,
    check_path,
    check_prefix,
)
from .bounded import DEFAULT_CALL_DEADLINE_SECONDS
from .deadlines import requests_session, stop_retrying
from .netguard import EndpointNotAllowed, EndpointPolicy

CLASSES = StorageClasses("Hot", "Cool", "Cold", ("Hot", "Cool", "Cold"))


class _CountedRetry(LinearRetry):  # type: ignore[misc]
    """The SDK's linear retry, marking the calling thread's next request as a resend (the
    policy sleeps once before each resend, in the thread that sends it)."""

    def __init__(self, local: threading.local, **options: Any) -> None:
        super().__init__(**options)
        self._marks = local

    def sleep(self, settings: Any, transport: Any) -> None:
        stop_retrying()  # not past the call's deadline
        self._marks.retrying = True
        super().sleep(settings, transport)


class AzureConnection:
    """What every Azure call stands on; :class:`storage_adapters.azure.AzureAdapter` is the
    adapter."""

    scheme = "az"

    def __init__(
        self, container: str, *, connection_string: str | None = None,
        account_url: str | None = None, account_key: str | None = None,
        sas_token: str | None = None, prefix: str = "", connect_timeout: float = 3.0,
        read_timeout: float = 20.0, max_attempts: int = 2,
        allow_ambient_credentials: bool = False, endpoint_policy: EndpointPolicy | None = None,
        archive_class: str | None = None, cold_class: str | None = None,
        call_deadline: float = DEFAULT_CALL_DEADLINE_SECONDS,
    ) -> None:
        if not container:
            raise ValueError("an Azure store needs 'container'")
        self.call_deadline, self._read_timeout = call_deadline, read_timeout
        self.storage_classes = CLASSES.with_overrides(archive_class, cold_class)
        if connection_string and not _conn_key(connection_string) and not allow_ambient_credentials:
            raise ValueError("an Azure connection_string must carry AccountKey or "
                             "SharedAccessSignature; this server does not lend its own "
                             "credentials")
        self.container = container
        self.part_size = STREAM_PART_BYTES
        self.root = check_prefix(prefix.strip("/") + "/") if prefix.strip("/") else ""
        self.stats = RequestStats()
        self._secrets = [s for s in (account_key, sas_token, _conn_key(connection_string)) if s]
        self._local = threading.local()
        options: dict[str, Any] = {
            "connection_timeout": connect_timeout, "read_timeout": read_timeout,
            "retry_policy": _CountedRetry(self._local, backoff=1, random_jitter_range=0,
                                          retry_total=max(0, max_attempts - 1)),
            "raw_request_hook": self._count,
        }
        if endpoint_policy is not None:
            if account_url and not connection_string:
                try:
                    endpoint_policy.check_endpoint(account_url)
                except EndpointNotAllowed as exc:
                    raise EndpointRefused(str(exc)) from None
        # Guarded connections, or (the operator's bucket) only deadline-bound ones.
        retries = Retry(total=False, redirect=False, raise_on_status=False)
        session = (endpoint_policy.requests_session(max_retries=retries)
                   if endpoint_policy is not None else requests_session(max_retries=retries))
        options["transport"] = RequestsTransport(
            session=session, session_owner=True, use_env_settings=endpoint_policy is None,
            connection_timeout=connect_timeout, read_timeout=read_timeout)
        if connection_string:
            service = BlobServiceClient.from_connection_string(connection_string, **options)
        elif account_url and (account_key or sas_token):
            service = BlobServiceClient(account_url, credential=account_key or sas_token,
                                        **options)
        else:
            raise ValueError("an Azure store needs 'connection_string', or 'account_url' "
                             "with 'account_key' or 'sas_token'")
        self.account_url = service.url.split("?", 1)[0].rstrip("/")
        if endpoint_policy is not None:
            try:
                endpoint_policy.check_endpoint(self.account_url)
            except EndpointNotAllowed as exc:
                service.close()
                raise EndpointRefused(str(exc)) from None
        self._service = service
        self._container = service.get_container_client(container)
        self._history_supported = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **options: Any) -> Self:
        """``options``: ``allow_ambient_credentials``, ``endpoint_policy`` and
        ``call_deadline``, never taken from ``config`` (which may come from a tenant)."""
        return cls(
            str(config.get("container") or config.get("bucket") or ""),
            connection_string=config.get("connection_string"),
            account_url=config.get("account_url"), account_key=config.get("account_key"),
            sas_token=config.get("sas_token"), prefix=str(config.get("prefix") or ""),
            connect_timeout=float(config.get("connect_timeout") or 3.0),
            read_timeout=float(config.get("read_timeout") or 20.0),
            max_attempts=int(config.get("max_attempts") or 2),
            allow_ambient_credentials=bool(options.get("allow_ambient_credentials")),
            endpoint_policy=options.get("endpoint_policy"),
            archive_class=config.get("archive_class"), cold_class=config.get("cold_class"),
            call_deadline=options.get("call_deadline") or DEFAULT_CALL_DEADLINE_SECONDS,
        )

    def _count(self, request: Any) -> None:
        # A resend after a failed attempt counts as ``retry``, not as another request of
        # its kind: the counts say how many operations reached the backend, and the
        # retries how often the SDK had to send one again.
        if getattr(self._local, "retrying", False):
            self._local.retrying = False
            self.stats.add("retry")
        else:
            self.stats.add(getattr(self._local, "kind", "other"))

    def _op(self, kind: str) -> None:
        self._local.kind = kind
        self._local.retrying = False

    def _key(self, path: str) -> str:
        return self.root + check_path(path)

    def _where(self, path: str) -> str:
        return f"az://{self.container}/{self.root}{path}"

    def _raise(self, exc: AzureError, path: str) -> NoReturn:
        """Translate an SDK error (storage_adapters/azure_errors)."""
        raise_storage_error(exc, path, where=self._where(path), container=self.container,
                            account_url=self.account_url, secrets=self._secrets)

    def close(self) -> None:
        self._service.close()


def _conn_key(connection_string: str | None) -> str | None:
    if not connection_string:
        return None
    match = re.search(r"(?i)(?:AccountKey|SharedAccessSignature)=([^;]+)", connection_string)
    return match.group(1) if match else None
