// /admin: an admin manages users and sessions with the page's forms; what the page says
// happened is what the API then reports. Works on a spare user, so the other tests' users
// keep their roles.
import { expect, Page, test } from "./fixtures";

const password = process.env.GANTRY_E2E_PASSWORD ?? "";

async function signIn(page: Page, name: string) {
  await page.goto("/login?next=/admin");
  await page.getByLabel("User name").fill(name);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
}

test("an admin changes a role, disables and enables, and revokes a session from /admin", async ({ page, browser }) => {
  // spare1 signs in elsewhere, so it has a session to revoke.
  const other = await browser.newContext();
  const spare = await other.newPage();
  await spare.goto("/login?next=/");
  await spare.getByLabel("User name").fill("spare1");
  await spare.getByLabel("Password").fill(password);
  await spare.getByRole("button", { name: "Sign in" }).click();
  await expect(spare.locator('[data-test="whoami"]')).toContainText("spare1 (viewer)");

  await signIn(page, "admin1");
  await expect(page).toHaveURL(/\/admin$/);
  await expect(page.getByRole("link", { name: "Users" })).toBeVisible();
  const row = page.locator('[data-test="admin-user"][data-user="spare1"]');
  await expect(row).toContainText("viewer");

  // Revoke spare1's session: the page says so, and spare1 is signed out.
  await page.getByRole("button", { name: "Revoke spare1's session" }).first().click();
  await expect(page.locator('[data-test="admin-done"]')).toContainText("spare1's session is revoked");
  const who = await spare.request.get("/api/whoami");
  expect((await who.json()).user).toBeNull();

  // Change the role with the keyboard: select, then the named button.
  await row.getByLabel("Role of spare1").selectOption("operator");
  await row.getByRole("button", { name: "Set role of spare1" }).click();
  await expect(page.locator('[data-test="admin-done"]')).toContainText("spare1 is now operator");
  await expect(page.locator('[data-test="admin-user"][data-user="spare1"]')).toContainText("operator");
  const users = await (await page.request.get("/api/admin/users")).json();
  expect(users.users.find((u: { name: string }) => u.name === "spare1").role).toBe("operator");

  await page.getByRole("button", { name: "Disable spare1" }).click();
  await expect(page.locator('[data-test="admin-user"][data-user="spare1"]')).toContainText("disabled");
  await page.getByRole("button", { name: "Enable spare1" }).click();
  await expect(page.locator('[data-test="admin-user"][data-user="spare1"]')).toContainText("enabled");
  await row.getByLabel("Role of spare1").selectOption("viewer");
  await row.getByRole("button", { name: "Set role of spare1" }).click();
  await expect(page.locator('[data-test="admin-done"]')).toContainText("spare1 is now viewer");
  await other.close();
});

test("a viewer has no Users link and is refused /admin", async ({ page }) => {
  await signIn(page, "viewer1");
  await page.goto("/");
  await expect(page.locator('[data-test="whoami"]')).toContainText("viewer1");
  await expect(page.getByRole("link", { name: "Users" })).toHaveCount(0);
  const r = await page.request.get("/admin", { headers: { Accept: "text/html" } });
  expect(r.status()).toBe(403);
  // Pages of other roles are not offered, and opened anyway they say whom they are for,
  // in Gantry's frame, hydrated like any page.
  await expect(page.getByRole("link", { name: "Audit" })).toHaveCount(0);
  await expect(page.getByRole("link", { name: "Reports" })).toHaveCount(0);
  const audit = await page.goto("/audit");
  expect(audit?.status()).toBe(403);
  await expect(page.locator('[data-test="denied"]')).toContainText("This page is for operators and admins");
  await expect(page.locator('[data-test="denied"]')).toContainText("viewer1 (viewer)");
  await expect(page.getByRole("navigation", { name: "Pages" }).getByRole("link", { name: "Overview" })).toBeVisible();
  await page.waitForLoadState("networkidle");
});
