import { expect, test } from "./fixtures";
import { expectMatchesTruth, readOverview, truthAt } from "./truth";

test("the overview goes live and updates without reload, matching the truth", async ({ page, request }) => {
  let loads = 0;
  page.on("load", () => loads++);
  await page.goto("/");
  const status = page.locator('[data-test="live-status"]');
  await expect(status).toHaveClass(/\blive\b/, { timeout: 15_000 });
  const root = page.locator('[data-test="overview"]');
  const first = Number(await root.getAttribute("data-seq"));
  // Deltas arrive once a second: the sequence moves on with no navigation.
  await expect.poll(async () => Number(await root.getAttribute("data-seq")), { timeout: 10_000 }).toBeGreaterThan(first + 1);
  expect(loads).toBe(1);
  const { seq, vals } = await readOverview(page);
  expectMatchesTruth(vals, await truthAt(request, seq));
});

test("data that stops arriving is marked stale, greyed and hatched", async ({ page }) => {
  // The live stream never connects: the server-rendered numbers age on screen.
  await page.route(/\/api\/live(\?|$)/, (route) => route.abort());
  await page.goto("/");
  const status = page.locator('[data-test="live-status"]');
  await expect(status).toHaveClass(/\bstale\b/, { timeout: 10_000 });
  await expect(status).toContainText("Stale");
  await expect(page.locator("section.cards")).toHaveClass(/\bstale\b/);
});
