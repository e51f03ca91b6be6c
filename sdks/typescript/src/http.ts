/**
 * Sending one call: base URL, bearer key, JSON in and out, the error tree, timeouts, the
 * caller's AbortSignal, and retries of transient failures (429, 503, no answer) with the
 * same Idempotency-Key, waiting what Retry-After asks.
 */
import {
  Aborted, APIError, InvalidResponse, RateLimited, RequestTimeout, StorageUnavailable,
  TransportError, errorFromResponse,
} from "./errors.js";

export const VERSION = "0.1.0";

export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /** The server root, e.g. `https://memplane.example.com`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>`; it decides the tenant. */
  apiKey: string;
  /** Each attempt's time limit (default 30 000 ms). */
  timeoutMs?: number;
  /** Retries of a transient failure (429, 503, no answer); default 2, 0 disables them. */
  maxRetries?: number;
  /** Longest wait between two attempts (default 30 000 ms), whatever Retry-After says. */
  maxRetryDelayMs?: number;
  /** The fetch to use (default: the global one). */
  fetch?: Fetch;
}

/** Per-call options every method takes last. */
export interface RequestOptions {
  /** Cancels the call (and its retries); it then throws `Aborted`. */
  signal?: AbortSignal;
  /** For a write: the key a retry replays by (default: a new random UUID per call). */
  idempotencyKey?: string;
  /** Overrides the client's timeoutMs for this call. */
  timeoutMs?: number;
}

export type Query = Record<string, string | number | boolean | null | undefined>;

export interface Call {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Query;
  body?: unknown;
  /** How a success answer is read: JSON (the default), bytes, text, or not at all. */
  accept?: "json" | "bytes" | "text" | "none";
}

export interface Answer<T> {
  status: number;
  headers: Headers;
  data: T;
}

const WRITES = new Set(["POST", "PUT", "DELETE"]);

export class Transport {
  readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly maxRetryDelayMs: number;
  private readonly fetcher: Fetch;

  constructor(options: ClientOptions) {
    if (!options || typeof options.baseUrl !== "string" || !options.baseUrl) {
      throw new TypeError("baseUrl must be a non-empty URL such as http://127.0.0.1:8080");
    }
    if (typeof options.apiKey !== "string" || !options.apiKey) {
      throw new TypeError("apiKey must be a non-empty string (a memplane API key)");
    }
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetries = options.maxRetries ?? 2;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 30_000;
    const fetcher = options.fetch ?? globalThis.fetch;
    if (typeof fetcher !== "function") {
      throw new TypeError("no fetch: pass options.fetch on a runtime without a global fetch");
    }
    this.fetcher = fetcher.bind(globalThis) as Fetch;
  }

  url(path: string, query?: Query): string {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null) params.append(name, String(value));
    }
    const search = params.toString();
    return this.baseUrl + path + (search ? `?${search}` : "");
  }

  async send<T>(call: Call, options: RequestOptions = {}): Promise<Answer<T>> {
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.apiKey}`,
      Accept: call.accept === "bytes" ? "application/zip, application/json" : "application/json",
      "X-Memplane-Client": `memplane-typescript/${VERSION}`,
    };
    let body: string | undefined;
    if (call.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(call.body);
    }
    if (WRITES.has(call.method)) {
      headers["Idempotency-Key"] = options.idempotencyKey ?? crypto.randomUUID();
    }
    const url = this.url(call.path, call.query);
    for (let attempt = 0; ; attempt++) {
      let error: unknown;
      try {
        return await this.attempt<T>(call, url, headers, body, options);
      } catch (caught) {
        error = caught;
      }
      const delay = this.retryDelay(error, attempt);
      if (delay === null) throw error;
      await sleep(delay, options.signal);
    }
  }

  /** The wait before the next attempt, or null when the error is final. */
  private retryDelay(error: unknown, attempt: number): number | null {
    if (attempt >= this.maxRetries) return null;
    let asked: number | null = null;
    if (error instanceof RateLimited || error instanceof StorageUnavailable) {
      asked = error.retryAfter;
    } else if (!(error instanceof TransportError)) {
      return null;
    }
    const backoff = 250 * 2 ** attempt * (1 + Math.random() * 0.25);
    const wanted = asked === null ? backoff : asked * 1000;
    return Math.min(wanted, this.maxRetryDelayMs);
  }

  private async attempt<T>(call: Call, url: string, headers: Record<string, string>,
                           body: string | undefined, options: RequestOptions
  ): Promise<Answer<T>> {
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const controller = new AbortController();
    const outer = options.signal;
    if (outer?.aborted) throw new Aborted("the call was aborted", { cause: outer.reason });
    const onAbort = () => controller.abort(outer?.reason);
    outer?.addEventListener("abort", onAbort, { once: true });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const fail = (caught: unknown): never => {
      if (outer?.aborted) throw new Aborted("the call was aborted", { cause: outer.reason });
      if (timedOut) {
        throw new RequestTimeout(`${call.method} ${call.path}: no answer within ${timeoutMs} ms`,
          { cause: caught });
      }
      if (caught instanceof APIError || caught instanceof InvalidResponse) throw caught;
      const what = caught instanceof Error ? `${caught.name}: ${caught.message}` : String(caught);
      throw new TransportError(`${call.method} ${call.path}: ${what}`, { cause: caught });
    };
    try {
      let response: Response;
      try {
        response = await this.fetcher(url, {
          method: call.method, headers, body, signal: controller.signal, redirect: "error",
        });
      } catch (caught) {
        return fail(caught);
      }
      try {
        if (!response.ok) {
          throw errorFromResponse(response.status, response.headers, await response.text());
        }
        const data = await read(call, response);
        return { status: response.status, headers: response.headers, data: data as T };
      } catch (caught) {
        return fail(caught);
      }
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener("abort", onAbort);
    }
  }
}

async function read(call: Call, response: Response): Promise<unknown> {
  const accept = call.accept ?? "json";
  if (accept === "none" || response.status === 204) {
    await response.arrayBuffer();
    return undefined;
  }
  if (accept === "bytes") return new Uint8Array(await response.arrayBuffer());
  const text = await response.text();
  if (accept === "text") return text;
  try {
    return JSON.parse(text);
  } catch {
    throw new InvalidResponse(`${call.method} ${call.path}: expected JSON, got ` +
      `${response.headers.get("content-type") ?? "no content type"}`);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new Aborted("the call was aborted", { cause: signal.reason }));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(new Aborted("the call was aborted", { cause: signal?.reason }));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** One path segment: everything outside the unreserved set encoded, `.`/`..` too. */
export function segment(value: string, name: string): string {
  if (typeof value !== "string" || !value) {
    throw new TypeError(`${name} must be a non-empty string`);
  }
  if (value === "." || value === "..") return value.replace(/\./g, "%2E");
  return encodeURIComponent(value).replace(/[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}
