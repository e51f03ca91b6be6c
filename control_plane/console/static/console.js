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

  // src/verify.ts
  var encoder = new TextEncoder();
  function canonical(value) {
    if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
    if (value !== null && typeof value === "object") {
      const keys = Object.keys(value).sort(byCodePoint);
      return "{" + keys.map((key) => JSON.stringify(key) + ":" + canonical(value[key])).join(",") + "}";
    }
    return JSON.stringify(value);
  }
  function byCodePoint(a, b) {
    const x = Array.from(a, (c) => c.codePointAt(0) ?? 0);
    const y = Array.from(b, (c) => c.codePointAt(0) ?? 0);
    for (let i = 0; i < Math.min(x.length, y.length); i += 1) {
      if (x[i] !== y[i]) return x[i] - y[i];
    }
    return x.length - y.length;
  }
  function base64(text) {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) {
      throw new Error("not base64");
    }
    return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  }
  function hex(bytes) {
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }
  async function sha256(...parts) {
    const size = parts.reduce((n, p) => n + p.length, 0);
    const all = new Uint8Array(size);
    let at = 0;
    for (const part of parts) {
      all.set(part, at);
      at += part.length;
    }
    return new Uint8Array(await crypto.subtle.digest("SHA-256", all));
  }
  function equal(a, b) {
    return a.length === b.length && a.every((byte, i) => byte === b[i]);
  }
  var SPKI_PREFIX = Uint8Array.from([48, 42, 48, 5, 6, 3, 43, 101, 112, 3, 33, 0]);
  function rawPublicKey(pem) {
    const body = pem.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, "").replace(/\s+/g, "");
    const der = base64(body);
    if (der.length !== 44 || !equal(der.slice(0, 12), SPKI_PREFIX)) {
      throw new Error("the server's receipt key is not an Ed25519 public key");
    }
    return der.slice(12);
  }
  async function ed25519(raw, signature, message2) {
    const key = await crypto.subtle.importKey("raw", raw, { name: "Ed25519" }, false, ["verify"]);
    return await crypto.subtle.verify({ name: "Ed25519" }, key, signature, message2);
  }
  async function verifyReceipt(text, pem, verifierKey) {
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
    if (receipt.format !== "memplane-erasure-receipt/1") {
      return fail("The receipt does not name the format memplane-erasure-receipt/1.");
    }
    let raw;
    try {
      raw = rawPublicKey(pem);
    } catch (error) {
      return fail(error instanceof Error ? error.message : String(error));
    }
    const keyId = hex(await sha256(raw)).slice(0, 16);
    if (receipt.key_id !== keyId) {
      return fail(`The receipt names signing key ${String(receipt.key_id)}, not the server's key ${keyId}.`);
    }
    let signature;
    try {
      signature = base64(String(receipt.signature ?? ""));
    } catch {
      return fail("The receipt's signature is not base64.");
    }
    const unsigned = Object.fromEntries(Object.entries(receipt).filter(([k]) => k !== "signature"));
    let signed = false;
    try {
      signed = await ed25519(raw, signature, encoder.encode(canonical(unsigned)));
    } catch {
      signed = false;
    }
    if (!signed) {
      return fail("The Ed25519 signature does not match the receipt: it was changed after signing, or signed by another key.");
    }
    lines.push(`Ed25519 signature by key ${keyId} checked in this browser.`);
    if (!("transparency" in receipt)) {
      lines.push("The receipt carries no transparency-log proofs (issued before receipts did).");
      return { ok: true, lines };
    }
    try {
      lines.push(await checkTransparency(receipt, raw, verifierKey));
    } catch (error) {
      return fail(error instanceof Error ? error.message : String(error));
    }
    return { ok: true, lines };
  }
  var DASH = "—";
  async function noteKeyId(name, raw) {
    return (await sha256(encoder.encode(name + "\n"), Uint8Array.of(1), raw)).slice(0, 4);
  }
  async function verifyNote(note, name, raw) {
    const cut = note.lastIndexOf("\n\n");
    if (cut < 0 || !note.endsWith("\n")) throw new Error("The receipt's checkpoint is not a signed note.");
    const text = note.slice(0, cut + 1);
    const id = await noteKeyId(name, raw);
    let checked = 0;
    for (const line of note.slice(cut + 2).split("\n").slice(0, -1)) {
      const fields = line.split(" ");
      if (fields.length !== 3 || fields[0] !== DASH) throw new Error("The checkpoint's signature lines are malformed.");
      if (fields[1] !== name) continue;
      const blob = base64(fields[2]);
      if (!equal(blob.slice(0, 4), id)) continue;
      if (!await ed25519(raw, blob.slice(4), encoder.encode(text))) {
        throw new Error(`The checkpoint's signature by ${name} does not verify: it was altered.`);
      }
      checked += 1;
    }
    if (checked === 0) throw new Error(`The checkpoint carries no signature of the log's key ${name}.`);
    return text;
  }
  function verifierName(verifierKey, checkpoint) {
    if (verifierKey) return verifierKey.trim().split("+")[0];
    return checkpoint.split("/")[0] || "memplane";
  }
  async function leafHash(leaf) {
    return await sha256(Uint8Array.of(0), leaf);
  }
  async function nodeHash(left, right) {
    return await sha256(Uint8Array.of(1), left, right);
  }
  async function verifyInclusion(hash, index, size, proof, root) {
    if (index < 0n || index >= size || proof.some((p) => p.length !== 32)) return false;
    let fn = index;
    let sn = size - 1n;
    let r = hash;
    for (const p of proof) {
      if (sn === 0n) return false;
      if ((fn & 1n) === 1n || fn === sn) {
        r = await nodeHash(p, r);
        while ((fn & 1n) === 0n && fn !== 0n) {
          fn >>= 1n;
          sn >>= 1n;
        }
      } else {
        r = await nodeHash(r, p);
      }
      fn >>= 1n;
      sn >>= 1n;
    }
    return sn === 0n && equal(r, root);
  }
  async function checkTransparency(receipt, raw, verifierKey) {
    const block = receipt.transparency;
    if (block === null || typeof block !== "object" || typeof block.checkpoint !== "string") {
      throw new Error("The receipt's transparency block has no checkpoint.");
    }
    const name = verifierName(verifierKey, block.checkpoint);
    const text = await verifyNote(block.checkpoint, name, raw);
    const [origin, sizeText, rootText] = text.split("\n");
    if (!/^(0|[1-9][0-9]{0,19})$/.test(sizeText ?? "")) throw new Error("The checkpoint's tree size is malformed.");
    const size = BigInt(sizeText);
    const root = base64(rootText ?? "");
    if (!origin.endsWith(`/audit/${String(receipt.tenant_id)}`)) {
      throw new Error(`The checkpoint is of the log ${origin}, not of the receipt's tenant.`);
    }
    const job = String(receipt.job_id);
    const proven = [];
    for (const item of block.proofs ?? []) {
      const proof = item;
      if (typeof proof.seq !== "number" || !Number.isInteger(proof.seq) || proof.seq < 1 || typeof proof.leaf !== "string" || !Array.isArray(proof.hashes)) {
        throw new Error("A proof in the receipt is not {seq, leaf, hashes}.");
      }
      const leaf = base64(proof.leaf);
      const hashes = proof.hashes.map((h2) => base64(String(h2)));
      if (!await verifyInclusion(await leafHash(leaf), BigInt(proof.seq - 1), size, hashes, root)) {
        throw new Error(`The inclusion proof of audit row ${proof.seq} does not verify against the checkpoint of ${size} rows.`);
      }
      let row = null;
      try {
        row = JSON.parse(new TextDecoder().decode(leaf));
      } catch {
        row = null;
      }
      const detail = row?.detail;
      if (row === null || row.seq !== proof.seq || typeof detail !== "string" || !(detail === `job ${job}` || detail.startsWith(`job ${job}:`))) {
        throw new Error(`Audit row ${proof.seq}, proven in the log, is not a row of job ${job}.`);
      }
      proven.push(proof.seq);
    }
    if (proven.length === 0) throw new Error("The receipt's transparency block proves no row.");
    const audit = receipt.audit;
    for (const seq of [audit?.first_seq, audit?.last_seq]) {
      if (typeof seq === "number" && !proven.includes(seq)) {
        throw new Error(`Audit row ${seq}, which the receipt names, has no inclusion proof.`);
      }
    }
    return `Audit rows ${proven.join(", ")} of job ${job} proven by RFC 9162 inclusion proofs in checkpoint ${size} of ${origin}, whose signature was checked in this browser.`;
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
    const verdict = await verifyReceipt(text, pem, verifier);
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

  // src/zip.ts
  function u16(data, at) {
    return data.getUint16(at, true);
  }
  function u32(data, at) {
    return data.getUint32(at, true);
  }
  async function readFile(archive, name) {
    const view = new DataView(archive.buffer, archive.byteOffset, archive.byteLength);
    let end = -1;
    for (let at2 = archive.length - 22; at2 >= Math.max(0, archive.length - 65557); at2 -= 1) {
      if (u32(view, at2) === 101010256) {
        end = at2;
        break;
      }
    }
    if (end < 0) throw new Error("The download is not a ZIP archive.");
    let entries = u16(view, end + 10);
    let at = u32(view, end + 16);
    if (entries === 65535 || at === 4294967295) {
      const locator = end - 20;
      if (locator < 0 || u32(view, locator) !== 117853008) throw new Error("The ZIP64 archive has no locator.");
      const record = Number(view.getBigUint64(locator + 8, true));
      entries = Number(view.getBigUint64(record + 32, true));
      at = Number(view.getBigUint64(record + 48, true));
    }
    const decoder = new TextDecoder();
    for (let i = 0; i < entries; i += 1) {
      if (u32(view, at) !== 33639248) throw new Error("The ZIP's directory is damaged.");
      const method = u16(view, at + 10);
      let compressed = u32(view, at + 20);
      const nameLength = u16(view, at + 28);
      const extraLength = u16(view, at + 30);
      const commentLength = u16(view, at + 32);
      let local = u32(view, at + 42);
      const entryName = decoder.decode(archive.subarray(at + 46, at + 46 + nameLength));
      if (entryName === name) {
        let extra = at + 46 + nameLength;
        const stop = extra + extraLength;
        while (extra + 4 <= stop) {
          const tag = u16(view, extra);
          const length = u16(view, extra + 2);
          if (tag === 1) {
            let field2 = extra + 4;
            if (u32(view, at + 24) === 4294967295) field2 += 8;
            if (compressed === 4294967295) {
              compressed = Number(view.getBigUint64(field2, true));
              field2 += 8;
            }
            if (local === 4294967295) local = Number(view.getBigUint64(field2, true));
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
