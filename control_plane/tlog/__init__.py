"""A transparency log's building blocks, with no database or bucket in them: the Merkle tree
of RFC 9162 §2.1 and its proofs (``merkle``), and the C2SP signed notes, checkpoints and
cosignatures (``note``). The audit log is such a tree (``control_plane/audit``); the CLI's
offline verifiers and the witness use the same code."""
