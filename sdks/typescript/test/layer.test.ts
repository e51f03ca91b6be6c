/** Jet's layer, storage and agents, against the live server. */
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { Conflict, NotFound } from "../src/index.js";
import { STORAGE_ROOT, newTenant, type Tenant, unique } from "./helpers.js";

let tenant: Tenant;
before(async () => {
  tenant = await newTenant();
});

describe("events, entries, compactor", () => {
  it("events: append, list, get with the body", async () => {
    const client = tenant.admin;
    const scopeRef = unique("project");
    const event = await client.events.append({ scope: "project", scopeRef, kind: "decision",
      body: "We ship on **Friday**.", sourceRef: "meeting-7", userId: "user-9" });
    assert.deepEqual([event.scope, event.scopeRef, event.kind, event.sourceRef, event.userId],
      ["project", scopeRef, "decision", "meeting-7", "user-9"]);
    assert.equal(event.compressedAt, null);
    await client.events.append({ scope: "project", scopeRef, kind: "note", body: "Second." });
    const listed = await client.events.list({ scope: "project", scopeRef });
    assert.equal(listed.items.length, 2);
    const decisions = await client.events.list({ scope: "project", scopeRef, kind: "decision" });
    assert.deepEqual(decisions.items.map((e) => e.id), [event.id]);
    const full = await client.events.get(event.id);
    assert.equal(full.body, "We ship on **Friday**.");
    assert.equal(full.contentSha256, event.contentSha256);
  });

  it("entries: create, get, update, search, list, delete", async () => {
    const client = tenant.admin;
    const scopeRef = unique("entity");
    const entry = await client.entries.create({ scope: "entity", scopeRef, title: "Acme",
      summary: "Acme renews in March; contact Priya.", tags: ["account"], importance: 4 });
    assert.deepEqual([entry.scopeType, entry.scopeRef, entry.title, entry.importance],
      ["entity", scopeRef, "Acme", 4]);
    assert.equal(entry.summary, "Acme renews in March; contact Priya.");
    assert.match(entry.contentHash, /^[0-9a-f]{64}$/);
    assert.equal((await client.entries.get(entry.id)).summary, entry.summary);
    const updated = await client.entries.update(entry.id, { title: "Acme Corp",
      summary: "Acme renews in April; contact Priya.", tags: ["account", "renewal"] });
    assert.equal(updated.title, "Acme Corp");
    assert.equal(updated.version, 2);
    const found = await client.entries.search({ scope: "entity", scopeRef, query: "april priya" });
    assert.deepEqual(found.items.map((e) => e.id), [entry.id]);
    const none = await client.entries.search({ scope: "entity", scopeRef, query: "march" });
    assert.equal(none.items.length, 0);
    const tagged = await client.entries.list({ scope: "entity", scopeRef, tag: "renewal",
      includeSummary: true });
    assert.equal(tagged.items[0]?.summary, "Acme renews in April; contact Priya.");
    await client.entries.delete(entry.id);
    await assert.rejects(client.entries.get(entry.id), NotFound);
  });

  it("compactor: run is a job that finishes", async () => {
    const job = await tenant.admin.compactor.run({ dryRun: true });
    assert.equal(job.kind, "compact");
    const done = await tenant.admin.jobs.wait(job.id, { waitMs: 60_000 });
    assert.equal(done.state, "completed");
    const config = await tenant.admin.compactor.getConfig();
    assert.equal(typeof config.minEvents, "number");
  });
});

describe("conversations", () => {
  it("messages, context, summarise, delete", async () => {
    const client = tenant.admin;
    const id = unique("conv");
    const userId = unique("user");
    const added = await client.conversations.addMessage(id, { role: "user",
      content: "I prefer email over phone.", userId });
    assert.equal(added.seq, 1);
    assert.equal(added.userId, userId);
    assert.equal(added.conversation.messageCount, 1);
    await client.conversations.addMessage(id, { role: "assistant", content: "Noted." });
    const messages = await client.conversations.messages(id);
    assert.deepEqual(messages.items.map((m) => [m.seq, m.role, m.content]),
      [[1, "user", "I prefer email over phone."], [2, "assistant", "Noted."]]);
    const window = await client.conversations.context(id, { systemPrompt: "You are helpful.",
      message: "How should we contact me?", tokenBudget: 2000 });
    assert.equal(window.tokenBudget, 2000);
    assert.ok(window.totalTokens <= 2000);
    assert.equal(window.sections[0]?.content, "You are helpful.");
    assert.ok(window.sections.some((s) => s.content.includes("I prefer email over phone.")));
    const job = await client.conversations.summarize(id);
    assert.equal((await client.jobs.wait(job.id, { waitMs: 60_000 })).state, "completed");
    assert.equal((await client.conversations.get(id)).messageCount, 2);
    await client.conversations.delete(id);
    await assert.rejects(client.conversations.get(id), NotFound);
  });
});

describe("storage and agents", () => {
  it("storage.configure with the seed's body, then healthCheck", async () => {
    assert.ok(STORAGE_ROOT, "the test script names a local storage root");
    const root = join(STORAGE_ROOT, unique("bucket"));
    mkdirSync(root);
    const config = await tenant.admin.storage.configure({ storageType: "local",
      connectionConfig: { root } });
    assert.equal(config.storageType, "local");
    assert.match(config.storageConfigId, /^sc_/);
    assert.equal(config.isDefault, true);
    const health = await tenant.admin.storage.healthCheck();
    assert.deepEqual([health.ok, health.reachable, health.storageType], [true, true, "local"]);
    assert.equal((await tenant.admin.storage.getConfig()).storageConfigId, config.storageConfigId);
  });

  it("agents.update with the seed's memory settings", async () => {
    const client = tenant.admin;
    const agentId = unique("agent");
    const agent = await client.agents.update({ agentId, memory: { userMemory: {
      enabled: true, retention: "90d" } } });
    assert.equal(agent.agentId, agentId);
    assert.deepEqual([agent.memory.userMemory.enabled, agent.memory.userMemory.retention,
      agent.memory.userMemory.retentionDays], [true, "90d", 90]);
    await client.agents.update({ agentId, memory: { userMemory: { enabled: false } } });
    assert.equal((await client.agents.get(agentId)).memory.userMemory.enabled, false);
    const refused = await client.memory.set({ scope: "user", userId: unique("user"), agentId,
      key: "k", value: 1 }).catch((e: unknown) => e);
    assert.ok(refused instanceof Conflict);
    assert.equal(refused.code, "user_memory_disabled");
    await client.agents.delete(agentId);
    await assert.rejects(client.agents.get(agentId), NotFound);
  });
});
