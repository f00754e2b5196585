// The fleet level: a simulated floor of 512 nodes stands in four halls. The overview's table
// of halls adds up to the cluster's own figures, reads at 4.5:1 in both themes, and each
// hall links to its floor, which draws that hall's racks only. A Gantry of its own (the
// shared server's 64 nodes have no halls); `cargo xtask test` passes the binary in GANTRY_BIN.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { expect, ownGantry, OwnGantry, test } from "./fixtures";

const axeSource = readFileSync(resolve(process.cwd(), "node_modules/axe-core/axe.min.js"), "utf8");

let gantry: OwnGantry | undefined;
let base = "";

test.beforeAll(async () => {
  gantry = await ownGantry("halls", { GANTRY_SIM_NODES: "512" });
  base = gantry.base;
});

test.afterAll(async () => {
  gantry?.stop();
});

const num = (s: string | null) => Number((s ?? "").replace(/[^0-9.]/g, ""));

test("the overview's halls add up to the cluster and link to their floors", async ({ page, request }) => {
  test.setTimeout(120_000);
  // Up once it serves its first overview (the simulator replays a day of 512 nodes first).
  await expect
    .poll(async () => (await request.get(`${base}/healthz`).catch(() => undefined))?.status() ?? 0, {
      timeout: 60_000,
      message: `gantry log:\n${gantry?.log()}`,
    })
    .toBe(200);
  await page.goto(`${base}/`);
  const rows = page.locator('[data-test="halls"] tbody tr');
  await expect(rows, gantry?.log()).toHaveCount(4, { timeout: 30_000 });
  await expect(rows.locator("th a")).toHaveText(["Hall H1", "Hall H2", "Hall H3", "Hall H4"]);
  // In one look at the page (one tick): the halls' allocated GPUs are the cluster's.
  const { halls, cluster } = await page.evaluate(() => ({
    halls: [...document.querySelectorAll('[data-test="halls"] [data-test="hall-allocated"]')].map((e) => e.textContent),
    cluster: document.querySelector('[data-test="gpus-allocated"]')?.textContent ?? "",
  }));
  expect(halls.map(num).reduce((a, b) => a + b, 0)).toBe(num(cluster));
  // Each hall has a feed and says how much of it it draws.
  for (const share of await page.locator('[data-test="hall-feed-share"]').allTextContents()) {
    expect(share).toMatch(/^\d+(\.\d)?%( over)?$/);
  }
  // Readable in both themes.
  for (const theme of ["dark", "light"]) {
    if (theme === "light") await page.locator('[data-test="theme-toggle"]').click();
    await expect(page.locator("html")).toHaveAttribute("data-theme", theme);
    await page.evaluate(axeSource);
    const bad: unknown[] = await page.evaluate(async () => {
      // @ts-expect-error axe is the script just evaluated
      const r = await window.axe.run(document.querySelector('[data-test="halls"]'), { runOnly: ["color-contrast"], resultTypes: ["violations"] });
      return r.violations;
    });
    expect(bad, JSON.stringify(bad)).toEqual([]);
  }

  // The link of hall H2 opens its floor: its racks only, each row saying its hall.
  await page.locator('[data-test="halls"] a', { hasText: "Hall H2" }).click();
  await expect(page).toHaveURL(/\/racks\?hall=H2$/);
  const floorRows = page.locator(".floor .floor-row h2");
  await expect(floorRows.first()).toContainText("hall H2");
  for (const t of await floorRows.allTextContents()) expect(t).toMatch(/, hall H2$/);
  await expect(page.locator('[data-test="hall-chips"] [aria-current="true"]')).toHaveText("H2");
  const racks = await page.locator(".floor [data-rack]").count();
  expect(racks).toBe(16);
  // The chips keep the metric and go back to the whole floor.
  await page.locator('[data-test="hall-chips"] a', { hasText: "All" }).click();
  await expect(page).toHaveURL(/\/racks\?metric=power$/);
  await expect(page.locator(".floor [data-rack]")).toHaveCount(64);
  // A hall the layout lacks says so, and draws nothing.
  await page.goto(`${base}/racks?hall=H9`);
  await expect(page.locator('[data-test="no-such-hall"]')).toContainText('No hall named "H9"');
  await expect(page.locator(".floor [data-rack]")).toHaveCount(0);
});

// /nodes and /jobs carry a page of 200 rows at a time, whatever the fleet's size: the page
// is in the URL, served without script, and a refresh asks the server for that page only.
test("/nodes shows a page of its 512 nodes at a time, the page in the URL", async ({ page, request }) => {
  test.setTimeout(120_000);
  await expect.poll(async () => (await request.get(`${base}/healthz`).catch(() => undefined))?.status() ?? 0, { timeout: 60_000 }).toBe(200);
  // Without script: the server renders the page the URL names.
  const html = await (await request.get(`${base}/nodes?page=3`)).text();
  expect(html.match(/data-test="node-row"/g)?.length).toBe(112);
  expect(html).toContain("Rows 401–512 of 512 nodes");

  await page.goto(`${base}/nodes`);
  await expect(page.locator('[data-test="nodes-page"]')).toHaveAttribute("data-hydrated", "true");
  const rows = page.locator('[data-test="node-row"]');
  const pager = page.locator('[data-test="pager"]').first();
  await expect(rows).toHaveCount(200);
  await expect(pager.locator('[data-test="pager-rows"]')).toHaveText("Rows 1–200 of 512 nodes");
  await expect(pager.getByText("Previous")).toHaveAttribute("aria-disabled", "true");
  const first = await rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-node")!));
  // Next: the following 200 by name, none of the first page's.
  const polled = page.waitForResponse((r) => r.url().includes("/api/nodes_view") && r.ok());
  await pager.locator('[data-rel="Next"]').click();
  await expect(page).toHaveURL(/\/nodes\?page=2$/);
  await polled;
  await expect(pager.locator('[data-test="pager-rows"]')).toHaveText("Rows 201–400 of 512 nodes");
  await expect(rows).toHaveCount(200);
  const second = await rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-node")!));
  expect(second.filter((n) => first.includes(n))).toEqual([]);
  expect(second[0] > first[first.length - 1]).toBe(true);
  // Last, and a reload keeps it.
  await pager.locator('[data-rel="Last"]').click();
  await expect(page).toHaveURL(/\/nodes\?page=3$/);
  await expect(rows).toHaveCount(112);
  await expect(pager.getByText("Next")).toHaveAttribute("aria-disabled", "true");
  await page.reload();
  await expect(rows).toHaveCount(112);
  // A filter starts again at its first page and says what it kept of all.
  // (Racks A01 to A09 hold 8 nodes each.)
  await page.getByLabel("Filter").fill("A0");
  await expect(page).toHaveURL(/\/nodes\?filter=A0$/);
  await expect(pager.locator('[data-test="pager-rows"]')).toHaveText("Rows 1–72 of the 72 nodes that match, of 512");
  await expect(rows).toHaveCount(72);
  // Problems first across every page: the fleet's worst node leads page 1.
  await page.goto(`${base}/nodes?sort=problems`);
  await expect(page.locator('[data-test="nodes-page"]')).toHaveAttribute("data-hydrated", "true");
  // (down, or a critical incident on it)
  const lead = await rows.first().evaluate((e) => [e.getAttribute("data-state"), e.querySelector('[data-test="node-incidents"] a')?.className ?? ""]);
  expect(lead[0] === "down" || lead[0] === "not responding" || lead[1].includes("sev-critical"), JSON.stringify(lead)).toBe(true);
});
