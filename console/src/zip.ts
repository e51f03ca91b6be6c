// Reads one file (manifest.json) out of an export archive in the browser with the TypeScript
// SDK's reader (sdks/typescript/src/zip.ts); its refusals in the console's words.
import { readZipEntry, ZipEntryError } from "../../sdks/typescript/src/zip.js";
import type { Bytes } from "./bytes";

export async function readFile(archive: Bytes, name: string): Promise<Bytes> {
  try {
    return new Uint8Array(await readZipEntry(archive, name));
  } catch (error) {
    if (!(error instanceof ZipEntryError)) throw error;
    if (error.problem === "not-zip") throw new Error("The download is not a ZIP archive.");
    if (error.problem === "method") {
      throw new Error(`The archive's ${name} uses compression method ${String(error.method)}.`);
    }
    throw new Error(`The archive holds no ${name}.`);
  }
}
