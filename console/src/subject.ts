// The Subject page: look up a user id, see what memplane holds about them by layer, their
// legal holds and past exports and erasures; then export or erase them (export.ts,
// erasure.ts).
import { getJson, message } from "./api";
import { announce, clear, errorBox, field, h, table, when } from "./dom";
import { erasureSection, showReceipt } from "./erasure";
import { exportSection } from "./export";

export interface Summary {
  layers: Record<string, number>;
  total: number;
  holds: { id: string; target: string; reason: string; created_at: string }[];
  erasure_in_progress: string | null;
  erased: boolean;
  jobs: { id: string; kind: string; state: string; dry_run: boolean; created_at: string;
          updated_at: string; receipt_id: string | null; archive_expires_at: string | null }[];
}

const LAYERS: [string, string][] = [
  ["memories", "Memories"], ["events", "Events"], ["entries", "Entries"],
  ["conversations", "Conversations"], ["knowledge", "Knowledge"], ["embeddings", "Embeddings"],
];

export function subjectPage(main: HTMLElement): void {
  const input = h("input", { type: "text", name: "user_id", autocomplete: "off", required: true,
                             spellcheck: "false", maxlength: 256 });
  const results = h("div", { id: "subject-results" });
  const form = h("form", { class: "inline-form", "aria-label": "Look up a data subject" },
    field("User id", input, "The data subject's user id, exactly as your agents store it."),
    h("button", { type: "submit" }, "Look up"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void lookUp(input.value.trim(), results);
  });
  clear(main, h("h1", {}, "Subject"), form, results);
  input.focus();
}

export async function lookUp(userId: string, results: HTMLElement): Promise<void> {
  if (!userId) {
    clear(results, errorBox("Type the data subject's user id, then press Look up."));
    return;
  }
  clear(results, h("p", { role: "status" }, "Looking up…"));
  let summary: Summary;
  try {
    summary = await getJson<Summary>(`v1/subjects/${encodeURIComponent(userId)}`);
  } catch (error) {
    clear(results, errorBox(message(error)));
    return;
  }
  const heading = h("h2", { tabindex: -1 }, `What memplane holds about ${userId}`);
  const layers = table(`Holdings of ${userId} by layer`, ["Layer", "Count"],
    LAYERS.map(([key, label]) => [label, String(summary.layers[key] ?? 0)]));
  const holds = summary.holds.length === 0
    ? h("p", {}, "No legal hold covers this subject.")
    : h("ul", { class: "holds" }, ...summary.holds.map((hold) => h("li", {},
        `Legal hold ${hold.id} on ${hold.target === "tenant" ? "the whole tenant" : "this subject"} ` +
        `(${hold.reason}), placed ${when(hold.created_at)}.`)));
  const jobs = summary.jobs.length === 0
    ? h("p", {}, "No exports or erasures of this subject yet.")
    : table(`Exports and erasures of ${userId}`, ["Kind", "State", "Requested", "Receipt or archive"],
        summary.jobs.map((job) => [
          job.kind === "erase" ? "Erasure" : "Export", job.state, when(job.created_at),
          job.receipt_id
            ? h("button", { type: "button", class: "link", onclick: () => {
                const box = document.getElementById("past-receipt");
                if (box) void showReceipt(job.receipt_id as string, box, userId);
              } }, `Show receipt ${job.receipt_id.slice(0, 8)}`)
            : job.archive_expires_at ? `archive until ${when(job.archive_expires_at)}` : "—",
        ]));
  const [erasure, planned] = erasureSection(userId, summary);
  clear(results,
    heading,
    h("p", {}, summary.erased
      ? `An erasure of this user id has completed before; ${summary.total} items are held now.`
      : `${summary.total} items in all.`),
    layers,
    h("h3", {}, "Legal holds"), holds,
    h("h3", {}, "Past exports and erasures"), jobs,
    h("div", { id: "past-receipt" }),
    exportSection(userId, planned),
    erasure);
  heading.focus();
  announce(`${userId}: ${summary.total} items, ${summary.holds.length} legal holds.`);
}
