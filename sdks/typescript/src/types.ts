/**
 * The answers' types, derived from the generated OpenAPI types (api-types.ts) in the SDK's
 * camelCase, pointers in the seed's MemoryPointer names: they cannot drift from the server.
 */
import type { components } from "./api-types.js";
import type { AsMemoryPointer, Camelize } from "./case.js";

type S = components["schemas"];

/** A memory's pointer (metadata only): `scopeType`, `scopeRef`, `contentHash`, `contentSizeBytes`, `syncStatus`, … */
export type MemoryPointer = AsMemoryPointer<S["PointerOut"]>;
/** A memory and its pointer, as `getWithPointer` answers. */
export interface Memory<T = unknown> {
  value: T;
  pointer: MemoryPointer;
}
/** A curated entry (Jet's layer): a pointer's fields and its `summary`. */
export type Entry = AsMemoryPointer<S["EntryOut"]>;
export type Event = Camelize<S["EventOut"]>;
export type EventWithBody = Camelize<S["EventWithBodyOut"]>;
export type Job = Camelize<S["JobOut"]>;
export type SearchResults = Camelize<S["SearchOut"]>;
export type SearchResult = Camelize<S["SearchResultOut"]>;
export type KnowledgeAdded = Camelize<S["KnowledgeAdded"]>;
export type CleanupResult = Camelize<S["CleanupOut"]>;
export type RetentionPolicy = Camelize<S["PolicyOut"]>;
export type StorageConfig = Camelize<S["StorageConfigOut"]>;
export type StorageHealth = Camelize<S["StorageHealthOut"]>;
export type Agent = Camelize<S["AgentOut"]>;
export type Conversation = Camelize<S["ConversationOut"]>;
export type MessageAdded = Camelize<S["MessageAdded"]>;
export type Message = Camelize<S["MessageOut"]>;
export type ContextWindow = Camelize<S["ContextOut"]>;
export type Remembered = Camelize<S["RememberOut"]>;
export type CompactorConfig = Camelize<S["CompactorConfigOut"]>;
export type Provenance = Camelize<S["ProvenanceOut"]>;
export type AuditEntry = Camelize<S["AuditEntryOut"]>;
export type AuditVerification = Camelize<S["AuditVerificationOut"]>;
export type InclusionProof = Camelize<S["InclusionProofOut"]>;
export type ConsistencyProof = Camelize<S["ConsistencyProofOut"]>;
export type CreatedApiKey = Camelize<S["CreatedApiKey"]>;
export type CreatedTenant = Camelize<S["CreatedTenant"]>;

/** One page of a listing; pass `nextCursor` back as `cursor` for the next. */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/**
 * A signed erasure receipt exactly as the server sent it (snake_case, every field kept):
 * the signature covers these bytes, so the SDK never renames them.
 */
export interface Receipt {
  id: string;
  format: string;
  key_id: string;
  signature: string;
  tenant_id?: string;
  job_id?: string;
  transparency?: TransparencyBlock;
  [field: string]: unknown;
}

/** A receipt's or manifest's proofs: the signed checkpoint and its rows' inclusion proofs. */
export interface TransparencyBlock {
  checkpoint: string;
  proofs: { seq: number; leaf: string; hashes: string[] }[];
}

/** A finished export: the ZIP's bytes and its manifest.json (as signed, snake_case). */
export interface ExportArchive {
  job: Job;
  archive: Uint8Array;
  manifest: Record<string, unknown> & { transparency?: TransparencyBlock };
}

/** The scopes of memories by key (`institutional` = `tenant`). */
export type Scope =
  | "tenant" | "institutional" | "app" | "team" | "agent" | "user" | "conversation"
  | "entity" | "project";
