// Reads one file (manifest.json) out of an export archive in the browser: the ZIP's central
// directory, then the entry stored or deflated (DecompressionStream "deflate-raw").
import type { Bytes } from "./bytes";

function u16(data: DataView, at: number): number { return data.getUint16(at, true); }
function u32(data: DataView, at: number): number { return data.getUint32(at, true); }

export async function readFile(archive: Bytes, name: string): Promise<Bytes> {
  const view = new DataView(archive.buffer, archive.byteOffset, archive.byteLength);
  let end = -1;
  for (let at = archive.length - 22; at >= Math.max(0, archive.length - 65557); at -= 1) {
    if (u32(view, at) === 0x06054b50) { end = at; break; }
  }
  if (end < 0) throw new Error("The download is not a ZIP archive.");
  let entries = u16(view, end + 10);
  let at = u32(view, end + 16);
  if (entries === 0xffff || at === 0xffffffff) {  // ZIP64: its end record names the directory
    const locator = end - 20;
    if (locator < 0 || u32(view, locator) !== 0x07064b50) throw new Error("The ZIP64 archive has no locator.");
    const record = Number(view.getBigUint64(locator + 8, true));
    entries = Number(view.getBigUint64(record + 32, true));
    at = Number(view.getBigUint64(record + 48, true));
  }
  const decoder = new TextDecoder();
  for (let i = 0; i < entries; i += 1) {
    if (u32(view, at) !== 0x02014b50) throw new Error("The ZIP's directory is damaged.");
    const method = u16(view, at + 10);
    let compressed = u32(view, at + 20);
    const nameLength = u16(view, at + 28);
    const extraLength = u16(view, at + 30);
    const commentLength = u16(view, at + 32);
    let local = u32(view, at + 42);
    const entryName = decoder.decode(archive.subarray(at + 46, at + 46 + nameLength));
    if (entryName === name) {
      // ZIP64 sizes and offsets, when the 32-bit fields are full, are in the extra field.
      let extra = at + 46 + nameLength;
      const stop = extra + extraLength;
      while (extra + 4 <= stop) {
        const tag = u16(view, extra);
        const length = u16(view, extra + 2);
        if (tag === 0x0001) {
          let field = extra + 4;
          if (u32(view, at + 24) === 0xffffffff) field += 8;
          if (compressed === 0xffffffff) { compressed = Number(view.getBigUint64(field, true)); field += 8; }
          if (local === 0xffffffff) local = Number(view.getBigUint64(field, true));
        }
        extra += 4 + length;
      }
      const start = local + 30 + u16(view, local + 26) + u16(view, local + 28);
      const data = archive.slice(start, start + compressed);
      if (method === 0) return data;
      if (method !== 8) throw new Error(`The archive's ${name} uses compression method ${method}.`);
      const stream = new Blob([data]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
      return new Uint8Array(await new Response(stream).arrayBuffer());
    }
    at += 46 + nameLength + extraLength + commentLength;
  }
  throw new Error(`The archive holds no ${name}.`);
}
