/** Jet's memory layer: raw events, curated entries, the compactor, conversations. */
import { page } from "./admin.js";
import { camelize, memoryPointer, snakeBody } from "./case.js";
import { segment, type Query, type RequestOptions, type Transport } from "./http.js";
import type {
  CompactorConfig, ContextWindow, Conversation, Entry, Event, EventWithBody, Job, Message,
  MessageAdded, Page, Provenance,
} from "./types.js";

type RawPage = { items: object[]; next_cursor: string | null };
type RawPointer = Parameters<typeof memoryPointer>[0];

export interface EventAppendArgs {
  scope: string;
  scopeRef: string;
  kind: string;
  /** The event's text (Markdown); stored encrypted in the tenant's bucket. */
  body: string;
  source?: string;
  sourceRef?: string;
  occurredAt?: string;
  userId?: string;
  agentId?: string;
}

export interface EventListArgs {
  scope?: string;
  scopeRef?: string;
  kind?: string;
  since?: string;
  until?: string;
  includeCompressed?: boolean;
  limit?: number;
  cursor?: string;
}

export class EventsAPI {
  constructor(private readonly http: Transport) {}

  /** Append a raw event (append-only: only erasure and retention remove events). */
  async append(args: EventAppendArgs, options?: RequestOptions): Promise<Event> {
    const answer = await this.http.send<object>(
      { method: "POST", path: "/v1/events", body: snakeBody({ ...args }) }, options);
    return camelize(answer.data) as Event;
  }

  async list(args: EventListArgs = {}, options?: RequestOptions): Promise<Page<Event>> {
    const answer = await this.http.send<RawPage>(
      { method: "GET", path: "/v1/events", query: snakeBody({ ...args }) as Query }, options);
    return page(answer.data, (item) => camelize(item) as Event);
  }

  /** One event with its body, hash-verified. */
  async get(eventId: string, options?: RequestOptions): Promise<EventWithBody> {
    const answer = await this.http.send<object>(
      { method: "GET", path: `/v1/events/${segment(eventId, "eventId")}` }, options);
    return camelize(answer.data) as EventWithBody;
  }
}

export interface EntryCreateArgs {
  scope: string;
  scopeRef: string;
  title: string;
  summary: string;
  tags?: string[];
  importance?: number;
  source?: string;
  userId?: string;
  agentId?: string;
}

export interface EntryUpdateArgs {
  title: string;
  summary: string;
  tags?: string[];
  importance?: number;
  source?: string;
}

export interface EntryListArgs {
  scope?: string;
  scopeRef?: string;
  tag?: string;
  search?: string;
  minImportance?: number;
  includeSummary?: boolean;
  limit?: number;
  cursor?: string;
}

export class EntriesAPI {
  constructor(private readonly http: Transport) {}

  async create(args: EntryCreateArgs, options?: RequestOptions): Promise<Entry> {
    const answer = await this.http.send<RawPointer>(
      { method: "POST", path: "/v1/entries", body: snakeBody({ ...args }) }, options);
    return memoryPointer(answer.data) as Entry;
  }

  async get(entryId: string, options?: RequestOptions): Promise<Entry> {
    const answer = await this.http.send<RawPointer>(
      { method: "GET", path: `/v1/entries/${segment(entryId, "entryId")}` }, options);
    return memoryPointer(answer.data) as Entry;
  }

  /** Replace the entry's title, summary, tags, importance and source. */
  async update(entryId: string, args: EntryUpdateArgs, options?: RequestOptions): Promise<Entry> {
    const answer = await this.http.send<RawPointer>({
      method: "PUT", path: `/v1/entries/${segment(entryId, "entryId")}`,
      body: snakeBody({ ...args }),
    }, options);
    return memoryPointer(answer.data) as Entry;
  }

  async delete(entryId: string, options?: RequestOptions): Promise<void> {
    await this.http.send({ method: "DELETE", path: `/v1/entries/${segment(entryId, "entryId")}`,
      accept: "none" }, options);
  }

  async list(args: EntryListArgs = {}, options?: RequestOptions): Promise<Page<Entry>> {
    const answer = await this.http.send<RawPage>(
      { method: "GET", path: "/v1/entries", query: snakeBody({ ...args }) as Query }, options);
    return page(answer.data, (item) => memoryPointer(item as RawPointer) as Entry);
  }

  /** Entries holding every word of `query` (a keyed blind index: no text in the database). */
  async search(args: Omit<EntryListArgs, "search"> & { query: string },
               options?: RequestOptions): Promise<Page<Entry>> {
    const { query, ...rest } = args;
    return this.list({ ...rest, search: query }, options);
  }
}

export class CompactorAPI {
  constructor(private readonly http: Transport) {}

  /** Compact every due (scope, scopeRef) bucket of events into entries; a Job. */
  async run(args: { dryRun?: boolean; scope?: string; scopeRef?: string } = {},
            options?: RequestOptions): Promise<Job> {
    const answer = await this.http.send<object>({
      method: "POST", path: "/v1/compactor/run",
      body: snakeBody({ ...args, dryRun: args.dryRun ?? false }),
    }, options);
    return camelize(answer.data) as Job;
  }

  async getConfig(options?: RequestOptions): Promise<CompactorConfig> {
    const answer = await this.http.send<object>({ method: "GET", path: "/v1/compactor/config" },
      options);
    return camelize(answer.data) as CompactorConfig;
  }

  async setConfig(args: { minEvents?: number; olderThanDays?: number; enabled?: boolean },
                  options?: RequestOptions): Promise<CompactorConfig> {
    const answer = await this.http.send<object>(
      { method: "PUT", path: "/v1/compactor/config", body: snakeBody({ ...args }) }, options);
    return camelize(answer.data) as CompactorConfig;
  }

  /** The events (ids and SHA-256) a compactor entry covers and the summariser that wrote it. */
  async provenance(entryId: string, options?: RequestOptions): Promise<Provenance> {
    const answer = await this.http.send<object>({
      method: "GET", path: `/v1/compactor/provenance/${segment(entryId, "entryId")}`,
    }, options);
    return camelize(answer.data) as Provenance;
  }
}

export interface MessageArgs {
  role: "user" | "assistant" | "system" | "tool" | (string & {});
  content: string;
  userId?: string;
  agentId?: string;
  model?: string;
  contextWindowLimit?: number;
}

export interface ContextArgs {
  systemPrompt: string;
  message: string;
  tokenBudget: number;
  model?: string;
  /** The scopes whose memories are candidates; [] none; omitted: the conversation's own. */
  memoryScopes?: { scope: string; scopeRef: string }[];
  memoryLimit?: number;
}

export class ConversationsAPI {
  constructor(private readonly http: Transport) {}

  private path(conversationId: string): string {
    return `/v1/conversations/${segment(conversationId, "conversationId")}`;
  }

  async addMessage(conversationId: string, args: MessageArgs,
                   options?: RequestOptions): Promise<MessageAdded> {
    const answer = await this.http.send<object>({
      method: "POST", path: `${this.path(conversationId)}/messages`, body: snakeBody({ ...args }),
    }, options);
    return camelize(answer.data) as MessageAdded;
  }

  async messages(conversationId: string,
                 args: { after?: number; limit?: number; cursor?: string } = {},
                 options?: RequestOptions): Promise<Page<Message>> {
    const answer = await this.http.send<RawPage>({
      method: "GET", path: `${this.path(conversationId)}/messages`, query: { ...args },
    }, options);
    return page(answer.data, (item) => camelize(item) as Message);
  }

  async get(conversationId: string, options?: RequestOptions): Promise<Conversation> {
    const answer = await this.http.send<object>({ method: "GET", path: this.path(conversationId) },
      options);
    return camelize(answer.data) as Conversation;
  }

  /** The context window for the next model call, within `tokenBudget`, with its report. */
  async context(conversationId: string, args: ContextArgs,
                options?: RequestOptions): Promise<ContextWindow> {
    const body = snakeBody({
      ...args,
      memoryScopes: args.memoryScopes?.map((s) => ({ scope: s.scope, scope_ref: s.scopeRef })),
    });
    const answer = await this.http.send<object>({
      method: "POST", path: `${this.path(conversationId)}/context`, body,
    }, options);
    return camelize(answer.data) as ContextWindow;
  }

  /** Summarise the conversation's older messages now; a Job. */
  async summarize(conversationId: string, options?: RequestOptions): Promise<Job> {
    const answer = await this.http.send<object>({
      method: "POST", path: `${this.path(conversationId)}/summarize`,
    }, options);
    return camelize(answer.data) as Job;
  }

  async delete(conversationId: string, options?: RequestOptions): Promise<void> {
    await this.http.send({ method: "DELETE", path: this.path(conversationId), accept: "none" },
      options);
  }
}
