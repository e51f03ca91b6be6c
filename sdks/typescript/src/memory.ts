/** `client.memory`: the seed's memory calls, exactly as the seed writes them. */
import { page, type JobsAPI, type ReceiptsAPI } from "./admin.js";
import { camelize, memoryPointer, snakeBody } from "./case.js";
import { InvalidResponse, MemplaneError } from "./errors.js";
import { segment, type RequestOptions, type Transport } from "./http.js";
import { keyPath, scopePath, seedFilter, seedScope, type ScopeArgs } from "./scope.js";
import type {
  CleanupResult, ExportArchive, Job, KnowledgeAdded, Memory, MemoryPointer, Page, Receipt,
  Remembered, RetentionPolicy, SearchResults,
} from "./types.js";
import { readZipEntry } from "./zip.js";

type RawPointer = Parameters<typeof memoryPointer>[0];
type RawPage = { items: object[]; next_cursor: string | null };

export interface KeyArgs extends ScopeArgs {
  key: string;
}

export interface SetArgs<T = unknown> extends KeyArgs {
  value: T;
  memoryType?: string;
  tags?: string[];
  importance?: number;
  title?: string;
  source?: string;
  ttlDays?: number;
  ttlSeconds?: number;
  searchable?: boolean;
}

export interface ListPointersArgs extends ScopeArgs {
  memoryType?: string;
  syncStatus?: string;
  tag?: string;
  keyPrefix?: string;
  order?: "created" | "key" | "key_desc" | "updated_desc";
  limit?: number;
  cursor?: string;
}

export interface SearchArgs {
  query: string;
  scope?: string;
  scopeRef?: string;
  userId?: string;
  memoryType?: string;
  tags?: string[];
  limit?: number;
  includeValues?: boolean;
}

export interface CleanupArgs {
  /** `'180d'`, `'26w'`, `'1y'` or a number of days. */
  olderThan: string | number;
  agentId?: string;
  scope?: string;
  scopeRef?: string;
  excludeKeys?: string[];
  dryRun?: boolean;
  keepImportanceAtLeast?: number;
}

export interface RetentionPolicyArgs {
  scope: string;
  retentionDays: number;
  autoDelete: boolean;
  memoryType?: string;
  archiveAfterDays?: number;
  keepImportanceAtLeast?: number;
}

export interface RememberArgs {
  messages: { role: string; content: string }[];
  userId: string;
  agentId?: string;
  conversationId?: string;
  scope?: string;
  scopeRef?: string;
  dryRun?: boolean;
}

const DAYS = /^\s*(\d+)\s*([dwy]?)\s*$/;
const UNIT_DAYS: Record<string, number> = { "": 1, d: 1, w: 7, y: 365 };

/** `180`, `'180d'`, `'26w'` or `'1y'` as a number of days. */
export function parseDays(value: string | number): number {
  if (typeof value === "number" && Number.isInteger(value)) return value;
  const found = DAYS.exec(String(value));
  if (!found) {
    throw new TypeError(`olderThan must be a number of days such as 180 or '180d' (also ` +
      `'26w', '1y'), not ${JSON.stringify(value)}`);
  }
  return Number(found[1]) * (UNIT_DAYS[found[2] ?? ""] ?? 1);
}

export class MemoryAPI {
  constructor(private readonly http: Transport, private readonly jobs: JobsAPI,
              private readonly receipts: ReceiptsAPI) {}

  /** Store `value` (any JSON) under the key, replacing what was there. */
  async set<T>(args: SetArgs<T>, options?: RequestOptions): Promise<MemoryPointer> {
    return this.write("", args, options);
  }

  /** Append `value` to the JSON list under the key (created if absent). */
  async append<T>(args: SetArgs<T>, options?: RequestOptions): Promise<MemoryPointer> {
    return this.write("/append", args, options);
  }

  private async write<T>(suffix: string, args: SetArgs<T>,
                         options?: RequestOptions): Promise<MemoryPointer> {
    const path = keyPath(args) + suffix;
    const body = {
      value: args.value,
      ...snakeBody({
        memoryType: args.memoryType, tags: args.tags, importance: args.importance,
        title: args.title, source: args.source, userId: args.userId, agentId: args.agentId,
        ttlDays: args.ttlDays, ttlSeconds: args.ttlSeconds, searchable: args.searchable,
      }),
    };
    const answer = await this.http.send<RawPointer>(
      { method: suffix ? "POST" : "PUT", path, body }, options);
    return memoryPointer(answer.data) as MemoryPointer;
  }

  /** The value under the key (as the seed's `const language = await client.memory.get(…)`). */
  async get<T = unknown>(args: KeyArgs, options?: RequestOptions): Promise<T> {
    return (await this.getWithPointer<T>(args, options)).value;
  }

  /** The value and its pointer; throws NotFound when absent, HashMismatch when altered. */
  async getWithPointer<T = unknown>(args: KeyArgs & { refreshTtl?: boolean },
                                    options?: RequestOptions): Promise<Memory<T>> {
    const answer = await this.http.send<{ value: T; pointer: RawPointer }>({
      method: "GET", path: keyPath(args),
      query: args.refreshTtl ? { refresh_ttl: true } : undefined,
    }, options);
    return { value: answer.data.value, pointer: memoryPointer(answer.data.pointer) as MemoryPointer };
  }

  /** Delete the memory under the key; throws NotFound when absent. */
  async delete(args: KeyArgs, options?: RequestOptions): Promise<void> {
    await this.http.send({ method: "DELETE", path: keyPath(args), accept: "none" }, options);
  }

  /** Delete every memory by key in the scope; resolves with how many went. */
  async clear(args: ScopeArgs, options?: RequestOptions): Promise<number> {
    const [scope, scopeRef] = seedScope(args);
    const answer = await this.http.send<{ deleted: number }>(
      { method: "DELETE", path: scopePath(scope, scopeRef) }, options);
    if (typeof answer.data?.deleted !== "number") {
      throw new InvalidResponse(`expected {"deleted": <int>}, got ${JSON.stringify(answer.data)}`);
    }
    return answer.data.deleted;
  }

  /** One page of pointers (metadata only); `userId` also filters by data subject. */
  async listPointers(args: ListPointersArgs = {},
                     options?: RequestOptions): Promise<Page<MemoryPointer>> {
    const [scope, scopeRef] = seedFilter(args);
    const query = snakeBody({
      scope, scopeRef, userId: args.userId, memoryType: args.memoryType,
      syncStatus: args.syncStatus, tag: args.tag, keyPrefix: args.keyPrefix,
      order: args.order, limit: args.limit, cursor: args.cursor,
    }) as Record<string, string>;
    const answer = await this.http.send<RawPage>({ method: "GET", path: "/v1/pointers", query },
      options);
    return page(answer.data, (item) => memoryPointer(item) as MemoryPointer);
  }

  /** Every matching pointer, page after page. */
  async *iterPointers(args: Omit<ListPointersArgs, "cursor"> = {},
                      options?: RequestOptions): AsyncGenerator<MemoryPointer> {
    let cursor: string | undefined;
    do {
      const got = await this.listPointers({ ...args, cursor }, options);
      yield* got.items;
      cursor = got.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** The memories most relevant to `query`, best first (each value verified). */
  async search(args: SearchArgs, options?: RequestOptions): Promise<SearchResults> {
    const body = snakeBody({ ...args });
    const answer = await this.http.send<object>({ method: "POST", path: "/v1/search", body },
      options);
    return camelize(answer.data) as SearchResults;
  }

  /** The seed's `addKnowledge({ agentId, documents: [{ title, content, metadata? }] })`. */
  async addKnowledge(args: { agentId: string; documents: { title: string; content: string;
                       metadata?: Record<string, unknown> }[] },
                     options?: RequestOptions): Promise<KnowledgeAdded> {
    const answer = await this.http.send<object>({
      method: "POST", path: "/v1/knowledge",
      body: { agent_id: args.agentId, documents: args.documents },
    }, options);
    return camelize(answer.data) as KnowledgeAdded;
  }

  /**
   * Export everything stored about `userId` (GDPR Art. 15/20): resolves when the job is done,
   * with the ZIP's bytes and its manifest.json.
   */
  async export(args: { userId: string; format?: "json"; waitMs?: number },
               options?: RequestOptions): Promise<ExportArchive> {
    const started = await this.http.send<object>({
      method: "POST", path: `/v1/subjects/${segment(args.userId, "userId")}/export`,
      body: { format: args.format ?? "json" },
    }, options);
    const job = await this.finished(camelize(started.data) as Job, args.waitMs, options);
    const download = await this.http.send<Uint8Array>({
      method: "GET", path: `/v1/exports/${segment(job.id, "jobId")}/download`, accept: "bytes",
    }, options);
    const manifest = JSON.parse(new TextDecoder().decode(
      await readZipEntry(download.data, "manifest.json"))) as ExportArchive["manifest"];
    return { job, archive: download.data, manifest };
  }

  /**
   * Erase everything stored about `userId` (GDPR Art. 17): resolves when the erasure is
   * done, with its signed receipt (check it with `verifyReceipt`).
   */
  async eraseUser(userId: string, options?: RequestOptions & { waitMs?: number }
  ): Promise<Receipt> {
    const started = await this.http.send<object>({
      method: "POST", path: `/v1/subjects/${segment(userId, "userId")}/erase`,
      body: { dry_run: false },
    }, options);
    const job = await this.finished(camelize(started.data) as Job, options?.waitMs, options);
    const receiptId = job.result?.["receiptId"];
    if (typeof receiptId !== "string") {
      throw new InvalidResponse(`the erasure job ${job.id} finished without a receipt_id`);
    }
    return this.receipts.get(receiptId, options);
  }

  private async finished(job: Job, waitMs: number | undefined,
                         options?: RequestOptions): Promise<Job> {
    const done = await this.jobs.wait(job.id, { ...options, waitMs });
    if (done.state !== "completed") {
      throw new JobFailed(done);
    }
    return done;
  }

  /** The seed's `cleanup({ agentId, olderThan: '180d', excludeKeys })`: counts, or the Job it became. */
  async cleanup(args: CleanupArgs, options?: RequestOptions): Promise<CleanupResult | Job> {
    const body = snakeBody({
      scope: args.scope, scopeRef: args.scopeRef, agentId: args.agentId,
      olderThanDays: parseDays(args.olderThan), excludeKeys: args.excludeKeys,
      dryRun: args.dryRun ?? false, keepImportanceAtLeast: args.keepImportanceAtLeast,
    });
    const answer = await this.http.send<object>({ method: "POST", path: "/v1/cleanup", body },
      options);
    return camelize(answer.data) as CleanupResult | Job;
  }

  /** How long a scope's memories are kept, and whether the daily run deletes what is due. */
  async setRetentionPolicy(args: RetentionPolicyArgs,
                           options?: RequestOptions): Promise<RetentionPolicy> {
    const answer = await this.http.send<object>({
      method: "PUT", path: "/v1/retention-policies", body: snakeBody({ ...args }),
    }, options);
    return camelize(answer.data) as RetentionPolicy;
  }

  /** Extract durable facts from `messages` and reconcile them with what is stored. */
  async remember(args: RememberArgs, options?: RequestOptions): Promise<Remembered> {
    const body = snakeBody({ ...args, dryRun: args.dryRun ?? false });
    const answer = await this.http.send<object>({ method: "POST", path: "/v1/remember", body },
      options);
    return camelize(answer.data) as Remembered;
  }
}

/** A job (export, erasure) that ended `failed`; `job.error` says why. */
export class JobFailed extends MemplaneError {
  readonly job: Job;
  constructor(job: Job) {
    super(`job ${job.id} (${job.kind}) failed: ${job.error ?? "no reason given"}`);
    this.job = job;
  }
}

