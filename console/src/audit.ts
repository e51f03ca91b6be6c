// The Audit page: rows filtered by operation, accessor and time; the chain and checkpoint
// verification; the rows as CSV.
import { getJson, message } from "./api";
import { announce, clear, download, errorBox, field, h, table, when } from "./dom";

interface Row { seq: number | null; accessed_at: string; operation: string; accessor_type: string;
                accessor_id: string; agent_id: string | null; success: boolean; detail: string;
                pointer_id: string | null; event_id: string | null; request_id: string | null }
interface Page { items: Row[]; next_cursor: string | null }
interface Verification { ok: boolean; checked: number; unsealed: number; problem: string | null;
                         checkpoints_checked: number; last_checkpoint_seq: number | null;
                         head_seq: number; anchored_seq: number; anchor_problem: string | null }

const MAX_CSV_PAGES = 100;

function iso(local: string): string | undefined {
  if (!local) return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

export function auditPage(main: HTMLElement): void {
  const operation = h("input", { type: "text", autocomplete: "off", placeholder: "e.g. erase" });
  const accessor = h("input", { type: "text", autocomplete: "off", placeholder: "key:…" });
  const since = h("input", { type: "datetime-local" });
  const until = h("input", { type: "datetime-local" });
  const status = h("div", {});
  const rows = h("div", {});
  const filters = () => ({ operation: operation.value.trim() || undefined,
                           accessor_id: accessor.value.trim() || undefined,
                           since: iso(since.value), until: iso(until.value) });
  const form = h("form", { class: "filters", "aria-label": "Audit filters" },
    field("Operation", operation), field("Accessor", accessor),
    field("From (your local time)", since), field("To (your local time)", until),
    h("button", { type: "submit" }, "Apply filters"));
  form.addEventListener("submit", (event) => { event.preventDefault(); void load(filters(), rows); });
  const csv = h("button", { type: "button" }, "Export CSV");
  csv.addEventListener("click", () => { void exportCsv(filters(), csv); });
  const verify = h("button", { type: "button" }, "Verify chain again");
  verify.addEventListener("click", () => { void verifyChain(status); });
  clear(main, h("h1", {}, "Audit"),
    h("section", { class: "card", "aria-labelledby": "chain-heading" },
      h("h2", { id: "chain-heading" }, "Chain and checkpoints"), status, verify),
    form, csv, rows);
  operation.focus();
  void verifyChain(status);
  void load(filters(), rows);
}

async function verifyChain(status: HTMLElement): Promise<void> {
  clear(status, h("progress", { "aria-label": "Verifying the audit chain" }), h("p", {}, "Verifying…"));
  try {
    const v = await getJson<Verification>("v1/audit/verify");
    clear(status,
      h("p", { class: v.ok ? "verdict ok" : "verdict bad", id: "chain-verdict" },
        v.ok ? "Audit chain verified" : "Audit chain NOT verified"),
      h("p", {}, v.ok
        ? `${v.checked} sealed rows recomputed in order; ${v.checkpoints_checked} signed checkpoints ` +
          `in your bucket agree (the newest covers row ${v.last_checkpoint_seq ?? "—"}); ${v.unsealed} rows not sealed yet.`
        : v.problem ?? "The server named no problem."),
      v.anchor_problem ? h("p", { class: "error" }, v.anchor_problem) : null);
  } catch (error) {
    clear(status, errorBox(message(error)));
  }
}

async function load(query: Record<string, string | undefined>, box: HTMLElement,
                    cursor?: string, rows: Row[] = []): Promise<void> {
  if (!cursor) clear(box, h("p", { role: "status" }, "Loading…"));
  let page: Page;
  try {
    page = await getJson<Page>("v1/audit", { ...query, cursor, limit: "200" });
  } catch (error) {
    clear(box, errorBox(message(error)));
    return;
  }
  const all = [...rows, ...page.items];
  const more = page.next_cursor
    ? h("button", { type: "button", onclick: () => { void load(query, box, page.next_cursor ?? undefined, all); } },
        "Load more rows")
    : null;
  clear(box, table(`Audit rows (${all.length} shown, oldest first)`,
    ["Seq", "Time", "Operation", "Accessor", "Success", "Detail"],
    all.map((r) => [String(r.seq ?? "—"), when(r.accessed_at), r.operation,
                    r.agent_id ? `${r.accessor_id} (${r.agent_id})` : r.accessor_id,
                    r.success ? "yes" : "no", r.detail])), more);
  announce(`${all.length} audit rows shown.`);
}

const COLUMNS: (keyof Row)[] = ["seq", "accessed_at", "operation", "accessor_type", "accessor_id",
                                "agent_id", "success", "detail", "pointer_id", "event_id", "request_id"];

function cell(value: unknown): string {
  const text = value === null || value === undefined ? "" : String(value);
  // Quoted always; a leading = + - @ is defused so a spreadsheet does not run it as a formula.
  const safe = /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
  return `"${safe.replace(/"/g, '""')}"`;
}

async function exportCsv(query: Record<string, string | undefined>, button: HTMLButtonElement): Promise<void> {
  button.disabled = true;
  const lines = [COLUMNS.join(",")];
  let cursor: string | undefined;
  try {
    for (let i = 0; i < MAX_CSV_PAGES; i += 1) {
      button.textContent = `Exporting CSV… (${lines.length - 1} rows)`;
      const page: Page = await getJson<Page>("v1/audit", { ...query, cursor, limit: "1000" });
      for (const row of page.items) lines.push(COLUMNS.map((c) => cell(row[c])).join(","));
      if (!page.next_cursor) break;
      cursor = page.next_cursor;
    }
    download("memplane-audit.csv", "text/csv", lines.join("\r\n") + "\r\n");
    announce(`CSV of ${lines.length - 1} audit rows saved.`);
  } catch (error) {
    announce(message(error));
  } finally {
    button.disabled = false;
    button.textContent = "Export CSV";
  }
}
