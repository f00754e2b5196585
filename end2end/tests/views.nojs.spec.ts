import { expect, Page, test } from "@playwright/test";
import { count, truthAt } from "./truth";

/** The sequence of the tick a live page was rendered from (JavaScript off: it stays). */
async function seqOf(page: Page): Promise<string> {
  const root = page.locator('[data-test="live-page"]');
  await expect(root).toBeVisible();
  return (await root.getAttribute("data-seq")) ?? "";
}

test("/racks shows each rack's power within 1% of the truth, and every node", async ({ page, request }) => {
  const resp = await page.goto("/racks");
  expect(resp?.status()).toBe(200);
  const truth = await truthAt(request, await seqOf(page));
  for (const r of truth.racks) {
    const head = page.locator(`[data-test="floor-rack"][data-rack="${r.name}"] [data-test="floor-rack-head"]`);
    const shown = Number(await head.getAttribute("data-power-watts"));
    expect(Math.abs(shown - r.power_watts)).toBeLessThanOrEqual(0.01 * r.power_watts);
  }
  await expect(page.locator('[data-test="floor-node"]')).toHaveCount(truth.nodes.length);
  // Every node cell says what it shows in words, not colour alone: its name and value are
  // its accessible name, its summary (state, power, hottest GPU, jobs) its description and
  // its hover text.
  const cell = page.locator('[data-test="floor-node"]').first();
  await expect(cell).toHaveAccessibleName(/^gpu\d+ \S+/);
  await expect(cell).toHaveAccessibleDescription(/^gpu\d+: \w+, .* power, hottest GPU/);
  expect((await cell.getAttribute("title")) ?? "").toMatch(/^gpu\d+: \w+/);
});

test("/racks?metric=state colours nodes by their Slurm state", async ({ page, request }) => {
  await page.goto("/racks?metric=state");
  const truth = await truthAt(request, await seqOf(page));
  const bucketOf: Record<string, string> = { idle: "0", allocated: "1", mixed: "1", draining: "2", drained: "2", down: "3", not_responding: "3" };
  for (const [name, state] of truth.nodes as [string, string][]) {
    const cell = page.locator(`[data-test="floor-node"][data-node="${name}"]`);
    await expect(cell).toHaveAttribute("data-bucket", bucketOf[state] ?? "4");
  }
  await expect(page.locator('nav[aria-label="Colour nodes by"] [aria-current="true"]')).toHaveText("Slurm state");
});

test("/thermal counts the throttled GPUs the simulator has", async ({ page, request }) => {
  await page.goto("/thermal");
  const truth = await truthAt(request, await seqOf(page));
  await expect(page.locator('[data-test="thermal-throttling"]')).toHaveText(count(truth.gpus_throttling));
  for (const r of truth.racks) {
    await expect(page.locator(`[data-test="thermal-racks"] tr[data-rack="${r.name}"] [data-test="rack-throttling"]`)).toHaveText(String(r.gpus_throttling));
  }
});

test("/topology: each domain's allocated GPUs equal the jobs placed there", async ({ page, request }) => {
  await page.goto("/topology");
  const truth = await truthAt(request, await seqOf(page));
  expect(truth.domains.length).toBeGreaterThan(0);
  for (const d of truth.domains) {
    const row = page.locator(`[data-test="domain"][data-domain="${d.name}"]`).first();
    await expect(row).toHaveAttribute("data-allocated", String(d.gpus_allocated));
  }
});

test("/topology: InfiniBand traffic per domain, from node_exporter counters", async ({ page }) => {
  // A rate needs two scrapes of the counters: reload until every domain has one.
  await expect
    .poll(
      async () => {
        await page.goto("/topology");
        const cells = await page.locator('[data-test="domain-ib"]').allTextContents();
        return cells.length > 0 && cells.every((t) => /^[\d,.]+ [GT]B\/s$/.test(t.trim()));
      },
      { timeout: 20_000 },
    )
    .toBe(true);
});

test("a node's page lists its GPUs and draws its last hour", async ({ page, request }) => {
  const resp = await page.goto("/nodes/gpu001");
  expect(resp?.status()).toBe(200);
  await expect(page.locator('[data-test="gpu-row"]')).toHaveCount(8);
  const src = await page.locator('[data-test="node-chart"]').first().getAttribute("src");
  const chart = await request.get(src ?? "");
  expect(chart.status()).toBe(200);
  expect(chart.headers()["content-type"]).toBe("image/svg+xml");
  expect(await chart.text()).toContain("<title>node:gpu001 power, last hour</title>");
  const missing = await page.goto("/nodes/gpu999");
  expect(missing?.status()).toBe(404);
});

test("a bar on the timeline opens its job, which lists its checkpoints", async ({ page }) => {
  const resp = await page.goto("/timeline?hours=24");
  expect(resp?.status()).toBe(200);
  const bar = page.locator('[data-test="timeline"] a[data-job="1000"]');
  await expect(bar).toHaveCount(1);
  await bar.locator("rect").first().click();
  await expect(page).toHaveURL(/\/jobs\/1000$/);
  await expect(page.locator('[data-test="job-page"]')).toHaveAttribute("data-job", "1000");
  await expect(page.locator('[data-test="job-state"]')).toHaveText("running");
  // The first multi-day run has checkpointed through the day of history.
  expect(await page.locator('[data-test="checkpoint"]').count()).toBeGreaterThan(5);
  await expect(page.locator('[data-test="work-at-risk"]')).toHaveText(/GPU-h$/);
});

test("the job history filters by state through the URL, a page at a time", async ({ page }) => {
  await page.goto("/jobs?state=completed");
  const rows = page.locator('[data-test="history-row"]');
  expect(await rows.count()).toBeGreaterThan(0);
  for (const s of await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute("data-state")))) {
    expect(s).toBe("completed");
  }
  await expect(page.locator('[data-test="history-count"]')).toContainText("page 1 of");
  // The form keeps the filter, so submitting it again shows the same view.
  await expect(page.locator("#h-state")).toHaveValue("completed");
});
