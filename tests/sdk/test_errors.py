"""Error answers and transport failures raise the documented exceptions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

import memplane

from .helpers import API_KEY, BASE_URL, Recorder


def _raise_for(reply: httpx.Response) -> memplane.APIError:
    recorder = Recorder(reply)
    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder)) as client:
        with pytest.raises(memplane.APIError) as caught:
            client.memory.get(scope="user", scope_ref="u1", key="k")
    return caught.value


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (400, "bad_request", memplane.BadRequest),
        (401, "unauthorized", memplane.Unauthorized),
        (403, "forbidden", memplane.Forbidden),
        (404, "not_found", memplane.NotFound),
        (405, "method_not_allowed", memplane.APIError),
        (409, "conflict", memplane.Conflict),
        (409, "hash_mismatch", memplane.HashMismatch),
        (409, "subject_erasure_in_progress", memplane.SubjectErasureInProgress),
        (413, "too_large", memplane.PayloadTooLarge),
        (422, "validation_error", memplane.BadRequest),
        (429, "rate_limited", memplane.APIError),
        (500, "internal", memplane.ServerError),
        (502, "bad_gateway", memplane.ServerError),
        (503, "storage_unavailable", memplane.StorageUnavailable),
        (504, "timeout", memplane.ServerError),
        # A code refines only its own status: a stray hash_mismatch on 400 stays BadRequest.
        (400, "hash_mismatch", memplane.BadRequest),
        (500, "subject_erasure_in_progress", memplane.ServerError),
    ],
)
def test_status_and_code_map_to_one_exception_class(
    status: int, code: str, expected: type[memplane.APIError]
) -> None:
    error = _raise_for(
        httpx.Response(
            status,
            json={"error": code, "detail": "it went wrong", "hint": 3},
            headers={"X-Request-ID": "req-42"},
        )
    )

    assert type(error) is expected
    assert error.status_code == status
    assert error.code == code
    assert error.detail == "it went wrong"
    assert error.body == {"error": code, "detail": "it went wrong", "hint": 3}
    assert error.request_id == "req-42"
    assert str(error) == f"{status} {code}: it went wrong (request id req-42)"


def test_builtin_bases_let_generic_handlers_catch() -> None:
    assert issubclass(memplane.BadRequest, ValueError)
    assert issubclass(memplane.NotFound, LookupError)
    assert issubclass(memplane.HashMismatch, memplane.Conflict)
    assert issubclass(memplane.SubjectErasureInProgress, memplane.Conflict)
    assert issubclass(memplane.APIError, memplane.MemplaneError)
    assert issubclass(memplane.TransportError, memplane.MemplaneError)
    assert issubclass(memplane.InvalidResponse, memplane.MemplaneError)


def test_hash_mismatch_carries_the_hashes() -> None:
    body = {
        "error": "hash_mismatch",
        "detail": "content changed outside memplane",
        "pointer_id": "p-1",
        "expected_sha256": "aa" * 32,
        "actual_sha256": "bb" * 32,
    }
    error = _raise_for(httpx.Response(409, json=body))

    assert isinstance(error, memplane.HashMismatch)
    assert (error.pointer_id, error.expected_sha256, error.actual_sha256) == (
        "p-1",
        "aa" * 32,
        "bb" * 32,
    )
    assert error.request_id is None
    assert str(error) == "409 hash_mismatch: content changed outside memplane"


def test_hash_mismatch_without_the_extra_fields_leaves_them_none() -> None:
    error = _raise_for(httpx.Response(409, json={"error": "hash_mismatch", "detail": "x"}))

    assert isinstance(error, memplane.HashMismatch)
    assert (error.pointer_id, error.expected_sha256, error.actual_sha256) == (None, None, None)


@pytest.mark.parametrize(
    ("header", "expected"),
    [("7", 7.0), ("0", 0.0), ("1.5", 1.5), ("-3", None), ("soon", None), ("nan", None)],
)
def test_storage_unavailable_reads_retry_after_seconds(header: str, expected: float | None) -> None:
    error = _raise_for(
        httpx.Response(503, json={"error": "storage_unavailable"}, headers={"Retry-After": header})
    )

    assert isinstance(error, memplane.StorageUnavailable)
    assert error.retry_after == expected


def test_storage_unavailable_reads_retry_after_as_http_date() -> None:
    when = datetime.now(UTC) + timedelta(seconds=120)
    error = _raise_for(
        httpx.Response(503, headers={"Retry-After": format_datetime(when, usegmt=True)})
    )

    assert isinstance(error, memplane.StorageUnavailable)
    assert error.retry_after is not None
    assert 110 <= error.retry_after <= 120


def test_storage_unavailable_without_retry_after() -> None:
    error = _raise_for(httpx.Response(503, json={"error": "storage_unavailable"}))

    assert isinstance(error, memplane.StorageUnavailable)
    assert error.retry_after is None


def test_a_non_json_error_body_becomes_the_detail() -> None:
    error = _raise_for(httpx.Response(502, text="  upstream connect error  \n"))

    assert type(error) is memplane.ServerError
    assert (error.code, error.detail, error.body) == (None, "upstream connect error", {})
    assert str(error) == "502: upstream connect error"


def test_an_empty_error_body_falls_back_to_the_reason_phrase() -> None:
    error = _raise_for(httpx.Response(404))

    assert type(error) is memplane.NotFound
    assert (error.code, error.detail, error.body) == (None, "Not Found", {})


def test_a_json_error_body_that_is_not_an_object_is_treated_as_text() -> None:
    error = _raise_for(httpx.Response(400, json=["nope"]))

    assert type(error) is memplane.BadRequest
    assert (error.code, error.detail, error.body) == (None, '["nope"]', {})


def test_a_structured_detail_is_rendered_as_json_text() -> None:
    body = {"detail": [{"loc": ["body", "value"], "msg": "field required"}]}
    error = _raise_for(httpx.Response(422, json=body))

    assert type(error) is memplane.BadRequest
    assert error.code is None
    assert error.detail == '[{"loc": ["body", "value"], "msg": "field required"}]'
    assert error.body == body


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ConnectError("[Errno 111] Connection refused"),
        httpx.ReadTimeout("timed out"),
        httpx.RemoteProtocolError("peer closed connection"),
    ],
)
def test_transport_failures_raise_transport_error(failure: httpx.RequestError) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise failure

    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(fail)) as client:
        with pytest.raises(memplane.TransportError) as caught:
            client.memory.clear(scope="user", scope_ref="u1")

    assert caught.value.__cause__ is failure
    assert str(caught.value) == f"{type(failure).__name__}: {failure}"
