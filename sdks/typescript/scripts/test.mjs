// `npm test`: compiles the tests, starts a real `memplane serve` (SQLite, a temporary data
// dir, a bootstrap admin key, a free port), waits for /readyz, runs `node --test` against it
// and stops it. With MEMPLANE_URL and MEMPLANE_BOOTSTRAP_KEY set, uses that server instead.
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const repo = resolve(pkg, "..", "..");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
rmSync(join(pkg, "build"), { recursive: true, force: true });
execFileSync(process.execPath, [tsc, "-p", "tsconfig.test.json"], { cwd: pkg, stdio: "inherit" });

function freePort() {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
  });
}

async function waitReady(url, child, seconds) {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`memplane serve exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`memplane serve did not answer /readyz within ${seconds} s`);
}

let server = null;
let dataDir = null;
const env = { ...process.env };
if (!env.MEMPLANE_URL) {
  const memplane = env.MEMPLANE_BIN ?? join(repo, ".venv", "bin", "memplane");
  dataDir = mkdtempSync(join(tmpdir(), "memplane-ts-"));
  const port = await freePort();
  env.MEMPLANE_URL = `http://127.0.0.1:${port}`;
  env.MEMPLANE_BOOTSTRAP_KEY = `mp_bootstrap_${randomBytes(16).toString("hex")}`;
  env.MEMPLANE_TEST_DATA_DIR = join(dataDir, "data");
  server = spawn(memplane, ["serve", "--port", String(port)], {
    cwd: dataDir, stdio: ["ignore", "inherit", "inherit"], detached: true,
    env: {
      ...process.env,
      MEMPLANE_DATA_DIR: env.MEMPLANE_TEST_DATA_DIR,
      MEMPLANE_ADMIN_KEY: env.MEMPLANE_BOOTSTRAP_KEY,
      MEMPLANE_LOCAL_STORAGE_ROOTS: JSON.stringify([dataDir]),
      MEMPLANE_AUDIT_SEAL_INTERVAL_SECONDS: "0.2",
      MEMPLANE_AUDIT_TLOG_CHECKPOINT_SECONDS: "0",
      MEMPLANE_COMPACTOR_SCHEDULE: "off",
      MEMPLANE_RETENTION_SCHEDULE: "off",
      MEMPLANE_LOG_LEVEL: "warning",
      // On a PostgreSQL database (MEMPLANE_DATABASE_URL, migrated; MEMPLANE_SERVER_KEY and
      // MEMPLANE_RECEIPT_SIGNING_KEY set by the caller), the default bucket is still local.
      ...(process.env.MEMPLANE_DATABASE_URL ? {
        MEMPLANE_DEFAULT_BUCKET_URL: `file://${join(dataDir, "data", "bucket")}`,
        MEMPLANE_ALLOW_LOCAL_STORAGE: "true",
      } : {}),
    },
  });
  env.MEMPLANE_TEST_STORAGE_ROOT = dataDir;
}
let status = 1;
const t0 = Date.now();
try {
  if (server) await waitReady(env.MEMPLANE_URL, server, 120);
  console.log(`memplane serve ready after ${Date.now() - t0} ms`);
  const only = process.argv.slice(2);
  const dir = join(pkg, "build", "test");
  const files = only.length ? only : readdirSync(dir).filter((f) => f.endsWith(".test.js"))
    .sort().map((f) => join(dir, f));
  try {
    execFileSync(process.execPath, ["--test", "--test-concurrency=1", ...files],
      { cwd: pkg, stdio: "inherit", env });
    status = 0;
  } catch (error) {
    status = typeof error.status === "number" ? error.status : 1;
  }
} finally {
  if (server && server.exitCode === null) {
    process.kill(-server.pid, "SIGTERM");
    await new Promise((r) => { server.once("exit", r); setTimeout(r, 10_000); });
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
}
process.exit(status);
