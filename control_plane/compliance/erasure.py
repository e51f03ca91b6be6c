"""Erasure of a data subject (GDPR Art. 17): a resumable, idempotent job (DESIGN §7, I4).

Steps, each recorded in the job's ``progress`` when finished, so a worker that takes over
after a crash continues with the next one:

1. **start** — the start time and the first audit row of the erasure (naming the job, not
   the subject);
2. **block** — a ``subject_erasures`` row: memory writes, appends and deletes of the subject
   answer 409 ``subject_erasure_in_progress`` until the receipt is written;
3a. **compactor entries** built from the subject's events (the ``compactions`` and
   ``compaction_events`` provenance names them), and any built from events that no longer
   exist: mark their pointers ``pending_delete``, delete their objects (all versions) and
   check by listing that they are gone, then delete the pointers and their provenance rows
   (other subjects' events they covered lose ``compressed_at``: ``erasure_derived.py``);
3. **delete**, in batches of the subject's pointers (``user_id`` = subject, or scope ``user``
   with ``scope_ref`` = subject): mark them ``pending_delete`` (reads stop), delete their
   objects (``delete_many``; on a versioned bucket every version and delete marker of each
   path outside the subject's prefix is purged), delete the rows with one audit row each.
   Objects outside the subject's prefix (conversation, agent … scopes) are verified right
   away by listing their scope directories; superseded copies of those keys that no pointer
   names and that predate the erasure are removed too. A batch's counts are saved in the
   transaction that deletes its rows, so a crash never counts anything twice. Memories by
   key and curated entries (key null, memory type ``entry``) are counted apart;
3b. **events**, in batches of the subject's raw events (``user_id`` = subject, or scope
   ``user``/subject): mark them ``pending_delete`` (reads stop), delete their bodies (all
   versions), list each month directory that held one to check they are gone, then delete
   the rows with one audit row each;
4. **sweep** — every object (and, on a versioned bucket, every version and marker) left under
   ``memories/user/<subject>/`` and ``events/user/<subject>/`` in each of the tenant's bucket
   locations, plus the archives of
   the subject's earlier exports;
5. **keys** — the subject's encryption key is destroyed through
   ``control_plane.keys.subject_keys.shred_subject`` when that module is installed;
6. **verify** — count queries on the pointers, the events and the compactor entries built
   from them, and a listing of every version under the subject's prefixes must all come back
   empty (if a write slipped in, the job goes back to step 3a);
7. **receipt** — the last audit row, the audit chain sealed, an Ed25519-signed receipt stored
   (see ``receipts.py``), the write block lifted, and nothing personal of the subject left in
   the control plane: this job and the subject's earlier exports keep only a keyed hash of
   the id (``pseudonyms.py``: the database alone cannot test a guess against it), the
   destroyed key's tombstone is renamed to that hash, the
   subject's idempotency answers are deleted (step 3 deletes those of each batch), and on
   SQLite the write-ahead log is checkpointed and truncated so that, with
   ``secure_delete``, no freed page keeps an old row (``db.engine.scrub_freed``).

Audit rows need no rewriting: they never held the subject's identifiers in clear, only
sealed under the subject's key, which step 5 destroys (``audit/sealed.py``); the chain, which
covers the sealed bytes, still verifies.

A write of the subject that looked up its key before the block and puts its object later
never lands an object behind the receipt: until the receipt its commit sees the block (409,
its object deleted); after the receipt its commit finds the key it sealed under destroyed
(step 5), so it never adopts that object — it deletes it and, as a new write after the
erasure, seals a fresh object under a new key (``memories.hotpath``; the key check holds a
share lock, so step 5 waits for a commit in progress and step 6 then sees its pointer).
``tests/faults/test_races_erasure_gc_export.py`` pauses the two at every step.

A second erasure of the same subject finds nothing, deletes nothing and says so in its
result and receipt. A dry run counts what would be deleted and deletes nothing.

The dry run: ``erasure_plan.py``; steps 1–6: ``erasure_walk.py``, which deletes and checks
objects through ``erasure_bucket.py``; step 7: ``erasure_receipt.py``.
"""

from __future__ import annotations

from typing import Any

from ..holds.service import ensure_subject_not_held
from ..jobs.service import JobContext
from . import erasure_leftovers as leftovers
from .erasure_bucket import ErasureIncomplete
from .erasure_plan import plan
from .erasure_receipt import finish
from .erasure_walk import ErasureWalk

MAX_ROUNDS = 3


def run(ctx: JobContext) -> dict[str, Any]:
    if ctx.params.get("dry_run"):
        return plan(ctx)
    if "receipt_id" in ctx.progress and "result" in ctx.progress:
        return dict(ctx.progress["result"])
    assert ctx.subject is not None
    if "start_audit_id" not in ctx.progress:
        # A hold placed after the request refuses the erasure before anything is deleted;
        # once it has started, placing a hold on the subject is refused instead (holds).
        ensure_subject_not_held(ctx.session, ctx.tenant_id, ctx.subject)
        ctx.session.rollback()
    run = ErasureWalk(ctx)
    run.start()
    run.block()
    for _ in range(MAX_ROUNDS):
        run.delete_compactor_entries()
        run.delete_pointers()
        run.delete_events()
        run.sweep()
        run.destroy_keys()
        if run.verify():
            break
        ctx.commit_progress(compactions_done=False, pointers_done=False, events_done=False,
                            swept=False)
    else:
        raise ErasureIncomplete("writes kept reappearing for the subject; rerun the erasure")
    if not ctx.progress.get("search_dropped"):
        leftovers.drop_search(ctx, run.user_id, run.targets())
    return finish(run)
