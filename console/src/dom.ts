// Small DOM helpers. Text always goes in as text (textContent), never as HTML.

type Child = Node | string | null | undefined | false;
type Attrs = Record<string, string | boolean | number | ((event: Event) => void) | undefined>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === "function") {
      element.addEventListener(name.replace(/^on/, ""), value);
    } else if (value === true) {
      element.setAttribute(name, "");
    } else {
      element.setAttribute(name, String(value));
    }
  }
  append(element, ...children);
  return element;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
}

export function clear(element: Element, ...children: Child[]): void {
  element.replaceChildren();
  append(element, ...children);
}

let ids = 0;
export function uid(stem: string): string {
  ids += 1;
  return `${stem}-${ids}`;
}

// A labelled field: <label for> + <input id>.
export function field(label: string, input: HTMLInputElement | HTMLSelectElement,
                      hint?: string): HTMLDivElement {
  input.id = input.id || uid("field");
  const box = h("div", { class: "field" }, h("label", { for: input.id }, label), input);
  if (hint) {
    const hintId = uid("hint");
    input.setAttribute("aria-describedby", hintId);
    box.appendChild(h("p", { class: "hint", id: hintId }, hint));
  }
  return box;
}

export function table(caption: string, headers: string[], rows: (string | Node)[][]): HTMLElement {
  return h("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": caption },
    h("table", {},
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, ...headers.map((name) => h("th", { scope: "col" }, name)))),
      h("tbody", {}, ...rows.map((row) => h("tr", {}, ...row.map((cell) => h("td", {}, cell)))))));
}

// A line in the page's live region, so screen readers hear what happened.
export function announce(text: string): void {
  const region = document.getElementById("announce");
  if (region) region.textContent = text;
}

export function errorBox(text: string): HTMLParagraphElement {
  return h("p", { class: "error", role: "alert" }, text);
}

export function when(iso: string | null | undefined): string {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC");
}

export function download(name: string, type: string, data: BlobPart): void {
  const link = h("a", { href: URL.createObjectURL(new Blob([data], { type })), download: name,
                        class: "hidden" });
  document.body.appendChild(link);
  link.click();
  setTimeout(() => { URL.revokeObjectURL(link.href); link.remove(); }, 1000);
}
