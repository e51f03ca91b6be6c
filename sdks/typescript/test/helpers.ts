/** The live server the test script started, and a fresh tenant per test file. */
import { randomUUID } from "node:crypto";
import { Memplane } from "../src/index.js";

export const URL = required("MEMPLANE_URL");
export const BOOTSTRAP_KEY = required("MEMPLANE_BOOTSTRAP_KEY");
/** The server's data dir (its SQLite file and default bucket), when the script started it. */
export const DATA_DIR = process.env["MEMPLANE_TEST_DATA_DIR"];
/** A directory under MEMPLANE_LOCAL_STORAGE_ROOTS, for a tenant's own local bucket. */
export const STORAGE_ROOT = process.env["MEMPLANE_TEST_STORAGE_ROOT"];

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the tests with \`npm test\``);
  return value;
}

export interface Tenant {
  id: string;
  adminKey: string;
  admin: Memplane;
  client(role: "admin" | "agent" | "compliance"): Promise<Memplane>;
}

export async function newTenant(): Promise<Tenant> {
  const bootstrap = new Memplane({ baseUrl: URL, apiKey: BOOTSTRAP_KEY });
  const created = await bootstrap.tenants.create({ name: `ts-${randomUUID().slice(0, 8)}` });
  const admin = new Memplane({ baseUrl: URL, apiKey: created.apiKey });
  return {
    id: created.tenant.id,
    adminKey: created.apiKey,
    admin,
    async client(role) {
      if (role === "admin") return admin;
      const key = await admin.keys.create({ role, name: `${role} key` });
      return new Memplane({ baseUrl: URL, apiKey: key.apiKey });
    },
  };
}

export function unique(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}
