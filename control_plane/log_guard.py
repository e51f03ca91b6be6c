"""What the server's log may carry: no credentials, whatever MEMPLANE_LOG_LEVEL says.

The cloud and HTTP client libraries log, at DEBUG, every request's headers and often the
remote's body: botocore writes the server's ``X-Amz-Security-Token`` and the SigV4
``Authorization`` of each request, the Google and Azure clients their bearer tokens and SAS
URLs, urllib3/httpx/httpcore the URLs (with a SAS token's ``sig=``) and raw bodies. So:

- **Third-party loggers are capped at WARNING** (``THIRD_PARTY``): their records below
  WARNING are dropped at the handler, whatever the level of the root logger or of the
  library's own logger (a library or a debugging session may lower that one). The server's own
  loggers keep MEMPLANE_LOG_LEVEL.
- **Every record is redacted** before it is written: the values of ``Authorization`` and the
  security-token, API-key and signature headers, ``Bearer`` tokens, Google access tokens
  (``ya29.…``), SAS query parameters (``sig=``, ``se=``…), ``Signature=`` / ``Credential=`` of
  SigV4, and ``AccountKey=`` / ``SharedAccessSignature=`` of Azure connection strings — in the
  message, its extra fields and the formatted exception.

:func:`guard` puts both on a handler (``observability.json_logs.configure_logging`` does it).
"""

from __future__ import annotations

import linecache
import logging
import re
import traceback
from typing import Any

THIRD_PARTY = ("botocore", "boto3", "s3transfer", "urllib3", "requests", "google",
               "google_auth_httplib2", "azure", "httpx", "httpcore", "hpack", "h2")
CAP = logging.WARNING
REDACTED = "[redacted]"

_SECRET_HEADERS = (r"authorization|proxy-authorization|x-amz-security-token|"
                   r"x-goog-api-key|x-api-key|api-key|ocp-apim-"
                   r"subscription-key|x-ms-encryption-key|x-amz-server-side-encryption-"
                   r"customer-key|cookie|set-cookie")
_PATTERNS = (
    # 'X-Amz-Security-Token': b'…'  /  X-Amz-Security-Token: …  /  "authorization": "…"
    re.compile(r"(?i)(['\"]?(?:" + _SECRET_HEADERS + r")['\"]?\s*[:=]\s*(?:b(?=['\"]))?)"
               r"(?:'[^']*'|\"[^\"]*\"|[^\r\n,}]*)"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"(ya29\.)[A-Za-z0-9._-]+"),
    re.compile(r"(?i)([?&](?:sig|signature|x-amz-signature|x-amz-credential|"
               r"x-amz-security-token|x-goog-signature|x-goog-credential|access_token|"
               r"token|key)=)[^&\s'\";]+"),
    re.compile(r"(?i)((?:Signature|Credential)=)[^,&\s'\"]+"),
    re.compile(r"(?i)((?:AccountKey|SharedAccessSignature)=)[^;\s'\"]+"),
)


def _hide(match: re.Match[str]) -> str:
    """The prefix kept, the value replaced (inside its quotes, if it had any)."""
    value = match.group(0)[len(match.group(1)):]
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match.group(1)}{quote}{REDACTED}{quote}"


def redact(text: str) -> str:
    """``text`` with the values of credentials replaced by ``[redacted]``."""
    for pattern in _PATTERNS:
        text = pattern.sub(_hide, text)
    return text


def is_third_party(name: str) -> bool:
    return any(name == lib or name.startswith(lib + ".") for lib in THIRD_PARTY)


class CredentialGuard(logging.Filter):
    """Drops third-party records below WARNING; redacts credentials from every other one."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < CAP and is_third_party(record.name):
            return False
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not format: keep its template
            message = str(record.msg)
        record.msg, record.args = redact(message), None
        for key, value in list(record.__dict__.items()):
            if key == "msg" or not isinstance(value, str | bytes) or key in _KEEP:
                continue
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            cleaned = redact(text)
            if cleaned != text:
                record.__dict__[key] = cleaned
        if record.exc_info and record.exc_info[0] is not None:
            formatted = "".join(traceback.format_exception(*record.exc_info)).rstrip()
            # Formatting read the source of every file in the traceback into linecache,
            # which keeps it for the process's life (3 MB after a bucket outage's errors).
            linecache.clearcache()
            record.__dict__["exception"] = redact(formatted)
            record.exc_info, record.exc_text = None, None
        return True


_KEEP = frozenset({"name", "levelname", "pathname", "filename", "module", "funcName",
                   "threadName", "processName", "taskName"})


def guard(handler: Any) -> Any:
    """``handler`` with the credential guard on it."""
    handler.addFilter(CredentialGuard())
    return handler
