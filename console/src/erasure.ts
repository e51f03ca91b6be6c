// Erasure: the dry-run plan first (what would be deleted, by layer and bucket), then the
// officer retypes the user id and presses Erase; the job is followed and its signed receipt
// shown, verified in this browser (verify.ts). A held subject shows its hold and no Erase.
import { getJson, getText, message, send } from "./api";
import { announce, clear, download, errorBox, field, h, table, when } from "./dom";
import { follow, type Job, progressBar } from "./jobs";
import type { Summary } from "./subject";
import { verifyReceipt } from "./verify";

interface Config { storage_config_id: string; name: string | null; storage_type: string;
                   bucket: string | null; region: string | null; is_default: boolean }

// The section, and the dry run it starts (an export waits for it: the server refuses an
// export while an erasure job of the subject, a dry run included, is queued or running).
export function erasureSection(userId: string, summary: Summary): [HTMLElement, Promise<void>] {
  const out = h("div", {});
  const section = h("section", { "aria-labelledby": "erasure-heading", class: "card" },
    h("h2", { id: "erasure-heading" }, "Erasure"));
  if (summary.holds.length > 0) {
    const hold = summary.holds[0];
    section.append(h("p", { class: "error", role: "note" },
      `This subject is under legal hold ${hold.id} (${hold.reason}); it cannot be erased until a ` +
      "compliance officer lifts the hold on the Legal holds page."));
  }
  const plan = h("button", { type: "button" }, "Plan again (dry run)");
  plan.addEventListener("click", () => { void dryRun(userId, summary, out, plan, true); });
  section.append(h("p", {}, "Erasure deletes every memory, entry, event and object of the subject " +
    "(GDPR Art. 17) and ends with a signed receipt. Its plan comes first: a dry run, which " +
    "deletes nothing, counts what it would delete."), plan, out);
  return [section, dryRun(userId, summary, out, plan, false)];
}

async function dryRun(userId: string, summary: Summary, out: HTMLElement,
                      plan: HTMLButtonElement, focus: boolean): Promise<void> {
  plan.disabled = true;
  const bar = progressBar("Dry run progress");
  clear(out, bar.box);
  let job: Job;
  let configs: Config[] = [];
  try {
    job = await follow(await send<Job>("POST", `v1/subjects/${encodeURIComponent(userId)}/erase`,
                                       { dry_run: true }), bar);
    configs = (await getJson<{ items: Config[] }>("v1/storage/configs")).items;
  } catch (error) {
    out.appendChild(errorBox(message(error)));
    plan.disabled = false;
    return;
  }
  plan.disabled = false;
  if (job.state !== "completed" || !job.result) return;
  const r = job.result;
  const byScope = (r.pointers_by_scope ?? {}) as Record<string, number>;
  out.append(
    h("h3", { tabindex: -1, id: "plan-heading" }, "What the erasure would delete"),
    table("Erasure plan by layer", ["Layer", "Would delete"], [
      ["Pointers (memories and entries)", String(r.pointers ?? 0)],
      ...Object.entries(byScope).map(([scope, n]) => [`… of them in scope ${scope}`, String(n)]),
      ["Events", String(r.events ?? 0)],
      ["Compactor entries", String(r.compactor_entries ?? 0)],
      ["Objects (values and embeddings)", String(r.objects ?? 0)],
      ["Objects under the subject's prefix", String(r.objects_under_subject_prefix ?? 0)],
      ["Older versions under that prefix", String(r.noncurrent_versions_under_subject_prefix ?? 0)],
      ["Keys", String(r.keys ?? "")],
    ]),
    table("Buckets the erasure walks", ["Configuration", "Type", "Bucket", "Region"],
      configs.map((c) => [`${c.name ?? c.storage_config_id}${c.is_default ? " (default)" : ""}`,
                          c.storage_type, c.bucket ?? "—", c.region ?? "—"])),
    h("p", {}, String(r.note ?? "")));
  if (focus) document.getElementById("plan-heading")?.focus();
  if (summary.holds.length > 0) {
    out.append(h("p", {}, "No Erase button: the subject is under legal hold."));
    return;
  }
  const confirm = h("input", { type: "text", autocomplete: "off", spellcheck: "false" });
  const erase = h("button", { type: "button", class: "danger" }, "Erase");
  const result = h("div", {});
  erase.addEventListener("click", () => { void eraseNow(userId, confirm, erase, result); });
  out.append(field("Type the user id to confirm", confirm,
                   `Erasure cannot be undone. Type ${userId} exactly.`), erase, result);
}

async function eraseNow(userId: string, confirm: HTMLInputElement, erase: HTMLButtonElement,
                        result: HTMLElement): Promise<void> {
  if (confirm.value !== userId) {
    clear(result, errorBox("The user id you typed does not match the subject; type it exactly to erase."));
    confirm.focus();
    return;
  }
  erase.disabled = true;
  confirm.disabled = true;
  const bar = progressBar("Erasure progress");
  clear(result, bar.box);
  let job: Job;
  try {
    job = await follow(await send<Job>("POST", `v1/subjects/${encodeURIComponent(userId)}/erase`,
                                       { dry_run: false }), bar);
  } catch (error) {
    result.appendChild(errorBox(message(error)));
    erase.disabled = false;
    confirm.disabled = false;
    return;
  }
  const receiptId = job.result?.receipt_id;
  if (job.state !== "completed" || typeof receiptId !== "string") return;
  const box = h("div", {});
  const after = h("p", {});
  result.append(box, after);
  await showReceipt(receiptId, box, userId);
  try {
    const now = await getJson<Summary>(`v1/subjects/${encodeURIComponent(userId)}`);
    after.textContent = `After the erasure, memplane holds ${now.total} items about ${userId}.`;
  } catch (error) {
    after.textContent = message(error);
  }
}

export async function showReceipt(receiptId: string, box: HTMLElement, userId: string): Promise<void> {
  clear(box, h("p", { role: "status" }, "Fetching and verifying the receipt…"));
  let text: string;
  let pem: string;
  let verifier: string | null = null;
  try {
    text = await getText(`v1/receipts/${encodeURIComponent(receiptId)}`);
    pem = await getText("v1/receipts/public-key");
    try { verifier = await getText("v1/audit/verifier-key"); } catch { verifier = null; }
  } catch (error) {
    clear(box, errorBox(message(error)));
    return;
  }
  const verdict = await verifyReceipt(text, pem, verifier);
  let receipt: Record<string, unknown> = {};
  try { receipt = JSON.parse(text) as Record<string, unknown>; } catch { receipt = {}; }
  const counts = (receipt.counts ?? {}) as Record<string, unknown>;
  const save = h("button", { type: "button" }, "Download receipt");
  save.addEventListener("click", () => download(`receipt-${receiptId}.json`, "application/json", text));
  const verdictLine = h("p", { class: verdict.ok ? "verdict ok" : "verdict bad", role: "status",
                               id: "receipt-verdict", tabindex: -1 },
    verdict.ok ? "Receipt verified" : "Receipt NOT verified");
  clear(box,
    h("h3", {}, `Erasure receipt ${receiptId}`),
    verdictLine,
    h("ul", { class: "checks" }, ...verdict.lines.map((line) => h("li", {}, line))),
    h("dl", { class: "facts" },
      h("dt", {}, "Subject"), h("dd", {}, `${userId} (the receipt names it only as a salted hash)`),
      h("dt", {}, "Finished"), h("dd", {}, when(String(receipt.finished_at ?? ""))),
      h("dt", {}, "Signing key"), h("dd", {}, String(receipt.key_id ?? "—"))),
    table("Deleted, as the receipt states", ["What", "Count"],
      Object.entries(counts).map(([k, v]) => [k, String(v)])),
    save,
    h("details", {}, h("summary", {}, "The receipt as signed (JSON)"), h("pre", { tabindex: 0 }, text)));
  verdictLine.focus();
  announce(verdict.ok ? "Receipt verified" : "Receipt NOT verified");
}
