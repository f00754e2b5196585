import { expect, test } from "@playwright/test";
import { expectMatchesTruth, readOverview, truthAt } from "./truth";

test("the overview's numbers are in the server-rendered HTML and equal the truth", async ({ page, request }) => {
  const resp = await page.goto("/");
  expect(resp?.status()).toBe(200);
  const { seq, vals } = await readOverview(page);
  expectMatchesTruth(vals, await truthAt(request, seq));
  // Without JavaScript the page says when its numbers are from, and stays put.
  await expect(page.locator('[data-test="live-status"]')).toContainText("As of 20");
  await page.waitForTimeout(2500);
  expect(await page.locator('[data-test="overview"]').getAttribute("data-seq")).toBe(seq);
});

test("rack tiles carry power and a text cue, not colour alone", async ({ page, request }) => {
  await page.goto("/");
  const { seq } = await readOverview(page);
  const truth = await truthAt(request, seq);
  const tiles = page.locator('[data-test="rack-tile"]');
  await expect(tiles).toHaveCount(truth.racks.length);
  for (const r of truth.racks) {
    const tile = page.locator(`[data-test="rack-tile"][data-rack="${r.name}"]`);
    const shown = Number(await tile.getAttribute("data-power-watts"));
    expect(Math.abs(shown - r.power_watts)).toBeLessThanOrEqual(0.01 * r.power_watts);
    const label = (await tile.getAttribute("aria-label")) ?? "";
    expect(label).toContain(`Rack ${r.name}`);
    if (r.power_watts > r.power_limit_watts) expect(label).toContain("over limit");
  }
});

test("keyboard users can skip to the content", async ({ page }) => {
  await page.goto("/");
  await page.keyboard.press("Tab");
  await expect(page.locator(".skip-link")).toBeFocused();
  await expect(page.locator("main h1")).toContainText("Overview");
});

test("the cluster's figures sit side by side across a wide screen", async ({ page }) => {
  // The reports' totals once shared the overview's class, and their one-column grid
  // stacked the eleven figures down the left edge.
  await page.setViewportSize({ width: 1300, height: 800 });
  await page.goto("/");
  const stats = page.locator(".stats > .stat");
  expect(await stats.count()).toBeGreaterThan(4);
  const [a, b] = [await stats.nth(0).boundingBox(), await stats.nth(1).boundingBox()];
  expect(a && b && Math.abs(a.y - b.y)).toBe(0);
  expect(b!.x).toBeGreaterThan(a!.x + a!.width);
});
