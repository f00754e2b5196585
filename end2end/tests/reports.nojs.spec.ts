import { expect, test } from "@playwright/test";

const password = process.env.GANTRY_E2E_PASSWORD ?? "";

test("without JavaScript the report form asks a new question and a bad one gets the reason", async ({ page }) => {
  await page.goto("/login?next=/reports");
  await page.getByLabel("User name").fill("manager1");
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.locator('[data-test="report-when"]')).toContainText("Day, by account");

  await page.getByLabel("Period").selectOption("week");
  await page.getByLabel("Group by").selectOption("user");
  await page.getByRole("button", { name: "Show report" }).click();
  await expect(page).toHaveURL(/period=week/);
  await expect(page).toHaveURL(/group=user/);
  await expect(page.locator('[data-test="report-when"]')).toContainText("Week, by user");
  await expect(page.getByRole("heading", { name: "By user" })).toBeVisible();
  await expect(page.locator('[data-test="report-table"] thead')).toContainText("User");

  await page.goto("/reports?period=custom&from=2026-03-01&to=2026-01-01");
  await expect(page.getByRole("alert")).toContainText("the last day comes before the first");
});
