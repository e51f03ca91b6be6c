"""Many tenants' S3 buckets in one server: every adapter's client stands on one parsed copy of
S3's service model and endpoint tables (``s3_connection._LOADER``), while credentials and
region stay each adapter's own. No request leaves the process: each is stopped once signed."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.credentials import DeferredRefreshableCredentials

from storage_adapters.s3_connection import _LOADER, S3Connection

ENDPOINT = "http://127.0.0.1:9"


class _Signed(Exception):
    def __init__(self, headers: Any) -> None:
        self.headers = headers


def _stop(request: Any, **_: Any) -> None:
    raise _Signed(request.headers)


def _signed_by(connection: S3Connection) -> str:
    """The credential scope (``key id/date/region/s3/aws4_request``) of a HEAD request as
    signed, and its session token if it carries one; the request is stopped before sending."""
    connection._client.meta.events.register_first("before-send.s3.HeadObject", _stop)
    with pytest.raises(_Signed) as signed:
        connection._client.head_object(Bucket=connection.bucket, Key="k")
    connection._client.meta.events.unregister("before-send.s3.HeadObject", _stop)
    headers = signed.value.headers
    scope = headers["Authorization"].decode().split("Credential=")[1].split(",")[0]
    token = headers.get("X-Amz-Security-Token", b"").decode()
    return f"{scope} {token}".strip()


def test_buckets_of_two_tenants_share_the_parsed_models_not_the_credentials() -> None:
    a = S3Connection("bucket-a", endpoint_url=ENDPOINT, region="eu-west-1",
                     access_key_id="KEYA", secret_access_key="secret-a")
    b = S3Connection("bucket-b", endpoint_url=ENDPOINT, region="us-east-2",
                     access_key_id="KEYB", secret_access_key="secret-b",
                     session_token="token-b")
    try:
        assert a._client._loader is _LOADER and b._client._loader is _LOADER
        # the model is parsed once: both clients read the same loaded document
        assert a._client._service_model._service_description is \
            b._client._service_model._service_description
        day = _signed_by(a).split("/")[1]
        assert _signed_by(a) == f"KEYA/{day}/eu-west-1/s3/aws4_request"
        assert _signed_by(b) == f"KEYB/{day}/us-east-2/s3/aws4_request token-b"
        frozen_a = a._client._request_signer._credentials.get_frozen_credentials()
        frozen_b = b._client._request_signer._credentials.get_frozen_credentials()
        assert (frozen_a.access_key, frozen_a.secret_key, frozen_a.token) == \
            ("KEYA", "secret-a", None)
        assert (frozen_b.access_key, frozen_b.secret_key, frozen_b.token) == \
            ("KEYB", "secret-b", "token-b")
    finally:
        a.close()
        b.close()


def test_an_assumed_role_keeps_its_credentials_to_its_own_session() -> None:
    role = S3Connection("bucket-r", region="eu-central-1",
                        role_arn="arn:aws:iam::123456789012:role/memplane",
                        external_id="tenant-1")
    keyed = S3Connection("bucket-k", endpoint_url=ENDPOINT, region="eu-central-1",
                         access_key_id="KEYK", secret_access_key="secret-k")
    try:
        assert role._client._loader is _LOADER
        credentials = role._client._request_signer._credentials
        assert isinstance(credentials, DeferredRefreshableCredentials)
        assert credentials.method == "assume-role"
        # nothing of the role's session reached the adapter made after it
        assert keyed._client._request_signer._credentials.method != "assume-role"
        assert _signed_by(keyed).startswith("KEYK/")
        assert _signed_by(keyed).endswith("/eu-central-1/s3/aws4_request")
    finally:
        role.close()
        keyed.close()
