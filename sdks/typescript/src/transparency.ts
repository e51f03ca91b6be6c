/**
 * The `transparency` block of a receipt or an export manifest, checked as
 * `memplane receipt verify` checks it (memplane/cli/transparency.py): the checkpoint's
 * signature (the log's key, the document's tenant), each row's inclusion proof against its
 * root, each row naming the document's job, and the rows the receipt names among them.
 */
import { fromBase64 } from "./encoding.js";
import {
  NoteError, leafHash, openCheckpoint, parseVerifier, verifierFromPem, verifyInclusion,
  type Verifier,
} from "./tlog.js";

/** What a verified transparency block proves. */
export interface TransparencyProven {
  origin: string;
  treeSize: number;
  rows: number[];
}

/**
 * Which check failed: no block, the checkpoint's note (`note` says how), another tenant's log,
 * a malformed proof, an inclusion proof, a row of another job, no row, a named row unproven.
 */
export type TransparencyCheck =
  "block" | "checkpoint" | "tenant" | "proof" | "inclusion" | "job" | "empty" | "named";

/** The thrown error's message says what is wrong (altered, another key, another tenant …). */
export class TransparencyError extends Error {
  readonly check: TransparencyCheck;
  /** The audit row the failed check is about, when it is about one. */
  readonly seq: number | null;
  /** The checkpoint's origin and size, once its signature verified. */
  readonly origin: string | null;
  readonly treeSize: number | null;
  /** Why the checkpoint was refused, when it was. */
  readonly note: NoteError | null;

  constructor(message: string, check: TransparencyCheck = "block",
              detail: { seq?: number; origin?: string; treeSize?: number; note?: NoteError } = {}) {
    super(message);
    this.name = "TransparencyError";
    this.check = check;
    this.seq = detail.seq ?? null;
    this.origin = detail.origin ?? null;
    this.treeSize = detail.treeSize ?? null;
    this.note = detail.note ?? null;
  }
}

/**
 * Check `document`'s transparency block with the log's verifier key (its `name+id+base64`
 * text, or a parsed Verifier); throws TransparencyError with the sentence that says what is
 * wrong, else resolves with what it proved.
 */
export async function verifyTransparency(document: Record<string, unknown>,
                                         verifierKey: string | Verifier
): Promise<TransparencyProven> {
  const verifier = typeof verifierKey === "string" ? await parseVerifier(verifierKey) : verifierKey;
  const block = document["transparency"];
  if (typeof block !== "object" || block === null || Array.isArray(block)) {
    throw new TransparencyError("the document carries no transparency proofs");
  }
  const { checkpoint: note, proofs } = block as { checkpoint?: unknown; proofs?: unknown };
  let checkpoint;
  try {
    checkpoint = await openCheckpoint(String(note), verifier);
  } catch (error) {
    if (!(error instanceof NoteError)) throw error;
    throw new TransparencyError(`its checkpoint does not carry a valid signature of the log's ` +
      `key ${verifier.name} (${error.message}): it was altered or signed by another key`,
      "checkpoint", { note: error });
  }
  const tenant = document["tenant_id"];
  const job = document["job_id"];
  if (!checkpoint.origin.endsWith(`/audit/${String(tenant)}`)) {
    throw new TransparencyError(`its checkpoint is of the log ${checkpoint.origin}, not of the ` +
      `document's tenant ${String(tenant)}`, "tenant", { origin: checkpoint.origin });
  }
  const proven: number[] = [];
  for (const item of Array.isArray(proofs) ? proofs : []) {
    const { seq, leaf, hashes } = proofItem(item);
    if (!(await verifyInclusion(await leafHash(leaf), seq - 1, checkpoint.size, hashes,
      checkpoint.root))) {
      throw new TransparencyError(`the inclusion proof of row ${seq} does not verify against ` +
        `the checkpoint of ${checkpoint.size} rows: the row or its proof was altered`, "inclusion",
        { seq, treeSize: checkpoint.size });
    }
    let row: unknown;
    try {
      row = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(leaf));
    } catch {
      row = null;
    }
    const fields = typeof row === "object" && row !== null ? row as Record<string, unknown> : null;
    const detail = fields?.["detail"];
    if (!fields || fields["seq"] !== seq || typeof detail !== "string" ||
        !(detail === `job ${String(job)}` || detail.startsWith(`job ${String(job)}:`))) {
      throw new TransparencyError(`row ${seq}, proven in the log, is not a row of job ${String(job)}`,
        "job", { seq });
    }
    proven.push(seq);
  }
  if (!proven.length) throw new TransparencyError("the document's transparency block proves no row",
    "empty");
  const audit = document["audit"];
  if (typeof audit === "object" && audit !== null) {
    for (const name of ["first_seq", "last_seq"]) {
      const seq = (audit as Record<string, unknown>)[name];
      if (seq !== undefined && seq !== null && !proven.includes(seq as number)) {
        throw new TransparencyError(`row ${String(seq)}, which the receipt names, has no ` +
          "inclusion proof", "named", { seq: seq as number });
      }
    }
  }
  return { origin: checkpoint.origin, treeSize: checkpoint.size, rows: proven };
}

/** The receipt key (PEM) as the verifier of the checkpoint the document carries. */
export function receiptVerifier(document: Record<string, unknown>, publicKeyPem: string): Verifier {
  const block = document["transparency"] as { checkpoint?: unknown } | undefined;
  const text = typeof block?.checkpoint === "string" ? block.checkpoint : "";
  return verifierFromPem(text.split("/", 1)[0] || "memplane", publicKeyPem);
}

function proofItem(item: unknown): { seq: number; leaf: Uint8Array; hashes: Uint8Array[] } {
  const bad = () => new TransparencyError("a proof in the document is not {seq, leaf, hashes} in base64",
    "proof");
  if (typeof item !== "object" || item === null) throw bad();
  const { seq, leaf, hashes } = item as Record<string, unknown>;
  const leafBytes = typeof leaf === "string" ? fromBase64(leaf) : null;
  if (!leafBytes || !Array.isArray(hashes)) throw bad();
  const hashBytes = hashes.map((h) => (typeof h === "string" ? fromBase64(h) : null));
  if (hashBytes.some((h) => h === null)) throw bad();
  if (typeof seq !== "number" || !Number.isInteger(seq) || seq < 1) {
    throw new TransparencyError("a proof in the document names no row", "proof");
  }
  return { seq, leaf: leafBytes, hashes: hashBytes as Uint8Array[] };
}
