"""A transparency-log witness (https://c2sp.org/tlog-witness): it cosigns a log's checkpoint
only when a consistency proof shows it extends the last checkpoint it cosigned, so a log that
shows two histories is caught the moment it asks for the second one.

``add-checkpoint`` takes a body of an ``old <size>`` line, the consistency proof's hashes in
base64 one a line, a blank line, then the signed checkpoint note, and answers:

====  =========================================================================================
200   the witness's cosignature line (https://c2sp.org/tlog-cosignature) on the checkpoint
400   a malformed body, more than 63 proof lines, or ``old`` above the checkpoint's size
403   no signature of a trusted key of the checkpoint's log verifies
404   the checkpoint's origin is no log the witness knows
409   ``old`` is not the size the witness last cosigned (or the sizes match and the roots do
      not); the body is that size and a newline, ``Content-Type: text/x.tlog.size``
422   the consistency proof does not verify
503   the new state could not be written (nothing was cosigned)
====  =========================================================================================

A log verifier key named N covers the origin N and every origin below it (``N/...``): the
audit logs of one memplane deployment (``memplane/audit/<tenant id>``) share one key.

**State.** Per origin, the size and root hash of the last cosigned checkpoint, in one JSON
file that is replaced atomically (written to a temporary file, fsynced, renamed over the old
one, the directory fsynced) *before* the cosignature is returned, under a lock that covers the
check too (the spec's rollback race). A restart therefore never forgets a cosigned checkpoint
and never cosigns a fork of it; a state file that cannot be read stops the witness from
starting rather than letting it start afresh. One process at a time holds a state directory
(an exclusive ``flock`` of ``<state>/lock``). A checkpoint the log signed that fails the proof
or the root check is kept in ``<state>/evidence/``: it is the log's own signed word that it
forked.

**Key file.** ``PRIVATE+KEY+<name>+<key id>+<base64(0x04 ‖ Ed25519 seed)>``: golang.org/x/mod's
note signer format, with the cosignature key type (0x04) and id of tlog-cosignature.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from . import merkle, note

SIZE_TYPE = "text/x.tlog.size"
TEXT_TYPE = "text/plain; charset=utf-8"
MAX_PROOF_LINES = 63
MAX_BODY_BYTES = 64 * 1024
STATE_FILE = "witness-state.json"
STATE_FORMAT = "memplane-witness-state/1"
KEY_PREFIX = "PRIVATE+KEY+"


class WitnessError(ValueError):
    """A key, a log key or a state directory the witness cannot start with."""


# -- keys -------------------------------------------------------------------------------------


def cosigner_verifier(signer: note.Signer) -> note.Verifier:
    """The verifier key of a witness's cosignatures (type 0x04)."""
    return note.Verifier(signer.name, signer.private.public_key(), note.COSIGNATURE)


def new_key(name: str) -> str:
    """A new witness key in its file form."""
    private = Ed25519PrivateKey.generate()
    verifier = note.Verifier(name, private.public_key(), note.COSIGNATURE)  # checks the name
    seed = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    encoded = base64.b64encode(bytes([note.COSIGNATURE]) + seed).decode()
    return f"{KEY_PREFIX}{name}+{verifier.id.hex()}+{encoded}"


def parse_key(text: str) -> note.Signer:
    """The witness's signer from its key file's text; WitnessError if it is not one."""
    body = text.strip()
    if not body.startswith(KEY_PREFIX):
        raise WitnessError("a witness key reads PRIVATE+KEY+<name>+<key id>+<base64 key>, as "
                           "`memplane witness key` writes it")
    parts = body[len(KEY_PREFIX):].split("+", 2)
    if len(parts) != 3:
        raise WitnessError("a witness key reads PRIVATE+KEY+<name>+<key id>+<base64 key>")
    name, hex_id, encoded = parts
    try:
        raw = base64.b64decode(encoded, validate=True)
        wanted = bytes.fromhex(hex_id)
    except (binascii.Error, ValueError):
        raise WitnessError("the witness key's id or key is not hex / base64") from None
    if len(raw) != 33 or raw[0] != note.COSIGNATURE:
        raise WitnessError("the witness key is not an Ed25519 cosignature key")
    try:
        signer = note.Signer(name, Ed25519PrivateKey.from_private_bytes(raw[1:]))
        matches = cosigner_verifier(signer).id == wanted
    except note.NoteError as exc:
        raise WitnessError(f"the witness key's name is not usable: {exc}") from None
    if not matches:
        raise WitnessError("the witness key's id does not match its name and key")
    return signer


def parse_log_key(text: str) -> note.Verifier:
    """A log's verifier key (an Ed25519 signed-note key, type 0x01)."""
    try:
        verifier = note.parse_verifier(text)
    except note.NoteError as exc:
        raise WitnessError(f"a log verifier key is not usable: {exc}") from None
    if verifier.kind != note.ED25519:
        raise WitnessError("a log verifier key must be an Ed25519 signed-note key (type 0x01), "
                           "as GET /v1/audit/verifier-key gives it")
    return verifier


# -- state ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cosigned:
    size: int
    root: bytes


class State:
    """The last cosigned checkpoint of each log, kept in ``directory``; holds the directory's
    lock until :meth:`close`."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.path = directory / STATE_FILE
        self._lock_fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            raise WitnessError(f"another witness process holds {directory}; one state "
                               "directory serves one witness") from None
        try:
            self.logs = self._load()
        except BaseException:
            self.close()
            raise

    def _load(self) -> dict[str, Cosigned]:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") != STATE_FORMAT:
                raise ValueError("format")
            return {origin: Cosigned(int(item["size"]),
                                     base64.b64decode(item["root"], validate=True))
                    for origin, item in data["logs"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise WitnessError(f"the witness state {self.path} cannot be read; restore it "
                               "from a backup (starting afresh would let a forked log be "
                               "cosigned)") from None

    def get(self, origin: str) -> Cosigned:
        return self.logs.get(origin, Cosigned(0, merkle.EMPTY_ROOT))

    def put(self, origin: str, size: int, root: bytes) -> None:
        """Record the checkpoint as cosigned: durable when this returns."""
        logs = {**self.logs, origin: Cosigned(size, root)}
        data = {"format": STATE_FORMAT,
                "logs": {o: {"size": c.size, "root": base64.b64encode(c.root).decode()}
                         for o, c in sorted(logs.items())}}
        _write_durably(self.path, json.dumps(data, indent=1).encode())
        self.logs = logs

    def keep_evidence(self, origin: str, size: int, body: bytes) -> None:
        folder = self.directory / "evidence"
        folder.mkdir(exist_ok=True)
        digest = hashlib.sha256(body).hexdigest()[:16]
        name = f"{hashlib.sha256(origin.encode()).hexdigest()[:12]}-{size}-{digest}.txt"
        if not (folder / name).exists():
            _write_durably(folder / name, body)

    def close(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1


def _write_durably(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


# -- add-checkpoint ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    content_type: str = TEXT_TYPE


@dataclass(frozen=True)
class Request:
    old: int
    proof: tuple[bytes, ...]
    note: str


class Malformed(ValueError):
    pass


def parse_request(body: bytes) -> Request:
    """The parts of an add-checkpoint body; Malformed with a sentence if it is not one."""
    if len(body) > MAX_BODY_BYTES:
        raise Malformed("the request body is too large")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed("the request body is not UTF-8") from None
    cut = text.find("\n\n")
    if cut < 0:
        raise Malformed("the body reads 'old <size>', proof lines, a blank line, then the "
                        "checkpoint")
    lines = text[:cut].split("\n")
    old = lines[0].removeprefix("old ")
    if (old == lines[0] or not old.isascii() or not old.isdigit()
            or (len(old) > 1 and old[0] == "0")):
        raise Malformed("the first line reads 'old <size>', in decimal without leading zeros")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise Malformed(f"a consistency proof has at most {MAX_PROOF_LINES} lines")
    proof = []
    for line in lines[1:]:
        try:
            hashed = base64.b64decode(line, validate=True)
        except binascii.Error:
            hashed = b""
        if len(hashed) != merkle.HASH_SIZE:
            raise Malformed("each proof line is one base64 SHA-256 hash")
        proof.append(hashed)
    return Request(int(old), tuple(proof), text[cut + 2:])


class Witness:
    """Cosigns checkpoints of the logs whose keys it trusts (see the module's doc)."""

    def __init__(self, signer: note.Signer, logs: Sequence[note.Verifier], state: State,
                 clock: Callable[[], float] = time.time) -> None:
        self.signer = signer
        self.logs = tuple(logs)
        self.state = state
        self.clock = clock
        self._lock = threading.Lock()

    @property
    def verifier(self) -> note.Verifier:
        return cosigner_verifier(self.signer)

    def keys_for(self, origin: str) -> list[note.Verifier]:
        return [key for key in self.logs
                if origin == key.name or origin.startswith(key.name + "/")]

    def add_checkpoint(self, body: bytes) -> Answer:
        try:
            request = parse_request(body)
            checkpoint_text = note.parse(request.note).text
            checkpoint = note.parse_checkpoint(checkpoint_text)
        except (Malformed, note.NoteError) as exc:
            return Answer(400, f"{exc}\n")
        keys = self.keys_for(checkpoint.origin)
        if not keys:
            return Answer(404, "this witness knows no log of that origin\n")
        if not any(_signed_by(request.note, key) for key in keys):
            return Answer(403, "no signature of a trusted key of this log verifies\n")
        if request.old > checkpoint.size:
            return Answer(400, "the old size is above the checkpoint's size\n")
        with self._lock:
            last = self.state.get(checkpoint.origin)
            if request.old != last.size:
                return Answer(409, f"{last.size}\n", SIZE_TYPE)
            if request.old == checkpoint.size and checkpoint.root != last.root:
                self.state.keep_evidence(checkpoint.origin, checkpoint.size, body)
                return Answer(409, f"{last.size}\n", SIZE_TYPE)
            if not merkle.verify_consistency(last.size, checkpoint.size, last.root,
                                             checkpoint.root, request.proof):
                self.state.keep_evidence(checkpoint.origin, checkpoint.size, body)
                return Answer(422, "the consistency proof does not verify\n")
            try:
                self.state.put(checkpoint.origin, checkpoint.size, checkpoint.root)
            except OSError:  # not recorded, so not cosigned
                return Answer(503, "the witness could not record the checkpoint; retry\n")
        cosignature = note.cosign(checkpoint_text, self.signer, int(self.clock()))
        return Answer(200, cosignature.line())


def _signed_by(signed: str, key: note.Verifier) -> bool:
    with contextlib.suppress(note.NoteError):
        note.verify(signed, key)
        return True
    return False


def request_body(old: int, proof: Sequence[bytes], signed_note: str) -> bytes:
    """An add-checkpoint request body (what a log sends)."""
    lines = [f"old {old}", *(base64.b64encode(h).decode() for h in proof)]
    return ("\n".join(lines) + "\n\n" + signed_note).encode()
