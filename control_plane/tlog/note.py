"""C2SP signed notes (https://c2sp.org/signed-note), the checkpoints they carry
(https://c2sp.org/tlog-checkpoint) and witness cosignatures (https://c2sp.org/tlog-cosignature).

A note is UTF-8 text ending in a newline (it may hold blank lines, but no other ASCII control
character), a blank line, then one line per signature (at most 100)::

    — <key name> <base64(4-byte key id ‖ signature)>

An Ed25519 key's id is the first 4 bytes of SHA-256(name ‖ "\\n" ‖ 0x01 ‖ public key), its
verifier key ``<name>+<8 hex digits of the id>+<base64(0x01 ‖ public key)>``. A witness's
cosignature (type 0x04) signs ``cosignature/v1\\ntime <seconds>\\n`` followed by the
checkpoint's text, and its signature line carries id ‖ 8-byte big-endian time ‖ signature.

A checkpoint is a note whose text is the log's origin line, the tree size in decimal, the
base64 root hash, and optional extension lines.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

ED25519 = 0x01
COSIGNATURE = 0x04
DASH = "\u2014"
MAX_NOTE_BYTES = 1 << 20
MAX_SIGNATURES = 100  # golang.org/x/mod/sumdb/note's limit; c2sp.org/signed-note: at least 16
MAX_TIMESTAMP = (1 << 63) - 1  # c2sp.org/tlog-cosignature
MAX_SIZE = (1 << 64) - 1
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f]")


class NoteError(ValueError):
    """Text that is not a well-formed note, checkpoint or key."""


def _raw(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


def _check_name(name: str) -> None:
    if not name or any(c.isspace() for c in name) or "+" in name:
        raise NoteError("a key name must be non-empty, without spaces or '+'")


def _check_characters(text: str) -> None:
    if _CONTROL.search(text):
        raise NoteError("a note holds no ASCII control character but newline")


def key_id(name: str, public: Ed25519PublicKey, kind: int = ED25519) -> bytes:
    _check_name(name)
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + _raw(public)).digest()[:4]


@dataclass(frozen=True)
class Verifier:
    """One key a note's signatures are checked with."""

    name: str
    public: Ed25519PublicKey
    kind: int = ED25519

    @property
    def id(self) -> bytes:
        return key_id(self.name, self.public, self.kind)

    def text(self) -> str:
        """The verifier key in its C2SP text form."""
        encoded = base64.b64encode(bytes([self.kind]) + _raw(self.public)).decode()
        return f"{self.name}+{self.id.hex()}+{encoded}"


def parse_verifier(text: str) -> Verifier:
    """A verifier key from its ``name+id+base64`` text (Ed25519 or a cosignature key)."""
    parts = text.strip().split("+", 2)
    if len(parts) != 3:
        raise NoteError("a verifier key reads <name>+<key id>+<base64 key>")
    name, hex_id, encoded = parts
    try:
        raw = base64.b64decode(encoded, validate=True)
        wanted = bytes.fromhex(hex_id)
    except (binascii.Error, ValueError) as exc:
        raise NoteError("the verifier key's id or key is not hex / base64") from exc
    if len(raw) != 33 or raw[0] not in (ED25519, COSIGNATURE) or len(wanted) != 4:
        raise NoteError("the verifier key is not an Ed25519 key")
    verifier = Verifier(name, Ed25519PublicKey.from_public_bytes(raw[1:]), raw[0])
    if verifier.id != wanted:
        raise NoteError("the verifier key's id does not match its name and key")
    return verifier


@dataclass(frozen=True)
class Signer:
    name: str
    private: Ed25519PrivateKey

    @property
    def verifier(self) -> Verifier:
        return Verifier(self.name, self.private.public_key())


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: bytes
    payload: bytes  # what follows the key id: the signature (and a cosignature's time)

    def line(self) -> str:
        return f"{DASH} {self.name} {base64.b64encode(self.key_id + self.payload).decode()}\n"


@dataclass(frozen=True)
class Note:
    text: str
    signatures: tuple[Signature, ...]

    def render(self) -> str:
        return self.text + "\n" + "".join(s.line() for s in self.signatures)


def sign(text: str, *signers: Signer) -> str:
    """The note of ``text`` signed by each of ``signers``."""
    _check_text(text)
    signatures = tuple(Signature(s.name, s.verifier.id, s.private.sign(text.encode()))
                       for s in signers)
    return Note(text, signatures).render()


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise NoteError("a note's text ends in a newline")
    _check_characters(text)


def parse(note: str) -> Note:
    """A note's text and signature lines, unverified."""
    if len(note.encode()) > MAX_NOTE_BYTES:
        raise NoteError("the note is too long")
    _check_characters(note)
    cut = note.rfind("\n\n")
    if cut < 0 or not note.endswith("\n"):
        raise NoteError("a note is text, a blank line, then signature lines")
    text, lines = note[:cut + 1], note[cut + 2:].split("\n")[:-1]
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"the note carries too many signatures (over {MAX_SIGNATURES})")
    signatures = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) != 3 or fields[0] != DASH:
            raise NoteError("a signature line reads '— <name> <base64>'")
        _check_name(fields[1])
        try:
            blob = base64.b64decode(fields[2], validate=True)
        except binascii.Error as exc:
            raise NoteError("a signature is not base64") from exc
        if len(blob) < 5:
            raise NoteError("a signature is too short")
        signatures.append(Signature(fields[1], blob[:4], blob[4:]))
    if not signatures:
        raise NoteError("the note carries no signature")
    return Note(text, tuple(signatures))


def _signatures_of(parsed: Note, verifier: Verifier) -> list[bytes]:
    """The distinct payloads of the lines bearing ``verifier``'s name and key id."""
    payloads = [s.payload for s in parsed.signatures
                if s.name == verifier.name and s.key_id == verifier.id]
    return list(dict.fromkeys(payloads))


def verify(note: str, verifier: Verifier) -> str:
    """The note's text, when ``verifier`` signed it (an Ed25519 signature); else NoteError. Every
    line bearing the key's name and id must verify, as golang.org/x/mod/sumdb/note checks
    (c2sp.org/signed-note: a known key's failing signature SHOULD reject the note)."""
    parsed = parse(note)
    payloads = _signatures_of(parsed, verifier)
    if not payloads:
        raise NoteError(f"the note carries no signature of {verifier.name}")
    for payload in payloads:
        try:
            verifier.public.verify(payload, parsed.text.encode())
        except InvalidSignature as exc:
            raise NoteError(f"the signature of {verifier.name} does not verify") from exc
    return parsed.text


# --- checkpoints -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode(),
                 *self.extensions]
        return "".join(f"{line}\n" for line in lines)


def parse_checkpoint(text: str) -> Checkpoint:
    """A checkpoint's lines (c2sp.org/tlog-checkpoint): origin, size (ASCII decimal, no leading
    zero, below 2^64), the base64 SHA-256 root hash, then non-empty extension lines."""
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "" or not lines[0]:
        raise NoteError("a checkpoint reads its origin, size and root hash, one a line")
    if "" in lines[:-1]:
        raise NoteError("a checkpoint holds no empty line")
    origin, size, encoded = lines[0], lines[1], lines[2]
    if (not size.isascii() or not size.isdigit() or (len(size) > 1 and size[0] == "0")
            or len(size) > 20 or int(size) > MAX_SIZE):
        raise NoteError("a checkpoint's size is a decimal number below 2^64")
    try:
        root_hash = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise NoteError("a checkpoint's root hash is not base64") from exc
    if len(root_hash) != 32:
        raise NoteError("a checkpoint's root hash is not 32 bytes")
    return Checkpoint(origin, int(size), root_hash, tuple(lines[3:-1]))


# --- cosignatures ----------------------------------------------------------------------------


def cosigned_message(checkpoint_text: str, timestamp: int) -> bytes:
    return f"cosignature/v1\ntime {timestamp}\n".encode() + checkpoint_text.encode()


def cosign(checkpoint_text: str, signer: Signer, timestamp: int) -> Signature:
    """A witness's cosignature line of a checkpoint, made at ``timestamp`` (Unix seconds)."""
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise NoteError("a cosignature's time is between 0 and 2^63 - 1")
    public = signer.private.public_key()
    payload = struct.pack(">Q", timestamp) + signer.private.sign(
        cosigned_message(checkpoint_text, timestamp))
    return Signature(signer.name, key_id(signer.name, public, COSIGNATURE), payload)


def verify_cosignature(note: str, witness: Verifier) -> int:
    """The time at which ``witness`` cosigned the note's checkpoint (the latest, if it did so
    more than once); NoteError if it did not, or if any of its lines fails to verify."""
    parsed = parse(note)
    payloads = _signatures_of(parsed, witness)
    if not payloads:
        raise NoteError(f"the note carries no cosignature of {witness.name}")
    times = []
    for payload in payloads:
        if len(payload) != 72:
            raise NoteError(f"the cosignature of {witness.name} is malformed")
        (timestamp,) = struct.unpack(">Q", payload[:8])
        if timestamp > MAX_TIMESTAMP:
            raise NoteError(f"the cosignature of {witness.name} has a time past 2^63 - 1")
        try:
            witness.public.verify(payload[8:], cosigned_message(parsed.text, timestamp))
        except InvalidSignature as exc:
            raise NoteError(f"the cosignature of {witness.name} does not verify") from exc
        times.append(int(timestamp))
    return max(times)
