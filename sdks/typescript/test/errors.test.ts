/**
 * The error tree: each status from the live server, and the client's own behaviour
 * (retries with one Idempotency-Key, Retry-After, timeouts, aborts) against a small HTTP
 * server of the test's that answers what the test scripts.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  Aborted, APIError, BadRequest, Conflict, Forbidden, HashMismatch, InvalidResponse, Memplane,
  MemplaneError, NotFound, RateLimited, RequestTimeout, ServerError, StorageUnavailable,
  TransportError, Unauthorized, ValidationError,
} from "../src/index.js";
import { DATA_DIR, URL, newTenant, type Tenant, unique } from "./helpers.js";

let tenant: Tenant;
before(async () => {
  tenant = await newTenant();
});

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail("the call did not throw");
}

describe("errors from the live server", () => {
  it("401 Unauthorized for an unknown key", async () => {
    const client = new Memplane({ baseUrl: URL, apiKey: "mp_not_a_key" });
    const error = await caught(client.memory.get({ scope: "tenant", key: "k" }));
    assert.ok(error instanceof Unauthorized);
    assert.ok(error instanceof APIError && error instanceof MemplaneError);
    assert.equal(error.status, 401);
    assert.equal(typeof error.requestId, "string");
  });

  it("403 Forbidden for a role without the right", async () => {
    const agent = await tenant.client("agent");
    const error = await caught(agent.storage.configure({ storageType: "local",
      connectionConfig: { root: "/tmp" } }));
    assert.ok(error instanceof Forbidden);
    assert.equal(error.status, 403);
  });

  it("404 NotFound, with the server's code and sentence", async () => {
    const error = await caught(tenant.admin.memory.get({ scope: "tenant", key: unique("none") }));
    assert.ok(error instanceof NotFound);
    assert.equal(error.code, "not_found");
    assert.ok(error.detail && error.detail.length > 0);
  });

  it("422 BadRequest (ValidationError) naming the field", async () => {
    const error = await caught(tenant.admin.memory.set({ scope: "tenant", key: "k", value: 1,
      importance: 9 }));
    assert.ok(error instanceof BadRequest);
    assert.ok(error instanceof ValidationError);
    assert.equal(error.status, 422);
    assert.match(error.detail ?? "", /importance/);
  });

  it("409 HashMismatch when the bucket's object was altered", async () => {
    assert.ok(DATA_DIR, "the test script names the server's data dir");
    const key = unique("tampered");
    const pointer = await tenant.admin.memory.set({ scope: "tenant", key, value: "original" });
    const file = join(DATA_DIR, "bucket", pointer.storagePath);
    assert.ok(existsSync(file), `the object is at ${file}`);
    const bytes = readFileSync(file);
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 0xff;
    writeFileSync(file, bytes);
    const error = await caught(tenant.admin.memory.get({ scope: "tenant", key }));
    assert.ok(error instanceof HashMismatch);
    assert.ok(error instanceof Conflict);
    assert.equal(error.code, "hash_mismatch");
    assert.equal(error.pointerId, pointer.id);
    assert.equal(error.expectedSha256, pointer.contentHash);
    assert.equal(error.reason, "undecryptable");
  });
});

type Script = (req: IncomingMessage, res: ServerResponse, n: number) => void;

/** A local HTTP server answering each request as `script` says, recording what came. */
async function stub(script: Script) {
  const seen: { method: string; url: string; headers: IncomingMessage["headers"]; body: string }[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      script(req, res, seen.length);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

const POINTER = {
  id: "p1", tenant_id: "t1", scope: "user", scope_ref: "u1", key: "k", memory_type: "fact",
  title: null, tags: [], importance: 3, source: "api", user_id: "u1", agent_id: null,
  team_id: null, storage_path: "x", content_sha256: "ab", content_size: 3,
  sync_status: "synced", version: 1, has_embeddings: false, embedding_model: null,
  created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z", expires_at: null,
  searchable: true,
};

describe("retries, timeouts and aborts", () => {
  const servers: { close(): Promise<void> }[] = [];
  after(async () => {
    await Promise.all(servers.map((s) => s.close()));
  });

  it("a 503 then a 429 are retried with the same Idempotency-Key, waiting Retry-After", async () => {
    const server = await stub((_req, res, n) => {
      if (n === 1) json(res, 503, { error: "storage_unavailable", detail: "busy" }, { "retry-after": "0.2" });
      else if (n === 2) json(res, 429, { error: "too_many_jobs", detail: "later" }, { "retry-after": "0" });
      else json(res, 200, POINTER);
    });
    servers.push(server);
    const client = new Memplane({ baseUrl: server.url, apiKey: "k", maxRetries: 2 });
    const started = Date.now();
    const pointer = await client.memory.set({ scope: "user", userId: "u1", key: "k", value: "v" });
    assert.ok(Date.now() - started >= 200, "waited the 0.2 s Retry-After asked");
    assert.equal(pointer.contentSizeBytes, 3);
    assert.equal(server.seen.length, 3);
    const keys = server.seen.map((s) => s.headers["idempotency-key"]);
    assert.match(String(keys[0]), /^[0-9a-f-]{36}$/);
    assert.deepEqual(keys, [keys[0], keys[0], keys[0]]);
    assert.deepEqual(server.seen.map((s) => [s.method, s.url]),
      Array(3).fill(["PUT", "/v1/memories/user/u1/k"]));
    assert.deepEqual(JSON.parse(server.seen[0]?.body ?? ""), { value: "v", user_id: "u1" });
    assert.equal(server.seen[0]?.headers.authorization, "Bearer k");
  });

  it("each call gets its own key; a given idempotencyKey is sent as is; reads send none", async () => {
    const server = await stub((_req, res) => json(res, 200, POINTER));
    servers.push(server);
    const client = new Memplane({ baseUrl: server.url, apiKey: "k" });
    await client.memory.set({ scope: "tenant", key: "a", value: 1 });
    await client.memory.set({ scope: "tenant", key: "a", value: 1 }, { idempotencyKey: "mine-1" });
    await client.memory.listPointers().catch(() => undefined);
    const [first, second, third] = server.seen;
    assert.notEqual(first?.headers["idempotency-key"], undefined);
    assert.equal(second?.headers["idempotency-key"], "mine-1");
    assert.equal(third?.headers["idempotency-key"], undefined);
  });

  it("when retries run out, the last error is thrown with retryAfter", async () => {
    const server = await stub((_req, res) =>
      json(res, 503, { error: "storage_unavailable", detail: "down" }, { "retry-after": "0" }));
    servers.push(server);
    const client = new Memplane({ baseUrl: server.url, apiKey: "k", maxRetries: 1 });
    const error = await caught(client.storage.healthCheck());
    assert.ok(error instanceof StorageUnavailable);
    assert.equal(error.retryAfter, 0);
    assert.equal(error.detail, "down");
    assert.equal(server.seen.length, 2);
  });

  it("429 is RateLimited; other 5xx ServerError, not retried; 4xx not retried", async () => {
    const answers = [[429, "too_many_jobs"], [500, "internal"], [404, "not_found"]] as const;
    for (const [status, code] of answers) {
      const server = await stub((_req, res) => json(res, status, { error: code, detail: "x" }));
      servers.push(server);
      const client = new Memplane({ baseUrl: server.url, apiKey: "k", maxRetries: 0 });
      const error = await caught(client.agents.get("a"));
      const cls = { 429: RateLimited, 500: ServerError, 404: NotFound }[status];
      assert.ok(error instanceof cls, `${status} → ${cls.name}`);
      assert.equal(server.seen.length, 1);
    }
    const retried = await stub((_req, res) => json(res, 500, { error: "internal", detail: "x" }));
    servers.push(retried);
    await caught(new Memplane({ baseUrl: retried.url, apiKey: "k", maxRetries: 3 }).agents.get("a"));
    assert.equal(retried.seen.length, 1, "a 500 is not retried");
  });

  it("no answer: TransportError after the retries; a slow answer: RequestTimeout", async () => {
    const dead = await stub((_req, res) => json(res, 200, {}));
    await dead.close();
    const client = new Memplane({ baseUrl: dead.url, apiKey: "k", maxRetries: 1 });
    const error = await caught(client.storage.healthCheck());
    assert.ok(error instanceof TransportError);
    assert.ok(!(error instanceof RequestTimeout));

    const slow = await stub((_req, res) => setTimeout(() => json(res, 200, {}), 1500));
    servers.push(slow);
    const impatient = new Memplane({ baseUrl: slow.url, apiKey: "k", timeoutMs: 100, maxRetries: 1 });
    const timeout = await caught(impatient.storage.healthCheck());
    assert.ok(timeout instanceof RequestTimeout);
    assert.equal(slow.seen.length, 2, "a timeout is retried as no answer");
  });

  it("the caller's AbortSignal stops the call and its retries", async () => {
    const slow = await stub((_req, res) => setTimeout(() => json(res, 200, {}), 2000));
    servers.push(slow);
    const client = new Memplane({ baseUrl: slow.url, apiKey: "k" });
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("user left")), 100);
    const error = await caught(client.storage.healthCheck({ signal: controller.signal }));
    assert.ok(error instanceof Aborted);
    assert.equal((error.cause as Error).message, "user left");
    assert.equal(slow.seen.length, 1);
  });

  it("a success answer that is not JSON is InvalidResponse", async () => {
    const server = await stub((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end("<html>proxy</html>");
    });
    servers.push(server);
    const error = await caught(new Memplane({ baseUrl: server.url, apiKey: "k" }).agents.get("a"));
    assert.ok(error instanceof InvalidResponse);
    assert.match(error.message, /expected JSON, got text\/html/);
  });

  it("a code refines the class only within its status", async () => {
    const server = await stub((_req, res, n) => json(res, n === 1 ? 409 : 400,
      { error: "hash_mismatch", detail: "x", pointer_id: "p9" }));
    servers.push(server);
    const client = new Memplane({ baseUrl: server.url, apiKey: "k", maxRetries: 0 });
    const refined = await caught(client.agents.get("a"));
    assert.ok(refined instanceof HashMismatch);
    assert.equal(refined.pointerId, "p9");
    const plain = await caught(client.agents.get("a"));
    assert.ok(plain instanceof BadRequest && !(plain instanceof HashMismatch));
  });

  it("bad options are refused at construction", () => {
    assert.throws(() => new Memplane({ baseUrl: "", apiKey: "k" }), /baseUrl must be/);
    assert.throws(() => new Memplane({ baseUrl: URL, apiKey: "" }), /apiKey must be/);
  });
});
