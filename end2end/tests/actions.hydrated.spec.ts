import { expect, Page, test } from "./fixtures";

const password = process.env.GANTRY_E2E_PASSWORD ?? "";

async function signIn(page: Page, name: string, next = "/nodes") {
  await page.goto(`/login?next=${encodeURIComponent(next)}`);
  await page.getByLabel("User name").fill(name);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(new RegExp(`${next}$`));
  await expect(page.locator('[data-test="whoami"]')).toContainText(name);
}

test("an operator drains a node after a preview, sees the verified result, and resumes it", async ({ page }) => {
  await signIn(page, "operator1");
  await expect(page.locator('[data-test="nodes-page"]')).toHaveAttribute("data-hydrated", "true");
  const row = page.locator('[data-test="node-row"][data-state="allocated"]').first();
  const node = (await row.getAttribute("data-node")) ?? "";
  expect(node).toMatch(/^gpu\d+$/);

  // Drain…: a preview first, naming what is affected; the button names the action and target.
  await row.locator('[data-test="node-action"]').click();
  const panel = page.locator('[data-test="action-panel"]');
  await expect(panel).toBeVisible();
  await expect(panel.locator('[data-test="preview-summary"]')).toContainText("Drain 1 node(s)");
  await expect(panel.locator('[data-test="preview-jobs"]')).toBeVisible();
  const confirm = panel.locator('[data-test="action-confirm"]');
  await expect(confirm).toHaveText(`Drain ${node}`);
  await panel.locator('[data-test="action-reason"]').fill("e2e: fan swap");
  await confirm.click();
  await expect(panel.locator('[data-test="action-outcome"]')).toHaveAttribute("data-status", "ok", { timeout: 15_000 });
  await expect(panel.locator('[data-test="action-outcome"] a')).toHaveAttribute("href", `/audit?target=${node}`);

  // The table shows the new state and the stored reason, with the operator's name.
  const same = page.locator(`[data-test="node-row"][data-node="${node}"]`);
  await expect(same).toHaveAttribute("data-state", /draining|drained/, { timeout: 10_000 });
  await expect(same.locator('[data-test="node-reason"]')).toHaveText("operator1: e2e: fan swap");

  // Resume it, through the same preview.
  await panel.locator('[data-test="action-cancel"]').click();
  await expect(panel).toBeHidden();
  await same.locator('[data-test="node-action"]').click();
  await expect(panel.locator('[data-test="action-confirm"]')).toHaveText(`Resume ${node}`);
  await panel.locator('[data-test="action-confirm"]').click();
  await expect(panel.locator('[data-test="action-outcome"]')).toHaveAttribute("data-status", "ok", { timeout: 15_000 });
  await expect(same).toHaveAttribute("data-state", "allocated", { timeout: 10_000 });

  // Both are in the audit log, newest first.
  await page.goto(`/audit?target=${node}`);
  const rows = page.locator('[data-test="audit-row"]');
  await expect(rows).toHaveCount(2);
  await expect(rows.first()).toContainText("resume");
  await expect(rows.nth(1)).toContainText("operator1: e2e: fan swap");
});

test("a viewer sees the actions, disabled, with the reason", async ({ page }) => {
  await signIn(page, "viewer1");
  await expect(page.locator('[data-test="nodes-page"]')).toHaveAttribute("data-hydrated", "true");
  const button = page.locator('[data-test="node-action"]').first();
  await expect(button).toBeDisabled();
  await expect(button).toHaveAttribute("title", "Your role cannot drain, resume or requeue");
  // And the audit page is not theirs.
  const resp = await page.goto("/audit");
  expect(resp?.status()).toBe(403);
});

test("Escape closes the preview and nothing is done", async ({ page }) => {
  await signIn(page, "operator1", "/jobs");
  await expect(page.locator('[data-test="jobs-page"]')).toHaveAttribute("data-hydrated", "true");
  const row = page.locator('[data-test="job-row"][data-state="running"]').first();
  const restarts = await row.locator('[data-test="job-restarts"]').textContent();
  await row.locator('[data-test="job-requeue"]').click();
  const panel = page.locator('[data-test="action-panel"]');
  await expect(panel).toBeFocused();
  await expect(panel.locator('[data-test="preview-summary"]')).toContainText("Requeue 1 running job(s)");
  await page.keyboard.press("Escape");
  await expect(panel).toBeHidden();
  await expect(row.locator('[data-test="job-restarts"]')).toHaveText(restarts ?? "");
});

test("an action runs on the server: leaving its page does not stop it, and the audit log shows its verified end", async ({ page }) => {
  await signIn(page, "operator1");
  await expect(page.locator('[data-test="nodes-page"]')).toHaveAttribute("data-hydrated", "true");
  const row = page.locator('[data-test="node-row"][data-state="allocated"]').nth(1);
  const node = (await row.getAttribute("data-node")) ?? "";
  expect(node).toMatch(/^gpu\d+$/);
  await row.locator('[data-test="node-action"]').click();
  const panel = page.locator('[data-test="action-panel"]');
  await panel.locator('[data-test="action-reason"]').fill("e2e: leave at once");
  await panel.locator('[data-test="action-confirm"]').click();
  // Recorded: the panel follows it; the operator leaves without waiting for the end.
  await expect(panel.locator('[data-test="action-state"]')).toBeVisible();
  await page.goto(`/audit?target=${node}`);
  await expect(async () => {
    await page.reload();
    await expect(page.locator('[data-test="audit-row"]').first()).toHaveAttribute("data-status", "ok", { timeout: 1_000 });
  }).toPass({ timeout: 15_000 });
  await expect(page.locator('[data-test="audit-row"]').first()).toContainText("e2e: leave at once");
  // Leave the node as found, through the API (202 or, waited for, 200).
  const r = await page.request.post("/api/actions/resume?wait=20", { data: { nodes: [node] } });
  expect(r.status()).toBe(200);
  expect((await r.json()).outcomes[0].status).toBe("ok");
});
