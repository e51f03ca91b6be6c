// Following a job (export, erasure, dry run) to its end, with a progress bar and a status
// line the screen reader hears.
import { getJson } from "./api";
import { announce, h } from "./dom";

export interface Job {
  id: string;
  kind: string;
  state: string;
  progress: Record<string, unknown>;
  result: Record<string, unknown> | null;
  error: string | null;
  attempts: number;
  created_at: string;
  updated_at: string;
}

export function progressBar(label: string): { box: HTMLElement; set(text: string, done?: boolean): void } {
  const bar = h("progress", { "aria-label": label });
  const text = h("p", { class: "progress-text" }, "Queued…");
  const box = h("div", { class: "progress", role: "group", "aria-label": label }, bar, text);
  return {
    box,
    set(line: string, done = false) {
      text.textContent = line;
      if (done) { bar.max = 1; bar.value = 1; }
    },
  };
}

function describe(job: Job): string {
  const steps = Object.keys(job.progress ?? {}).length;
  return `${job.kind === "erase" ? "Erasure" : "Export"} ${job.state}` +
    (job.state === "running" ? ` (${steps} step${steps === 1 ? "" : "s"} recorded)` : "") + "…";
}

export async function follow(job: Job, bar: ReturnType<typeof progressBar>): Promise<Job> {
  let current = job;
  let delay = 250;
  while (current.state === "queued" || current.state === "running") {
    bar.set(describe(current));
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 1.5, 2000);
    current = await getJson<Job>(`v1/jobs/${encodeURIComponent(current.id)}`);
  }
  const line = current.state === "completed" ? "Done." : `The job ${current.state}: ${current.error ?? "no reason given"}.`;
  bar.set(line, true);
  announce(line);
  return current;
}
