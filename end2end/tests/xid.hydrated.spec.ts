// A node's XID shows NVIDIA's catalog meaning and the action it calls for. The simulated
// GPU fault throws its first XID two simulated hours after start, so this test starts a
// Gantry of its own with the simulation 20,000 times faster than the wall clock (the shared
// server runs at wall-clock speed for every other test). `cargo xtask test` passes the
// binary in GANTRY_BIN.
import { expect, ownGantry, OwnGantry, test } from "./fixtures";

/** What NVIDIA's XID catalog says of the XIDs the simulator throws, and their action. */
const CATALOG: Record<number, { meaning: RegExp; action: RegExp }> = {
  48: { meaning: /Double-bit ECC error/i, action: /drain/i },
};

let gantry: OwnGantry | undefined;
let base = "";
const log = () => gantry?.log() ?? "";

test.beforeAll(async () => {
  gantry = await ownGantry("xid", { GANTRY_SIM_SPEED: "20000" }, [["operator1", "operator"]]);
  base = gantry.base;
});

test.afterAll(async () => {
  gantry?.stop();
});

test("a node's XID shows the catalog's meaning and action, as the simulator threw it", async ({ page, request }) => {
  test.setTimeout(120_000);
  // Wait for the simulator to have thrown an XID (truth: each GPU's last XID).
  let xids: { node: string; gpu: number; xid: number }[] = [];
  await expect
    .poll(
      async () => {
        const r = await request.get(`${base}/sim/truth`).catch(() => undefined);
        if (!r || r.status() !== 200) return 0;
        xids = (await r.json()).truth.xids;
        return xids.length;
      },
      { timeout: 90_000, intervals: [500], message: `no XID from the fast simulation; gantry log:\n${log()}` },
    )
    .toBeGreaterThan(0);
  const { node, gpu, xid } = xids[0];
  const want = CATALOG[xid];
  expect(want, `XID ${xid} is one this test knows the catalog's words for`).toBeTruthy();

  await page.goto(`${base}/nodes/${encodeURIComponent(node)}`);
  await expect(page.locator('[data-test="node-page"]')).toHaveAttribute("data-node", node);
  // The GPU's row: its last XID, with meaning and action.
  const cell = page.locator(`[data-test="gpu-row"][data-gpu="${gpu}"] [data-test="gpu-xid"]`);
  await expect(cell).toContainText(`XID ${xid}:`);
  await expect(cell).toContainText(want.meaning);
  await expect(cell).toContainText(want.action);
  // The node's XID history lists it for that GPU, in the same words.
  const row = page.locator('[data-test="node-xids"] tbody tr').filter({ hasText: `XID ${xid}:` }).first();
  await expect(row.locator("td").nth(1)).toHaveText(String(gpu));
  await expect(row).toContainText(want.meaning);
});

test("a fatal NVSwitch error shows on its node's page and on /alerts, as the simulator threw it", async ({ page, request }) => {
  test.setTimeout(120_000);
  // The simulator's NVSwitch fails three simulated hours in (about half a second here).
  let fatal: [string, number, number][] = [];
  await expect
    .poll(
      async () => {
        const r = await request.get(`${base}/sim/truth`).catch(() => undefined);
        if (!r || r.status() !== 200) return 0;
        fatal = (await r.json()).truth.nvswitch_fatal ?? [];
        return fatal.length;
      },
      { timeout: 90_000, intervals: [500], message: `no NVSwitch fault from the fast simulation; gantry log:\n${log()}` },
    )
    .toBeGreaterThan(0);
  const [node, sw, sxid] = fatal[0];
  await page.goto(`${base}/nodes/${encodeURIComponent(node)}`);
  const row = page.locator(`[data-test="node-nvswitches"] [data-test="nvswitch-row"][data-switch="${sw}"]`);
  await expect(row.locator('[data-test="nvswitch-fatal"]')).toHaveText(`SXid ${sxid}`);
  await expect(row).toHaveClass(/\bcrit\b/);
  // Its healthy peers say none.
  await expect(page.locator('[data-test="nvswitch-row"] [data-test="nvswitch-fatal"]', { hasText: "none" })).toHaveCount(3);
  await page.goto(`${base}/alerts`);
  const alert = page.locator(`[data-test="alert"][data-rule="nvswitch_fatal"][data-subject="node:${node}"]`);
  await expect(alert).toHaveCount(1, { timeout: 5_000 });
  await expect(alert).toContainText(`NVSwitch ${sw} SXid ${sxid}`);
});

test("an operator drains a node from its incident, the reason filled in from it", async ({ page, request }) => {
  test.setTimeout(120_000);
  // Wait for an incident whose remedy is a drain (bad hardware on a node).
  await expect
    .poll(
      async () => {
        const r = await request.get(`${base}/api/incidents`).catch(() => undefined);
        if (!r || r.status() !== 200) return 0;
        const drainable = ["xid", "ecc_double_bit", "remapped_rows", "nvswitch_fatal"];
        return (await r.json()).incidents.filter((i: { cause: { rule: string } }) => drainable.includes(i.cause.rule)).length;
      },
      { timeout: 90_000, intervals: [500], message: `no hardware incident from the fast simulation; gantry log:\n${log()}` },
    )
    .toBeGreaterThan(0);
  await page.goto(`${base}/login?next=${encodeURIComponent("/alerts")}`);
  await page.getByLabel("User name").fill("operator1");
  await page.getByLabel("Password").fill(gantry!.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(/\/alerts$/);
  const button = page.locator('[data-test="incident-remedy"]', { hasText: /^Drain gpu\d+…$/ }).first();
  await expect(button).toBeEnabled();
  const node = ((await button.innerText()).match(/gpu\d+/) ?? [""])[0];
  const incident = await button.locator("xpath=ancestor::li[@data-test='incident']").getAttribute("data-id");
  // A click before the page has hydrated does nothing: click until the preview opens.
  const panel = page.locator('[data-test="action-panel"]');
  await expect(async () => {
    await button.click();
    await expect(panel).toBeVisible({ timeout: 1_000 });
  }).toPass({ timeout: 20_000 });
  const reason = panel.locator('[data-test="action-reason"]');
  await expect(reason).toHaveValue(new RegExp(`^incident ${incident}: `));
  await expect(panel.locator('[data-test="action-confirm"]')).toHaveText(`Drain ${node}`);
  await panel.locator('[data-test="action-confirm"]').click();
  await expect(panel.locator('[data-test="action-outcome"]')).toHaveAttribute("data-status", "ok", { timeout: 30_000 });
  // Slurm has it drained (or draining), with the incident in its reason after who acted.
  await page.goto(`${base}/nodes/${node}`);
  await expect(page.locator('[data-test="node-state"]')).toHaveText(/drain/i);
  await expect(page.locator('[data-test="node-reason"]')).toContainText(`operator1: incident ${incident}: `);
});
