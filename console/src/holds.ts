// The Legal holds page: the tenant's holds; place one on a subject with a reason; lift one.
import { getJson, message, send } from "./api";
import { announce, clear, errorBox, field, h, table, when } from "./dom";

interface Hold { id: string; target: string; user_id: string | null; scope: string | null;
                 scope_ref: string | null; reason: string; active: boolean; created_at: string;
                 lifted_at: string | null }

const REASONS = ["litigation", "regulatory", "investigation", "audit", "other"];

export function holdsPage(main: HTMLElement): void {
  const user = h("input", { type: "text", autocomplete: "off", spellcheck: "false", required: true });
  const reason = h("select", {}, ...REASONS.map((r) => h("option", { value: r }, r)));
  const feedback = h("div", {});
  const list = h("div", {});
  const form = h("form", { class: "inline-form", "aria-label": "Place a legal hold" },
    field("User id to hold", user), field("Reason", reason,
      "A category only; keep case details out of memplane."),
    h("button", { type: "submit" }, "Place hold"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void place(user.value.trim(), reason.value, feedback, list);
  });
  clear(main, h("h1", {}, "Legal holds"),
    h("p", {}, "A held subject cannot be erased, and retention passes over their data, until the hold is lifted."),
    form, feedback, list);
  user.focus();
  void refresh(list, feedback);
}

async function place(userId: string, reason: string, feedback: HTMLElement, list: HTMLElement): Promise<void> {
  if (!userId) { clear(feedback, errorBox("Type the user id to hold.")); return; }
  try {
    const hold = await send<Hold>("POST", "v1/legal-holds", { user_id: userId, reason });
    clear(feedback, h("p", { class: "ok", role: "status" }, `Hold ${hold.id} placed on ${userId} (${reason}).`));
  } catch (error) {
    clear(feedback, errorBox(message(error)));
    return;
  }
  await refresh(list, feedback);
}

async function lift(id: string, feedback: HTMLElement, list: HTMLElement): Promise<void> {
  try {
    await send<Hold>("DELETE", `v1/legal-holds/${encodeURIComponent(id)}`);
    clear(feedback, h("p", { class: "ok", role: "status" }, `Hold ${id} lifted.`));
  } catch (error) {
    clear(feedback, errorBox(message(error)));
    return;
  }
  await refresh(list, feedback);
}

async function refresh(list: HTMLElement, feedback: HTMLElement): Promise<void> {
  let holds: Hold[];
  try {
    holds = (await getJson<{ items: Hold[] }>("v1/legal-holds")).items;
  } catch (error) {
    clear(list, errorBox(message(error)));
    return;
  }
  const what = (hold: Hold) => hold.target === "tenant" ? "the whole tenant"
    : hold.user_id ?? (hold.scope ? `${hold.scope}/${hold.scope_ref ?? "(hashed)"}` : "(lifted: kept as a keyed hash)");
  clear(list, holds.length === 0 ? h("p", {}, "No legal holds.") : table("Legal holds, oldest first",
    ["Hold", "Covers", "Reason", "Placed", "State"],
    holds.map((hold) => [hold.id, what(hold), hold.reason, when(hold.created_at),
      hold.active
        ? h("button", { type: "button", "aria-label": `Lift hold ${hold.id}`,
                        onclick: () => { void lift(hold.id, feedback, list); } }, "Lift")
        : `lifted ${when(hold.lifted_at)}`])));
  announce(`${holds.filter((x) => x.active).length} active legal holds.`);
}
