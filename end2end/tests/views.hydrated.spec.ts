import { expect, Page, test } from "./fixtures";
import { truthAt } from "./truth";

/** Opens /racks and waits until it is live and has applied two updates; counts page loads. */
async function racksLive(page: Page) {
  let n = 0;
  page.on("load", () => n++);
  await page.goto("/racks");
  await expect(page.locator('[data-test="live-status"]')).toHaveClass(/\blive\b/, { timeout: 15_000 });
  const root = page.locator('[data-test="live-page"]');
  const first = Number(await root.getAttribute("data-seq"));
  await expect.poll(async () => Number(await root.getAttribute("data-seq")), { timeout: 10_000 }).toBeGreaterThan(first + 1);
  return { root, loads: () => n };
}

test("/racks goes live: the floor updates without reload and still matches the truth", async ({ page, request }) => {
  const { root, loads } = await racksLive(page);
  expect(loads()).toBe(1);
  // Read a consistent picture: the sequence must not move while reading.
  for (let i = 0; i < 20; i++) {
    const seq = await root.getAttribute("data-seq");
    const shown: Record<string, number> = {};
    for (const head of await page.locator('[data-test="floor-rack"]').all()) {
      const name = (await head.getAttribute("data-rack")) ?? "";
      shown[name] = Number(await head.locator('[data-test="floor-rack-head"]').getAttribute("data-power-watts"));
    }
    if ((await root.getAttribute("data-seq")) !== seq) continue;
    const truth = await truthAt(request, seq ?? "");
    for (const r of truth.racks) {
      expect(Math.abs(shown[r.name] - r.power_watts)).toBeLessThanOrEqual(0.01 * r.power_watts);
    }
    return;
  }
  throw new Error("the floor kept changing while being read");
});

test("a click on a node opens its page", async ({ page }) => {
  await page.goto("/racks");
  await expect(page.locator('[data-test="live-status"]')).toHaveClass(/\blive\b/, { timeout: 15_000 });
  await page.locator('[data-test="floor-node"][data-node="gpu003"]').click();
  await expect(page).toHaveURL(/\/nodes\/gpu003$/);
  await expect(page.locator('[data-test="node-page"]')).toHaveAttribute("data-node", "gpu003");
});

test("choosing a metric recolours every node cell in place, rows off screen included", async ({ page, request }) => {
  // Updates are arriving and being applied: the page is hydrated and its router is in charge.
  const { loads } = await racksLive(page);
  await page.getByRole("link", { name: "Slurm state" }).click();
  await expect(page.locator('[data-test="floor-legend"]')).toHaveAttribute("data-metric", "state");
  const bucketOf: Record<string, string> = { idle: "0", allocated: "1", mixed: "1", draining: "2", drained: "2", down: "3", not_responding: "3" };
  // Cells of rows off screen follow within two ticks; read every cell and the sequence in
  // one go, and compare with the truth of that sequence until they agree.
  let mismatched: string[] = [];
  for (let i = 0; i < 20; i++) {
    const { seq, cells } = await page.evaluate(() => ({
      seq: document.querySelector('[data-test="live-page"]')?.getAttribute("data-seq") ?? "",
      cells: [...document.querySelectorAll('[data-test="floor-node"]')].map((a) => [a.getAttribute("data-node"), a.getAttribute("data-bucket")]),
    }));
    const shown = Object.fromEntries(cells);
    const truth = await truthAt(request, seq);
    mismatched = (truth.nodes as [string, string][])
      .filter(([name, state]) => shown[name] !== (bucketOf[state] ?? "4"))
      .map(([name]) => name);
    if (mismatched.length === 0) break;
    await page.waitForTimeout(500);
  }
  expect(mismatched).toEqual([]);
  expect(loads()).toBe(1);
});
