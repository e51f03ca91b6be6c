/**
 * Reads one file out of a ZIP archive (an export's manifest.json) with nothing but Web
 * platform APIs: the central directory finds it, DecompressionStream inflates it.
 */
import { InvalidResponse } from "./errors.js";

/** Why the entry could not be read: not a ZIP, no such entry, or a compression it does not read. */
export type ZipProblem = "not-zip" | "missing" | "method";

/** An InvalidResponse that also says which of the ZipProblems it is (and the method, if that). */
export class ZipEntryError extends InvalidResponse {
  readonly problem: ZipProblem;
  readonly method: number | null;

  constructor(message: string, problem: ZipProblem, method: number | null = null) {
    super(message);
    this.problem = problem;
    this.method = method;
  }
}

const EOCD = 0x06054b50;
const EOCD64_LOCATOR = 0x07064b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;

export async function readZipEntry(zip: Uint8Array, name: string): Promise<Uint8Array> {
  const view = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
  let end = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 0xffff); i--) {
    if (view.getUint32(i, true) === EOCD) {
      end = i;
      break;
    }
  }
  if (end < 0) throw new ZipEntryError("the export is not a ZIP archive (no end record)",
    "not-zip");
  let count = view.getUint16(end + 10, true);
  let offset = view.getUint32(end + 16, true);
  if ((count === 0xffff || offset === 0xffffffff) && end >= 20 &&
      view.getUint32(end - 20, true) === EOCD64_LOCATOR) {
    const record = Number(view.getBigUint64(end - 12, true));
    count = Number(view.getBigUint64(record + 32, true));
    offset = Number(view.getBigUint64(record + 48, true));
  }
  const wanted = new TextEncoder().encode(name);
  for (let i = 0; i < count; i++) {
    if (view.getUint32(offset, true) !== CENTRAL) break;
    const method = view.getUint16(offset + 10, true);
    let compressed = view.getUint32(offset + 20, true);
    const nameLength = view.getUint16(offset + 28, true);
    const extraLength = view.getUint16(offset + 30, true);
    const commentLength = view.getUint16(offset + 32, true);
    let local = view.getUint32(offset + 42, true);
    const entryName = zip.subarray(offset + 46, offset + 46 + nameLength);
    if (equal(entryName, wanted)) {
      if (compressed === 0xffffffff || local === 0xffffffff) {
        [compressed, local] = zip64Sizes(view, offset + 46 + nameLength, extraLength,
          compressed, local, view.getUint32(offset + 24, true));
      }
      if (view.getUint32(local, true) !== LOCAL) break;
      const start = local + 30 + view.getUint16(local + 26, true) + view.getUint16(local + 28, true);
      const data = zip.subarray(start, start + compressed);
      if (method === 0) return data;
      if (method === 8) return inflateRaw(data);
      throw new ZipEntryError(`${name} in the export uses ZIP method ${method}`, "method", method);
    }
    offset += 46 + nameLength + extraLength + commentLength;
  }
  throw new ZipEntryError(`the export holds no ${name}`, "missing");
}

function zip64Sizes(view: DataView, at: number, length: number, compressed: number,
                    local: number, uncompressed: number): [number, number] {
  for (let p = at; p + 4 <= at + length;) {
    const id = view.getUint16(p, true);
    const size = view.getUint16(p + 2, true);
    if (id === 0x0001) {
      let q = p + 4;
      if (uncompressed === 0xffffffff) q += 8;
      if (compressed === 0xffffffff) {
        compressed = Number(view.getBigUint64(q, true));
        q += 8;
      }
      if (local === 0xffffffff) local = Number(view.getBigUint64(q, true));
      break;
    }
    p += 4 + size;
  }
  return [compressed, local];
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

async function inflateRaw(data: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([data as BlobPart]).stream()
    .pipeThrough(new DecompressionStream("deflate-raw" as CompressionFormat));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
