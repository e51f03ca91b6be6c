/** The seed's memory calls, as written, against the live server. */
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { BadRequest, Memplane, NotFound, parseDays, type MemoryPointer } from "../src/index.js";
import { newTenant, type Tenant, unique } from "./helpers.js";

let tenant: Tenant;
before(async () => {
  tenant = await newTenant();
});

describe("client.memory", () => {
  it("ready() reads /readyz; an address nobody answers is not ready", async () => {
    assert.equal(await tenant.admin.ready(), true);
    const nowhere = new Memplane({ baseUrl: "http://127.0.0.1:9", apiKey: "k", maxRetries: 0 });
    assert.equal(await nowhere.ready(), false);
  });

  it("set gives a pointer in the seed's MemoryPointer names; get resolves to the value", async () => {
    const client = tenant.admin;
    const userId = unique("user");
    const pointer: MemoryPointer = await client.memory.set({
      scope: "user", userId, agentId: "agent-456", key: "preferred_language", value: "Spanish",
    });
    assert.equal(pointer.scopeType, "user");
    assert.equal(pointer.scopeRef, userId);
    assert.equal(pointer.key, "preferred_language");
    assert.equal(pointer.userId, userId);
    assert.equal(pointer.agentId, "agent-456");
    assert.equal(pointer.tenantId, tenant.id);
    assert.equal(pointer.teamId, null);
    assert.equal(pointer.syncStatus, "synced");
    assert.equal(pointer.contentSizeBytes, Buffer.byteLength(JSON.stringify("Spanish")));
    assert.match(pointer.contentHash, /^[0-9a-f]{64}$/);
    assert.equal(pointer.version, 1);
    assert.equal("content_sha256" in pointer, false);
    assert.equal("scope" in pointer, false);

    const language = await client.memory.get({ scope: "user", userId, key: "preferred_language" });
    assert.equal(language, "Spanish");
    const both = await client.memory.getWithPointer<string>(
      { scope: "user", userId, agentId: "agent-456", key: "preferred_language" });
    assert.equal(both.value, "Spanish");
    assert.equal(both.pointer.id, pointer.id);
    assert.equal(both.pointer.contentHash, pointer.contentHash);
  });

  it("a value's own keys stay as written (no camelCase inside what was stored)", async () => {
    const value = { snake_case: { inner_key: [1, { deep_key: true }] }, "x-y": null };
    await tenant.admin.memory.set({ scope: "tenant", key: unique("raw"), value });
    const key = unique("raw2");
    await tenant.admin.memory.set({ scope: "tenant", key, value });
    assert.deepEqual(await tenant.admin.memory.get({ scope: "tenant", key }), value);
  });

  it("append, listPointers, delete and clear", async () => {
    const client = tenant.admin;
    const userId = unique("user");
    await client.memory.append({ scope: "user", userId, key: "past_issues", value: "VPN drops" });
    const second = await client.memory.append({ scope: "user", userId, key: "past_issues",
      value: "Printer jam" });
    assert.equal(second.version, 2);
    assert.deepEqual(await client.memory.get({ scope: "user", userId, key: "past_issues" }),
      ["VPN drops", "Printer jam"]);
    await client.memory.set({ scope: "user", userId, key: "tier", value: "gold", tags: ["crm"],
      importance: 4, memoryType: "fact" });
    const listed = await client.memory.listPointers({ scope: "user", userId });
    assert.deepEqual(listed.items.map((p) => p.key).sort(), ["past_issues", "tier"]);
    assert.equal(listed.nextCursor, null);
    const tier = listed.items.find((p) => p.key === "tier");
    assert.deepEqual([tier?.tags, tier?.importance, tier?.memoryType], [["crm"], 4, "fact"]);
    const paged = await client.memory.listPointers({ scope: "user", userId, limit: 1 });
    assert.equal(paged.items.length, 1);
    assert.equal(typeof paged.nextCursor, "string");
    const all = [];
    for await (const p of client.memory.iterPointers({ scope: "user", userId, limit: 1 })) {
      all.push(p.key);
    }
    assert.equal(all.length, 2);

    await client.memory.delete({ scope: "user", userId, key: "tier" });
    await assert.rejects(client.memory.get({ scope: "user", userId, key: "tier" }), NotFound);
    assert.equal(await client.memory.clear({ scope: "user", userId }), 1);
    assert.equal((await client.memory.listPointers({ scope: "user", userId })).items.length, 0);
  });

  it("teamId alone names a team's memory; agentId names the agent's", async () => {
    const client = tenant.admin;
    const teamId = unique("team");
    const pointer = await client.memory.set({ teamId, key: "status",
      value: "Email outage in progress" });
    assert.equal(pointer.scopeType, "team");
    assert.equal(pointer.scopeRef, teamId);
    assert.equal(pointer.teamId, teamId);
    assert.equal(await client.memory.get({ teamId, key: "status" }), "Email outage in progress");
    const agentId = unique("agent");
    const styled = await client.memory.set({ scope: "agent", agentId, key: "style", value: "bullets" });
    assert.equal(styled.scopeRef, agentId);
  });

  it("contradicting names throw before anything is sent", async () => {
    const client = tenant.admin;
    await assert.rejects(client.memory.set({ scope: "user", scopeRef: "u-1", userId: "u-2",
      key: "k", value: 1 }), /scopeRef 'u-1' contradicts userId 'u-2'/);
    await assert.rejects(client.memory.set({ scope: "user", teamId: "t", key: "k", value: 1 }),
      /teamId names a team's memory/);
    await assert.rejects(client.memory.get({ key: "k" }), /give scope/);
    await assert.rejects(client.memory.get({ scope: "user", key: "k" }), /required for scope 'user'/);
  });

  it("search finds the user's memory", async () => {
    const client = tenant.admin;
    const userId = unique("user");
    await client.memory.set({ scope: "user", userId, key: "favourite_fruit",
      value: "The customer loves persimmons" });
    let found;
    for (let i = 0; i < 50; i++) {
      found = await client.memory.search({ scope: "user", userId, query: "persimmons", limit: 5,
        includeValues: true });
      if (found.results.length) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(found);
    assert.equal(found.results[0]?.key, "favourite_fruit");
    assert.equal(found.results[0]?.scopeRef, userId);
    assert.equal(found.results[0]?.value, "The customer loves persimmons");
    assert.equal(typeof found.tookMs, "number");
  });

  it("addKnowledge, cleanup and setRetentionPolicy", async () => {
    const client = tenant.admin;
    const agentId = unique("agent");
    const added = await client.memory.addKnowledge({ agentId, documents: [
      { title: "Refunds", content: "Refunds are paid within 14 days.", metadata: { source_doc: "kb-1" } },
    ] });
    assert.equal(added.agentId, agentId);
    assert.equal(added.documents.length, 1);
    assert.equal(added.documents[0]?.title, "Refunds");

    const cleaned = unique("agent");
    // Memories written just now are younger than any cleanup's threshold (a day at least).
    await client.memory.set({ scope: "agent", agentId: cleaned, key: "old", value: 1 });
    await client.memory.set({ scope: "agent", agentId: cleaned, key: "keep", value: 2 });
    const dry = await client.memory.cleanup({ agentId: cleaned, olderThan: "180d", excludeKeys: ["keep"],
      dryRun: true });
    assert.ok("matched" in dry);
    assert.deepEqual([dry.dryRun, dry.matched, dry.deleted, dry.items], [true, 0, 0, []]);
    const done = await client.memory.cleanup({ agentId: cleaned, olderThan: "26w", excludeKeys: ["keep"] });
    assert.ok("deleted" in done);
    assert.deepEqual([done.dryRun, done.deleted], [false, 0]);
    assert.equal((await client.memory.listPointers({ scope: "agent", agentId: cleaned })).items.length, 2);
    assert.deepEqual(["180d", "26w", "1y", 3, "7"].map(parseDays), [180, 182, 365, 3, 7]);
    await assert.rejects(client.memory.cleanup({ agentId: cleaned, olderThan: "0d" }), BadRequest);
    await assert.rejects(client.memory.cleanup({ agentId, olderThan: "soon" }), /olderThan must be/);

    const policy = await client.memory.setRetentionPolicy({ scope: "conversation",
      retentionDays: 90, autoDelete: true });
    assert.deepEqual([policy.scope, policy.retentionDays, policy.autoDelete],
      ["conversation", 90, true]);
  });

  it("remember extracts the user's facts", async () => {
    const userId = unique("user");
    const remembered = await tenant.admin.memory.remember({ userId, messages: [
      { role: "user", content: "My name is Ada and I live in Lisbon." },
    ] });
    assert.equal(remembered.dryRun, false);
    assert.ok(remembered.decisions.length >= 1);
    assert.ok(remembered.decisions.every((d) => ["ADD", "UPDATE", "DELETE", "NONE"].includes(d.event)));
    const stored = await tenant.admin.memory.listPointers({ scope: "user", userId });
    assert.equal(stored.items.length,
      remembered.decisions.filter((d) => d.event === "ADD").length);
  });
});
