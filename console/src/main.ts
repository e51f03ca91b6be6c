// The compliance console: sign in with a compliance or admin key, then the pages.
import { ApiError, getJson, message, signIn, signOut } from "./api";
import { auditPage } from "./audit";
import { announce, clear, errorBox, field, h } from "./dom";
import { holdsPage } from "./holds";
import { OFFICER_ROLES, refusal, session, type Who } from "./state";
import { storagePage } from "./storage";
import { subjectPage } from "./subject";

const PAGES: [string, (main: HTMLElement) => void][] = [
  ["Subject", subjectPage], ["Audit", auditPage], ["Legal holds", holdsPage], ["Storage", storagePage],
];

function mainArea(): HTMLElement {
  return document.getElementById("main") as HTMLElement;
}

function signInPage(notice?: string): void {
  session.who = null;
  clear(document.getElementById("nav") as HTMLElement);
  clear(document.getElementById("who") as HTMLElement);
  const key = h("input", { type: "password", autocomplete: "off", spellcheck: "false", required: true });
  const feedback = h("div", {}, notice ? h("p", { role: "status" }, notice) : null);
  const form = h("form", { class: "signin", "aria-label": "Sign in" },
    field("API key", key, "A key with role compliance or admin. It is kept in this tab's memory only " +
      "and forgotten when you sign out or close the tab."),
    h("button", { type: "submit" }, "Sign in"), feedback);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void trySignIn(key, feedback);
  });
  clear(mainArea(), h("h1", {}, "Sign in"), form);
  key.focus();
}

async function trySignIn(input: HTMLInputElement, feedback: HTMLElement): Promise<void> {
  const value = input.value.trim();
  input.value = "";
  if (!value) {
    clear(feedback, errorBox("Paste an API key with role compliance or admin, then press Sign in."));
    input.focus();
    return;
  }
  signIn(value);
  let who: Who;
  try {
    who = await getJson<Who>("v1/whoami");
  } catch (error) {
    signOut();
    clear(feedback, errorBox(error instanceof ApiError && error.status === 401
      ? "That API key is not valid (unknown or revoked); check it and try again."
      : message(error)));
    input.focus();
    return;
  }
  if (!OFFICER_ROLES.includes(who.role)) {
    signOut();
    clear(feedback, errorBox(refusal(who.role)));
    input.focus();
    return;
  }
  session.who = who;
  showApp();
}

function showApp(): void {
  const who = session.who as Who;
  const nav = document.getElementById("nav") as HTMLElement;
  const buttons = PAGES.map(([name, page]) => {
    const button = h("button", { type: "button" }, name);
    button.addEventListener("click", () => open(name, page, buttons));
    return button;
  });
  const out = h("button", { type: "button", class: "secondary" }, "Sign out");
  out.addEventListener("click", () => {
    signOut();
    signInPage("Signed out; the key was forgotten.");
    announce("Signed out.");
  });
  clear(nav, h("ul", {}, ...buttons.map((b) => h("li", {}, b)), h("li", {}, out)));
  clear(document.getElementById("who") as HTMLElement,
    `Signed in with a ${who.role} key (key:${who.key_id.slice(0, 8)}…) of tenant ${who.tenant_id}.`);
  open(PAGES[0][0], PAGES[0][1], buttons);
}

function open(name: string, page: (main: HTMLElement) => void, buttons: HTMLButtonElement[]): void {
  for (const button of buttons) {
    if (button.textContent === name) button.setAttribute("aria-current", "page");
    else button.removeAttribute("aria-current");
  }
  document.title = `${name} — memplane compliance console`;
  page(mainArea());
  announce(`${name} page.`);
}

document.addEventListener("DOMContentLoaded", () => signInPage());
