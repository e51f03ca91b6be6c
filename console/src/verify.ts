// Erasure receipts verified in the browser by the TypeScript SDK's own code
// (sdks/typescript/src/receipts.ts, tlog.ts, transparency.ts; Web Crypto only): the same
// checks as `memplane receipt verify`. This module words each check for the page.
//
// 1. The signature: Ed25519 over the canonical form by the server's receipt key
//    (GET /v1/receipts/public-key), whose id (SHA-256 of the raw key, 16 hex) is the key_id.
// 2. The transparency log, when the receipt carries `transparency`: its checkpoint (a C2SP
//    signed note) signed by the log's key (GET /v1/audit/verifier-key, the same key), of the
//    receipt's tenant; each proven row's RFC 9162 inclusion proof against the checkpoint's
//    root; each row naming the receipt's job; the rows the receipt names among them.
import { ed25519FromPem, fromBase64 } from "../../sdks/typescript/src/encoding.js";
import { publicKeyId, RECEIPT_FORMAT, verifyReceipt as signedBy } from "../../sdks/typescript/src/receipts.js";
import { NoteError, verifierFromPem } from "../../sdks/typescript/src/tlog.js";
import { TransparencyError, verifyTransparency } from "../../sdks/typescript/src/transparency.js";

export interface Verdict {
  ok: boolean;
  lines: string[];   // what was checked, in order; the first failure ends it
}

export async function verifyReceipt(text: string, pem: string, verifierKey: string | null): Promise<Verdict> {
  const lines: string[] = [];
  const fail = (why: string): Verdict => ({ ok: false, lines: [...lines, why] });
  let receipt: Record<string, unknown>;
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      return fail("The receipt is not a JSON object.");
    }
    receipt = parsed as Record<string, unknown>;
  } catch {
    return fail("The receipt is not valid JSON: it was altered in transit or in storage.");
  }
  if (receipt.format !== RECEIPT_FORMAT) {
    return fail("The receipt does not name the format memplane-erasure-receipt/1.");
  }
  try {
    ed25519FromPem(pem);
  } catch {
    return fail("the server's receipt key is not an Ed25519 public key");
  }
  const keyId = await publicKeyId(pem);
  if (receipt.key_id !== keyId) {
    return fail(`The receipt names signing key ${String(receipt.key_id)}, not the server's key ${keyId}.`);
  }
  if (fromBase64(String(receipt.signature ?? "")) === null) {
    return fail("The receipt's signature is not base64.");
  }
  let signed = false;
  try {
    signed = await signedBy({ ...receipt, signature: String(receipt.signature ?? "") }, pem);
  } catch {
    signed = false;
  }
  if (!signed) {
    return fail("The Ed25519 signature does not match the receipt: it was changed after signing, or signed by another key.");
  }
  lines.push(`Ed25519 signature by key ${keyId} checked in this browser.`);
  if (!("transparency" in receipt)) {
    lines.push("The receipt carries no transparency-log proofs (issued before receipts did).");
    return { ok: true, lines };
  }
  try {
    lines.push(await checkTransparency(receipt, pem, verifierKey));
  } catch (error) {
    return fail(error instanceof Error ? error.message : String(error));
  }
  return { ok: true, lines };
}

// --- the transparency log: the SDK's verifyTransparency, its refusals in the page's words ---

function verifierName(verifierKey: string | null, checkpoint: string): string {
  if (verifierKey) return verifierKey.trim().split("+")[0];
  return checkpoint.split("/")[0] || "memplane";
}

function noteRefusal(note: NoteError | null, name: string): string {
  switch (note?.problem) {
    case "unsigned": return `The checkpoint carries no signature of the log's key ${name}.`;
    case "forged": return `The checkpoint's signature by ${name} does not verify: it was altered.`;
    case "lines": case "key": return "The checkpoint's signature lines are malformed.";
    case "checkpoint": return "The checkpoint's tree size is malformed.";
    default: return "The receipt's checkpoint is not a signed note.";
  }
}

function refusal(error: TransparencyError, name: string, job: string): string {
  const seq = String(error.seq);
  switch (error.check) {
    case "checkpoint": return noteRefusal(error.note, name);
    case "tenant": return `The checkpoint is of the log ${String(error.origin)}, not of the receipt's tenant.`;
    case "proof": return "A proof in the receipt is not {seq, leaf, hashes}.";
    case "inclusion":
      return `The inclusion proof of audit row ${seq} does not verify against the checkpoint of ${String(error.treeSize)} rows.`;
    case "job": return `Audit row ${seq}, proven in the log, is not a row of job ${job}.`;
    case "empty": return "The receipt's transparency block proves no row.";
    case "named": return `Audit row ${seq}, which the receipt names, has no inclusion proof.`;
    default: return "The receipt's transparency block has no checkpoint.";
  }
}

async function checkTransparency(receipt: Record<string, unknown>, pem: string,
                                 verifierKey: string | null): Promise<string> {
  const block = receipt.transparency as { checkpoint?: unknown } | null;
  if (block === null || typeof block !== "object" || typeof block.checkpoint !== "string") {
    throw new Error("The receipt's transparency block has no checkpoint.");
  }
  const name = verifierName(verifierKey, block.checkpoint);
  const job = String(receipt.job_id);
  let proven;
  try {
    proven = await verifyTransparency(receipt, verifierFromPem(name, pem));
  } catch (error) {
    if (error instanceof TransparencyError) throw new Error(refusal(error, name, job));
    if (error instanceof NoteError) throw new Error(noteRefusal(error, name));
    throw error;
  }
  return `Audit rows ${proven.rows.join(", ")} of job ${job} proven by RFC 9162 inclusion proofs in checkpoint ${proven.treeSize} of ${proven.origin}, whose signature was checked in this browser.`;
}
