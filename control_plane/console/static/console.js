// memplane compliance console: built from console/src by console/build.mjs; do not edit.
"use strict";
(() => {
  // src/api.ts
  var apiKey = null;
  function signIn(key) {
    apiKey = key;
  }
  function signOut() {
    apiKey = null;
  }
  var ApiError = class extends Error {
    constructor(status, code, detail) {
      super(detail);
      this.status = status;
      this.code = code;
    }
    status;
    code;
  };
  function url(path, query) {
    const target = new URL("../" + path.replace(/^\//, ""), document.baseURI);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== void 0 && value !== "") target.searchParams.set(name, value);
    }
    return target.toString();
  }
  async function request(method, path, options = {}) {
    if (apiKey === null) throw new ApiError(401, "signed_out", "Sign in with an API key first.");
    const headers = { Authorization: `Bearer ${apiKey}` };
    let body;
    if (options.body !== void 0) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(options.body);
    }
    let response;
    try {
      response = await fetch(url(path, options.query), {
        method,
        headers,
        body,
        cache: "no-store",
        credentials: "omit"
      });
    } catch {
      throw new ApiError(0, "unreachable", "The memplane server could not be reached; check the connection and try again.");
    }
    if (!response.ok) {
      let code = "error";
      let detail = `The server answered ${response.status}.`;
      try {
        const problem = await response.json();
        code = problem.error ?? code;
        if (problem.detail) detail = problem.detail;
      } catch {
      }
      throw new ApiError(response.status, code, detail);
    }
    return response;
  }
  async function getJson(path, query) {
    return await (await request("GET", path, { query })).json();
  }
  async function send(method, path, body) {
    return await (await request(method, path, { body })).json();
  }
  async function getText(path) {
    return await (await request("GET", path)).text();
  }
  async function getBytes(path) {
    return new Uint8Array(await (await request("GET", path)).arrayBuffer());
  }
  function message(error) {
    if (error instanceof Error) return error.message;
    return String(error);
  }

  // src/dom.ts
  function h(tag, attrs = {}, ...children) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (value === void 0 || value === false) continue;
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
  function append(parent, ...children) {
    for (const child of children) {
      if (child === null || child === void 0 || child === false) continue;
      parent.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
  }
  function clear(element, ...children) {
    element.replaceChildren();
    append(element, ...children);
  }
  var ids = 0;
  function uid(stem) {
    ids += 1;
    return `${stem}-${ids}`;
  }
  function field(label, input, hint) {
    input.id = input.id || uid("field");
    const box = h("div", { class: "field" }, h("label", { for: input.id }, label), input);
    if (hint) {
      const hintId = uid("hint");
      input.setAttribute("aria-describedby", hintId);
      box.appendChild(h("p", { class: "hint", id: hintId }, hint));
    }
    return box;
  }
  function table(caption, headers, rows) {
    return h(
      "div",
      { class: "table-wrap", tabindex: 0, role: "region", "aria-label": caption },
      h(
        "table",
        {},
        h("caption", {}, caption),
        h("thead", {}, h("tr", {}, ...headers.map((name) => h("th", { scope: "col" }, name)))),
        h("tbody", {}, ...rows.map((row) => h("tr", {}, ...row.map((cell2) => h("td", {}, cell2)))))
      )
    );
  }
  function announce(text) {
    const region = document.getElementById("announce");
    if (region) region.textContent = text;
  }
  function errorBox(text) {
    return h("p", { class: "error", role: "alert" }, text);
  }
  function when(iso2) {
    if (!iso2) return "—";
    const date = new Date(iso2);
    return Number.isNaN(date.getTime()) ? iso2 : date.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC");
  }
  function download(name, type, data) {
    const link = h("a", {
      href: URL.createObjectURL(new Blob([data], { type })),
      download: name,
      class: "hidden"
    });
    document.body.appendChild(link);
    link.click();
    setTimeout(() => {
      URL.revokeObjectURL(link.href);
      link.remove();
    }, 1e3);
  }

  // src/audit.ts
  var MAX_CSV_PAGES = 100;
  function iso(local) {
    if (!local) return void 0;
    const date = new Date(local);
    return Number.isNaN(date.getTime()) ? void 0 : date.toISOString();
  }
  function auditPage(main) {
    const operation = h("input", { type: "text", autocomplete: "off", placeholder: "e.g. erase" });
    const accessor = h("input", { type: "text", autocomplete: "off", placeholder: "key:…" });
    const since = h("input", { type: "datetime-local" });
    const until = h("input", { type: "datetime-local" });
    const status = h("div", {});
    const rows = h("div", {});
    const filters = () => ({
      operation: operation.value.trim() || void 0,
      accessor_id: accessor.value.trim() || void 0,
      since: iso(since.value),
      until: iso(until.value)
    });
    const form = h(
      "form",
      { class: "filters", "aria-label": "Audit filters" },
      field("Operation", operation),
      field("Accessor", accessor),
      field("From (your local time)", since),
      field("To (your local time)", until),
      h("button", { type: "submit" }, "Apply filters")
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      void load(filters(), rows);
    });
    const csv = h("button", { type: "button" }, "Export CSV");
    csv.addEventListener("click", () => {
      void exportCsv(filters(), csv);
    });
    const verify = h("button", { type: "button" }, "Verify chain again");
    verify.addEventListener("click", () => {
      void verifyChain(status);
    });
    clear(
      main,
      h("h1", {}, "Audit"),
      h(
        "section",
        { class: "card", "aria-labelledby": "chain-heading" },
        h("h2", { id: "chain-heading" }, "Chain and checkpoints"),
        status,
        verify
      ),
      form,
      csv,
      rows
    );
    operation.focus();
    void verifyChain(status);
    void load(filters(), rows);
  }
  async function verifyChain(status) {
    clear(status, h("progress", { "aria-label": "Verifying the audit chain" }), h("p", {}, "Verifying…"));
    try {
      const v = await getJson("v1/audit/verify");
      clear(
        status,
        h(
          "p",
          { class: v.ok ? "verdict ok" : "verdict bad", id: "chain-verdict" },
          v.ok ? "Audit chain verified" : "Audit chain NOT verified"
        ),
        h("p", {}, v.ok ? `${v.checked} sealed rows recomputed in order; ${v.checkpoints_checked} signed checkpoints in your bucket agree (the newest covers row ${v.last_checkpoint_seq ?? "—"}); ${v.unsealed} rows not sealed yet.` : v.problem ?? "The server named no problem."),
        v.anchor_problem ? h("p", { class: "error" }, v.anchor_problem) : null
      );
    } catch (error) {
      clear(status, errorBox(message(error)));
    }
  }
  async function load(query, box, cursor, rows = []) {
    if (!cursor) clear(box, h("p", { role: "status" }, "Loading…"));
    let page;
    try {
      page = await getJson("v1/audit", { ...query, cursor, limit: "200" });
    } catch (error) {
      clear(box, errorBox(message(error)));
      return;
    }
    const all = [...rows, ...page.items];
    const more = page.next_cursor ? h(
      "button",
      { type: "button", onclick: () => {
        void load(query, box, page.next_cursor ?? void 0, all);
      } },
      "Load more rows"
    ) : null;
    clear(box, table(
      `Audit rows (${all.length} shown, oldest first)`,
      ["Seq", "Time", "Operation", "Accessor", "Success", "Detail"],
      all.map((r) => [
        String(r.seq ?? "—"),
        when(r.accessed_at),
        r.operation,
        r.agent_id ? `${r.accessor_id} (${r.agent_id})` : r.accessor_id,
        r.success ? "yes" : "no",
        r.detail
      ])
    ), more);
    announce(`${all.length} audit rows shown.`);
  }
  var COLUMNS = [
    "seq",
    "accessed_at",
    "operation",
    "accessor_type",
    "accessor_id",
    "agent_id",
    "success",
    "detail",
    "pointer_id",
    "event_id",
    "request_id"
  ];
  function cell(value) {
    const text = value === null || value === void 0 ? "" : String(value);
    const safe = /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
    return `"${safe.replace(/"/g, '""')}"`;
  }
  async function exportCsv(query, button) {
    button.disabled = true;
    const lines = [COLUMNS.join(",")];
    let cursor;
    try {
      for (let i = 0; i < MAX_CSV_PAGES; i += 1) {
        button.textContent = `Exporting CSV… (${lines.length - 1} rows)`;
        const page = await getJson("v1/audit", { ...query, cursor, limit: "1000" });
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

  // src/holds.ts
  var REASONS = ["litigation", "regulatory", "investigation", "audit", "other"];
  function holdsPage(main) {
    const user = h("input", { type: "text", autocomplete: "off", spellcheck: "false", required: true });
    const reason = h("select", {}, ...REASONS.map((r) => h("option", { value: r }, r)));
    const feedback = h("div", {});
    const list = h("div", {});
    const form = h(
      "form",
      { class: "inline-form", "aria-label": "Place a legal hold" },
      field("User id to hold", user),
      field(
        "Reason",
        reason,
        "A category only; keep case details out of memplane."
      ),
      h("button", { type: "submit" }, "Place hold")
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      void place(user.value.trim(), reason.value, feedback, list);
    });
    clear(
      main,
      h("h1", {}, "Legal holds"),
      h("p", {}, "A held subject cannot be erased, and retention passes over their data, until the hold is lifted."),
      form,
      feedback,
      list
    );
    user.focus();
    void refresh(list, feedback);
  }
  async function place(userId, reason, feedback, list) {
    if (!userId) {
      clear(feedback, errorBox("Type the user id to hold."));
      return;
    }
    try {
      const hold = await send("POST", "v1/legal-holds", { user_id: userId, reason });
      clear(feedback, h("p", { class: "ok", role: "status" }, `Hold ${hold.id} placed on ${userId} (${reason}).`));
    } catch (error) {
      clear(feedback, errorBox(message(error)));
      return;
    }
    await refresh(list, feedback);
  }
  async function lift(id, feedback, list) {
    try {
      await send("DELETE", `v1/legal-holds/${encodeURIComponent(id)}`);
      clear(feedback, h("p", { class: "ok", role: "status" }, `Hold ${id} lifted.`));
    } catch (error) {
      clear(feedback, errorBox(message(error)));
      return;
    }
    await refresh(list, feedback);
  }
  async function refresh(list, feedback) {
    let holds;
    try {
      holds = (await getJson("v1/legal-holds")).items;
    } catch (error) {
      clear(list, errorBox(message(error)));
      return;
    }
    const what = (hold) => hold.target === "tenant" ? "the whole tenant" : hold.user_id ?? (hold.scope ? `${hold.scope}/${hold.scope_ref ?? "(hashed)"}` : "(lifted: kept as a keyed hash)");
    clear(list, holds.length === 0 ? h("p", {}, "No legal holds.") : table(
      "Legal holds, oldest first",
      ["Hold", "Covers", "Reason", "Placed", "State"],
      holds.map((hold) => [
        hold.id,
        what(hold),
        hold.reason,
        when(hold.created_at),
        hold.active ? h("button", {
          type: "button",
          "aria-label": `Lift hold ${hold.id}`,
          onclick: () => {
            void lift(hold.id, feedback, list);
          }
        }, "Lift") : `lifted ${when(hold.lifted_at)}`
      ])
    ));
    announce(`${holds.filter((x) => x.active).length} active legal holds.`);
  }

  // src/state.ts
  var session = { who: null };
  var OFFICER_ROLES = ["compliance", "admin"];
  function refusal(role) {
    if (role === "agent") {
      return "This is an agent key. The compliance console needs a key with role compliance or admin; agent keys read and write memories but cannot export, erase or read the audit log.";
    }
    if (role === "user") {
      return "This is a data subject's own key (role user). The compliance console needs a key with role compliance or admin.";
    }
    return `This key has role ${role}. The compliance console needs a key with role compliance or admin.`;
  }

  // src/storage.ts
  function storagePage(main) {
    const box = h("div", {}, h("p", { role: "status" }, "Loading…"));
    clear(main, h("h1", {}, "Storage"), box);
    void load2(box);
  }
  async function health(config) {
    if (session.who?.role !== "admin") return "checked with an admin key only (the probe writes a small object)";
    try {
      const result = await getJson(`v1/storage/configs/${encodeURIComponent(config.storage_config_id)}/health`);
      return result.ok ? `healthy (${Math.round(result.latency_ms)} ms)` : `unhealthy: ${result.problem ?? "no reason given"}`;
    } catch (error) {
      return `not checked: ${message(error)}`;
    }
  }
  async function load2(box) {
    let configs;
    try {
      configs = (await getJson("v1/storage/configs")).items;
    } catch (error) {
      clear(box, errorBox(message(error)));
      return;
    }
    const states = await Promise.all(configs.map(health));
    clear(box, table(
      "Bucket configurations, the default first",
      ["Configuration", "Type", "Bucket", "Region", "Health"],
      configs.map((c, i) => [
        `${c.name ?? c.storage_config_id}${c.is_default ? " (default)" : ""}`,
        c.storage_type,
        c.bucket ?? "—",
        `${c.region ?? c.declared_region ?? "none"}${c.region_verified ? " (reported by the bucket)" : ""}`,
        states[i]
      ])
    ));
  }

  // src/jobs.ts
  function progressBar(label) {
    const bar = h("progress", { "aria-label": label });
    const text = h("p", { class: "progress-text" }, "Queued…");
    const box = h("div", { class: "progress", role: "group", "aria-label": label }, bar, text);
    return {
      box,
      set(line, done = false) {
        text.textContent = line;
        if (done) {
          bar.max = 1;
          bar.value = 1;
        }
      }
    };
  }
  function describe(job) {
    const steps = Object.keys(job.progress ?? {}).length;
    return `${job.kind === "erase" ? "Erasure" : "Export"} ${job.state}` + (job.state === "running" ? ` (${steps} step${steps === 1 ? "" : "s"} recorded)` : "") + "…";
  }
  async function follow(job, bar) {
    let current = job;
    let delay = 250;
    while (current.state === "queued" || current.state === "running") {
      bar.set(describe(current));
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 1.5, 2e3);
      current = await getJson(`v1/jobs/${encodeURIComponent(current.id)}`);
    }
    const line = current.state === "completed" ? "Done." : `The job ${current.state}: ${current.error ?? "no reason given"}.`;
    bar.set(line, true);
    announce(line);
    return current;
  }

  // ../sdks/typescript/src/encoding.ts
  function utf8(text) {
    return new TextEncoder().encode(text);
  }
  function concat(...parts) {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const part of parts) {
      out.set(part, at);
      at += part.length;
    }
    return out;
  }
  function equalBytes(a, b) {
    if (a.length !== b.length) return false;
    let diff = 0;
    for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
    return diff === 0;
  }
  var B64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
  function fromBase64(text) {
    if (typeof text !== "string" || !B64.test(text)) return null;
    const binary = atob(text);
    const out = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
    return out;
  }
  function toHex(bytes) {
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }
  async function sha256(data) {
    return new Uint8Array(await crypto.subtle.digest("SHA-256", data));
  }
  function ed25519FromPem(pem) {
    const body = pem.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, "").replace(/\s+/g, "");
    const der = fromBase64(body);
    const prefix = [48, 42, 48, 5, 6, 3, 43, 101, 112, 3, 33, 0];
    if (!der || der.length !== 44 || !prefix.every((b, i) => der[i] === b)) {
      throw new TypeError("the public key is not an Ed25519 key in PEM (SubjectPublicKeyInfo)");
    }
    return der.subarray(12);
  }
  async function ed25519Verify(raw, signature, message2) {
    if (signature.length !== 64 || raw.length !== 32) return false;
    const key = await crypto.subtle.importKey(
      "raw",
      raw,
      { name: "Ed25519" },
      false,
      ["verify"]
    );
    return crypto.subtle.verify(
      { name: "Ed25519" },
      key,
      signature,
      message2
    );
  }

  // ../sdks/typescript/src/receipts.ts
  var RECEIPT_FORMAT = "memplane-erasure-receipt/1";
  function canonicalReceipt(receipt) {
    const unsigned = {};
    for (const [name, value] of Object.entries(receipt)) {
      if (name !== "signature") unsigned[name] = value;
    }
    return utf8(canonicalJson(unsigned));
  }
  function canonicalJson(value) {
    if (value === null) return "null";
    if (typeof value === "boolean") return value ? "true" : "false";
    if (typeof value === "number") return pythonNumber(value);
    if (typeof value === "string") return JSON.stringify(value);
    if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
    if (typeof value === "object") {
      const names = Object.keys(value).filter((k) => value[k] !== void 0);
      names.sort(byCodePoint);
      return `{${names.map((k) => `${JSON.stringify(k)}:${canonicalJson(
        value[k]
      )}`).join(",")}}`;
    }
    throw new TypeError(`a signed document holds no ${typeof value}`);
  }
  function byCodePoint(a, b) {
    const x = Array.from(a, (c) => c.codePointAt(0) ?? 0);
    const y = Array.from(b, (c) => c.codePointAt(0) ?? 0);
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      if (x[i] !== y[i]) return (x[i] ?? 0) - (y[i] ?? 0);
    }
    return x.length - y.length;
  }
  function pythonNumber(value) {
    if (!Number.isFinite(value)) throw new TypeError("a signed document holds no NaN or Infinity");
    if (Number.isInteger(value) && Math.abs(value) < 2 ** 53) return String(value);
    const [mantissa = "", exp = "0"] = value.toExponential().split("e");
    const exponent = Number(exp);
    if (exponent < -4 || exponent >= 16) {
      const e = Math.abs(exponent).toString().padStart(2, "0");
      return `${mantissa}e${exponent < 0 ? "-" : "+"}${e}`;
    }
    const text = String(value);
    return text.includes(".") ? text : `${text}.0`;
  }
  async function publicKeyId(publicKeyPem) {
    return toHex(await sha256(ed25519FromPem(publicKeyPem))).slice(0, 16);
  }
  async function verifyReceipt(receipt, publicKeyPem) {
    return verifySigned(receipt, publicKeyPem, RECEIPT_FORMAT);
  }
  async function verifySigned(body, publicKeyPem, format) {
    const raw = ed25519FromPem(publicKeyPem);
    const signature = body["signature"];
    if (typeof signature !== "string" || body["format"] !== format) return false;
    if (body["key_id"] !== toHex(await sha256(raw)).slice(0, 16)) return false;
    const bytes = fromBase64(signature);
    if (!bytes) return false;
    let message2;
    try {
      message2 = canonicalReceipt(body);
    } catch {
      return false;
    }
    return ed25519Verify(raw, bytes, message2);
  }

  // ../sdks/typescript/src/tlog.ts
  var HASH_SIZE = 32;
  var DASH = "—";
  var ED25519 = 1;
  var MAX_NOTE_BYTES = 1 << 20;
  var MAX_SIGNATURES = 100;
  var CONTROL = /[\x00-\x09\x0b-\x1f]/;
  var NoteError = class extends Error {
    problem;
    constructor(message2, problem = "format") {
      super(message2);
      this.name = "NoteError";
      this.problem = problem;
    }
  };
  async function leafHash(leaf) {
    return sha256(concat(new Uint8Array([0]), leaf));
  }
  async function nodeHash(left, right) {
    return sha256(concat(new Uint8Array([1]), left, right));
  }
  async function verifyInclusion(leaf, index, size, proof, root) {
    if (!(index >= 0 && index < size) || [leaf, ...proof].some((p) => p.length !== HASH_SIZE)) {
      return false;
    }
    let fn = BigInt(index);
    let sn = BigInt(size - 1);
    let r = leaf;
    for (const p of proof) {
      if (sn === 0n) return false;
      if (fn & 1n || fn === sn) {
        r = await nodeHash(p, r);
        while (!(fn & 1n) && fn) {
          fn >>= 1n;
          sn >>= 1n;
        }
      } else {
        r = await nodeHash(r, p);
      }
      fn >>= 1n;
      sn >>= 1n;
    }
    return sn === 0n && equalBytes(r, root);
  }
  function checkName(name) {
    if (!name || /\s/.test(name) || name.includes("+")) {
      throw new NoteError("a key name must be non-empty, without spaces or '+'", "key");
    }
  }
  async function keyId(verifier) {
    checkName(verifier.name);
    const digest = await sha256(concat(
      utf8(`${verifier.name}
`),
      new Uint8Array([verifier.kind]),
      verifier.publicKey
    ));
    return digest.subarray(0, 4);
  }
  async function parseVerifier(text) {
    const trimmed = text.trim();
    const first = trimmed.indexOf("+");
    const second = first < 0 ? -1 : trimmed.indexOf("+", first + 1);
    if (first < 0 || second < 0) throw new NoteError(
      "a verifier key reads <name>+<key id>+<base64 key>",
      "key"
    );
    const name = trimmed.slice(0, first);
    const hexId = trimmed.slice(first + 1, second);
    const raw = fromBase64(trimmed.slice(second + 1));
    if (!raw || !/^[0-9a-fA-F]{8}$/.test(hexId)) {
      throw new NoteError("the verifier key's id or key is not hex / base64", "key");
    }
    if (raw.length !== 33 || raw[0] !== ED25519 && raw[0] !== 4) {
      throw new NoteError("the verifier key is not an Ed25519 key", "key");
    }
    const verifier = { name, publicKey: raw.subarray(1), kind: raw[0] };
    if (toHex(await keyId(verifier)) !== hexId.toLowerCase()) {
      throw new NoteError("the verifier key's id does not match its name and key", "key");
    }
    return verifier;
  }
  function verifierFromPem(name, publicKeyPem) {
    return { name, publicKey: ed25519FromPem(publicKeyPem), kind: ED25519 };
  }
  function parseNote(note) {
    if (utf8(note).length > MAX_NOTE_BYTES) throw new NoteError("the note is too long");
    if (CONTROL.test(note)) throw new NoteError("a note holds no ASCII control character but newline");
    const cut = note.lastIndexOf("\n\n");
    if (cut < 0 || !note.endsWith("\n")) {
      throw new NoteError("a note is text, a blank line, then signature lines");
    }
    const text = note.slice(0, cut + 1);
    const lines = note.slice(cut + 2).split("\n").slice(0, -1);
    if (lines.length > MAX_SIGNATURES) throw new NoteError(
      "the note carries too many signatures",
      "lines"
    );
    const signatures = lines.map((line) => {
      const fields = line.split(" ");
      if (fields.length !== 3 || fields[0] !== DASH) {
        throw new NoteError("a signature line reads '— <name> <base64>'", "lines");
      }
      checkName(fields[1]);
      const blob = fromBase64(fields[2]);
      if (!blob) throw new NoteError("a signature is not base64", "lines");
      if (blob.length < 5) throw new NoteError("a signature is too short", "lines");
      return { name: fields[1], keyId: blob.subarray(0, 4), payload: blob.subarray(4) };
    });
    if (!signatures.length) throw new NoteError("the note carries no signature", "unsigned");
    return { text, signatures };
  }
  async function openNote(note, verifier) {
    const parsed = parseNote(note);
    const id = await keyId(verifier);
    const mine = parsed.signatures.filter((s) => s.name === verifier.name && equalBytes(s.keyId, id));
    if (!mine.length) throw new NoteError(
      `the note carries no signature of ${verifier.name}`,
      "unsigned"
    );
    for (const s of mine) {
      if (!await ed25519Verify(verifier.publicKey, s.payload, utf8(parsed.text))) {
        throw new NoteError(`the signature of ${verifier.name} does not verify`, "forged");
      }
    }
    return parsed.text;
  }
  function parseCheckpoint(text) {
    const lines = text.split("\n");
    if (lines.length < 4 || lines[lines.length - 1] !== "" || !lines[0]) {
      throw new NoteError(
        "a checkpoint reads its origin, size and root hash, one a line",
        "checkpoint"
      );
    }
    if (lines.slice(0, -1).includes("")) throw new NoteError(
      "a checkpoint holds no empty line",
      "checkpoint"
    );
    const [origin, size, encoded] = lines;
    if (!/^(0|[1-9][0-9]{0,19})$/.test(size) || BigInt(size) > 2n ** 64n - 1n) {
      throw new NoteError("a checkpoint's size is a decimal number below 2^64", "checkpoint");
    }
    if (BigInt(size) > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new NoteError(
        "a checkpoint's size is beyond what this verifier counts (2^53)",
        "checkpoint"
      );
    }
    const root = fromBase64(encoded);
    if (!root) throw new NoteError("a checkpoint's root hash is not base64", "checkpoint");
    if (root.length !== HASH_SIZE) throw new NoteError(
      "a checkpoint's root hash is not 32 bytes",
      "checkpoint"
    );
    return { origin, size: Number(size), root, extensions: lines.slice(3, -1) };
  }
  async function openCheckpoint(note, verifier) {
    const key = typeof verifier === "string" ? await parseVerifier(verifier) : verifier;
    return parseCheckpoint(await openNote(note, key));
  }

  // ../sdks/typescript/src/transparency.ts
  var TransparencyError = class extends Error {
    check;
    /** The audit row the failed check is about, when it is about one. */
    seq;
    /** The checkpoint's origin and size, once its signature verified. */
    origin;
    treeSize;
    /** Why the checkpoint was refused, when it was. */
    note;
    constructor(message2, check = "block", detail = {}) {
      super(message2);
      this.name = "TransparencyError";
      this.check = check;
      this.seq = detail.seq ?? null;
      this.origin = detail.origin ?? null;
      this.treeSize = detail.treeSize ?? null;
      this.note = detail.note ?? null;
    }
  };
  async function verifyTransparency(document2, verifierKey) {
    const verifier = typeof verifierKey === "string" ? await parseVerifier(verifierKey) : verifierKey;
    const block = document2["transparency"];
    if (typeof block !== "object" || block === null || Array.isArray(block)) {
      throw new TransparencyError("the document carries no transparency proofs");
    }
    const { checkpoint: note, proofs } = block;
    let checkpoint;
    try {
      checkpoint = await openCheckpoint(String(note), verifier);
    } catch (error) {
      if (!(error instanceof NoteError)) throw error;
      throw new TransparencyError(
        `its checkpoint does not carry a valid signature of the log's key ${verifier.name} (${error.message}): it was altered or signed by another key`,
        "checkpoint",
        { note: error }
      );
    }
    const tenant = document2["tenant_id"];
    const job = document2["job_id"];
    if (!checkpoint.origin.endsWith(`/audit/${String(tenant)}`)) {
      throw new TransparencyError(`its checkpoint is of the log ${checkpoint.origin}, not of the document's tenant ${String(tenant)}`, "tenant", { origin: checkpoint.origin });
    }
    const proven = [];
    for (const item of Array.isArray(proofs) ? proofs : []) {
      const { seq, leaf, hashes } = proofItem(item);
      if (!await verifyInclusion(
        await leafHash(leaf),
        seq - 1,
        checkpoint.size,
        hashes,
        checkpoint.root
      )) {
        throw new TransparencyError(
          `the inclusion proof of row ${seq} does not verify against the checkpoint of ${checkpoint.size} rows: the row or its proof was altered`,
          "inclusion",
          { seq, treeSize: checkpoint.size }
        );
      }
      let row;
      try {
        row = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(leaf));
      } catch {
        row = null;
      }
      const fields = typeof row === "object" && row !== null ? row : null;
      const detail = fields?.["detail"];
      if (!fields || fields["seq"] !== seq || typeof detail !== "string" || !(detail === `job ${String(job)}` || detail.startsWith(`job ${String(job)}:`))) {
        throw new TransparencyError(
          `row ${seq}, proven in the log, is not a row of job ${String(job)}`,
          "job",
          { seq }
        );
      }
      proven.push(seq);
    }
    if (!proven.length) throw new TransparencyError(
      "the document's transparency block proves no row",
      "empty"
    );
    const audit = document2["audit"];
    if (typeof audit === "object" && audit !== null) {
      for (const name of ["first_seq", "last_seq"]) {
        const seq = audit[name];
        if (seq !== void 0 && seq !== null && !proven.includes(seq)) {
          throw new TransparencyError(`row ${String(seq)}, which the receipt names, has no inclusion proof`, "named", { seq });
        }
      }
    }
    return { origin: checkpoint.origin, treeSize: checkpoint.size, rows: proven };
  }
  function proofItem(item) {
    const bad = () => new TransparencyError(
      "a proof in the document is not {seq, leaf, hashes} in base64",
      "proof"
    );
    if (typeof item !== "object" || item === null) throw bad();
    const { seq, leaf, hashes } = item;
    const leafBytes = typeof leaf === "string" ? fromBase64(leaf) : null;
    if (!leafBytes || !Array.isArray(hashes)) throw bad();
    const hashBytes = hashes.map((h2) => typeof h2 === "string" ? fromBase64(h2) : null);
    if (hashBytes.some((h2) => h2 === null)) throw bad();
    if (typeof seq !== "number" || !Number.isInteger(seq) || seq < 1) {
      throw new TransparencyError("a proof in the document names no row", "proof");
    }
    return { seq, leaf: leafBytes, hashes: hashBytes };
  }

  // src/verify.ts
  async function verifyReceipt2(text, pem, verifierKey) {
    const lines = [];
    const fail = (why) => ({ ok: false, lines: [...lines, why] });
    let receipt;
    try {
      const parsed = JSON.parse(text);
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        return fail("The receipt is not a JSON object.");
      }
      receipt = parsed;
    } catch {
      return fail("The receipt is not valid JSON: it was altered in transit or in storage.");
    }
    if (receipt.format !== RECEIPT_FORMAT) {
      return fail("The receipt does not name the format memplane-erasure-receipt/1.");
    }
    try {
      ed25519FromPem(pem);
    } catch {
      return fail("the server's receipt key is not an Ed25519 public key");
    }
    const keyId2 = await publicKeyId(pem);
    if (receipt.key_id !== keyId2) {
      return fail(`The receipt names signing key ${String(receipt.key_id)}, not the server's key ${keyId2}.`);
    }
    if (fromBase64(String(receipt.signature ?? "")) === null) {
      return fail("The receipt's signature is not base64.");
    }
    let signed = false;
    try {
      signed = await verifyReceipt({ ...receipt, signature: String(receipt.signature ?? "") }, pem);
    } catch {
      signed = false;
    }
    if (!signed) {
      return fail("The Ed25519 signature does not match the receipt: it was changed after signing, or signed by another key.");
    }
    lines.push(`Ed25519 signature by key ${keyId2} checked in this browser.`);
    if (!("transparency" in receipt)) {
      lines.push("The receipt carries no transparency-log proofs (issued before receipts did).");
      return { ok: true, lines };
    }
    try {
      lines.push(await checkTransparency(receipt, pem, verifierKey));
    } catch (error) {
      return fail(error instanceof Error ? error.message : String(error));
    }
    return { ok: true, lines };
  }
  function verifierName(verifierKey, checkpoint) {
    if (verifierKey) return verifierKey.trim().split("+")[0];
    return checkpoint.split("/")[0] || "memplane";
  }
  function noteRefusal(note, name) {
    switch (note?.problem) {
      case "unsigned":
        return `The checkpoint carries no signature of the log's key ${name}.`;
      case "forged":
        return `The checkpoint's signature by ${name} does not verify: it was altered.`;
      case "lines":
      case "key":
        return "The checkpoint's signature lines are malformed.";
      case "checkpoint":
        return "The checkpoint's tree size is malformed.";
      default:
        return "The receipt's checkpoint is not a signed note.";
    }
  }
  function refusal2(error, name, job) {
    const seq = String(error.seq);
    switch (error.check) {
      case "checkpoint":
        return noteRefusal(error.note, name);
      case "tenant":
        return `The checkpoint is of the log ${String(error.origin)}, not of the receipt's tenant.`;
      case "proof":
        return "A proof in the receipt is not {seq, leaf, hashes}.";
      case "inclusion":
        return `The inclusion proof of audit row ${seq} does not verify against the checkpoint of ${String(error.treeSize)} rows.`;
      case "job":
        return `Audit row ${seq}, proven in the log, is not a row of job ${job}.`;
      case "empty":
        return "The receipt's transparency block proves no row.";
      case "named":
        return `Audit row ${seq}, which the receipt names, has no inclusion proof.`;
      default:
        return "The receipt's transparency block has no checkpoint.";
    }
  }
  async function checkTransparency(receipt, pem, verifierKey) {
    const block = receipt.transparency;
    if (block === null || typeof block !== "object" || typeof block.checkpoint !== "string") {
      throw new Error("The receipt's transparency block has no checkpoint.");
    }
    const name = verifierName(verifierKey, block.checkpoint);
    const job = String(receipt.job_id);
    let proven;
    try {
      proven = await verifyTransparency(receipt, verifierFromPem(name, pem));
    } catch (error) {
      if (error instanceof TransparencyError) throw new Error(refusal2(error, name, job));
      if (error instanceof NoteError) throw new Error(noteRefusal(error, name));
      throw error;
    }
    return `Audit rows ${proven.rows.join(", ")} of job ${job} proven by RFC 9162 inclusion proofs in checkpoint ${proven.treeSize} of ${proven.origin}, whose signature was checked in this browser.`;
  }

  // src/erasure.ts
  function erasureSection(userId, summary) {
    const out = h("div", {});
    const section = h(
      "section",
      { "aria-labelledby": "erasure-heading", class: "card" },
      h("h2", { id: "erasure-heading" }, "Erasure")
    );
    if (summary.holds.length > 0) {
      const hold = summary.holds[0];
      section.append(h(
        "p",
        { class: "error", role: "note" },
        `This subject is under legal hold ${hold.id} (${hold.reason}); it cannot be erased until a compliance officer lifts the hold on the Legal holds page.`
      ));
    }
    const plan = h("button", { type: "button" }, "Plan again (dry run)");
    plan.addEventListener("click", () => {
      void dryRun(userId, summary, out, plan, true);
    });
    section.append(h("p", {}, "Erasure deletes every memory, entry, event and object of the subject (GDPR Art. 17) and ends with a signed receipt. Its plan comes first: a dry run, which deletes nothing, counts what it would delete."), plan, out);
    return [section, dryRun(userId, summary, out, plan, false)];
  }
  async function dryRun(userId, summary, out, plan, focus) {
    plan.disabled = true;
    const bar = progressBar("Dry run progress");
    clear(out, bar.box);
    let job;
    let configs = [];
    try {
      job = await follow(await send(
        "POST",
        `v1/subjects/${encodeURIComponent(userId)}/erase`,
        { dry_run: true }
      ), bar);
      configs = (await getJson("v1/storage/configs")).items;
    } catch (error) {
      out.appendChild(errorBox(message(error)));
      plan.disabled = false;
      return;
    }
    plan.disabled = false;
    if (job.state !== "completed" || !job.result) return;
    const r = job.result;
    const byScope = r.pointers_by_scope ?? {};
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
        ["Keys", String(r.keys ?? "")]
      ]),
      table(
        "Buckets the erasure walks",
        ["Configuration", "Type", "Bucket", "Region"],
        configs.map((c) => [
          `${c.name ?? c.storage_config_id}${c.is_default ? " (default)" : ""}`,
          c.storage_type,
          c.bucket ?? "—",
          c.region ?? "—"
        ])
      ),
      h("p", {}, String(r.note ?? ""))
    );
    if (focus) document.getElementById("plan-heading")?.focus();
    if (summary.holds.length > 0) {
      out.append(h("p", {}, "No Erase button: the subject is under legal hold."));
      return;
    }
    const confirm = h("input", { type: "text", autocomplete: "off", spellcheck: "false" });
    const erase = h("button", { type: "button", class: "danger" }, "Erase");
    const result = h("div", {});
    erase.addEventListener("click", () => {
      void eraseNow(userId, confirm, erase, result);
    });
    out.append(field(
      "Type the user id to confirm",
      confirm,
      `Erasure cannot be undone. Type ${userId} exactly.`
    ), erase, result);
  }
  async function eraseNow(userId, confirm, erase, result) {
    if (confirm.value !== userId) {
      clear(result, errorBox("The user id you typed does not match the subject; type it exactly to erase."));
      confirm.focus();
      return;
    }
    erase.disabled = true;
    confirm.disabled = true;
    const bar = progressBar("Erasure progress");
    clear(result, bar.box);
    let job;
    try {
      job = await follow(await send(
        "POST",
        `v1/subjects/${encodeURIComponent(userId)}/erase`,
        { dry_run: false }
      ), bar);
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
      const now = await getJson(`v1/subjects/${encodeURIComponent(userId)}`);
      after.textContent = `After the erasure, memplane holds ${now.total} items about ${userId}.`;
    } catch (error) {
      after.textContent = message(error);
    }
  }
  async function showReceipt(receiptId, box, userId) {
    clear(box, h("p", { role: "status" }, "Fetching and verifying the receipt…"));
    let text;
    let pem;
    let verifier = null;
    try {
      text = await getText(`v1/receipts/${encodeURIComponent(receiptId)}`);
      pem = await getText("v1/receipts/public-key");
      try {
        verifier = await getText("v1/audit/verifier-key");
      } catch {
        verifier = null;
      }
    } catch (error) {
      clear(box, errorBox(message(error)));
      return;
    }
    const verdict = await verifyReceipt2(text, pem, verifier);
    let receipt = {};
    try {
      receipt = JSON.parse(text);
    } catch {
      receipt = {};
    }
    const counts = receipt.counts ?? {};
    const save = h("button", { type: "button" }, "Download receipt");
    save.addEventListener("click", () => download(`receipt-${receiptId}.json`, "application/json", text));
    const verdictLine = h(
      "p",
      {
        class: verdict.ok ? "verdict ok" : "verdict bad",
        role: "status",
        id: "receipt-verdict",
        tabindex: -1
      },
      verdict.ok ? "Receipt verified" : "Receipt NOT verified"
    );
    clear(
      box,
      h("h3", {}, `Erasure receipt ${receiptId}`),
      verdictLine,
      h("ul", { class: "checks" }, ...verdict.lines.map((line) => h("li", {}, line))),
      h(
        "dl",
        { class: "facts" },
        h("dt", {}, "Subject"),
        h("dd", {}, `${userId} (the receipt names it only as a salted hash)`),
        h("dt", {}, "Finished"),
        h("dd", {}, when(String(receipt.finished_at ?? ""))),
        h("dt", {}, "Signing key"),
        h("dd", {}, String(receipt.key_id ?? "—"))
      ),
      table(
        "Deleted, as the receipt states",
        ["What", "Count"],
        Object.entries(counts).map(([k, v]) => [k, String(v)])
      ),
      save,
      h("details", {}, h("summary", {}, "The receipt as signed (JSON)"), h("pre", { tabindex: 0 }, text))
    );
    verdictLine.focus();
    announce(verdict.ok ? "Receipt verified" : "Receipt NOT verified");
  }

  // ../sdks/typescript/src/errors.ts
  var MemplaneError = class extends Error {
    constructor(message2, options) {
      super(message2, options);
      this.name = new.target.name;
    }
  };
  var InvalidResponse = class extends MemplaneError {
  };

  // ../sdks/typescript/src/zip.ts
  var ZipEntryError = class extends InvalidResponse {
    problem;
    method;
    constructor(message2, problem, method = null) {
      super(message2);
      this.problem = problem;
      this.method = method;
    }
  };
  var EOCD = 101010256;
  var EOCD64_LOCATOR = 117853008;
  var CENTRAL = 33639248;
  var LOCAL = 67324752;
  async function readZipEntry(zip, name) {
    const view = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
    let end = -1;
    for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 65535); i--) {
      if (view.getUint32(i, true) === EOCD) {
        end = i;
        break;
      }
    }
    if (end < 0) throw new ZipEntryError(
      "the export is not a ZIP archive (no end record)",
      "not-zip"
    );
    let count = view.getUint16(end + 10, true);
    let offset = view.getUint32(end + 16, true);
    if ((count === 65535 || offset === 4294967295) && end >= 20 && view.getUint32(end - 20, true) === EOCD64_LOCATOR) {
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
        if (compressed === 4294967295 || local === 4294967295) {
          [compressed, local] = zip64Sizes(
            view,
            offset + 46 + nameLength,
            extraLength,
            compressed,
            local,
            view.getUint32(offset + 24, true)
          );
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
  function zip64Sizes(view, at, length, compressed, local, uncompressed) {
    for (let p = at; p + 4 <= at + length; ) {
      const id = view.getUint16(p, true);
      const size = view.getUint16(p + 2, true);
      if (id === 1) {
        let q = p + 4;
        if (uncompressed === 4294967295) q += 8;
        if (compressed === 4294967295) {
          compressed = Number(view.getBigUint64(q, true));
          q += 8;
        }
        if (local === 4294967295) local = Number(view.getBigUint64(q, true));
        break;
      }
      p += 4 + size;
    }
    return [compressed, local];
  }
  function equal(a, b) {
    return a.length === b.length && a.every((byte, i) => byte === b[i]);
  }
  async function inflateRaw(data) {
    const stream = new Blob([data]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  // src/zip.ts
  async function readFile(archive, name) {
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

  // src/export.ts
  function exportSection(userId, planned) {
    const out = h("div", {});
    const start = h("button", { type: "button" }, "Start export");
    start.addEventListener("click", () => {
      void run(userId, out, start, planned);
    });
    return h(
      "section",
      { "aria-labelledby": "export-heading", class: "card" },
      h("h2", { id: "export-heading" }, "Export"),
      h("p", {}, "A sealed archive of everything stored about the subject (GDPR Art. 15 and 20), written to your bucket; download it here once it is built."),
      start,
      out
    );
  }
  async function run(userId, out, start, planned) {
    start.disabled = true;
    const bar = progressBar("Export progress");
    clear(out, bar.box);
    bar.set("Waiting for the erasure plan (a dry run) to finish…");
    let job;
    try {
      await planned;
      job = await follow(await send(
        "POST",
        `v1/subjects/${encodeURIComponent(userId)}/export`,
        { format: "json" }
      ), bar);
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
    save.addEventListener("click", () => {
      void fetchArchive(job, manifestBox);
    });
    out.append(
      h("p", {}, `Archive ready: ${String(result.size ?? "?")} bytes, SHA-256 ${String(result.sha256 ?? "?")}, kept until ${when(String(result.expires_at ?? ""))}.`),
      save,
      manifestBox
    );
    save.focus();
  }
  async function sha256Hex(data) {
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
    return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
  }
  async function fetchArchive(job, box) {
    clear(box, h("p", { role: "status" }, "Downloading…"));
    let bytes;
    let manifest;
    try {
      bytes = await getBytes(`v1/exports/${encodeURIComponent(job.id)}/download`);
      manifest = JSON.parse(new TextDecoder().decode(await readFile(bytes, "manifest.json")));
    } catch (error) {
      clear(box, errorBox(message(error)));
      return;
    }
    download(`export-${job.id}.zip`, "application/zip", bytes);
    const digest = await sha256Hex(bytes);
    const recorded = String(job.result?.sha256 ?? "");
    const counts = manifest.counts ?? {};
    clear(
      box,
      h("p", { class: digest === recorded ? "ok" : "error" }, digest === recorded ? `Saved export-${job.id}.zip; its SHA-256 matches the export job's record.` : `Saved export-${job.id}.zip, but its SHA-256 ${digest} differs from the job's record ${recorded}.`),
      h("h3", {}, "Manifest"),
      h(
        "dl",
        { class: "facts" },
        h("dt", {}, "Format"),
        h("dd", {}, manifest.format ?? "—"),
        h("dt", {}, "Created"),
        h("dd", {}, when(manifest.created_at)),
        h("dt", {}, "Selection"),
        h("dd", {}, manifest.selection ?? "—"),
        h("dt", {}, "Items listed"),
        h("dd", {}, String(manifest.items?.length ?? 0)),
        h("dt", {}, "Events listed"),
        h("dd", {}, String(manifest.events?.length ?? 0))
      ),
      table("Manifest counts", ["Count", "Value"], Object.entries(counts).map(([k, v]) => [k, String(v)])),
      h("h3", {}, "Not exported"),
      h("ul", {}, ...(manifest.not_exported ?? []).map((n) => h("li", {}, `${n.what ?? "?"}: ${n.why ?? ""}`)))
    );
    announce("Export downloaded; its manifest is shown.");
  }

  // src/subject.ts
  var LAYERS = [
    ["memories", "Memories"],
    ["events", "Events"],
    ["entries", "Entries"],
    ["conversations", "Conversations"],
    ["knowledge", "Knowledge"],
    ["embeddings", "Embeddings"]
  ];
  function subjectPage(main) {
    const input = h("input", {
      type: "text",
      name: "user_id",
      autocomplete: "off",
      required: true,
      spellcheck: "false",
      maxlength: 256
    });
    const results = h("div", { id: "subject-results" });
    const form = h(
      "form",
      { class: "inline-form", "aria-label": "Look up a data subject" },
      field("User id", input, "The data subject's user id, exactly as your agents store it."),
      h("button", { type: "submit" }, "Look up")
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      void lookUp(input.value.trim(), results);
    });
    clear(main, h("h1", {}, "Subject"), form, results);
    input.focus();
  }
  async function lookUp(userId, results) {
    if (!userId) {
      clear(results, errorBox("Type the data subject's user id, then press Look up."));
      return;
    }
    clear(results, h("p", { role: "status" }, "Looking up…"));
    let summary;
    try {
      summary = await getJson(`v1/subjects/${encodeURIComponent(userId)}`);
    } catch (error) {
      clear(results, errorBox(message(error)));
      return;
    }
    const heading = h("h2", { tabindex: -1 }, `What memplane holds about ${userId}`);
    const layers = table(
      `Holdings of ${userId} by layer`,
      ["Layer", "Count"],
      LAYERS.map(([key, label]) => [label, String(summary.layers[key] ?? 0)])
    );
    const holds = summary.holds.length === 0 ? h("p", {}, "No legal hold covers this subject.") : h("ul", { class: "holds" }, ...summary.holds.map((hold) => h(
      "li",
      {},
      `Legal hold ${hold.id} on ${hold.target === "tenant" ? "the whole tenant" : "this subject"} (${hold.reason}), placed ${when(hold.created_at)}.`
    )));
    const jobs = summary.jobs.length === 0 ? h("p", {}, "No exports or erasures of this subject yet.") : table(
      `Exports and erasures of ${userId}`,
      ["Kind", "State", "Requested", "Receipt or archive"],
      summary.jobs.map((job) => [
        job.kind === "erase" ? "Erasure" : "Export",
        job.state,
        when(job.created_at),
        job.receipt_id ? h("button", { type: "button", class: "link", onclick: () => {
          const box = document.getElementById("past-receipt");
          if (box) void showReceipt(job.receipt_id, box, userId);
        } }, `Show receipt ${job.receipt_id.slice(0, 8)}`) : job.archive_expires_at ? `archive until ${when(job.archive_expires_at)}` : "—"
      ])
    );
    const [erasure, planned] = erasureSection(userId, summary);
    clear(
      results,
      heading,
      h("p", {}, summary.erased ? `An erasure of this user id has completed before; ${summary.total} items are held now.` : `${summary.total} items in all.`),
      layers,
      h("h3", {}, "Legal holds"),
      holds,
      h("h3", {}, "Past exports and erasures"),
      jobs,
      h("div", { id: "past-receipt" }),
      exportSection(userId, planned),
      erasure
    );
    heading.focus();
    announce(`${userId}: ${summary.total} items, ${summary.holds.length} legal holds.`);
  }

  // src/main.ts
  var PAGES = [
    ["Subject", subjectPage],
    ["Audit", auditPage],
    ["Legal holds", holdsPage],
    ["Storage", storagePage]
  ];
  function mainArea() {
    return document.getElementById("main");
  }
  function signInPage(notice) {
    session.who = null;
    clear(document.getElementById("nav"));
    clear(document.getElementById("who"));
    const key = h("input", { type: "password", autocomplete: "off", spellcheck: "false", required: true });
    const feedback = h("div", {}, notice ? h("p", { role: "status" }, notice) : null);
    const form = h(
      "form",
      { class: "signin", "aria-label": "Sign in" },
      field("API key", key, "A key with role compliance or admin. It is kept in this tab's memory only and forgotten when you sign out or close the tab."),
      h("button", { type: "submit" }, "Sign in"),
      feedback
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      void trySignIn(key, feedback);
    });
    clear(mainArea(), h("h1", {}, "Sign in"), form);
    key.focus();
  }
  async function trySignIn(input, feedback) {
    const value = input.value.trim();
    input.value = "";
    if (!value) {
      clear(feedback, errorBox("Paste an API key with role compliance or admin, then press Sign in."));
      input.focus();
      return;
    }
    signIn(value);
    let who;
    try {
      who = await getJson("v1/whoami");
    } catch (error) {
      signOut();
      clear(feedback, errorBox(error instanceof ApiError && error.status === 401 ? "That API key is not valid (unknown or revoked); check it and try again." : message(error)));
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
  function showApp() {
    const who = session.who;
    const nav = document.getElementById("nav");
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
    clear(
      document.getElementById("who"),
      `Signed in with a ${who.role} key (key:${who.key_id.slice(0, 8)}…) of tenant ${who.tenant_id}.`
    );
    open(PAGES[0][0], PAGES[0][1], buttons);
  }
  function open(name, page, buttons) {
    for (const button of buttons) {
      if (button.textContent === name) button.setAttribute("aria-current", "page");
      else button.removeAttribute("aria-current");
    }
    document.title = `${name} — memplane compliance console`;
    page(mainArea());
    announce(`${name} page.`);
  }
  document.addEventListener("DOMContentLoaded", () => signInPage());
})();
