/**
 * The transparency log, checked offline as control_plane/tlog and `memplane receipt verify`
 * check it: RFC 9162 Merkle inclusion and consistency proofs, C2SP signed notes
 * (https://c2sp.org/signed-note) and the checkpoints they carry (c2sp.org/tlog-checkpoint).
 */
import {
  concat, ed25519FromPem, ed25519Verify, equalBytes, fromBase64, sha256, toHex, utf8,
} from "./encoding.js";

export const HASH_SIZE = 32;
const DASH = "\u2014";
const ED25519 = 0x01;
const MAX_NOTE_BYTES = 1 << 20;
const MAX_SIGNATURES = 100;
const CONTROL = /[\x00-\x09\x0b-\x1f]/;

/**
 * What is wrong with a note: not a signed note at all, a malformed signature line, no
 * signature of the key, a signature that does not verify, or a malformed checkpoint or key.
 */
export type NoteProblem = "format" | "lines" | "unsigned" | "forged" | "checkpoint" | "key";

/** A note, key or checkpoint that is not well-formed, or a signature that does not verify. */
export class NoteError extends Error {
  readonly problem: NoteProblem;

  constructor(message: string, problem: NoteProblem = "format") {
    super(message);
    this.name = "NoteError";
    this.problem = problem;
  }
}

export async function leafHash(leaf: Uint8Array): Promise<Uint8Array> {
  return sha256(concat(new Uint8Array([0]), leaf));
}

async function nodeHash(left: Uint8Array, right: Uint8Array): Promise<Uint8Array> {
  return sha256(concat(new Uint8Array([1]), left, right));
}

/** RFC 9162 §2.1.3.2: whether `proof` shows `leaf` (its hash) at `index` of the tree of `size` leaves whose head is `root`. */
export async function verifyInclusion(leaf: Uint8Array, index: number, size: number,
                                      proof: Uint8Array[], root: Uint8Array): Promise<boolean> {
  if (!(index >= 0 && index < size) || [leaf, ...proof].some((p) => p.length !== HASH_SIZE)) {
    return false;
  }
  let fn = BigInt(index);
  let sn = BigInt(size - 1);
  let r = leaf;
  for (const p of proof) {
    if (sn === 0n) return false;
    if (fn & 1n || fn === sn) {
      r = await nodeHash(p, r);
      while (!(fn & 1n) && fn) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      r = await nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && equalBytes(r, root);
}

/** RFC 9162 §2.1.4.2: whether `proof` shows the tree of `second` leaves extends that of `first`. */
export async function verifyConsistency(first: number, second: number, firstRoot: Uint8Array,
                                        secondRoot: Uint8Array,
                                        proof: Uint8Array[]): Promise<boolean> {
  if (proof.some((p) => p.length !== HASH_SIZE) || !(first >= 0 && first <= second)) return false;
  if (first === 0) {
    const empty = await sha256(new Uint8Array());
    return proof.length === 0 && equalBytes(firstRoot, empty) &&
      (second > 0 || equalBytes(secondRoot, empty));
  }
  if (first === second) return proof.length === 0 && equalBytes(firstRoot, secondRoot);
  if (proof.length === 0) return false;
  const path = [...proof];
  if ((first & (first - 1)) === 0) path.unshift(firstRoot);
  let fn = BigInt(first - 1);
  let sn = BigInt(second - 1);
  while (fn & 1n) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr = path[0] as Uint8Array;
  let sr = fr;
  for (const c of path.slice(1)) {
    if (sn === 0n) return false;
    if (fn & 1n || fn === sn) {
      fr = await nodeHash(c, fr);
      sr = await nodeHash(c, sr);
      while (!(fn & 1n) && fn) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      sr = await nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && equalBytes(fr, firstRoot) && equalBytes(sr, secondRoot);
}

/** A note's verifier: the key's name and its raw Ed25519 public key. */
export interface Verifier {
  name: string;
  publicKey: Uint8Array;
  /** 0x01 Ed25519 (a log's key), 0x04 a witness's cosignature key. */
  kind: number;
}

function checkName(name: string): void {
  if (!name || /\s/.test(name) || name.includes("+")) {
    throw new NoteError("a key name must be non-empty, without spaces or '+'", "key");
  }
}

export async function keyId(verifier: Verifier): Promise<Uint8Array> {
  checkName(verifier.name);
  const digest = await sha256(concat(utf8(`${verifier.name}\n`), new Uint8Array([verifier.kind]),
    verifier.publicKey));
  return digest.subarray(0, 4);
}

/** A verifier key from its `name+id+base64` text (GET /v1/audit/verifier-key). */
export async function parseVerifier(text: string): Promise<Verifier> {
  const trimmed = text.trim();
  const first = trimmed.indexOf("+");
  const second = first < 0 ? -1 : trimmed.indexOf("+", first + 1);
  if (first < 0 || second < 0) throw new NoteError("a verifier key reads <name>+<key id>+<base64 key>",
    "key");
  const name = trimmed.slice(0, first);
  const hexId = trimmed.slice(first + 1, second);
  const raw = fromBase64(trimmed.slice(second + 1));
  if (!raw || !/^[0-9a-fA-F]{8}$/.test(hexId)) {
    throw new NoteError("the verifier key's id or key is not hex / base64", "key");
  }
  if (raw.length !== 33 || (raw[0] !== ED25519 && raw[0] !== 0x04)) {
    throw new NoteError("the verifier key is not an Ed25519 key", "key");
  }
  const verifier = { name, publicKey: raw.subarray(1), kind: raw[0] as number };
  if (toHex(await keyId(verifier)) !== hexId.toLowerCase()) {
    throw new NoteError("the verifier key's id does not match its name and key", "key");
  }
  return verifier;
}

/** The receipt key (PEM) as the verifier of notes signed under `name`. */
export function verifierFromPem(name: string, publicKeyPem: string): Verifier {
  return { name, publicKey: ed25519FromPem(publicKeyPem), kind: ED25519 };
}

interface Signature {
  name: string;
  keyId: Uint8Array;
  payload: Uint8Array;
}

function parseNote(note: string): { text: string; signatures: Signature[] } {
  if (utf8(note).length > MAX_NOTE_BYTES) throw new NoteError("the note is too long");
  if (CONTROL.test(note)) throw new NoteError("a note holds no ASCII control character but newline");
  const cut = note.lastIndexOf("\n\n");
  if (cut < 0 || !note.endsWith("\n")) {
    throw new NoteError("a note is text, a blank line, then signature lines");
  }
  const text = note.slice(0, cut + 1);
  const lines = note.slice(cut + 2).split("\n").slice(0, -1);
  if (lines.length > MAX_SIGNATURES) throw new NoteError("the note carries too many signatures",
    "lines");
  const signatures = lines.map((line) => {
    const fields = line.split(" ");
    if (fields.length !== 3 || fields[0] !== DASH) {
      throw new NoteError("a signature line reads '— <name> <base64>'", "lines");
    }
    checkName(fields[1] as string);
    const blob = fromBase64(fields[2] as string);
    if (!blob) throw new NoteError("a signature is not base64", "lines");
    if (blob.length < 5) throw new NoteError("a signature is too short", "lines");
    return { name: fields[1] as string, keyId: blob.subarray(0, 4), payload: blob.subarray(4) };
  });
  if (!signatures.length) throw new NoteError("the note carries no signature", "unsigned");
  return { text, signatures };
}

/** The note's text, when `verifier` signed it; every line bearing its name and id must verify. */
export async function openNote(note: string, verifier: Verifier): Promise<string> {
  const parsed = parseNote(note);
  const id = await keyId(verifier);
  const mine = parsed.signatures.filter((s) => s.name === verifier.name && equalBytes(s.keyId, id));
  if (!mine.length) throw new NoteError(`the note carries no signature of ${verifier.name}`,
    "unsigned");
  for (const s of mine) {
    if (!(await ed25519Verify(verifier.publicKey, s.payload, utf8(parsed.text)))) {
      throw new NoteError(`the signature of ${verifier.name} does not verify`, "forged");
    }
  }
  return parsed.text;
}

export interface Checkpoint {
  origin: string;
  size: number;
  root: Uint8Array;
  extensions: string[];
}

/** A checkpoint's lines: origin, size (decimal, no leading zero), base64 root, extensions. */
export function parseCheckpoint(text: string): Checkpoint {
  const lines = text.split("\n");
  if (lines.length < 4 || lines[lines.length - 1] !== "" || !lines[0]) {
    throw new NoteError("a checkpoint reads its origin, size and root hash, one a line",
      "checkpoint");
  }
  if (lines.slice(0, -1).includes("")) throw new NoteError("a checkpoint holds no empty line",
    "checkpoint");
  const [origin, size, encoded] = lines as [string, string, string];
  if (!/^(0|[1-9][0-9]{0,19})$/.test(size) || BigInt(size) > 2n ** 64n - 1n) {
    throw new NoteError("a checkpoint's size is a decimal number below 2^64", "checkpoint");
  }
  if (BigInt(size) > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new NoteError("a checkpoint's size is beyond what this verifier counts (2^53)",
      "checkpoint");
  }
  const root = fromBase64(encoded);
  if (!root) throw new NoteError("a checkpoint's root hash is not base64", "checkpoint");
  if (root.length !== HASH_SIZE) throw new NoteError("a checkpoint's root hash is not 32 bytes",
    "checkpoint");
  return { origin, size: Number(size), root, extensions: lines.slice(3, -1) };
}

/** Verify the note's signature by `verifier` and read the checkpoint it carries. */
export async function openCheckpoint(note: string, verifier: Verifier | string): Promise<Checkpoint> {
  const key = typeof verifier === "string" ? await parseVerifier(verifier) : verifier;
  return parseCheckpoint(await openNote(note, key));
}
