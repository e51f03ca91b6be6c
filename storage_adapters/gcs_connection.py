"""The GCS adapter's connection to its bucket (google-cloud-storage): settings, credentials,
one client per thread, request counting, and the error translation every call goes through.

- The requests session under a client is not documented as thread-safe, so each thread
  gets its own client; credentials are shared.
- Credentials: a service account key (``credentials_info``; its ``token_uri`` is replaced by
  Google's own, whatever the key says), ``impersonate_service_account`` (the server's
  identity only mints tokens for that account), or ``anonymous``. ``google.auth.default`` is
  used for the bucket itself only with ``allow_ambient_credentials`` (the operator's default
  bucket); otherwise an adapter without credentials is refused.
- With an ``endpoint_policy`` (storage_adapters/netguard.py) the endpoint is checked when the
  adapter is built and every connection (token requests of a key too) is vetted at connect
  time; proxies from the environment are not used.

Every HTTP response is counted in ``stats`` under the operation that caused it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn, Self

import requests
from google.api_core.retry import Retry
from google.auth import exceptions as auth_exc
from google.auth.credentials import AnonymousCredentials
from google.auth.transport.requests import AuthorizedSession
from google.auth.transport.requests import Request as GoogleRequest
from google.cloud import storage
from google.cloud.storage.retry import DEFAULT_RETRY

from .base import (
    STREAM_PART_BYTES,
    EndpointRefused,
    RequestStats,
    StorageAuthError,
    StorageClasses,
    check_path,
    check_prefix,
)
from .bounded import DEFAULT_CALL_DEADLINE_SECONDS
from .deadlines import requests_adapter, stop_retrying
from .gcs_errors import raise_storage_error
from .netguard import EndpointNotAllowed, EndpointPolicy

CLASSES = StorageClasses("STANDARD", "NEARLINE", "COLDLINE",
                         ("STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE"))
_SCOPES = ("https://www.googleapis.com/auth/devstorage.read_write",)
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
NO_CREDENTIALS = ("a GCS bucket needs credentials_info (a service account key), "
                  "impersonate_service_account (an account this server may impersonate), or "
                  "anonymous: true (a public bucket); this server does not lend its own Google "
                  "credentials")


class GCSConnection:
    """What every GCS call stands on; :class:`storage_adapters.gcs.GCSAdapter` is the
    adapter."""

    scheme = "gs"

    def __init__(
        self, bucket: str, *, project: str | None = None, endpoint: str | None = None,
        credentials_info: Mapping[str, Any] | str | None = None, anonymous: bool = False,
        use_batch: bool = True, prefix: str = "", connect_timeout: float = 3.0,
        read_timeout: float = 20.0, max_attempts: int = 2, delete_workers: int = 8,
        impersonate_service_account: str | None = None,
        allow_ambient_credentials: bool = False, endpoint_policy: EndpointPolicy | None = None,
        archive_class: str | None = None, cold_class: str | None = None,
        call_deadline: float = DEFAULT_CALL_DEADLINE_SECONDS,
    ) -> None:
        if not bucket:
            raise ValueError("a GCS store needs 'bucket'")
        self.call_deadline, self._attempts = call_deadline, max(1, max_attempts)
        self.storage_classes = CLASSES.with_overrides(archive_class, cold_class)
        self._versioning: bool | None = None
        if endpoint_policy is not None and endpoint:
            try:
                endpoint_policy.check_endpoint(endpoint)
            except EndpointNotAllowed as exc:
                raise EndpointRefused(str(exc)) from None
        self._policy = endpoint_policy
        self.bucket = bucket
        self.part_size = STREAM_PART_BYTES
        self.root = check_prefix(prefix.strip("/") + "/") if prefix.strip("/") else ""
        self.endpoint = endpoint
        self.use_batch = use_batch
        self.stats = RequestStats()
        self._project = project
        self._timeout = (connect_timeout, read_timeout)
        # The library retries for up to 120 s by time, not by count; a stopped backend must
        # fail within seconds, so each extra attempt buys 1.5 s of retrying.
        self._retry: Retry | None = None
        if max_attempts > 1:
            self._retry = Retry(predicate=DEFAULT_RETRY._predicate, initial=0.2, maximum=1.0,
                                multiplier=2.0, timeout=1.5 * (max_attempts - 1),
                                on_error=stop_retrying)  # not past the call's deadline
        self._credentials = _credentials(credentials_info, anonymous,
                                         impersonate_service_account,
                                         allow_ambient_credentials)
        self._guard_tokens = credentials_info is not None
        self._local = threading.local()
        self._clients: list[storage.Client] = []
        self._clients_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=delete_workers,
                                        thread_name_prefix="gcs-delete")

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **options: Any) -> Self:
        """``options``: ``allow_ambient_credentials``, ``endpoint_policy`` and
        ``call_deadline``, never taken from ``config`` (which may come from a tenant)."""
        def flag(key: str, default: bool) -> bool:
            value = config.get(key, default)
            return value if isinstance(value, bool) else str(value).lower() in ("1", "true")

        return cls(
            str(config.get("bucket") or ""), project=config.get("project"),
            endpoint=config.get("endpoint"), credentials_info=config.get("credentials_info"),
            anonymous=flag("anonymous", False), use_batch=flag("use_batch", True),
            prefix=str(config.get("prefix") or ""),
            connect_timeout=float(config.get("connect_timeout") or 3.0),
            read_timeout=float(config.get("read_timeout") or 20.0),
            max_attempts=int(config.get("max_attempts") or 2),
            impersonate_service_account=config.get("impersonate_service_account"),
            allow_ambient_credentials=bool(options.get("allow_ambient_credentials")),
            endpoint_policy=options.get("endpoint_policy"),
            archive_class=config.get("archive_class"), cold_class=config.get("cold_class"),
            call_deadline=options.get("call_deadline") or DEFAULT_CALL_DEADLINE_SECONDS,
        )

    # -- clients and request counting -------------------------------------------------

    def _client(self, kind: str) -> storage.Client:
        """This thread's client; responses it receives are counted under ``kind``."""
        self._local.kind = kind
        client: storage.Client | None = getattr(self._local, "client", None)
        if client is None:
            if self._policy is None:
                session = AuthorizedSession(self._credentials)
                pool = requests_adapter(pool_connections=2, pool_maxsize=8)
                session.mount("http://", pool)
                session.mount("https://", pool)
            else:
                # A key's token requests are guarded too; impersonation's go to Google's IAM
                # endpoint with the server's own identity, which the library fixes.
                auth_request = (GoogleRequest(self._policy.requests_session())
                                if self._guard_tokens else None)
                session = self._policy.requests_session(
                    AuthorizedSession(self._credentials, auth_request=auth_request),
                    pool_connections=2, pool_maxsize=8)
            session.hooks["response"].append(self._count)
            self._local.session = session  # the bounded downloads' (storage_adapters/gcs_reads)
            options = {"api_endpoint": self.endpoint} if self.endpoint else None
            client = storage.Client(project=self._project, credentials=self._credentials,
                                    client_options=options, _http=session)
            # The library fetches bucket metadata in background threads to decorate tracing
            # spans: unrequested traffic that would also skew the request counts.
            client._bucket_metadata_cache = None
            self._local.client = client
            with self._clients_lock:
                self._clients.append(client)
        return client

    def _count(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self.stats.add(getattr(self._local, "kind", "other"))

    def _blob(self, kind: str, key: str, generation: int | None = None) -> storage.Blob:
        return self._client(kind).bucket(self.bucket).blob(key, generation=generation)

    def _key(self, path: str) -> str:
        return self.root + check_path(path)

    def _bucket_exists(self) -> bool:
        """Tell a missing bucket from a missing object: GCS answers 404 for both."""
        try:
            return bool(self._client("bucket_check").bucket(self.bucket).exists(
                retry=self._retry, timeout=self._timeout))
        except Exception:
            return True  # cannot tell; the caller reports the object as missing

    def _raise(self, exc: Exception, path: str, *, object_call: bool = True) -> NoReturn:
        """Translate a client error (storage_adapters/gcs_errors). A 404 from a call about
        one object (``object_call``) may mean the bucket is gone, so the bucket is looked up
        before the object is reported missing."""
        raise_storage_error(exc, path, where=f"gs://{self.bucket}/{self.root}{path}",
                            bucket=self.bucket, endpoint=self.endpoint,
                            bucket_exists=self._bucket_exists if object_call else None)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        with self._clients_lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()


def _credentials(info: Mapping[str, Any] | str | None, anonymous: bool,
                 impersonate: str | None, allow_ambient: bool) -> Any:
    if anonymous:
        return AnonymousCredentials()
    if info:
        from google.oauth2 import service_account

        data = json.loads(info) if isinstance(info, str) else dict(info)
        data["token_uri"] = GOOGLE_TOKEN_URI  # a key pointing elsewhere would be an SSRF
        return service_account.Credentials.from_service_account_info(data, scopes=_SCOPES)
    if not impersonate and not allow_ambient:
        raise ValueError(NO_CREDENTIALS)
    import google.auth

    try:
        source, _ = google.auth.default(
            scopes=("https://www.googleapis.com/auth/cloud-platform",) if impersonate
            else _SCOPES)
    except auth_exc.DefaultCredentialsError as exc:
        raise StorageAuthError("this server has no Google identity to use") from exc
    if not impersonate:
        return source
    from google.auth import impersonated_credentials

    return impersonated_credentials.Credentials(
        source_credentials=source, target_principal=impersonate,
        target_scopes=list(_SCOPES), lifetime=3600)
