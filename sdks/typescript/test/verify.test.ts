/** Receipts and transparency-log proofs from the live server, and tampered ones. */
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { before, describe, it } from "node:test";
import {
  fromBase64, leafHash, openCheckpoint, parseReceipt, parseVerifier, publicKeyId,
  receiptVerifier, toBase64, TransparencyError, verifyConsistency, verifyInclusion,
  verifyReceipt, verifyTransparency, type Memplane, type Receipt,
} from "../src/index.js";
import { newTenant, type Tenant, unique } from "./helpers.js";

let tenant: Tenant;
let compliance: Memplane;
let receipt: Receipt;
let publicKey: string;
let verifierKey: string;
const userId = unique("sübject-Zürich-✓");

before(async () => {
  tenant = await newTenant();
  compliance = await tenant.client("compliance");
  await tenant.admin.memory.set({ scope: "user", userId, key: "preferred_language", value: "Español" });
  await tenant.admin.memory.set({ scope: "user", userId, key: "city", value: "Zürich" });
  receipt = await compliance.memory.eraseUser(userId);
  publicKey = await compliance.receipts.publicKey();
  verifierKey = await compliance.audit.verifierKey();
});

function clone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

describe("verifyReceipt", () => {
  it("a live erasure receipt verifies with the server's key", async () => {
    assert.equal(receipt.format, "memplane-erasure-receipt/1");
    assert.equal(receipt.key_id, await publicKeyId(publicKey));
    assert.equal(await verifyReceipt(receipt, publicKey), true);
    assert.equal(await verifyReceipt(parseReceipt(JSON.stringify(receipt)), publicKey), true);
    await assert.rejects(tenant.admin.memory.get({ scope: "user", userId, key: "city" }));
  });

  it("any change gives false: a count, a field added or removed, the signature, the key", async () => {
    const counts = clone(receipt);
    const first = Object.keys(counts).find((k) => typeof counts[k] === "string" && k !== "signature"
      && k !== "format" && k !== "key_id") as string;
    counts[first] = `${String(counts[first])}x`;
    assert.equal(await verifyReceipt(counts, publicKey), false);
    assert.equal(await verifyReceipt({ ...clone(receipt), extra: 1 }, publicKey), false);
    const removed = clone(receipt);
    delete removed.job_id;
    assert.equal(await verifyReceipt(removed, publicKey), false);
    const signature = fromBase64(receipt.signature) as Uint8Array;
    signature[0] = (signature[0] ?? 0) ^ 1;
    assert.equal(await verifyReceipt({ ...clone(receipt), signature: toBase64(signature) }, publicKey), false);
    assert.equal(await verifyReceipt({ ...clone(receipt), signature: "not base64!" }, publicKey), false);
    const other = generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" });
    assert.equal(await verifyReceipt(receipt, String(other)), false);
    const rsa = generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey
      .export({ type: "spki", format: "pem" });
    await assert.rejects(verifyReceipt(receipt, String(rsa)), /not an Ed25519 key/);
  });

  it("a receipt naming a key twice is refused when read from text", () => {
    const text = JSON.stringify(receipt).replace(/^\{/, '{"job_id":"forged",');
    assert.throws(() => parseReceipt(text), /names the key "job_id" twice/);
    assert.throws(() => parseReceipt("[1]"), /a receipt is a JSON object/);
  });
});

describe("transparency proofs", () => {
  it("the receipt's rows are proven in the log's signed checkpoint", async () => {
    const proven = await verifyTransparency(receipt, verifierKey);
    assert.ok(proven.origin.endsWith(`/audit/${tenant.id}`));
    assert.ok(proven.rows.length >= 1);
    const audit = receipt["audit"] as { first_seq: number; last_seq: number };
    assert.ok(proven.rows.includes(audit.first_seq) && proven.rows.includes(audit.last_seq));
    const byPem = await verifyTransparency(receipt, receiptVerifier(receipt, publicKey));
    assert.deepEqual(byPem, proven);
  });

  it("a tampered leaf, hash, checkpoint or key is refused with its sentence", async () => {
    const block = receipt.transparency;
    assert.ok(block);
    const leaf = clone(receipt);
    const proof = leaf.transparency?.proofs[0];
    assert.ok(proof);
    const bytes = fromBase64(proof.leaf) as Uint8Array;
    bytes[bytes.length - 2] = (bytes[bytes.length - 2] ?? 0) ^ 1;
    proof.leaf = toBase64(bytes);
    await assert.rejects(verifyTransparency(leaf, verifierKey),
      /inclusion proof of row \d+ does not verify/);

    const note = clone(receipt);
    const lines = block.checkpoint.split("\n");
    lines[1] = String(Number(lines[1]) + 1);
    (note.transparency as { checkpoint: string }).checkpoint = lines.join("\n");
    await assert.rejects(verifyTransparency(note, verifierKey), TransparencyError);
    await assert.rejects(verifyTransparency(note, verifierKey), /does not carry a valid signature/);

    const otherTenant = { ...clone(receipt), tenant_id: "00000000-0000-0000-0000-000000000000" };
    await assert.rejects(verifyTransparency(otherTenant, verifierKey), /not of the document's tenant/);
    const otherJob = { ...clone(receipt), job_id: "another-job" };
    await assert.rejects(verifyTransparency(otherJob, verifierKey), /is not a row of job another-job/);
    const none = { ...clone(receipt), transparency: { ...block, proofs: [] } };
    await assert.rejects(verifyTransparency(none, verifierKey), /proves no row/);
    const wrongKey = await newTenant();
    const foreign = await wrongKey.admin.audit.verifierKey();
    if (foreign !== verifierKey) {
      await assert.rejects(verifyTransparency(receipt, foreign), /valid signature/);
    }
  });

  it("an audit row's inclusion proof, and consistency between two checkpoints", async () => {
    const verifier = await parseVerifier(verifierKey);
    const before = await openCheckpoint(await compliance.audit.checkpoint(), verifier);
    await tenant.admin.memory.set({ scope: "tenant", key: unique("more"), value: 1 });
    await tenant.admin.memory.set({ scope: "tenant", key: unique("more"), value: 2 });
    let later = before;
    for (let i = 0; i < 50 && later.size <= before.size; i++) {
      await new Promise((r) => setTimeout(r, 200));
      later = await openCheckpoint(await compliance.audit.checkpoint(), verifierKey);
    }
    assert.ok(later.size > before.size);

    const rows = await compliance.audit.list({ limit: 5 });
    const row = rows.items.find((r) => r.leaf && r.seq !== null && r.seq <= later.size);
    assert.ok(row?.leaf && typeof row.seq === "number");
    const proof = await compliance.audit.inclusionProof({ seq: row.seq, treeSize: later.size });
    const hashes = proof.hashes.map((h) => fromBase64(h) as Uint8Array);
    const hash = await leafHash(fromBase64(row.leaf) as Uint8Array);
    assert.equal(await verifyInclusion(hash, row.seq - 1, later.size, hashes, later.root), true);
    assert.equal(await verifyInclusion(hash, row.seq, later.size, hashes, later.root), false);
    const altered = await leafHash(new TextEncoder().encode("forged row"));
    assert.equal(await verifyInclusion(altered, row.seq - 1, later.size, hashes, later.root), false);

    const consistency = await compliance.audit.consistencyProof({ first: before.size,
      second: later.size });
    const path = consistency.hashes.map((h) => fromBase64(h) as Uint8Array);
    assert.equal(await verifyConsistency(before.size, later.size, before.root, later.root, path), true);
    const forkedRoot = new Uint8Array(before.root);
    forkedRoot[0] = (forkedRoot[0] ?? 0) ^ 1;
    assert.equal(await verifyConsistency(before.size, later.size, forkedRoot, later.root, path), false);
    if (path.length) {
      assert.equal(await verifyConsistency(before.size, later.size, before.root, later.root,
        path.slice(1)), false);
    }
  });

  it("export resolves with the archive and a manifest whose proofs verify", async () => {
    const subject = unique("subject");
    await tenant.admin.memory.set({ scope: "user", userId: subject, key: "a", value: { n: 1 } });
    await tenant.admin.memory.append({ scope: "user", userId: subject, key: "b", value: "x" });
    const exported = await compliance.memory.export({ userId: subject, format: "json" });
    assert.equal(exported.job.state, "completed");
    assert.deepEqual([...exported.archive.subarray(0, 4)], [0x50, 0x4b, 0x03, 0x04]);
    assert.equal(exported.manifest["format"], "memplane-export/1");
    assert.equal(exported.manifest["user_id"], subject);
    const items = exported.manifest["items"] as { key: string; status: string }[];
    assert.deepEqual(items.map((i) => [i.key, i.status]).sort(), [["a", "exported"], ["b", "exported"]]);
    const proven = await verifyTransparency(exported.manifest, verifierKey);
    assert.equal(proven.rows.length, 1);
  });
});
