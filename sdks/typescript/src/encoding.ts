/** Bytes, base64, hex and SHA-256 with Web platform APIs only (Node ≥ 20, browsers, edge). */

export function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}

const B64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Strict base64 (standard alphabet, padded), as Python's b64decode(validate=True); null if not. */
export function fromBase64(text: string): Uint8Array | null {
  if (typeof text !== "string" || !B64.test(text)) return null;
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

export function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export async function sha256(data: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", data as BufferSource));
}

/** The raw 32-byte key of an Ed25519 public key in PEM (SubjectPublicKeyInfo). */
export function ed25519FromPem(pem: string): Uint8Array {
  const body = pem.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, "").replace(/\s+/g, "");
  const der = fromBase64(body);
  const prefix = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
  if (!der || der.length !== 44 || !prefix.every((b, i) => der[i] === b)) {
    throw new TypeError("the public key is not an Ed25519 key in PEM (SubjectPublicKeyInfo)");
  }
  return der.subarray(12);
}

/** Whether `signature` is `raw` key's Ed25519 signature of `message`. */
export async function ed25519Verify(raw: Uint8Array, signature: Uint8Array,
                                    message: Uint8Array): Promise<boolean> {
  if (signature.length !== 64 || raw.length !== 32) return false;
  const key = await crypto.subtle.importKey("raw", raw as BufferSource, { name: "Ed25519" },
    false, ["verify"]);
  return crypto.subtle.verify({ name: "Ed25519" }, key, signature as BufferSource,
    message as BufferSource);
}
