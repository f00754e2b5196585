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
