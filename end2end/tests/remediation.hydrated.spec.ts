// /remediation: operators read the policies; an admin switches the kill switch and changes
// a rule's mode with the page (keyboard-reachable controls), and the API then says the same.
import { expect, Page, test } from "./fixtures";

const password = process.env.GANTRY_E2E_PASSWORD ?? "";

async function signIn(page: Page, name: string) {
  await page.goto("/login?next=/remediation");
  await page.getByLabel("User name").fill(name);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(/\/remediation$/);
}

test("an operator reads the rules, limits and decisions, and changes nothing", async ({ page }) => {
  await signIn(page, "operator1");
  await expect(page.getByRole("heading", { name: "Remediation", level: 1 })).toBeVisible();
  const api = await (await page.request.get("/api/remediation")).json();
  const rows = page.locator('[data-test="remediation-rule"]');
  await expect(rows).toHaveCount(api.rules.length);
  await expect(page.locator('[data-test="remediation-limits"]')).toContainText(`${api.limits.cooldown_seconds} s`);
  await expect(page.locator('[data-test="kill-toggle"]')).toHaveCount(0);
  await expect(rows.first().locator("select")).toHaveCount(0);
});

test("an admin switches the kill switch and a rule's mode from the page", async ({ page }) => {
  await signIn(page, "admin1");
  const kill = page.locator('[data-test="kill-switch"]');
  await expect(kill).toHaveAttribute("data-on", "false");
  // Wait for hydration before clicking: the button does nothing until then.
  const toggle = page.getByRole("button", { name: "Switch on (stop executions)" });
  await expect(async () => {
    await toggle.click();
    await expect(kill).toHaveAttribute("data-on", "true", { timeout: 1000 });
  }).toPass({ timeout: 15_000 });
  await expect(kill).toContainText("by admin1");
  expect((await (await page.request.get("/api/remediation")).json()).kill_switch.by).toBe("admin1");
  await page.getByRole("button", { name: "Switch off (allow executions)" }).click();
  await expect(kill).toHaveAttribute("data-on", "false");
  expect((await (await page.request.get("/api/remediation")).json()).kill_switch).toBeNull();

  // A rule's mode, by its labelled select; then back as configured.
  const rule = page.locator('[data-test="remediation-rule"][data-cause="remapped_rows"]');
  await rule.getByLabel("Mode of remapped_rows").selectOption("observe");
  await expect
    .poll(async () => {
      const v = await (await page.request.get("/api/remediation")).json();
      return v.rules.find((r: { cause: string }) => r.cause === "remapped_rows").mode;
    })
    .toBe("observe");
  await rule.getByLabel("Mode of remapped_rows").selectOption("recommend");
  await expect
    .poll(async () => {
      const v = await (await page.request.get("/api/remediation")).json();
      return v.rules.find((r: { cause: string }) => r.cause === "remapped_rows").mode;
    })
    .toBe("recommend");
  // Each change is in the audit log.
  const audit = await (await page.request.get("/api/audit?user=admin1&limit=50")).json();
  const actions = audit.entries.map((e: { action: string }) => e.action);
  expect(actions).toContain("remediation_kill_switch");
  expect(actions).toContain("remediation_mode");
});
