/**
 * The errors the SDK throws, all in one tree (the Python SDK's, memplane/_exceptions.py):
 *
 *     MemplaneError
 *     ├── TransportError               no HTTP answer: connection refused, reset, DNS …
 *     │   └── RequestTimeout           no answer within timeoutMs
 *     ├── Aborted                      the caller's AbortSignal fired
 *     ├── InvalidResponse              a success answer the SDK cannot read
 *     └── APIError                     the server answered with an error status
 *         ├── BadRequest (ValidationError)  400, 422
 *         │   └── SensitiveData        422 "sensitive_data" (kinds, where)
 *         ├── Unauthorized             401
 *         ├── Forbidden                403
 *         ├── NotFound                 404
 *         ├── Conflict                 409
 *         │   ├── HashMismatch         409 "hash_mismatch"
 *         │   └── SubjectErasureInProgress  409 "subject_erasure_in_progress"
 *         ├── PayloadTooLarge          413
 *         ├── RateLimited              429 (retryAfter, seconds)
 *         ├── StorageUnavailable       503 (retryAfter, seconds)
 *         └── ServerError              any other 5xx
 *
 * An error status without its own class (405, 410 …) throws a plain APIError.
 */

const MAX_TEXT_DETAIL = 1000;

export class MemplaneError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The request got no HTTP answer; `cause` is what fetch threw. */
export class TransportError extends MemplaneError {}

/** No answer within the client's `timeoutMs` (each attempt has its own). */
export class RequestTimeout extends TransportError {}

/** The caller's AbortSignal fired; `cause` is the signal's reason. */
export class Aborted extends MemplaneError {}

/** The server answered with success, but not with what the contract promises. */
export class InvalidResponse extends MemplaneError {}

export interface APIErrorInit {
  code?: string | null;
  detail?: string | null;
  body?: Record<string, unknown>;
  headers?: Headers;
}

/**
 * The server answered with an error status: `code` is its `error` field, `detail` its
 * sentence, `body` the whole JSON object and `requestId` the X-Request-ID header.
 */
export class APIError extends MemplaneError {
  readonly status: number;
  readonly code: string | null;
  readonly detail: string | null;
  readonly body: Record<string, unknown>;
  readonly headers: Headers;
  readonly requestId: string | null;

  constructor(status: number, init: APIErrorInit = {}) {
    const headers = init.headers ?? new Headers();
    const code = init.code ?? null;
    const detail = init.detail ?? null;
    const requestId = headers.get("x-request-id");
    let message = `${status}`;
    if (code) message += ` ${code}`;
    if (detail) message += `: ${detail}`;
    if (requestId) message += ` (request id ${requestId})`;
    super(message);
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.body = init.body ?? {};
    this.headers = headers;
    this.requestId = requestId;
  }
}

/** 400 or 422: the server refused the input; `detail` says what to fix. */
export class BadRequest extends APIError {}
export { BadRequest as ValidationError };

/** 422 `sensitive_data`: the DLP policy refused the write; `kinds` and `where`, never the value. */
export class SensitiveData extends BadRequest {
  readonly kinds: string[];
  readonly where: string[];
  constructor(status: number, init: APIErrorInit = {}) {
    super(status, init);
    this.kinds = strings(this.body["kinds"]);
    this.where = strings(this.body["where"]);
  }
}

/** 401: the API key is missing, unknown or revoked. */
export class Unauthorized extends APIError {}
/** 403: the key's role lacks the right for this call. */
export class Forbidden extends APIError {}
/** 404: no such object in this tenant (another tenant's ids included). */
export class NotFound extends APIError {}
/** 409: the request conflicts with the stored state. */
export class Conflict extends APIError {}

/** 409 `hash_mismatch`: the bucket's content no longer matches the recorded hash. */
export class HashMismatch extends Conflict {
  readonly pointerId: string | null;
  readonly expectedSha256: string | null;
  readonly actualSha256: string | null;
  /** `missing`, `mismatch` or `undecryptable`. */
  readonly reason: string | null;
  constructor(status: number, init: APIErrorInit = {}) {
    super(status, init);
    this.pointerId = optionalString(this.body["pointer_id"]);
    this.expectedSha256 = optionalString(this.body["expected_sha256"]);
    this.actualSha256 = optionalString(this.body["actual_sha256"]);
    this.reason = optionalString(this.body["reason"]);
  }
}

/** 409 `subject_erasure_in_progress`: the user's data is being erased; writes wait. */
export class SubjectErasureInProgress extends Conflict {}
/** 413: the value is larger than the server accepts. */
export class PayloadTooLarge extends APIError {}

/** 429: too many requests or jobs; `retryAfter` in seconds, or null. */
export class RateLimited extends APIError {
  readonly retryAfter: number | null;
  constructor(status: number, init: APIErrorInit = {}) {
    super(status, init);
    this.retryAfter = parseRetryAfter(this.headers.get("retry-after"));
  }
}

/** 503: the tenant's bucket is unreachable or busy; `retryAfter` in seconds, or null. */
export class StorageUnavailable extends APIError {
  readonly retryAfter: number | null;
  constructor(status: number, init: APIErrorInit = {}) {
    super(status, init);
    this.retryAfter = parseRetryAfter(this.headers.get("retry-after"));
  }
}

/** A 5xx other than 503: the server failed. */
export class ServerError extends APIError {}

type ErrorClass = new (status: number, init?: APIErrorInit) => APIError;

const BY_STATUS: Record<number, ErrorClass> = {
  400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
  413: PayloadTooLarge, 422: BadRequest, 429: RateLimited, 503: StorageUnavailable,
};

// A code refines the status's class only when it names a subclass of it.
const BY_CODE: Record<string, ErrorClass> = {
  hash_mismatch: HashMismatch,
  subject_erasure_in_progress: SubjectErasureInProgress,
  sensitive_data: SensitiveData,
};

/** The error for an error response, its body already read as text. */
export function errorFromResponse(status: number, headers: Headers, text: string): APIError {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    data = undefined;
  }
  let cls: ErrorClass = BY_STATUS[status] ?? (status >= 500 ? ServerError : APIError);
  if (!isObject(data)) {
    const detail = text.trim().slice(0, MAX_TEXT_DETAIL) || null;
    return new cls(status, { detail, headers });
  }
  const code = optionalString(data["error"]);
  const raw = data["detail"];
  const detail = raw === undefined || raw === null ? null
    : typeof raw === "string" ? raw : JSON.stringify(raw);
  const refined = code ? BY_CODE[code] : undefined;
  if (refined && refined.prototype instanceof cls) cls = refined;
  return new cls(status, { code, detail, body: data, headers });
}

/** Retry-After is delay-seconds or an HTTP date (RFC 9110 §10.2.3); seconds, or null. */
export function parseRetryAfter(value: string | null): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text);
  const when = Date.parse(text);
  if (Number.isNaN(when)) return null;
  return Math.max(0, (when - Date.now()) / 1000);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function optionalString(value: unknown): string | null {
  return value === undefined || value === null ? null : String(value);
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.map(String) : [];
}
