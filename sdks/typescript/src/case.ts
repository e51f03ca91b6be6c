/**
 * camelCase out, snake_case in. Answers are converted key by key, never inside what a user
 * stored (a memory's `value`, a document's `metadata`) nor inside signed documents (receipts,
 * manifests), which stay byte for byte what the server signed.
 */

export type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}`
  ? `${Head}${Capitalize<CamelCase<Tail>>}`
  : S;

/** The keys left as they are, with what is under them. */
type Opaque = "value" | "metadata" | "body";

export type Camelize<T> = T extends readonly (infer Item)[]
  ? Camelize<Item>[]
  : T extends object
    ? { [K in keyof T as K extends string ? CamelCase<K> : K]:
        K extends Opaque ? T[K] : Camelize<T[K]> }
    : T;

/** The seed's MemoryPointer names for the fields the API spells otherwise. */
export const POINTER_NAMES = {
  scope: "scopeType",
  content_sha256: "contentHash",
  content_size: "contentSizeBytes",
} as const;

type PointerNames = typeof POINTER_NAMES;

/** A pointer (or an entry) as the seed's MemoryPointer names it. */
export type AsMemoryPointer<T> = {
  [K in keyof T as K extends keyof PointerNames ? PointerNames[K]
    : K extends string ? CamelCase<K> : K]: Camelize<T[K]>
};

const OPAQUE = new Set<string>(["value", "metadata", "body"]);

export function camelName(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

export function snakeName(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** Deep camelCase of an answer's keys, except under `value`, `metadata` and `body`. */
export function camelize<T>(data: T): Camelize<T> {
  return convert(data) as Camelize<T>;
}

function convert(data: unknown): unknown {
  if (Array.isArray(data)) return data.map(convert);
  if (typeof data !== "object" || data === null) return data;
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(data)) {
    out[camelName(name)] = OPAQUE.has(name) ? value : convert(value);
  }
  return out;
}

/** A pointer or an entry with the seed's MemoryPointer field names. */
export function memoryPointer<T extends object>(raw: T): AsMemoryPointer<T> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(raw)) {
    const renamed = (POINTER_NAMES as Record<string, string>)[name];
    out[renamed ?? camelName(name)] = convert(value);
  }
  return out as AsMemoryPointer<T>;
}

/** A request body's camelCase keys in snake_case (one level), undefined ones left out. */
export function snakeBody(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined) out[snakeName(name)] = value;
  }
  return out;
}
