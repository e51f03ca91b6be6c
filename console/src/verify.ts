// Erasure receipts verified in the browser, with Web Crypto only (Ed25519 and SHA-256): the
// same checks as `memplane receipt verify` (memplane/_receipts.py, memplane/cli/transparency.py).
//
// 1. The signature: Ed25519 over the canonical form — the receipt without `signature`, JSON
//    with keys sorted at every level, no whitespace, non-ASCII as UTF-8 — by the server's
//    receipt key (GET /v1/receipts/public-key), whose id (SHA-256 of the raw key, 16 hex)
//    is the receipt's key_id.
// 2. The transparency log, when the receipt carries `transparency`: its checkpoint (a C2SP
//    signed note) signed by the log's key (GET /v1/audit/verifier-key, the same key), of the
//    receipt's tenant; each proven row's RFC 9162 inclusion proof against the checkpoint's
//    root; each row naming the receipt's job; the rows the receipt names among them.
import type { Bytes } from "./bytes";

export interface Verdict {
  ok: boolean;
  lines: string[];   // what was checked, in order; the first failure ends it
}

const encoder = new TextEncoder();

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

// JSON.stringify writes strings, numbers, booleans and null as Python's json.dumps(...,
// ensure_ascii=False) does for what receipts hold (integers, no floats).
export function canonical(value: Json): string {
  if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort(byCodePoint);
    return "{" + keys.map((key) => JSON.stringify(key) + ":" + canonical(value[key])).join(",") + "}";
  }
  return JSON.stringify(value);
}

function byCodePoint(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0) ?? 0);
  const y = Array.from(b, (c) => c.codePointAt(0) ?? 0);
  for (let i = 0; i < Math.min(x.length, y.length); i += 1) {
    if (x[i] !== y[i]) return x[i] - y[i];
  }
  return x.length - y.length;
}

export function base64(text: string): Bytes {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) {
    throw new Error("not base64");
  }
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

function hex(bytes: Bytes): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function sha256(...parts: Bytes[]): Promise<Bytes> {
  const size = parts.reduce((n, p) => n + p.length, 0);
  const all = new Uint8Array(size);
  let at = 0;
  for (const part of parts) { all.set(part, at); at += part.length; }
  return new Uint8Array(await crypto.subtle.digest("SHA-256", all));
}

function equal(a: Bytes, b: Bytes): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

// An Ed25519 SubjectPublicKeyInfo is this 12-byte prefix and the 32-byte key.
const SPKI_PREFIX = Uint8Array.from([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]);

export function rawPublicKey(pem: string): Bytes {
  const body = pem.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, "").replace(/\s+/g, "");
  const der = base64(body);
  if (der.length !== 44 || !equal(der.slice(0, 12), SPKI_PREFIX)) {
    throw new Error("the server's receipt key is not an Ed25519 public key");
  }
  return der.slice(12);
}

async function ed25519(raw: Bytes, signature: Bytes, message: Bytes): Promise<boolean> {
  const key = await crypto.subtle.importKey("raw", raw, { name: "Ed25519" }, false, ["verify"]);
  return await crypto.subtle.verify({ name: "Ed25519" }, key, signature, message);
}

export async function verifyReceipt(text: string, pem: string, verifierKey: string | null): Promise<Verdict> {
  const lines: string[] = [];
  const fail = (why: string): Verdict => ({ ok: false, lines: [...lines, why] });
  let receipt: { [key: string]: Json };
  try {
    const parsed = JSON.parse(text) as Json;
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      return fail("The receipt is not a JSON object.");
    }
    receipt = parsed;
  } catch {
    return fail("The receipt is not valid JSON: it was altered in transit or in storage.");
  }
  if (receipt.format !== "memplane-erasure-receipt/1") {
    return fail("The receipt does not name the format memplane-erasure-receipt/1.");
  }
  let raw: Bytes;
  try {
    raw = rawPublicKey(pem);
  } catch (error) {
    return fail(error instanceof Error ? error.message : String(error));
  }
  const keyId = hex(await sha256(raw)).slice(0, 16);
  if (receipt.key_id !== keyId) {
    return fail(`The receipt names signing key ${String(receipt.key_id)}, not the server's key ${keyId}.`);
  }
  let signature: Bytes;
  try {
    signature = base64(String(receipt.signature ?? ""));
  } catch {
    return fail("The receipt's signature is not base64.");
  }
  const unsigned = Object.fromEntries(Object.entries(receipt).filter(([k]) => k !== "signature"));
  let signed = false;
  try {
    signed = await ed25519(raw, signature, encoder.encode(canonical(unsigned)));
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
    lines.push(await checkTransparency(receipt, raw, verifierKey));
  } catch (error) {
    return fail(error instanceof Error ? error.message : String(error));
  }
  return { ok: true, lines };
}

// --- the transparency log ---------------------------------------------------------------

const DASH = "\u2014";

async function noteKeyId(name: string, raw: Bytes): Promise<Bytes> {
  return (await sha256(encoder.encode(name + "\n"), Uint8Array.of(0x01), raw)).slice(0, 4);
}

// The checkpoint's text, when the log's key signed it (every line under its name must verify).
async function verifyNote(note: string, name: string, raw: Bytes): Promise<string> {
  const cut = note.lastIndexOf("\n\n");
  if (cut < 0 || !note.endsWith("\n")) throw new Error("The receipt's checkpoint is not a signed note.");
  const text = note.slice(0, cut + 1);
  const id = await noteKeyId(name, raw);
  let checked = 0;
  for (const line of note.slice(cut + 2).split("\n").slice(0, -1)) {
    const fields = line.split(" ");
    if (fields.length !== 3 || fields[0] !== DASH) throw new Error("The checkpoint's signature lines are malformed.");
    if (fields[1] !== name) continue;
    const blob = base64(fields[2]);
    if (!equal(blob.slice(0, 4), id)) continue;
    if (!await ed25519(raw, blob.slice(4), encoder.encode(text))) {
      throw new Error(`The checkpoint's signature by ${name} does not verify: it was altered.`);
    }
    checked += 1;
  }
  if (checked === 0) throw new Error(`The checkpoint carries no signature of the log's key ${name}.`);
  return text;
}

function verifierName(verifierKey: string | null, checkpoint: string): string {
  if (verifierKey) return verifierKey.trim().split("+")[0];
  return checkpoint.split("/")[0] || "memplane";
}

async function leafHash(leaf: Bytes): Promise<Bytes> {
  return await sha256(Uint8Array.of(0x00), leaf);
}

async function nodeHash(left: Bytes, right: Bytes): Promise<Bytes> {
  return await sha256(Uint8Array.of(0x01), left, right);
}

// RFC 9162 §2.1.3.2 (BigInt: tree sizes may pass 2^32).
export async function verifyInclusion(hash: Bytes, index: bigint, size: bigint,
                                      proof: Bytes[], root: Bytes): Promise<boolean> {
  if (index < 0n || index >= size || proof.some((p) => p.length !== 32)) return false;
  let fn = index;
  let sn = size - 1n;
  let r = hash;
  for (const p of proof) {
    if (sn === 0n) return false;
    if ((fn & 1n) === 1n || fn === sn) {
      r = await nodeHash(p, r);
      while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
    } else {
      r = await nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && equal(r, root);
}

async function checkTransparency(receipt: { [key: string]: Json }, raw: Bytes,
                                 verifierKey: string | null): Promise<string> {
  const block = receipt.transparency as { checkpoint?: string; proofs?: Json[] } | null;
  if (block === null || typeof block !== "object" || typeof block.checkpoint !== "string") {
    throw new Error("The receipt's transparency block has no checkpoint.");
  }
  const name = verifierName(verifierKey, block.checkpoint);
  const text = await verifyNote(block.checkpoint, name, raw);
  const [origin, sizeText, rootText] = text.split("\n");
  if (!/^(0|[1-9][0-9]{0,19})$/.test(sizeText ?? "")) throw new Error("The checkpoint's tree size is malformed.");
  const size = BigInt(sizeText);
  const root = base64(rootText ?? "");
  if (!origin.endsWith(`/audit/${String(receipt.tenant_id)}`)) {
    throw new Error(`The checkpoint is of the log ${origin}, not of the receipt's tenant.`);
  }
  const job = String(receipt.job_id);
  const proven: number[] = [];
  for (const item of block.proofs ?? []) {
    const proof = item as { seq?: Json; leaf?: Json; hashes?: Json };
    if (typeof proof.seq !== "number" || !Number.isInteger(proof.seq) || proof.seq < 1
        || typeof proof.leaf !== "string" || !Array.isArray(proof.hashes)) {
      throw new Error("A proof in the receipt is not {seq, leaf, hashes}.");
    }
    const leaf = base64(proof.leaf);
    const hashes = proof.hashes.map((h) => base64(String(h)));
    if (!await verifyInclusion(await leafHash(leaf), BigInt(proof.seq - 1), size, hashes, root)) {
      throw new Error(`The inclusion proof of audit row ${proof.seq} does not verify against the checkpoint of ${size} rows.`);
    }
    let row: { seq?: unknown; detail?: unknown } | null = null;
    try { row = JSON.parse(new TextDecoder().decode(leaf)) as { seq?: unknown; detail?: unknown }; } catch { row = null; }
    const detail = row?.detail;
    if (row === null || row.seq !== proof.seq || typeof detail !== "string"
        || !(detail === `job ${job}` || detail.startsWith(`job ${job}:`))) {
      throw new Error(`Audit row ${proof.seq}, proven in the log, is not a row of job ${job}.`);
    }
    proven.push(proof.seq);
  }
  if (proven.length === 0) throw new Error("The receipt's transparency block proves no row.");
  const audit = receipt.audit as { first_seq?: Json; last_seq?: Json } | null;
  for (const seq of [audit?.first_seq, audit?.last_seq]) {
    if (typeof seq === "number" && !proven.includes(seq)) {
      throw new Error(`Audit row ${seq}, which the receipt names, has no inclusion proof.`);
    }
  }
  return `Audit rows ${proven.join(", ")} of job ${job} proven by RFC 9162 inclusion proofs in checkpoint ${size} of ${origin}, whose signature was checked in this browser.`;
}
