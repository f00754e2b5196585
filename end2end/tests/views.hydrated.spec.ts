import { expect, test } from "@playwright/test";
import { truthAt } from "./truth";

test("/racks goes live: the floor updates without reload and still matches the truth", async ({ page, request }) => {
  let loads = 0;
  page.on("load", () => loads++);
  await page.goto("/racks");
  await expect(page.locator('[data-test="live-status"]')).toHaveClass(/\blive\b/, { timeout: 15_000 });
  const root = page.locator('[data-test="live-page"]');
  const first = Number(await root.getAttribute("data-seq"));
  await expect.poll(async () => Number(await root.getAttribute("data-seq")), { timeout: 10_000 }).toBeGreaterThan(first + 1);
  expect(loads).toBe(1);
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
