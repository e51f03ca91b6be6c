/** Jobs, receipts, the audit log, storage, agents, tenants and keys. */
import { camelize, snakeBody } from "./case.js";
import { RequestTimeout } from "./errors.js";
import { segment, type Query, type RequestOptions, type Transport } from "./http.js";
import type {
  Agent, AuditEntry, AuditVerification, ConsistencyProof, CreatedApiKey, CreatedTenant,
  InclusionProof, Job, Page, Receipt, StorageConfig, StorageHealth,
} from "./types.js";

export interface WaitOptions extends RequestOptions {
  /** Give up after this long (default 600 000 ms) with RequestTimeout. */
  waitMs?: number;
  onProgress?: (job: Job) => void;
}

export function page<R, T>(raw: { items: R[]; next_cursor?: string | null },
                           item: (r: R) => T): Page<T> {
  return { items: raw.items.map(item), nextCursor: raw.next_cursor ?? null };
}

export class JobsAPI {
  constructor(private readonly http: Transport) {}

  async get(jobId: string, options?: RequestOptions): Promise<Job> {
    const answer = await this.http.send<object>(
      { method: "GET", path: `/v1/jobs/${segment(jobId, "jobId")}` }, options);
    return camelize(answer.data) as Job;
  }

  /** Poll until the job is completed or failed, and return it (check `state`). */
  async wait(jobId: string, options: WaitOptions = {}): Promise<Job> {
    const deadline = Date.now() + (options.waitMs ?? 600_000);
    let delay = 100;
    for (;;) {
      const job = await this.get(jobId, options);
      options.onProgress?.(job);
      if (job.state === "completed" || job.state === "failed") return job;
      if (Date.now() > deadline) {
        throw new RequestTimeout(`job ${jobId} is still ${job.state} after ${options.waitMs ?? 600_000} ms`);
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 1.5, 2000);
    }
  }
}

export class ReceiptsAPI {
  constructor(private readonly http: Transport) {}

  /** The signed erasure receipt, exactly as the server sent it (verify it with verifyReceipt). */
  async get(receiptId: string, options?: RequestOptions): Promise<Receipt> {
    const answer = await this.http.send<Receipt>(
      { method: "GET", path: `/v1/receipts/${segment(receiptId, "receiptId")}` }, options);
    return answer.data;
  }

  /** The server's receipt signing key, PEM (Ed25519). */
  async publicKey(options?: RequestOptions): Promise<string> {
    const answer = await this.http.send<string>(
      { method: "GET", path: "/v1/receipts/public-key", accept: "text" }, options);
    return answer.data;
  }
}

export interface AuditListArgs {
  pointerId?: string;
  accessorId?: string;
  operation?: string;
  since?: string;
  until?: string;
  limit?: number;
  cursor?: string;
}

export class AuditAPI {
  constructor(private readonly http: Transport) {}

  async list(args: AuditListArgs = {}, options?: RequestOptions): Promise<Page<AuditEntry>> {
    const answer = await this.http.send<{ items: object[]; next_cursor: string | null }>(
      { method: "GET", path: "/v1/audit", query: snakeBody({ ...args }) as Query }, options);
    return page(answer.data, (item) => camelize(item) as AuditEntry);
  }

  async verify(options?: RequestOptions): Promise<AuditVerification> {
    const answer = await this.http.send<object>({ method: "GET", path: "/v1/audit/verify" }, options);
    return camelize(answer.data) as AuditVerification;
  }

  /** The signed checkpoint of the tenant's audit log (a C2SP signed note). */
  async checkpoint(options?: RequestOptions): Promise<string> {
    const answer = await this.http.send<string>(
      { method: "GET", path: "/v1/audit/checkpoint", accept: "text" }, options);
    return answer.data;
  }

  /** The log's verifier key, `<name>+<key id>+<base64 key>`. */
  async verifierKey(options?: RequestOptions): Promise<string> {
    const answer = await this.http.send<string>(
      { method: "GET", path: "/v1/audit/verifier-key", accept: "text" }, options);
    return answer.data;
  }

  async inclusionProof(args: { seq: number; treeSize: number },
                       options?: RequestOptions): Promise<InclusionProof> {
    const answer = await this.http.send<object>({
      method: "GET", path: "/v1/audit/proof/inclusion",
      query: { seq: args.seq, tree_size: args.treeSize },
    }, options);
    return camelize(answer.data) as InclusionProof;
  }

  async consistencyProof(args: { first: number; second: number },
                         options?: RequestOptions): Promise<ConsistencyProof> {
    const answer = await this.http.send<object>({
      method: "GET", path: "/v1/audit/proof/consistency", query: { ...args },
    }, options);
    return camelize(answer.data) as ConsistencyProof;
  }
}

export interface StorageConfigureArgs {
  storageType: "local" | "s3" | "gcs" | "azure" | (string & {});
  /** The backend's fields, camelCase or snake_case (`bucket`, `accessKeyId`, `root`, …). */
  connectionConfig: Record<string, unknown>;
}

export class StorageAPI {
  constructor(private readonly http: Transport) {}

  /** The seed's `storage.configure({ storageType, connectionConfig })`: probed, then saved. */
  async configure(args: StorageConfigureArgs, options?: RequestOptions): Promise<StorageConfig> {
    const answer = await this.http.send<object>({
      method: "PUT", path: "/v1/storage/config",
      body: { storageType: args.storageType, connectionConfig: args.connectionConfig },
    }, options);
    return camelize(answer.data) as StorageConfig;
  }

  async getConfig(options?: RequestOptions): Promise<StorageConfig> {
    const answer = await this.http.send<object>({ method: "GET", path: "/v1/storage/config" }, options);
    return camelize(answer.data) as StorageConfig;
  }

  /** The bucket's reachability and a write/read/delete probe. */
  async healthCheck(options?: RequestOptions): Promise<StorageHealth> {
    const answer = await this.http.send<object>({ method: "GET", path: "/v1/storage/health" }, options);
    return camelize(answer.data) as StorageHealth;
  }
}

export interface AgentUpdateArgs {
  agentId: string;
  name?: string;
  /** The seed's `{ userMemory: { enabled, retention: '90d', storageConfigId } }`. */
  memory?: { userMemory?: { enabled?: boolean; retention?: string; storageConfigId?: string } };
}

export class AgentsAPI {
  constructor(private readonly http: Transport) {}

  /** The seed's `agents.update({ agentId, memory: { userMemory: {...} } })`. */
  async update(args: AgentUpdateArgs, options?: RequestOptions): Promise<Agent> {
    const body: Record<string, unknown> = {};
    if (args.name !== undefined) body["name"] = args.name;
    if (args.memory !== undefined) body["memory"] = args.memory;
    const answer = await this.http.send<object>({
      method: "PUT", path: `/v1/agents/${segment(args.agentId, "agentId")}`, body,
    }, options);
    return camelize(answer.data) as Agent;
  }

  async get(agentId: string, options?: RequestOptions): Promise<Agent> {
    const answer = await this.http.send<object>(
      { method: "GET", path: `/v1/agents/${segment(agentId, "agentId")}` }, options);
    return camelize(answer.data) as Agent;
  }

  async list(args: { limit?: number; cursor?: string } = {},
             options?: RequestOptions): Promise<Page<Agent>> {
    const answer = await this.http.send<{ items: object[]; next_cursor: string | null }>(
      { method: "GET", path: "/v1/agents", query: { ...args } }, options);
    return page(answer.data, (item) => camelize(item) as Agent);
  }

  async delete(agentId: string, options?: RequestOptions): Promise<void> {
    await this.http.send({ method: "DELETE", path: `/v1/agents/${segment(agentId, "agentId")}`,
      accept: "none" }, options);
  }
}

export class TenantsAPI {
  constructor(private readonly http: Transport) {}

  /** A new tenant and its first admin key (needs the server's bootstrap key). */
  async create(args: { name: string }, options?: RequestOptions): Promise<CreatedTenant> {
    const answer = await this.http.send<object>(
      { method: "POST", path: "/v1/tenants", body: { name: args.name } }, options);
    return camelize(answer.data) as CreatedTenant;
  }
}

export interface KeyCreateArgs {
  role: "admin" | "agent" | "compliance" | "user" | (string & {});
  name: string;
  scopes?: { scope: string; scopeRef: string }[];
  agentId?: string;
  userId?: string;
}

export class KeysAPI {
  constructor(private readonly http: Transport) {}

  /** A new API key of this tenant; its secret (`apiKey`) is shown once. */
  async create(args: KeyCreateArgs, options?: RequestOptions): Promise<CreatedApiKey> {
    const body = snakeBody({
      role: args.role, name: args.name, agentId: args.agentId, userId: args.userId,
      scopes: args.scopes?.map((s) => ({ scope: s.scope, scope_ref: s.scopeRef })),
    });
    const answer = await this.http.send<object>(
      { method: "POST", path: "/v1/api-keys", body }, options);
    return camelize(answer.data) as CreatedApiKey;
  }

  async delete(keyId: string, options?: RequestOptions): Promise<void> {
    await this.http.send({ method: "DELETE", path: `/v1/api-keys/${segment(keyId, "keyId")}`,
      accept: "none" }, options);
  }
}
