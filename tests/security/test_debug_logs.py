"""DEBUG logs carry no credentials.

With MEMPLANE_LOG_LEVEL=DEBUG the client libraries would log every request's headers and the
remote's bodies (botocore: the session token in ``X-Amz-Security-Token``, the SigV4
``Authorization``). The server's logging (observability.json_logs.configure_logging) caps them at
WARNING and redacts credentials from every line, whatever the level.
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Iterator

import pytest

from tests.support.emulators import MotoServer, unique_name

SESSION_TOKEN = "FAKE-SESSION-TOKEN-" + uuid.uuid4().hex
SECRET_KEY = "fake-secret-key-" + uuid.uuid4().hex
ACCESS_KEY = "ASIAFAKEKEYFORLOGS01"


@pytest.fixture
def debug_logging() -> Iterator[io.StringIO]:
    """The server's logging at DEBUG, as `memplane serve` sets it up, written into a buffer;
    restored afterwards."""
    from control_plane.observability.json_logs import configure_logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging("DEBUG")
    [handler] = root.handlers
    buffer = io.StringIO()
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(buffer)
    try:
        yield buffer
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


# Other tests' live servers in this process log their own stalls and slow requests whenever
# they happen (a loaded machine), into the same root handler: not what these tests look at.
_OTHER_SERVERS = ("control_plane.observability.loop_lag", "memplane.access")


def _lines(text: str) -> list[dict[str, object]]:
    found = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    return [r for r in found if r.get("logger") not in _OTHER_SERVERS]


def test_a_real_s3_request_at_debug_leaves_no_credential_in_the_log(
        moto_server: MotoServer, debug_logging: io.StringIO) -> None:
    from storage_adapters.s3 import S3Adapter

    bucket = unique_name("logs")
    moto_server.create_bucket(bucket)
    debug_logging.seek(0)
    debug_logging.truncate()
    adapter = S3Adapter(bucket, region="us-east-1", endpoint_url=moto_server.endpoint,
                        access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY,
                        session_token=SESSION_TOKEN)
    try:
        adapter.put("a/b", b"value")
        assert adapter.get("a/b") == b"value"
    finally:
        adapter.close()
    logging.getLogger("control_plane.test").debug("own debug line stays")
    logged = debug_logging.getvalue()
    assert SESSION_TOKEN not in logged
    assert SECRET_KEY not in logged
    assert "X-Amz-Security-Token" not in logged
    lines = _lines(logged)
    # The server's own DEBUG lines are kept; nothing of the client libraries below WARNING.
    assert {"logger": "control_plane.test", "message": "own debug line stays"}.items() <= \
        lines[-1].items()
    assert [line["logger"] for line in lines
            if str(line["logger"]).split(".")[0] in ("botocore", "boto3", "urllib3")] == []


def test_a_library_logger_lowered_to_debug_is_still_capped(
        moto_server: MotoServer, debug_logging: io.StringIO) -> None:
    from storage_adapters.s3 import S3Adapter

    botocore_logger = logging.getLogger("botocore")
    before = botocore_logger.level
    botocore_logger.setLevel(logging.DEBUG)  # as boto3.set_stream_logger would
    bucket = unique_name("logs")
    moto_server.create_bucket(bucket)
    debug_logging.seek(0)
    debug_logging.truncate()
    try:
        adapter = S3Adapter(bucket, region="us-east-1", endpoint_url=moto_server.endpoint,
                            access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY,
                            session_token=SESSION_TOKEN)
        try:
            adapter.put("x", b"1")
        finally:
            adapter.close()
    finally:
        botocore_logger.setLevel(before)
    logged = debug_logging.getvalue()
    assert SESSION_TOKEN not in logged
    assert _lines(logged) == []


@pytest.mark.parametrize(("message", "expected"), [
    ("headers={'Authorization': b'AWS4-HMAC-SHA256 Credential=AKIA/x, Signature=abc', "
     "'X-Amz-Security-Token': b'TOKEN123'}",
     "headers={'Authorization': b'[redacted]', 'X-Amz-Security-Token': b'[redacted]'}"),
    ("Authorization: Bearer ya29.a0AfH6SMBx", "Authorization: [redacted]"),
    ("sent Bearer abc.def-ghi to the endpoint", "sent Bearer [redacted] to the endpoint"),
    ("token ya29.a0AfH6SMBx in text", "token ya29.[redacted] in text"),
    ("GET https://acct.blob.core.windows.net/c/b?sv=2024-01-01&sp=r&sig=abc%2Bdef&se=x",
     "GET https://acct.blob.core.windows.net/c/b?sv=2024-01-01&sp=r&sig=[redacted]&se=x"),
    ("https://s3.amazonaws.com/b/k?X-Amz-Credential=AKIA%2F&X-Amz-Signature=f00",
     "https://s3.amazonaws.com/b/k?X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]"),
    ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0==;",
     "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=[redacted];"),
    ("stored memory key=diet for scope user", "stored memory key=diet for scope user"),
])
def test_credentials_are_redacted_from_every_line(message: str, expected: str) -> None:
    from control_plane.log_guard import redact

    assert redact(message) == expected


def test_the_servers_own_lines_and_exceptions_are_redacted(
        debug_logging: io.StringIO) -> None:
    log = logging.getLogger("control_plane.test")
    debug_logging.seek(0)
    debug_logging.truncate()
    log.info("probe with %s", f"Authorization: Bearer {SESSION_TOKEN}")
    try:
        raise RuntimeError(f"x-amz-security-token: {SESSION_TOKEN}")
    except RuntimeError:
        log.exception("failed")
    logged = debug_logging.getvalue()
    assert SESSION_TOKEN not in logged
    first, second = _lines(logged)
    assert first["message"] == "probe with Authorization: [redacted]"
    assert str(second["exception"]).endswith("RuntimeError: x-amz-security-token: [redacted]")


def test_a_logged_exception_shows_its_source_lines_and_leaves_no_source_cached(
        debug_logging: io.StringIO) -> None:
    import linecache

    log = logging.getLogger("control_plane.test")
    debug_logging.seek(0)
    debug_logging.truncate()
    linecache.clearcache()
    try:
        raise LookupError("no such thing")
    except LookupError:
        log.exception("lookup failed")
    [line] = _lines(debug_logging.getvalue())
    assert '    raise LookupError("no such thing")\n' in str(line["exception"])
    assert __file__ not in linecache.cache
