import { expect, Page, test } from "./fixtures";

const password = process.env.GANTRY_E2E_PASSWORD ?? "";

async function signIn(page: Page, name: string, next: string) {
  await page.goto(`/login?next=${encodeURIComponent(next)}`);
  await page.getByLabel("User name").fill(name);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.locator('[data-test="whoami"]')).toContainText(name);
}

const num = (s: string | null) => Number((s ?? "").replace(/,/g, ""));
const thousands = (n: number) => Math.round(n).toLocaleString("en-US");

test("a manager's report matches the API, charts download as PNG and SVG, the table as CSV, and it prints without controls", async ({
  page,
}) => {
  // The simulator's first minute reaches the report rollups within a minute of start.
  test.setTimeout(120_000);
  await signIn(page, "manager1", "/reports?period=day&group=rack");
  await expect(page.getByRole("link", { name: "Reports" })).toBeVisible();
  await expect
    .poll(
      async () => {
        await page.goto("/reports?period=day&group=rack");
        return num(await page.locator('[data-test="total-capacity"]').textContent());
      },
      { timeout: 100_000, intervals: [2_000] },
    )
    .toBeGreaterThan(0);

  // The page says what the API says, read at the same moment (rollups only move once a
  // minute; retry if a flush fell between the two reads).
  await expect
    .poll(
      async () => {
        await page.goto("/reports?period=day&group=rack");
        const api = await (await page.request.get("/api/reports?period=day&group=rack")).json();
        const shown = {
          capacity: num(await page.locator('[data-test="total-capacity"]').textContent()),
          rows: await page.locator('[data-test="report-table"] tbody tr').count(),
        };
        const want = { capacity: num(thousands(api.total.usage.capacity_gh)), rows: api.rows.length };
        return JSON.stringify(shown) === JSON.stringify(want);
      },
      { timeout: 30_000, intervals: [1_000] },
    )
    .toBe(true);
  const api = await (await page.request.get("/api/reports?period=day&group=rack")).json();
  // Racks add up to the cluster: every GPU of the simulated cluster is in one rack.
  const sum = api.rows.reduce((a: number, r: any) => a + r.usage.capacity_gh, 0);
  expect(Math.abs(sum - api.total.usage.capacity_gh)).toBeLessThan(1e-6 * Math.max(1, sum));
  await expect(page.locator('[data-test="rates"]')).toContainText("USD");
  // The page says how much of the day has data: this server's time since it started (the
  // simulator with it), from the hour it began, as the API's coverage.
  const c = api.coverage;
  expect(c.covered_ms).toBeGreaterThan(0);
  expect(c.covered_ms).toBeLessThanOrEqual(c.elapsed_ms);
  const hourOfStart = Math.floor((api.now_ms - c.covered_ms) / 3_600_000) * 3_600_000;
  expect([hourOfStart, hourOfStart - 3_600_000]).toContain(c.first_ms);
  const first = new Date(c.first_ms).toISOString().slice(0, 16).replace("T", " ");
  await expect(page.locator('[data-test="report-coverage"]')).toContainText(
    c.covered_ms >= 0.99 * c.elapsed_ms ? "Data for all of" : `so far (`,
  );
  if (c.covered_ms < 0.99 * c.elapsed_ms) await expect(page.locator('[data-test="report-coverage"]')).toContainText(`from the hour of ${first} UTC`);
  // Each side of owned against rented says what it covers; the cards compare with the same time before.
  await expect(page.locator('[data-test="cost-sides"]')).toContainText("allocated or not");
  await expect(page.locator('[data-test="before"]').first()).toContainText("The same time before:");

  // Three charts, each titled and with units, inline SVG; both downloads work.
  for (const name of ["utilization", "goodput", "cost"]) {
    const fig = page.locator(`[data-test="chart-${name}"]`);
    await expect(fig.locator("svg title")).toHaveCount(1);
    for (const ext of ["svg", "png"]) {
      const href = await fig.getByRole("link", { name: ext.toUpperCase(), exact: true }).getAttribute("href");
      expect(href).toContain(`/api/reports/charts/${name}.${ext}?period=day&group=rack`);
      const resp = await page.request.get(href ?? "");
      expect(resp.status()).toBe(200);
      expect(resp.headers()["content-type"]).toBe(ext === "png" ? "image/png" : "image/svg+xml");
    }
  }
  await expect(page.locator('[data-test="chart-utilization"] svg')).toContainText("GPUs (mean)");

  const csvHref = await page.getByRole("link", { name: "Download CSV" }).getAttribute("href");
  const csv = await page.request.get(csvHref ?? "");
  expect(csv.headers()["content-type"]).toContain("text/csv");
  const lines = (await csv.text()).trim().split("\n");
  expect(lines[0]).toMatch(/^group,capacity_gpu_h,/);
  expect(lines.length).toBeGreaterThanOrEqual(api.rows.length + 2);
  expect(lines[lines.length - 1]).toMatch(/^"\(total\)",/);

  // Printed: light, without the form, the top bar or download links.
  await page.emulateMedia({ media: "print" });
  await expect(page.locator("form.report-form")).toBeHidden();
  await expect(page.locator("header.topbar")).toBeHidden();
  await expect(page.locator('[data-test="report-table"]')).toBeVisible();
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  expect(bg).toBe("rgb(255, 255, 255)");
});

test("a viewer gets no reports link and is refused the page", async ({ page }) => {
  await signIn(page, "viewer1", "/");
  await expect(page.locator("nav[aria-label=Pages]")).toContainText("Timeline");
  await expect(page.getByRole("link", { name: "Reports" })).toHaveCount(0);
  const resp = await page.goto("/reports");
  expect(resp?.status()).toBe(403);
});
