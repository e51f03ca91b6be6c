/**
 * The seed's memory examples, top to bottom, against a live memplane server.
 *
 *   MEMPLANE_URL=http://127.0.0.1:8080 MEMPLANE_API_KEY=mp_… node seed.js
 *
 * The key must be an admin key of a tenant (it also creates the compliance key the export
 * and the erasure need).
 */
import { Memplane, NotFound, verifyReceipt, verifyTransparency } from "@memplane/sdk";

const baseUrl = process.env["MEMPLANE_URL"] ?? "http://127.0.0.1:8080";
const apiKey = process.env["MEMPLANE_API_KEY"] ?? "";
const client = new Memplane({ baseUrl, apiKey });

// A user's preferences, written by an agent.
await client.memory.set({
  scope: "user",
  userId: "user-123",
  agentId: "agent-456",
  key: "preferred_language",
  value: "Spanish",
});
const language = await client.memory.get({ scope: "user", userId: "user-123", key: "preferred_language" });
console.log("preferred_language:", language);

// A history the agent adds to.
await client.memory.append({ scope: "user", userId: "user-123", key: "past_issues", value: "VPN drops" });
await client.memory.append({ scope: "user", userId: "user-123", key: "past_issues", value: "Printer jam" });
console.log("past_issues:", await client.memory.get({ scope: "user", userId: "user-123", key: "past_issues" }));

// The pointer: metadata only, in the seed's MemoryPointer names.
const { pointer } = await client.memory.getWithPointer({ scope: "user", userId: "user-123", key: "preferred_language" });
console.log("pointer:", pointer.scopeType, pointer.scopeRef, pointer.contentHash.slice(0, 12),
  pointer.contentSizeBytes, pointer.syncStatus);

// A team's shared state, and an agent's own.
await client.memory.set({ teamId: "team-123", key: "status", value: "Email outage in progress" });
await client.memory.set({ scope: "agent", agentId: "agent-456", key: "style", value: "bullets" });

// What the agent knows: documents it retrieves through search.
await client.memory.addKnowledge({
  agentId: "agent-456",
  documents: [{ title: "VPN guide", content: "Restart the VPN client, then re-enter the token." }],
});
const results = await client.memory.search({ scope: "user", userId: "user-123", query: "Spanish", limit: 5 });
console.log("search:", results.results.map((r) => r.key));

const pointers = await client.memory.listPointers({ scope: "user", userId: "user-123" });
console.log("pointers:", pointers.items.map((p) => p.key).sort());

// Housekeeping.
await client.memory.setRetentionPolicy({ scope: "conversation", retentionDays: 90, autoDelete: true });
const cleanup = await client.memory.cleanup({ agentId: "agent-456", olderThan: "180d", excludeKeys: ["style"] });
console.log("cleanup:", cleanup);
await client.agents.update({ agentId: "agent-456", memory: { userMemory: { enabled: true, retention: "90d" } } });

// Forget one thing, then the user (GDPR): export first, erase, verify the receipt offline.
await client.memory.delete({ scope: "user", userId: "user-123", key: "past_issues" });
const compliance = new Memplane({
  baseUrl,
  apiKey: (await client.keys.create({ role: "compliance", name: "dpo" })).apiKey,
});
const exported = await compliance.memory.export({ userId: "user-123", format: "json" });
console.log("export:", exported.archive.length, "bytes,", (exported.manifest["items"] as unknown[]).length, "items");
const receipt = await compliance.memory.eraseUser("user-123");
const publicKey = await compliance.receipts.publicKey();
console.log("receipt verified:", await verifyReceipt(receipt, publicKey));
const proven = await verifyTransparency(receipt, await compliance.audit.verifierKey());
console.log("receipt's rows in the log:", proven.rows.join(", "));
try {
  await client.memory.get({ scope: "user", userId: "user-123", key: "preferred_language" });
} catch (error) {
  console.log("after erasure:", error instanceof NotFound ? "not found" : error);
}
console.log("cleared team memories:", await client.memory.clear({ teamId: "team-123" }));
