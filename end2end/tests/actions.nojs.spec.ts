import { expect, test } from "@playwright/test";

const password = process.env.GANTRY_E2E_PASSWORD ?? "";

test("the nodes page is in the server-rendered HTML", async ({ page }) => {
  const resp = await page.goto("/nodes");
  expect(resp?.status()).toBe(200);
  await expect(page.locator('[data-test="node-row"]')).toHaveCount(64);
  await expect(page.locator('[data-test="nodes-page"]')).toHaveAttribute("data-hydrated", "false");
  // Anonymous viewers see the actions, disabled, and why.
  await expect(page.locator('[data-test="node-action"]').first()).toHaveAttribute("title", "Sign in as an operator to act");
});

test("signing in works without JavaScript", async ({ page }) => {
  await page.goto("/login?next=/jobs");
  await page.getByLabel("User name").fill("operator1");
  await page.getByLabel("Password").fill("not the password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.locator('[data-test="login-error"]')).toBeVisible();
  await page.getByLabel("User name").fill("operator1");
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(/\/jobs$/);
  await expect(page.locator('[data-test="whoami"]')).toContainText("operator1 (operator)");
});

test("after signing in, a hostile next leads to Gantry's own front page", async ({ page, baseURL }) => {
  // An encoded tab after the first slash: a browser strips it, so `/\t/evil.example` would
  // be `//evil.example`, another site.
  await page.goto("/login?next=%2F%09%2Fevil.example");
  await expect(page.locator('input[name="next"]')).toHaveValue("/");
  await page.getByLabel("User name").fill("operator1");
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(new URL("/", baseURL).href);
});
