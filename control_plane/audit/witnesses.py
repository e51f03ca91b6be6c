"""The witnesses of a tenant's audit log: registering them, and collecting their cosignatures.

A tenant lists the witnesses it trusts (``PUT /v1/audit/witnesses``): each a C2SP
tlog-witness submission URL and its cosignature verifier key (``memplane witness key`` prints
one). When the server writes a checkpoint, :func:`collect_cosignatures` sends it to each of
them (``POST <url>/add-checkpoint`` with the consistency proof from the previous checkpoint),
checks every cosignature line that comes back with that witness's key, and returns the note
with the valid lines added; :func:`store_cosigned` writes it into the tenant's bucket
(``<anchor folder>/tlog/cosigned/<size, 20 digits>``). :func:`cosign_and_store` does both.

- **The guard.** Every connection goes through the SSRF guard (storage_adapters/netguard.py)
  with the operator's allow-list: any host *name* may be registered, but the addresses it
  resolves to must be public unless a CIDR of ``MEMPLANE_ALLOWED_ENDPOINTS`` covers them,
  and an IP literal needs such a CIDR; checked when the list is saved and again at every
  connection (after DNS resolution, so a name rebound to 127.0.0.1 is refused). No redirect
  is followed, no proxy used.
- **Deadlines.** Each phase of a call waits at most :data:`CALL_SECONDS`, the whole call at
  most twice that; the witnesses are called at once, so a checkpoint waits for the slowest
  one's deadline at worst. Answers beyond :data:`ANSWER_CAP` bytes are not read.
- **Refusals.** A witness that refuses or fails is skipped: its outcome is kept on its row as
  a generic code (``last_status``: ``cosigned``, ``conflict``, ``proof_refused``,
  ``log_key_refused``, ``origin_unknown``, ``request_refused``, ``refused``,
  ``witness_error``, ``bad_cosignature``, ``timeout``, ``unreachable``,
  ``endpoint_not_allowed``) and logged with the witness's host, never its answer. Not in the
  audit log: a row per checkpoint would grow the log and call for the next checkpoint.
- **Which size.** Each row keeps the tree size the witness last cosigned (or named in a 409:
  a decimal of at most :data:`MAX_KNOWN_SIZE`, else the 409 is kept as a conflict of no size).
  A witness that never cosigned gets ``old 0`` and no proof; one at another size than the
  previous checkpoint gets a proof from its own size when the caller passes ``prove``, else
  the request as given (its 409 is recorded and the next checkpoint catches it up).

The collection commits its own transactions: call it with none open (as the checkpoint
writer is, while it writes to the bucket).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters.netguard import EndpointNotAllowed, EndpointPolicy, refusal_in

from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import AuditWitness
from ..plane.data_plane import Target
from ..settings import Settings
from ..tlog import note
from ..tlog.witness import SIZE_TYPE, request_body
from .anchors import FOLDER

log = logging.getLogger(__name__)

MAX_WITNESSES = 8
CALL_SECONDS = 10.0
ANSWER_CAP = 16 * 1024
COSIGNED_FOLDER = (*FOLDER, "tlog", "cosigned")
SIZE_DIGITS = 20
# The largest size a 409 may name and be kept: what the row's column holds (a signed 64-bit
# integer). A larger one is a conflict of unknown size; kept, it failed the whole collection.
MAX_KNOWN_SIZE = (1 << 63) - 1
Prove = Callable[[int, int], Sequence[bytes]]

def endpoint_policy(settings: Settings) -> EndpointPolicy:
    """The guard: any host name, public addresses only unless the operator's allow-list
    covers them."""
    return EndpointPolicy.from_entries(settings.allowed_endpoints, ("*",))


def rows(session: Session, tenant_id: uuid.UUID) -> list[AuditWitness]:
    return list(session.scalars(select(AuditWitness).where(AuditWitness.tenant_id == tenant_id)
                                .order_by(AuditWitness.position)))


# -- collecting -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one witness answered: a generic code, the size it now holds (when it said), and
    its valid cosignature lines."""

    witness_id: uuid.UUID
    host: str
    status: str
    size: int | None = None
    lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class Collected:
    note: str
    outcomes: tuple[Outcome, ...]


@dataclass(frozen=True)
class _Asked:
    witness_id: uuid.UUID
    url: str
    verifier: note.Verifier
    body: bytes


def collect(session: Session, settings: Settings, tenant_id: uuid.UUID, note_text: str,
            old_size: int, proof: Sequence[bytes], *, prove: Prove | None = None) -> Collected:
    """Ask each of the tenant's witnesses to cosign the checkpoint ``note_text`` (signed by
    the log), ``proof`` being its consistency proof from ``old_size``; see the module."""
    text = note.parse(note_text).text
    size = note.parse_checkpoint(text).size
    listed = [(row.id, row.url, row.verifier_key, row.cosigned_size)
              for row in rows(session, tenant_id)]
    session.rollback()  # nothing stays open while the witnesses answer
    if not listed:
        return Collected(note_text, ())
    asked = [_Asked(witness_id, url, note.parse_verifier(verifier_key),
                    _body(known, size, old_size, proof, prove, note_text))
             for witness_id, url, verifier_key, known in listed]
    policy = endpoint_policy(settings)
    with ThreadPoolExecutor(max_workers=len(asked)) as pool:
        outcomes = tuple(pool.map(lambda a: _ask(policy, a, note_text, size), asked))
    now = utcnow()
    begin_write(session)
    for outcome in outcomes:
        values: dict[str, object] = {"last_status": outcome.status, "last_attempt_at": now}
        if outcome.size is not None:
            values["cosigned_size"] = outcome.size
        session.execute(update(AuditWitness).where(AuditWitness.id == outcome.witness_id)
                        .values(**values).execution_options(synchronize_session=False))
    session.commit()
    lines = "".join(line for outcome in outcomes for line in outcome.lines)
    return Collected(note_text + lines, outcomes)


def collect_cosignatures(session: Session, settings: Settings, tenant_id: uuid.UUID,
                         note_text: str, old_size: int, proof: Sequence[bytes]) -> str:
    """The checkpoint note with every valid cosignature of the tenant's witnesses added."""
    return collect(session, settings, tenant_id, note_text, old_size, proof).note


def _body(known: int, size: int, old_size: int, proof: Sequence[bytes], prove: Prove | None,
          note_text: str) -> bytes:
    if known == old_size:
        return request_body(old_size, proof, note_text)
    if known == 0:
        return request_body(0, (), note_text)
    if prove is not None and known < size:
        try:
            return request_body(known, prove(known, size), note_text)
        except ValueError:  # a size the log cannot prove from: send what was given
            pass
    return request_body(old_size, proof, note_text)


def _ask(policy: EndpointPolicy, asked: _Asked, note_text: str, size: int) -> Outcome:
    host = urlsplit(asked.url).hostname or ""

    def done(status: str, at: int | None = None, lines: tuple[str, ...] = ()) -> Outcome:
        if status != "cosigned":
            log.info("audit witness at %s: %s", host, status)
        return Outcome(asked.witness_id, host, status, at, lines)

    try:
        status, content_type, raw = _post(policy, f"{asked.url}/add-checkpoint", asked.body)
    except EndpointNotAllowed:
        return done("endpoint_not_allowed")
    except TimeoutError:
        return done("timeout")
    except OSError:
        return done("unreachable")
    if status == 200:
        lines = _valid_lines(note_text, raw, asked.verifier)
        return done("cosigned", size, lines) if lines else done("bad_cosignature")
    if status == 409:
        answer = raw.decode("ascii", "replace").strip()
        known = int(answer) if (answer.isdigit() and len(answer) <= 19
                                and int(answer) <= MAX_KNOWN_SIZE
                                and content_type.startswith(SIZE_TYPE)) else None
        return done("conflict", known)
    codes = {400: "request_refused", 403: "log_key_refused", 404: "origin_unknown",
             422: "proof_refused"}
    return done(codes.get(status, "witness_error" if status >= 500 else "refused"))


def _post(policy: EndpointPolicy, url: str, body: bytes) -> tuple[int, str, bytes]:
    """(status, content type, the answer up to ANSWER_CAP bytes); TimeoutError,
    EndpointNotAllowed or another OSError when no answer came."""
    deadline = time.monotonic() + 2 * CALL_SECONDS
    try:
        with httpx.Client(transport=policy.httpx_transport(),
                          timeout=httpx.Timeout(CALL_SECONDS), follow_redirects=False) as client, \
                client.stream("POST", url, content=body,
                              headers={"Content-Type": "text/plain"}) as response:
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                if time.monotonic() > deadline:
                    raise TimeoutError("the witness's answer ran past its deadline")
                size += len(chunk)
                if size > ANSWER_CAP:
                    break
                chunks.append(chunk)
            return (response.status_code, response.headers.get("content-type", ""),
                    b"".join(chunks))
    except httpx.TimeoutException:
        raise TimeoutError("the witness did not answer in time") from None
    except (httpx.TransportError, httpx.InvalidURL, OSError) as exc:
        refused = refusal_in(exc)
        if refused is not None:
            raise refused from None
        if isinstance(exc, TimeoutError):
            raise
        raise ConnectionError("the witness could not be reached") from None


def _valid_lines(note_text: str, raw: bytes, witness: note.Verifier) -> tuple[str, ...]:
    """The answer's cosignature lines of ``witness`` that verify on this checkpoint; lines of
    other keys are ignored, as the protocol says."""
    try:
        answer = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ()
    text = note.parse(note_text).text
    present = {line for line in note_text[len(text) + 1:].splitlines(keepends=True)}
    kept: list[str] = []
    for line in answer.splitlines(keepends=True):
        if not line.endswith("\n") or line in present or line in kept:
            continue
        try:
            signature = note.parse(text + "\n" + line).signatures[0]
            if signature.name != witness.name or signature.key_id != witness.id:
                continue
            note.verify_cosignature(text + "\n" + line, witness)
        except note.NoteError:
            continue
        kept.append(line)
    return tuple(kept)


# -- storing ----------------------------------------------------------------------------------


def cosigned_path(target: Target, size: int) -> str:
    return target.path(*COSIGNED_FOLDER, f"{size:0{SIZE_DIGITS}d}")


def store_cosigned(target: Target, size: int, cosigned_note: str) -> bool:
    """Write the cosigned checkpoint into the tenant's bucket, create-only; False when one is
    already there (another replica wrote it first)."""
    try:
        target.adapter.put(cosigned_path(target, size), cosigned_note.encode())
    except storage.ObjectExists:
        return False
    return True


def cosign_and_store(session: Session, settings: Settings, target: Target,
                     tenant_id: uuid.UUID, note_text: str, old_size: int,
                     proof: Sequence[bytes], *, prove: Prove | None = None) -> Collected:
    """The hook for the checkpoint writer, after it wrote ``tlog/checkpoint/<size>``: collect
    the witnesses' cosignatures and, when at least one came, store the cosigned note. Call it
    with no transaction open; a bucket write that fails raises (the caller's to record)."""
    collected = collect(session, settings, tenant_id, note_text, old_size, proof, prove=prove)
    if any(outcome.lines for outcome in collected.outcomes):
        size = note.parse_checkpoint(note.parse(note_text).text).size
        store_cosigned(target, size, collected.note)
    return collected
