// Every page hydrates without a panic (the fixture fails a test whose page panicked), and
// the live pages keep following the stream in place: what they show after updates is the
// simulator's truth at the sequence they show.
import { expect, Page, test } from "./fixtures";
import { count, shownSegments, truthAt } from "./truth";

/** Opens a live page and waits until it has applied two updates; returns a page-load counter. */
async function live(page: Page, path: string) {
  let loads = 0;
  page.on("load", () => loads++);
  await page.goto(path);
  await expect(page.locator('[data-test="live-status"]')).toHaveClass(/\blive\b/, { timeout: 15_000 });
  const seq = async () => Number(await page.locator("[data-seq]").first().getAttribute("data-seq"));
  const first = await seq();
  await expect.poll(seq, { timeout: 10_000 }).toBeGreaterThan(first + 1);
  return () => loads;
}

for (const path of ["/", "/racks", "/thermal", "/topology"]) {
  test(`${path} hydrates and applies live updates without reload`, async ({ page }) => {
    const loads = await live(page, path);
    expect(loads()).toBe(1);
  });
}

for (const path of ["/nodes", "/nodes/gpu001", "/jobs", "/jobs/1000", "/timeline", "/alerts", "/login"]) {
  test(`${path} hydrates`, async ({ page }) => {
    const resp = await page.goto(path);
    expect(resp?.status()).toBe(200);
    await page.waitForLoadState("networkidle");
  });
}

test("/topology, live: each domain's allocated GPUs equal the jobs placed there", async ({ page, request }) => {
  await live(page, "/topology");
  // One synchronous read in the page: the rows and the sequence they show belong together.
  const shown = await page.evaluate(() => ({
    seq: document.querySelector("[data-seq]")?.getAttribute("data-seq") ?? "",
    allocated: Object.fromEntries(
      [...document.querySelectorAll('[data-test="domain"]')].map((r) => [r.getAttribute("data-domain"), r.getAttribute("data-allocated")]),
    ),
  }));
  const truth = await truthAt(request, shown.seq);
  expect(truth.domains.length).toBeGreaterThan(0);
  for (const d of truth.domains) expect(shown.allocated[d.name], d.name).toBe(String(d.gpus_allocated));
});

test("/topology, live: free segments per size are the truth's idle nodes of each 16-node block", async ({ page, request }) => {
  await live(page, "/topology");
  const shown = await shownSegments(page);
  const truth = await truthAt(request, shown.seq);
  const idle: number[] = [];
  for (const [name, state] of truth.nodes as [string, string][]) {
    const b = Math.floor((Number(name.slice(3)) - 1) / 16);
    idle[b] = (idle[b] ?? 0) + (state === "idle" ? 1 : 0);
  }
  expect(shown.sizes.map((s) => s.size)).toEqual([1, 2, 4, 8, 16]);
  expect(shown.largest).toBe(String(Math.max(...idle)));
  const all = idle.reduce((a, b) => a + b, 0);
  for (const s of shown.sizes) {
    const n = idle.reduce((a, i) => a + Math.floor(i / s.size), 0);
    expect(s.free, `size ${s.size}`).toBe(String(n));
    expect(s.stranded, `size ${s.size}`).toBe(String(all - n * s.size));
  }
});

test("/thermal, live: the throttled GPUs, in all and per rack, are the simulator's", async ({ page, request }) => {
  await live(page, "/thermal");
  const shown = await page.evaluate(() => ({
    seq: document.querySelector("[data-seq]")?.getAttribute("data-seq") ?? "",
    total: document.querySelector('[data-test="thermal-throttling"]')?.textContent?.trim(),
    racks: Object.fromEntries(
      [...document.querySelectorAll('[data-test="thermal-racks"] tr[data-rack]')].map((r) => [
        r.getAttribute("data-rack"),
        r.querySelector('[data-test="rack-throttling"]')?.textContent?.trim(),
      ]),
    ),
  }));
  const truth = await truthAt(request, shown.seq);
  expect(shown.total).toBe(count(truth.gpus_throttling));
  for (const r of truth.racks) expect(shown.racks[r.name], r.name).toBe(String(r.gpus_throttling));
});
