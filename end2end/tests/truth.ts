// Helpers to compare what a page shows with the simulator's ground truth (/sim/truth).
import { APIRequestContext, expect, Page } from "@playwright/test";

/** Formats like app::units::count: thousands separators. */
export function count(n: number): string {
  return n.toLocaleString("en-US");
}

/** Formats like app::units::power. */
export function power(watts: number): string {
  if (Math.abs(watts) < 1000) return `${Math.round(watts)} W`;
  const tenths = Math.round(watts / 100);
  return `${count(Math.trunc(tenths / 10))}.${Math.abs(tenths % 10)} kW`;
}

export async function truthAt(request: APIRequestContext, seq: string) {
  const r = await request.get(`/sim/truth?seq=${seq}`);
  expect(r.status(), `truth for seq ${seq}`).toBe(200);
  return (await r.json()).truth;
}

/** Reads the overview's numbers and its sequence in one go, so they belong together. */
export async function readOverview(page: Page) {
  const root = page.locator('[data-test="overview"]');
  await expect(root).toBeVisible();
  const read = async () => {
    const seq = await root.getAttribute("data-seq");
    const vals: Record<string, string> = {};
    for (const k of [
      "gpus-total", "gpus-allocated", "gpus-idle", "gpus-drained", "gpus-down",
      "gpus-throttling", "jobs-running", "jobs-pending", "power-now", "power-capacity",
    ]) {
      vals[k] = ((await page.locator(`[data-test="${k}"]`).textContent()) ?? "").trim();
    }
    return { seq: seq ?? "", vals };
  };
  // Retry until the sequence did not change while reading (the page may be live).
  for (let i = 0; i < 20; i++) {
    const a = await read();
    const after = await root.getAttribute("data-seq");
    if (after === a.seq) return a;
  }
  throw new Error("overview kept changing while being read");
}

export function expectMatchesTruth(vals: Record<string, string>, t: any) {
  expect(vals["gpus-total"]).toBe(count(t.gpus.total));
  expect(vals["gpus-allocated"]).toBe(count(t.gpus.allocated));
  expect(vals["gpus-idle"]).toBe(count(t.gpus.idle));
  expect(vals["gpus-drained"]).toBe(count(t.gpus.drained));
  expect(vals["gpus-down"]).toBe(count(t.gpus.down));
  expect(vals["gpus-throttling"]).toBe(count(t.gpus_throttling));
  expect(vals["jobs-running"]).toBe(count(t.jobs_running));
  expect(vals["jobs-pending"]).toBe(count(t.jobs_pending));
  expect(vals["power-now"]).toBe(power(t.power_watts));
  expect(vals["power-capacity"]).toBe(power(t.power_capacity_watts));
}

/** What /topology's first free-segments table shows, with the sequence it shows, read in
 * one evaluation so they belong together. */
export async function shownSegments(page: Page) {
  return page.evaluate(() => ({
    seq: document.querySelector("[data-seq]")?.getAttribute("data-seq") ?? "",
    largest: document.querySelector('[data-test="segments-largest"]')?.textContent?.trim(),
    sizes: [...document.querySelectorAll('[data-test="segments"] tr[data-size]')].map((r) => ({
      size: Number(r.getAttribute("data-size")),
      free: r.querySelector('[data-test="segments-free"]')?.textContent?.trim(),
      stranded: r.querySelector('[data-test="segments-stranded"]')?.textContent?.trim(),
    })),
  }));
}
