export { Memplane } from "./client.js";
export type { ClientOptions, Fetch, RequestOptions } from "./http.js";
export { VERSION } from "./http.js";
export * from "./errors.js";
export { JobFailed, parseDays } from "./memory.js";
export type {
  CleanupArgs, KeyArgs, ListPointersArgs, RememberArgs, RetentionPolicyArgs, SearchArgs, SetArgs,
} from "./memory.js";
export type { ScopeArgs } from "./scope.js";
export type {
  ContextArgs, EntryCreateArgs, EntryListArgs, EntryUpdateArgs, EventAppendArgs, EventListArgs,
  MessageArgs,
} from "./layer.js";
export type { AgentUpdateArgs, KeyCreateArgs, StorageConfigureArgs, WaitOptions } from "./admin.js";
export type * from "./types.js";
export type { AsMemoryPointer, CamelCase, Camelize } from "./case.js";
export type { components, operations, paths } from "./api-types.js";
export {
  canonicalJson, canonicalReceipt, parseReceipt, publicKeyId, verifyCheckpointDocument,
  verifyReceipt,
} from "./receipts.js";
export {
  NoteError, leafHash, openCheckpoint, openNote, parseCheckpoint, parseVerifier,
  verifierFromPem, verifyConsistency, verifyInclusion,
} from "./tlog.js";
export type { Checkpoint, NoteProblem, Verifier } from "./tlog.js";
export { TransparencyError, receiptVerifier, verifyTransparency } from "./transparency.js";
export type { TransparencyCheck, TransparencyProven } from "./transparency.js";
export { fromBase64, toBase64 } from "./encoding.js";
