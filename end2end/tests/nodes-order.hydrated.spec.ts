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
  // (The server filters: the rows follow its answer.)
  await page.getByLabel("Filter").fill("gpu06");
  await expect(page).toHaveURL(/filter=gpu06&sort=problems/);
  const shown = () => rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-node")));
  await expect.poll(async () => (await shown()).every((n) => n!.includes("gpu06"))).toBe(true);
  const names = await shown();
  expect(names.length).toBeGreaterThan(0);
  await page.reload();
  await expect(page.getByLabel("Filter")).toHaveValue("gpu06");
  expect(await rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-node")))).toEqual(names);
  // A column header sorts by it, and says so to screen readers.
  await page.locator('[data-test="sort-nodes"][data-sort="rack"]').click();
  await expect(page).toHaveURL(/filter=gpu06&sort=rack/);
  await expect(page.locator('th[aria-sort="ascending"]')).toContainText("Rack");
});

// Rows are keyed by their content: a refresh keeps the elements of rows that did not
// change (a key that moved every refresh, such as one holding a running job's age, would
// make every row again). The old unkeyed table kept its elements too, patching each in
// place, so this guards the keys; the time saved (230 ms of main thread a refresh at
// 2,048 nodes, 30 ms now) is measured by `cargo xtask bench browser` with
// GANTRY_BENCH_PAGE=/nodes (xtask/BENCHMARKS.md).
for (const [path, row] of [["/nodes", "node-row"], ["/jobs", "job-row"]] as const) {
  test(`a refresh of ${path} keeps the rows that did not change`, async ({ page }) => {
    await page.goto(path);
    await expect(page.locator(`[data-test="${path.slice(1)}-page"]`)).toHaveAttribute("data-hydrated", "true");
    const rows = page.locator(`[data-test="${row}"]`);
    await expect(rows.first()).toBeVisible();
    const total = await rows.evaluateAll((els) => {
      els.forEach((e, i) => ((e as any).__gantryMark = i + 1));
      return els.length;
    });
    // Refreshes answered and applied. A refresh says which rows the page holds (their
    // fingerprint): while the scheduler's rows stay the same, the answer leaves them out.
    const answers: { unchanged: boolean; rows: number }[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await page.waitForResponse((r) => r.url().includes("/api/nodes_view") && r.ok(), { timeout: 15_000 });
      const v = await r.json();
      answers.push({ unchanged: v.unchanged, rows: v.nodes.length + v.jobs.length });
    }
    await page.waitForTimeout(300);
    const kept = await rows.evaluateAll((els) => els.filter((e) => (e as any).__gantryMark).length);
    expect(kept, `${kept} of ${total} rows kept their elements`).toBeGreaterThanOrEqual(Math.ceil(total / 2));
    expect(answers.some((a) => a.unchanged), JSON.stringify(answers)).toBe(true);
    expect(answers.filter((a) => a.unchanged).every((a) => a.rows === 0)).toBe(true);
    // And the rows shown are still all there.
    await expect(rows).toHaveCount(total);
  });
}

// /jobs' scheduler health strip changes its words at every read (its "as of" time). Drawn
// again at each refresh (Leptos re-set every attribute of it in place), it made the
// browser lay out and paint the jobs table below it each time: now only words that
// changed are rewritten.
test("a refresh of /jobs rewrites the scheduler strip's words, nothing else of it", async ({ page }) => {
  await page.goto("/jobs");
  await expect(page.locator('[data-test="jobs-page"]')).toHaveAttribute("data-hydrated", "true");
  const strip = page.locator('[data-test="sched-health"]');
  await expect(strip).toBeVisible();
  await strip.evaluate((e) => {
    (window as any).__stripSets = [];
    new MutationObserver((l) => (window as any).__stripSets.push(...l.filter((m) => m.type !== "characterData").map((m) => `${m.type} ${(m.target as Element).tagName} ${m.attributeName ?? ""}`)))
      .observe(e, { subtree: true, attributes: true, childList: true, characterData: true });
  });
  for (let i = 0; i < 3; i++) {
    await page.waitForResponse((r) => r.url().includes("/api/nodes_view") && r.ok(), { timeout: 15_000 });
  }
  await page.waitForTimeout(300);
  expect(await page.evaluate(() => (window as any).__stripSets)).toEqual([]);
});
