// The Storage page: each bucket configuration, its region and health.
import { getJson, message } from "./api";
import { clear, errorBox, h, table } from "./dom";
import { session } from "./state";

interface Config { storage_config_id: string; name: string | null; storage_type: string;
                   bucket: string | null; region: string | null; declared_region: string | null;
                   region_verified: boolean; is_default: boolean; versioning: boolean | null }
interface Health { ok: boolean; reachable: boolean; problem: string | null; latency_ms: number;
                   region: string | null }

export function storagePage(main: HTMLElement): void {
  const box = h("div", {}, h("p", { role: "status" }, "Loading…"));
  clear(main, h("h1", {}, "Storage"), box);
  void load(box);
}

async function health(config: Config): Promise<string> {
  if (session.who?.role !== "admin") return "checked with an admin key only (the probe writes a small object)";
  try {
    const result = await getJson<Health>(`v1/storage/configs/${encodeURIComponent(config.storage_config_id)}/health`);
    return result.ok ? `healthy (${Math.round(result.latency_ms)} ms)` : `unhealthy: ${result.problem ?? "no reason given"}`;
  } catch (error) {
    return `not checked: ${message(error)}`;
  }
}

async function load(box: HTMLElement): Promise<void> {
  let configs: Config[];
  try {
    configs = (await getJson<{ items: Config[] }>("v1/storage/configs")).items;
  } catch (error) {
    clear(box, errorBox(message(error)));
    return;
  }
  const states = await Promise.all(configs.map(health));
  clear(box, table("Bucket configurations, the default first",
    ["Configuration", "Type", "Bucket", "Region", "Health"],
    configs.map((c, i) => [`${c.name ?? c.storage_config_id}${c.is_default ? " (default)" : ""}`,
      c.storage_type, c.bucket ?? "—",
      `${c.region ?? c.declared_region ?? "none"}${c.region_verified ? " (reported by the bucket)" : ""}`,
      states[i]])));
}
