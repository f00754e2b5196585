import { expect, test } from "@playwright/test";

const password = process.env.GANTRY_E2E_PASSWORD ?? "";

test("without JavaScript the reliability page answers its form, lists every cause and downloads its tables", async ({ page }) => {
  await page.goto("/login?next=/reliability");
  await page.getByLabel("User name").fill("operator1");
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("heading", { level: 1, name: "Reliability" })).toBeVisible();
  await expect(page.locator('[data-test="reliability-when"]')).toContainText("interruptions");
  // One row per cause, the shares summing to the whole when there is any.
  const causes = page.locator('[data-test="by-cause"] tbody tr');
  await expect(causes).toHaveCount(9);
  await expect(page.locator('[data-test="by-cause"] tr[data-cause="unknown"]')).toHaveCount(1);

  await page.getByLabel("Period").selectOption("week");
  await page.getByLabel("Group by").selectOption("rack");
  await page.getByRole("button", { name: "Show" }).click();
  await expect(page).toHaveURL(/period=week/);
  await expect(page).toHaveURL(/group=rack/);
  await expect(page.getByRole("table").filter({ has: page.getByText("By rack") })).toHaveCount(1);

  // Each table downloads as CSV with the page's question.
  const link = page.getByRole("link", { name: "CSV of lemon scores" });
  const href = (await link.getAttribute("href")) ?? "";
  expect(href).toContain("period=week");
  const csv = await page.request.get(href);
  expect(csv.status()).toBe(200);
  expect(csv.headers()["content-type"]).toContain("text/csv");
  expect((await csv.text()).split("\n")[0]).toBe(
    "node,rack,score,recent_score,rma,jobs_taken_down,hardware_xids,counter_steps,outages,out_of_service_hours,evidence",
  );

  await page.goto("/reliability?period=custom&from=2026-03-01&to=2026-01-01");
  await expect(page.getByRole("alert")).toContainText("the last day comes before the first");
});

test("a viewer is told the reliability page is for operators, managers and admins", async ({ page }) => {
  await page.goto("/login?next=/reliability");
  await page.getByLabel("User name").fill("viewer1");
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.locator("main")).toContainText("operators, managers and admins");
});

test("without JavaScript the ledger's buckets add up to the allocation and its charts load", async ({ page }) => {
  test.setTimeout(120_000);
  await page.goto("/login?next=/reliability");
  await page.getByLabel("User name").fill("manager1");
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("heading", { level: 2, name: "Effective training time" })).toBeVisible();
  const ettr = page.locator('[data-test="ettr"]');
  // The pipeline books the ledger once a minute: a fresh server may need one.
  await expect(async () => {
    await page.reload();
    await expect(ettr).toContainText(/^ETTR \d/, { timeout: 1_000 });
  }).toPass({ timeout: 90_000 });
  const words = (await ettr.textContent()) ?? "";
  const m = words.match(/([\d.]+) productive GPU-hours of ([\d.]+) allocated plus ([\d.]+) waiting/);
  expect(m, words).not.toBeNull();
  const [productive, allocated] = [Number(m![1]), Number(m![2])];
  expect(allocated).toBeGreaterThan(0);
  const rows = page.locator('[data-test="ledger-buckets"] tbody tr');
  await expect(rows).toHaveCount(9);
  let inside = 0;
  for (let i = 0; i < 9; i++) {
    const name = (await rows.nth(i).locator("th").textContent()) ?? "";
    const v = Number((await rows.nth(i).locator("td").first().textContent()) ?? "NaN");
    if (name === "productive") expect(v).toBeCloseTo(productive, 1);
    if (name !== "restart wait") inside += v;
  }
  // Each figure is rounded to 0.1 GPU-hour: nine of them.
  expect(Math.abs(inside - allocated)).toBeLessThanOrEqual(0.5);
  // Both charts are drawn into the page with words, their text in the page's colour:
  // light on the dark screen, dark when printed (it was black on the dark page as images).
  const charts = page.locator('[data-test="ledger"] figure [role="img"]');
  await expect(charts).toHaveCount(2);
  const luminance = (css: string) => {
    const [r, g, b] = (css.match(/\d+(\.\d+)?/g) ?? []).map(Number);
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  };
  const textColour = (i: number) =>
    charts.nth(i).locator("svg text").first().evaluate((t) => getComputedStyle(t).fill);
  for (let i = 0; i < 2; i++) {
    await expect(charts.nth(i)).toHaveAttribute("aria-label", /table below/);
    expect(await charts.nth(i).locator("svg text").count()).toBeGreaterThan(3);
    expect(luminance(await textColour(i)), "light text on the dark page").toBeGreaterThan(0.6);
  }
  await page.emulateMedia({ media: "print" });
  for (let i = 0; i < 2; i++) {
    expect(luminance(await textColour(i)), "dark text on paper").toBeLessThan(0.3);
  }
  await page.emulateMedia({ media: "screen" });
  // The tables wear the site's table style, and the contents link every section.
  const tables = page.locator("main table");
  expect(await tables.count()).toBeGreaterThanOrEqual(10);
  for (const cls of await tables.evaluateAll((ts) => ts.map((t) => t.className))) expect(cls).toContain("grid");
  const toc = page.locator('[data-test="toc"] a');
  expect(await toc.count()).toBe(7);
  for (const href of await toc.evaluateAll((as) => as.map((a) => a.getAttribute("href") ?? ""))) {
    await expect(page.locator(href)).toHaveCount(1);
  }
  await expect(page.locator('[data-test="ettr-goodput"]')).toContainText("at most its goodput share");
  // Its figures say how much of the period has data, as the API's coverage does.
  const api = await (await page.request.get("/api/reliability?period=day")).json();
  expect(api.coverage.covered_ms).toBeGreaterThan(0);
  expect(api.coverage.covered_ms).toBeLessThanOrEqual(api.coverage.elapsed_ms);
  await expect(page.locator('[data-test="reliability-coverage"]')).toContainText(/^Data for /);
  const jobs = page.getByRole("link", { name: "CSV of the ledger per job" });
  const csv = await page.request.get((await jobs.getAttribute("href")) ?? "");
  expect(csv.status()).toBe(200);
  expect((await csv.text()).split("\n")[0]).toMatch(/^job_id,job,allocated_gpu_hours,ettr,productive_gpu_hours,/);
});
