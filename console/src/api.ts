// Calls to the memplane API on this origin. The API key lives in this module's memory only:
// never in localStorage, sessionStorage, a cookie or the URL; signing out forgets it and a
// reload forgets it too.
import type { Bytes } from "./bytes";

let apiKey: string | null = null;

export function signIn(key: string): void {
  apiKey = key;
}

export function signOut(): void {
  apiKey = null;
}

export function signedIn(): boolean {
  return apiKey !== null;
}

export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, detail: string) {
    super(detail);
  }
}

// The API's root, relative to the page (/console/ → /): it works behind a path prefix too.
function url(path: string, query?: Record<string, string | undefined>): string {
  const target = new URL("../" + path.replace(/^\//, ""), document.baseURI);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== "") target.searchParams.set(name, value);
  }
  return target.toString();
}

export async function request(method: string, path: string, options: {
  body?: unknown; query?: Record<string, string | undefined>;
} = {}): Promise<Response> {
  if (apiKey === null) throw new ApiError(401, "signed_out", "Sign in with an API key first.");
  const headers: Record<string, string> = { Authorization: `Bearer ${apiKey}` };
  let body: string | undefined;
  if (options.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(options.body);
  }
  let response: Response;
  try {
    response = await fetch(url(path, options.query), { method, headers, body, cache: "no-store",
                                                       credentials: "omit" });
  } catch {
    throw new ApiError(0, "unreachable", "The memplane server could not be reached; check the " +
                       "connection and try again.");
  }
  if (!response.ok) {
    let code = "error";
    let detail = `The server answered ${response.status}.`;
    try {
      const problem = await response.json() as { error?: string; detail?: string };
      code = problem.error ?? code;
      if (problem.detail) detail = problem.detail;
    } catch { /* not JSON: keep the status sentence */ }
    throw new ApiError(response.status, code, detail);
  }
  return response;
}

export async function getJson<T>(path: string, query?: Record<string, string | undefined>): Promise<T> {
  return await (await request("GET", path, { query })).json() as T;
}

export async function send<T>(method: string, path: string, body?: unknown): Promise<T> {
  return await (await request(method, path, { body })).json() as T;
}

export async function getText(path: string): Promise<string> {
  return await (await request("GET", path)).text();
}

export async function getBytes(path: string): Promise<Bytes> {
  return new Uint8Array(await (await request("GET", path)).arrayBuffer());
}

export function message(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
