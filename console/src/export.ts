// Export: start the job, follow it, download the archive (fetched with the key, saved from
// memory) and show its manifest.
import type { Bytes } from "./bytes";
import { getBytes, message, send } from "./api";
import { announce, clear, download, errorBox, h, table, when } from "./dom";
import { follow, type Job, progressBar } from "./jobs";
import { readFile } from "./zip";

interface Manifest {
  format?: string; job_id?: string; created_at?: string; selection?: string;
  counts?: Record<string, number>; items?: unknown[]; events?: unknown[];
  not_exported?: { what?: string; why?: string }[];
}

export function exportSection(userId: string, planned: Promise<void>): HTMLElement {
  const out = h("div", {});
  const start = h("button", { type: "button" }, "Start export");
  start.addEventListener("click", () => { void run(userId, out, start, planned); });
  return h("section", { "aria-labelledby": "export-heading", class: "card" },
    h("h2", { id: "export-heading" }, "Export"),
    h("p", {}, "A sealed archive of everything stored about the subject (GDPR Art. 15 and 20), " +
      "written to your bucket; download it here once it is built."),
    start, out);
}

async function run(userId: string, out: HTMLElement, start: HTMLButtonElement,
                   planned: Promise<void>): Promise<void> {
  start.disabled = true;
  const bar = progressBar("Export progress");
  clear(out, bar.box);
  bar.set("Waiting for the erasure plan (a dry run) to finish…");
  let job: Job;
  try {
    await planned;
    job = await follow(await send<Job>("POST", `v1/subjects/${encodeURIComponent(userId)}/export`,
                                       { format: "json" }), bar);
  } catch (error) {
    out.appendChild(errorBox(message(error)));
    start.disabled = false;
    return;
  }
  start.disabled = false;
  if (job.state !== "completed") return;
  const result = job.result ?? {};
  const save = h("button", { type: "button" }, "Download archive");
  const manifestBox = h("div", {});
  save.addEventListener("click", () => { void fetchArchive(job, manifestBox); });
  out.append(
    h("p", {}, `Archive ready: ${String(result.size ?? "?")} bytes, SHA-256 ${String(result.sha256 ?? "?")}, ` +
      `kept until ${when(String(result.expires_at ?? ""))}.`),
    save, manifestBox);
  save.focus();
}

async function sha256Hex(data: Bytes): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function fetchArchive(job: Job, box: HTMLElement): Promise<void> {
  clear(box, h("p", { role: "status" }, "Downloading…"));
  let bytes: Bytes;
  let manifest: Manifest;
  try {
    bytes = await getBytes(`v1/exports/${encodeURIComponent(job.id)}/download`);
    manifest = JSON.parse(new TextDecoder().decode(await readFile(bytes, "manifest.json"))) as Manifest;
  } catch (error) {
    clear(box, errorBox(message(error)));
    return;
  }
  download(`export-${job.id}.zip`, "application/zip", bytes);
  const digest = await sha256Hex(bytes);
  const recorded = String(job.result?.sha256 ?? "");
  const counts = manifest.counts ?? {};
  clear(box,
    h("p", { class: digest === recorded ? "ok" : "error" }, digest === recorded
      ? `Saved export-${job.id}.zip; its SHA-256 matches the export job's record.`
      : `Saved export-${job.id}.zip, but its SHA-256 ${digest} differs from the job's record ${recorded}.`),
    h("h3", {}, "Manifest"),
    h("dl", { class: "facts" },
      h("dt", {}, "Format"), h("dd", {}, manifest.format ?? "—"),
      h("dt", {}, "Created"), h("dd", {}, when(manifest.created_at)),
      h("dt", {}, "Selection"), h("dd", {}, manifest.selection ?? "—"),
      h("dt", {}, "Items listed"), h("dd", {}, String(manifest.items?.length ?? 0)),
      h("dt", {}, "Events listed"), h("dd", {}, String(manifest.events?.length ?? 0))),
    table("Manifest counts", ["Count", "Value"], Object.entries(counts).map(([k, v]) => [k, String(v)])),
    h("h3", {}, "Not exported"),
    h("ul", {}, ...(manifest.not_exported ?? []).map((n) => h("li", {}, `${n.what ?? "?"}: ${n.why ?? ""}`))));
  announce("Export downloaded; its manifest is shown.");
}
