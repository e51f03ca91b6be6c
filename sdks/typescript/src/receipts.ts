/**
 * Offline verification of erasure receipts, as memplane/_receipts.py does it: the receipt
 * without `signature`, as JSON with keys sorted at every level, no whitespace, non-ASCII
 * written as UTF-8 (Python's json.dumps(sort_keys=True, separators=(",", ":"),
 * ensure_ascii=False)); `signature` is the base64 Ed25519 signature over those bytes and
 * `key_id` the first 16 hex digits of SHA-256 of the raw public key.
 */
import { ed25519FromPem, ed25519Verify, fromBase64, sha256, toHex, utf8 } from "./encoding.js";

export const RECEIPT_FORMAT = "memplane-erasure-receipt/1";
export const CHECKPOINT_FORMAT = "memplane-audit-checkpoint/1";

/** The bytes a receipt's signature covers. */
export function canonicalReceipt(receipt: Record<string, unknown>): Uint8Array {
  const unsigned: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(receipt)) {
    if (name !== "signature") unsigned[name] = value;
  }
  return utf8(canonicalJson(unsigned));
}

/** Python's json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False). */
export function canonicalJson(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "number") return pythonNumber(value);
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object") {
    const names = Object.keys(value).filter((k) => (value as Record<string, unknown>)[k] !== undefined);
    names.sort(byCodePoint);
    return `{${names.map((k) => `${JSON.stringify(k)}:${canonicalJson(
      (value as Record<string, unknown>)[k])}`).join(",")}}`;
  }
  throw new TypeError(`a signed document holds no ${typeof value}`);
}

function byCodePoint(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0) ?? 0);
  const y = Array.from(b, (c) => c.codePointAt(0) ?? 0);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return (x[i] ?? 0) - (y[i] ?? 0);
  }
  return x.length - y.length;
}

/**
 * A number as Python writes it: an integer in full; any other as float.__repr__ (the server
 * signs no floats — numbers of days are strings — so this only matters for altered documents).
 */
function pythonNumber(value: number): string {
  if (!Number.isFinite(value)) throw new TypeError("a signed document holds no NaN or Infinity");
  if (Number.isInteger(value) && Math.abs(value) < 2 ** 53) return String(value);
  const [mantissa = "", exp = "0"] = value.toExponential().split("e");
  const exponent = Number(exp);
  if (exponent < -4 || exponent >= 16) {
    const e = Math.abs(exponent).toString().padStart(2, "0");
    return `${mantissa}e${exponent < 0 ? "-" : "+"}${e}`;
  }
  const text = String(value);
  return text.includes(".") ? text : `${text}.0`;
}

/** The `key_id` receipts signed by this key carry: SHA-256 of the raw key, 16 hex digits. */
export async function publicKeyId(publicKeyPem: string): Promise<string> {
  return toHex(await sha256(ed25519FromPem(publicKeyPem))).slice(0, 16);
}

/**
 * True when `receipt` is exactly what the holder of the key signed. Any change — a count, a
 * date, a field added or removed, the signature itself — or another key gives false. A public
 * key that is not Ed25519 PEM throws TypeError.
 */
export async function verifyReceipt(receipt: Record<string, unknown>,
                                    publicKeyPem: string): Promise<boolean> {
  return verifySigned(receipt, publicKeyPem, RECEIPT_FORMAT);
}

/** True when an audit checkpoint (audit/checkpoints/*.json) is what the key signed. */
export async function verifyCheckpointDocument(checkpoint: Record<string, unknown>,
                                               publicKeyPem: string): Promise<boolean> {
  return verifySigned(checkpoint, publicKeyPem, CHECKPOINT_FORMAT);
}

async function verifySigned(body: Record<string, unknown>, publicKeyPem: string,
                            format: string): Promise<boolean> {
  const raw = ed25519FromPem(publicKeyPem);
  const signature = body["signature"];
  if (typeof signature !== "string" || body["format"] !== format) return false;
  if (body["key_id"] !== toHex(await sha256(raw)).slice(0, 16)) return false;
  const bytes = fromBase64(signature);
  if (!bytes) return false;
  let message: Uint8Array;
  try {
    message = canonicalReceipt(body);
  } catch {
    return false;
  }
  return ed25519Verify(raw, bytes, message);
}

/**
 * A receipt read from JSON text, refusing duplicate keys (readers disagree on which of two
 * values counts, so a signature checked on one could be read with the other).
 */
export function parseReceipt(text: string): Record<string, unknown> {
  const seen = duplicateKey(text);
  if (seen) {
    throw new SyntaxError(`the JSON names the key ${JSON.stringify(seen)} twice in one object; ` +
      "a signed document never does, so this one was altered");
  }
  const data: unknown = JSON.parse(text);
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    throw new SyntaxError("a receipt is a JSON object; this text holds something else");
  }
  return data as Record<string, unknown>;
}

function duplicateKey(text: string): string | null {
  JSON.parse(text);  // well-formed first: the scan below trusts the structure
  const frames: { keys: Set<string> | null; expectKey: boolean }[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    const top = frames[frames.length - 1];
    if (c === "{") frames.push({ keys: new Set(), expectKey: true });
    else if (c === "[") frames.push({ keys: null, expectKey: false });
    else if (c === "}" || c === "]") frames.pop();
    else if (c === "," && top?.keys) top.expectKey = true;
    else if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      if (top?.keys && top.expectKey) {
        const key = JSON.parse(text.slice(i, j + 1)) as string;
        if (top.keys.has(key)) return key;
        top.keys.add(key);
        top.expectKey = false;
      }
      i = j;
    }
  }
  return null;
}
