"""The audit log checked from the tenant's buckets alone: no database, one verifier key.

Beside its JSON checkpoints (``checkpoints.py``) the sealer writes the log's signed tree
heads, C2SP checkpoint notes, and the consistency proof from each one to the next::

    <place>/audit/checkpoints/tlog/checkpoint/<size, 20 digits>             the signed note
    <place>/audit/checkpoints/tlog/consistency/<size>-<size>                {"first", "second",
                                                                             "hashes": [base64]}

:func:`verify` reads every place it is given, the first being where the log starts (the
operator's default bucket at ``tenants/<tenant id>``), and proves, or names the first thing
that is wrong in one sentence:

- every note carries the log's signature, names the same log (its origin) and the size its
  file is named by; sizes never go down, and two places never hold two heads of one size;
- every checkpoint extends the one before it (RFC 9162 §2.1.4), in whichever places the two
  are: a checkpoint deleted from the middle leaves a proof that names it, or no proof from
  its neighbour to the next; a proof swapped for another names other sizes or fails;
- the anchor never moved silently: every move record (``anchors.py``) is itself in the log,
  its ``audit_anchor_moved`` row proven (RFC 9162 §2.1.3) in a checkpoint of the place it
  left, and names a place that was given; and the log continues in a place other than the
  first, or jumps between places, only where such a move says it went.

``leaf_check.py`` adds the database: the root over its rows' leaves at every checkpoint.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from storage_adapters.base import StorageAdapter
from storage_adapters.bounded import ObjectTooLarge

from ..signing import canonical
from ..tlog import merkle, note
from .anchors import (
    FOLDER,
    FORMAT,
    MOVE_OPERATION,
    MOVED_SUFFIX,
    SEQ_DIGITS,
    Place,
    described,
    label,
    move_detail,
)
from .tlog_anchor import TLOG, checkpoint_name, consistency_name

FILE_CEILING = 1 << 16
"""The most one note, proof or move record may take from the bucket: a larger file is
reported as altered, never read whole."""


class Failure(Exception):
    """The log in the buckets does not verify; the message is the sentence that says why."""


def note_name(size: int) -> str:
    return f"{size:0{SEQ_DIGITS}d}"


def checkpoint_path(size: int) -> tuple[str, ...]:
    """Where, under a place's prefix, the note of the tree of ``size`` leaves is kept."""
    return (*TLOG, checkpoint_name(size))


def consistency_path(first: int, second: int) -> tuple[str, ...]:
    return (*TLOG, consistency_name(first, second))


def origin_of(log_name: str, tenant_id: uuid.UUID | str) -> str:
    """The origin line of a tenant's log (``notes.origin``; its key name is the first part)."""
    return f"{log_name}/audit/{tenant_id}"


@dataclass(frozen=True)
class Bucket:
    """One place to read: an adapter, the prefix of the tenant's objects in it, and how the
    sentences name it."""

    name: str
    adapter: StorageAdapter
    prefix: str = ""

    def path(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix.strip("/"), *parts) if p)


@dataclass(frozen=True)
class Head:
    size: int
    root: bytes
    origin: str


@dataclass
class _Read:
    """What one place holds."""

    bucket: Bucket
    heads: dict[int, Head] = field(default_factory=dict)
    proofs: dict[tuple[int, int], str] = field(default_factory=dict)
    moves: list[dict[str, Any]] = field(default_factory=list)
    # Where this place's own signed JSON checkpoints say they were written.
    names: set[tuple[Place, uuid.UUID | None]] = field(default_factory=set)


@dataclass(frozen=True)
class Verified:
    """A log that verified: its origin, its checkpoints and what was checked."""

    origin: str
    checkpoints: int
    first_size: int
    last_size: int
    last_root: bytes
    places: int
    moves: int
    proofs: int
    heads: tuple[tuple[int, bytes], ...]

    def summary(self) -> dict[str, Any]:
        return {"ok": True, "origin": self.origin, "checkpoints": self.checkpoints,
                "first_size": self.first_size, "last_size": self.last_size,
                "last_root": base64.b64encode(self.last_root).decode(),
                "places": self.places, "moves": self.moves,
                "consistency_proofs": self.proofs}


def verify(buckets: Sequence[Bucket], verifier: note.Verifier, *,
           tenant_id: str | None = None) -> Verified:
    """Verify the log kept in ``buckets`` (the first where it starts) with ``verifier``, the
    log's key; raise :class:`Failure` naming the first problem."""
    if not buckets:
        raise Failure("no bucket was given")
    read = [_read(bucket, verifier) for bucket in buckets]
    origin = _one_origin(read, tenant_id)
    merged = _merge(read)
    if not merged:
        raise Failure(f"{_names(b.bucket for b in read)} hold no checkpoint of the audit log "
                      f"(nothing under {'/'.join(TLOG)}/checkpoint/)")
    sizes = sorted(merged)
    if 0 not in merged[sizes[0]][1]:
        raise Failure(f"the log's first checkpoint ({sizes[0]}) is in "
                      f"{read[min(merged[sizes[0]][1])].bucket.name}, not in "
                      f"{read[0].bucket.name}: give the bucket where the log starts first")
    _no_dangling_proofs(read, merged)
    proofs = _extends(read, merged, sizes)
    moves = _moves(read, merged, sizes)
    last = merged[sizes[-1]][0]
    return Verified(origin, len(sizes), sizes[0], sizes[-1], last.root, len(read), moves,
                    proofs, tuple((size, merged[size][0].root) for size in sizes))


# -- reading a place -------------------------------------------------------------------------


def _read(bucket: Bucket, verifier: note.Verifier) -> _Read:
    found = _Read(bucket)
    folder = bucket.path(*FOLDER) + "/"
    notes: dict[int, str] = {}
    plain: list[str] = []
    for info in bucket.adapter.list(folder):
        rel = info.path[len(folder):] if info.path.startswith(folder) else info.path
        parts = rel.split("/")
        if parts[0] == TLOG[-1]:
            _classify(bucket, parts[1:], info.path, notes, found)
        elif len(parts) == 1 and rel.endswith(f"{MOVED_SUFFIX}.json"):
            body = _signed_json(bucket, info.path, verifier)
            if body is not None and "moved_to" in body:
                found.moves.append(body)
                _name(found, body)  # a move record names the place it leaves
        elif len(parts) == 1 and rel.endswith(".json"):
            plain.append(info.path)
    # Where the place's JSON checkpoints say they were written: the latest that carries the
    # log's signature (a forged one is the database's verify to report, checkpoints.py).
    for path in sorted(plain, reverse=True):
        body = _signed_json(bucket, path, verifier)
        if body is not None and _name(found, body):
            break
    previous: int | None = None
    for size in sorted(notes):
        head = _head(bucket, size, notes[size], verifier)
        if previous is not None and head.size < previous:
            raise Failure(f"checkpoint {note_name(size)} in {bucket.name} holds a tree of "
                          f"{head.size} rows, fewer than the checkpoint before it "
                          f"({previous}): the log's size went down")
        if head.size != size:
            raise Failure(f"checkpoint {note_name(size)} in {bucket.name} holds a tree of "
                          f"{head.size} rows, not {size}: the file was renamed or replaced")
        found.heads[size] = head
        previous = head.size
    return found


def _name(found: _Read, body: dict[str, Any]) -> bool:
    named = described(body.get("anchor"))
    if named is not None:
        found.names.add(named)
    return named is not None


def _classify(bucket: Bucket, parts: list[str], path: str, notes: dict[int, str],
              found: _Read) -> None:
    if len(parts) != 2:
        return
    kind, name = parts
    if kind == "checkpoint":
        if not (name.isdigit() and len(name) == SEQ_DIGITS):
            raise Failure(f"{bucket.name} holds {path}, which is not named by a tree size: "
                          "the checkpoints were tampered with")
        notes[int(name)] = path
    elif kind == "consistency":
        first, dash, second = name.partition("-")
        if not (dash and all(p.isdigit() and len(p) == SEQ_DIGITS for p in (first, second))):
            raise Failure(f"{bucket.name} holds {path}, which is not named by two tree "
                          "sizes: the proofs were tampered with")
        found.proofs[(int(first), int(second))] = path


def _get(bucket: Bucket, path: str, what: str) -> bytes:
    try:
        return bucket.adapter.get(path, FILE_CEILING)
    except ObjectTooLarge:
        raise Failure(f"{what} in {bucket.name} is larger than any the server writes: it "
                      "was altered") from None


def _head(bucket: Bucket, size: int, path: str, verifier: note.Verifier) -> Head:
    what = f"checkpoint {note_name(size)}"
    raw = _get(bucket, path, what)
    try:
        text = note.verify(raw.decode("utf-8"), verifier)
        checkpoint = note.parse_checkpoint(text)
    except UnicodeDecodeError:
        raise Failure(f"{what} in {bucket.name} is not a signed note: it was altered") from None
    except note.NoteError as exc:
        raise Failure(f"{what} in {bucket.name} does not carry a valid signature of the "
                      f"log's key {verifier.name} ({exc}): it was forged, altered or signed "
                      "by another key") from None
    return Head(checkpoint.size, checkpoint.root, checkpoint.origin)


def _signed_json(bucket: Bucket, path: str, verifier: note.Verifier) -> dict[str, Any] | None:
    """A JSON checkpoint or move record signed by the log's key (the same Ed25519 key signs
    both forms); None when it is not."""
    try:
        body = json.loads(_get(bucket, path, path.rsplit("/", 1)[-1]))
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        return None
    raw = verifier.public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    signature = body.get("signature")
    if body.get("key_id") != hashlib.sha256(raw).hexdigest()[:16] or not isinstance(
            signature, str):
        return None
    try:
        verifier.public.verify(base64.b64decode(signature, validate=True), canonical(body))
    except (InvalidSignature, binascii.Error, ValueError):
        return None
    return body


# -- the log across places -------------------------------------------------------------------


def _names(buckets: Iterable[Bucket]) -> str:
    return " and ".join(b.name for b in buckets)


def _one_origin(read: list[_Read], tenant_id: str | None) -> str:
    origins = {(head.origin, r.bucket.name) for r in read for head in r.heads.values()}
    names = sorted({origin for origin, _ in origins})
    if len(names) > 1:
        raise Failure(f"the checkpoints name {len(names)} different logs ({', '.join(names)}): "
                      "checkpoints of another log were put among these")
    if not names:
        return ""
    if tenant_id is not None and not names[0].endswith(f"/audit/{tenant_id}"):
        raise Failure(f"the checkpoints are of the log {names[0]}, not of tenant {tenant_id}")
    return names[0]


def _merge(read: list[_Read]) -> dict[int, tuple[Head, set[int]]]:
    merged: dict[int, tuple[Head, set[int]]] = {}
    for index, place in enumerate(read):
        for size, head in place.heads.items():
            if size in merged:
                seen, where = merged[size]
                if seen.root != head.root:
                    other = read[min(where)].bucket.name
                    raise Failure(f"{other} and {place.bucket.name} hold two different trees "
                                  f"of {size} rows: the log was forked")
                where.add(index)
            else:
                merged[size] = (head, {index})
    return merged


def _no_dangling_proofs(read: list[_Read], merged: dict[int, tuple[Head, set[int]]]) -> None:
    for place in read:
        for first, second in sorted(place.proofs):
            for size in (first, second):
                if size not in merged:
                    raise Failure(f"{place.bucket.name} holds the consistency proof from "
                                  f"checkpoint {first} to checkpoint {second}, but checkpoint "
                                  f"{size} is in none of the buckets: checkpoints were deleted")


def _extends(read: list[_Read], merged: dict[int, tuple[Head, set[int]]],
             sizes: list[int]) -> int:
    for first, second in zip(sizes, sizes[1:], strict=False):
        where = [read[i] for i in sorted(merged[second][1] | merged[first][1])]
        holder = next((p for p in where if (first, second) in p.proofs), None)
        if holder is None:
            raise Failure(f"there is no consistency proof from checkpoint {first} to checkpoint "
                          f"{second} in {_names(p.bucket for p in where)}: a checkpoint "
                          "between them, or the proof, was deleted")
        hashes = _proof(holder, first, second)
        if not merkle.verify_consistency(first, second, merged[first][0].root,
                                         merged[second][0].root, hashes):
            raise Failure(f"checkpoint {second} does not extend checkpoint {first}: their "
                          f"consistency proof in {holder.bucket.name} does not verify (the "
                          "log was rewritten between them, or the proof was replaced)")
    return len(sizes) - 1


def _proof(place: _Read, first: int, second: int) -> list[bytes]:
    path = place.proofs[(first, second)]
    where = f"the consistency proof from {first} to {second}"
    try:
        body = json.loads(_get(place.bucket, path, where))
        named = (body["first"], body["second"])
        hashes = [base64.b64decode(h, validate=True) for h in body["hashes"]]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise Failure(f"{where} in {place.bucket.name} is not a well-formed proof: it was "
                      "altered") from None
    if named != (first, second):
        raise Failure(f"the file of {where} in {place.bucket.name} holds the proof from "
                      f"{named[0]} to {named[1]}: proofs were swapped")
    return hashes


# -- moves of the anchor ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Move:
    source: int  # index of the place it left
    size: int  # the checkpoint of the old place that proves it
    target: tuple[Place, uuid.UUID | None]


def _moves(read: list[_Read], merged: dict[int, tuple[Head, set[int]]],
           sizes: list[int]) -> int:
    moves = [_proven_move(read, index, body)
             for index, place in enumerate(read) for body in place.moves]
    into: dict[int, list[_Move]] = {}
    for move in moves:
        targets = [i for i, place in enumerate(read) if move.target in place.names
                   and i != move.source]
        if not targets:
            raise Failure(f"{read[move.source].bucket.name} records that the anchor moved to "
                          f"{label(*move.target)} (proven in its checkpoint {move.size}), "
                          "which was not given: pass that bucket with another --bucket so the "
                          "rest of the log is checked")
        for target in targets:
            into.setdefault(target, []).append(move)
    for size in sizes:  # each checkpoint in the first place, or one a move led to by then
        holders = merged[size][1]
        if not any(i == 0 or any(m.size <= size for m in into.get(i, [])) for i in holders):
            raise Failure(f"the log continues in {read[min(holders)].bucket.name} from "
                          f"checkpoint {size}, but no bucket given holds a checkpointed "
                          "record of the anchor moving there: the anchor was moved silently")
    for before, after in zip(sizes, sizes[1:], strict=False):
        left, entered = merged[before][1], merged[after][1]
        if left & entered:
            continue
        # A move recorded in the place left, or — when that place took no more writes — in
        # the first place, proven in the very checkpoint the log goes on with there.
        if not any(m.source in left and m.size <= before
                   for target in entered for m in into.get(target, [])) and not any(
                m.source == 0 and m.size == after for m in moves if 0 in entered):
            raise Failure(f"the log goes on from checkpoint {before} in "
                          f"{_names(read[i].bucket for i in sorted(left))} to checkpoint "
                          f"{after} in {_names(read[i].bucket for i in sorted(entered))} "
                          "without a checkpointed record of the anchor moving: the anchor "
                          "was moved silently")
    return len(moves)


def _proven_move(read: list[_Read], index: int, body: dict[str, Any]) -> _Move:
    place = read[index]
    target = described(body.get("moved_to"))
    if target is None:
        raise Failure(f"a move record in {place.bucket.name} names no place it moved to")
    where = (f"{place.bucket.name} records that the anchor moved to {label(*target)} at "
             f"row {body.get('seq')}")
    evidence = body.get("tlog")
    if not isinstance(evidence, dict):
        raise Failure(f"{where}, but the move is not in the log (no checkpoint proves it): "
                      "the anchor was moved without a checkpointed record of the move")
    try:
        size, seq = int(evidence["size"]), int(evidence["seq"])
        leaf = base64.b64decode(evidence["leaf"], validate=True)
        hashes = [base64.b64decode(h, validate=True) for h in evidence["hashes"]]
        row = json.loads(leaf)
    except (KeyError, TypeError, ValueError, binascii.Error):
        raise Failure(f"{where}, but its proof is not well formed") from None
    head = place.heads.get(size)
    if head is None:
        raise Failure(f"{where}, proven in its checkpoint {size}, which is not there: "
                      "checkpoints were deleted")
    if not merkle.verify_inclusion(merkle.leaf_hash(leaf), seq - 1, size, hashes, head.root):
        raise Failure(f"{where}, but that row is not in its checkpoint {size}: the proof "
                      "does not verify")
    if not isinstance(row, dict) or (row.get("seq"), row.get("operation"),
                                     row.get("detail")) != (seq, MOVE_OPERATION,
                                                            move_detail(*target)):
        raise Failure(f"{where}, but the row proven is not that move's "
                      f"{MOVE_OPERATION} row")
    return _Move(index, size, target)
