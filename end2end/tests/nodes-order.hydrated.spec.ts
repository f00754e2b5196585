// /nodes: problems first (down or a critical incident, then a warning incident, then
// drained), the order and the filter kept in the URL, so a link or a reload shows the same.
import { expect, test } from "./fixtures";

const rank = (state: string | null, worst: string) =>
  worst === "critical" || state === "down" || state === "not responding" ? 0 : worst ? 1 : ["drained", "draining", "maintenance"].includes(state ?? "") ? 2 : 3;

test("/nodes puts problems first and keeps its order and filter in the URL", async ({ page }) => {
  await page.goto("/nodes");
  await expect(page.locator('[data-test="nodes-page"]')).toHaveAttribute("data-hydrated", "true");
  await page.locator('[data-test="problems-first"]').click();
  await expect(page).toHaveURL(/\/nodes\?sort=problems$/);
  const rows = page.locator('[data-test="node-row"]');
  await expect(rows.first()).toBeVisible();
  const seen = await rows.evaluateAll((els) =>
    els.map((e) => [e.getAttribute("data-state"), e.querySelector('[data-test="node-incidents"] a')?.className.replace(/.*sev-/, "") ?? ""]),
  );
  const ranks = seen.map(([s, w]) => rank(s, w as string));
  expect(ranks.every((r, i) => i === 0 || ranks[i - 1] <= r), JSON.stringify(seen.slice(0, 12))).toBe(true);
  // The simulated cluster has a down node: it leads.
  expect(ranks[0]).toBe(0);

  // The filter goes into the URL as it is typed; a reload keeps both.
  await page.getByLabel("Filter").fill("gpu06");
  await expect(page).toHaveURL(/filter=gpu06&sort=problems/);
  const names = await rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-node")));
  expect(names.length).toBeGreaterThan(0);
  expect(names.every((n) => n!.includes("gpu06"))).toBe(true);
  await page.reload();
  await expect(page.getByLabel("Filter")).toHaveValue("gpu06");
  expect(await rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-node")))).toEqual(names);
  // A column header sorts by it, and says so to screen readers.
  await page.locator('[data-test="sort-nodes"][data-sort="rack"]').click();
  await expect(page).toHaveURL(/filter=gpu06&sort=rack/);
  await expect(page.locator('th[aria-sort="ascending"]')).toContainText("Rack");
});
