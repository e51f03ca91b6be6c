from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class AuditEntryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    seq: int | None = Field(description="Position in the tenant's hash chain (1, 2, …); "
                            "null until the row is sealed, a fraction of a second later.")
    pointer_id: uuid.UUID | None = Field(description="The memory pointer the access touched, "
                                         "if any.")
    event_id: uuid.UUID | None = Field(description="The event the access touched, if any.")
    accessor_type: str = Field(
        description="Who acted: 'agent' (an agent key; its agent id in agent_id), 'user' (a "
        "data subject's own key, role user; the subject is not named in the row), 'api' (an "
        "admin or compliance key) or 'system' (the server's own work: jobs, the scheduler, "
        "the sealer, the search indexer, the command line's local commands).",
        examples=["agent"])
    accessor_id: str = Field(
        description="Which one: 'key:<API key id>' for every key; for the system, what acted "
        "('job:<id>', 'worker:<owner>', 'scheduler:<owner>', 'search-indexer', 'cli:<command>', "
        "'bootstrap', …).", examples=["key:0191c1e2-…"])
    agent_id: str | None = Field(None, description="The agent recorded for the access (an "
                                 "agent key's agent_id, or the write's agent_id).")
    operation: str = Field(
        description="What was done. Memories, events and entries: read, write, append, "
        "delete, clear, list, search, context, summarize, compact, cleanup; compliance: "
        "export, export_download, erase, legal_hold, receipt_read, job_read; keys and "
        "settings: key_create, key_revoke, team_update, team_delete, agent_update, "
        "storage_configure, retention_policy_write, …; the audit log itself: audit_query, "
        "audit_verify, audit_checkpoint; the server: gc, reconcile, job_takeover, "
        "access_denied (a refused role); docs/teams-and-user-keys.md lists them all.",
        examples=["write"])
    success: bool = Field(description="False when the operation was refused or failed.")
    detail: str = Field(description="A short description without memory content; a data "
                        "subject's identifiers appear only sealed under the subject's key.")
    request_id: str | None = Field(description="The X-Request-ID of the HTTP request that "
                                   "caused it, to find it in the server's logs.")
    accessed_at: datetime = Field(description="When it happened (UTC).")
    leaf: str | None = Field(
        None, description="Base64 of the row's leaf in the audit log's Merkle tree (leaf "
        "index seq − 1; leaf hash SHA-256(0x00 ‖ leaf)): the canonical JSON object of the "
        "row's fields — accessed_at, accessor_id, accessor_type, agent_id, detail, event_id, "
        "operation, pointer_id, request_id, seq, success, tenant_id — with the values this "
        "item shows, keys sorted, no whitespace, UTF-8. detail is the detail as stored: an "
        "address sealed under a data subject's key stays its sealed:… token there, so the "
        "leaf never changes, even after the subject's erasure. Null while unsealed. Prove it "
        "with GET /v1/audit/proof/inclusion against GET /v1/audit/checkpoint.")


class AuditPage(BaseModel):
    items: list[AuditEntryOut] = Field(description="Audit rows, oldest first.")
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on "
                                    "the last page.")


class AuditVerificationOut(BaseModel):
    ok: bool = Field(description="True when the hash chain and the bucket's signed "
                     "checkpoints agree with every row.")
    checked: int = Field(description="Sealed rows recomputed and found in order.")
    unsealed: int = Field(description="Rows not yet sealed (written in the last moments); "
                          "they are checked once sealed.")
    first_bad_seq: int | None = Field(description="The first row that is missing, out of "
                                      "order or changed; null when none.")
    problem: str | None = Field(None, description="What is wrong, in a sentence; null when ok.")
    checkpoints_checked: int = Field(
        0, description="Signed checkpoints read from the tenant's bucket and held against "
        "the database.")
    first_checkpoint_seq: int | None = Field(None, description="Row covered by the oldest "
                                             "checkpoint read.")
    last_checkpoint_seq: int | None = Field(None, description="Row covered by the newest "
                                            "checkpoint read.")
    first_bad_checkpoint: int | None = Field(
        None, description="The seq (and file name) of the first checkpoint that is forged, "
        "missing, or disagrees with the database.")
    head_seq: int = Field(0, description="The last sealed row in the database.")
    anchored_seq: int = Field(0, description="The last row covered by a checkpoint written "
                              "into the bucket; rows after it are not yet anchored.")
    anchor_lag_seconds: float | None = Field(
        None, description="Seconds since the last checkpoint while rows wait for the next.")
    anchor_problem: str | None = Field(
        None, description="Why the last checkpoint write failed (unreachable, auth_failed, "
        "…); it is retried every interval.")
    anchors_checked: int = Field(
        0, description="Places whose checkpoints were read: the operator's default bucket "
        "at the tenant's prefix (where every tenant starts), every storage configuration the "
        "tenant has had, and every place a recorded move of the anchor names.")
    anchor_moves: int = Field(
        0, description="Signed records of the anchor moving to another bucket (written "
        "into the old one when the tenant's storage changed).")
    anchors_unreadable: list[str] = Field(
        default_factory=list, description="Storage configurations whose bucket could not be "
        "read and that no recorded move names (a bucket since removed); a place the anchor "
        "moved through that cannot be read fails verification instead.")


class InclusionProofOut(BaseModel):
    leaf_index: int = Field(description="The row's leaf index: its seq − 1.")
    tree_size: int = Field(description="The size of the tree the proof is against (the "
                           "checkpoint's size).")
    hashes: list[str] = Field(description="The RFC 9162 inclusion proof, each hash base64, "
                              "from the leaf's sibling up.")


class ConsistencyProofOut(BaseModel):
    first: int = Field(description="The size of the older tree.")
    second: int = Field(description="The size of the newer tree.")
    hashes: list[str] = Field(description="The RFC 9162 consistency proof, each hash base64; "
                              "empty when first equals second.")
