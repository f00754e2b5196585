// The straggler radar on the live floor: a GPU the simulator slows (its truth names it)
// marks its node's cell on the hydrated /racks page, live, as a class and in the cell's
// words, and no cell is marked a straggler that the simulator did not slow. The first
// straggler comes about 4.4 simulated hours in, so this test starts a Gantry of its own
// 600 times faster than the wall clock (about 26 s); `cargo xtask test` passes the binary
// in GANTRY_BIN.
import { expect, ownGantry, OwnGantry, test } from "./fixtures";

let gantry: OwnGantry | undefined;
let base = "";
const log = () => gantry?.log() ?? "";

test.beforeAll(async () => {
  gantry = await ownGantry("radar", {
    GANTRY_SIM_SPEED: "600",
    GANTRY_SIM_START_MS: "1795968000000",
    GANTRY_LIVE_INTERVAL_MS: "200",
  });
  base = gantry.base;
});

test.afterAll(async () => {
  gantry?.stop();
});

test("a straggling GPU marks its node on the live floor, and only the simulator's stragglers are marked", async ({ page, request }) => {
  test.setTimeout(150_000);
  await expect
    .poll(async () => (await request.get(`${base}/healthz`).catch(() => undefined))?.status(), {
      timeout: 20_000,
      message: `gantry did not start; log:\n${log()}`,
    })
    .toBe(200);
  // Every node the simulator has slowed so far, read all along (a straggle ends, and its
  // truth with it, while its alert waits for the evidence to clear).
  const slowed = new Set<string>();
  let watching = true;
  const watch = (async () => {
    while (watching) {
      const r = await request.get(`${base}/sim/truth`).catch(() => undefined);
      if (r?.status() === 200) {
        for (const s of (await r.json()).truth.slowdowns ?? []) {
          if (s.kind === "straggler" && s.node) slowed.add(s.node);
        }
      }
      await new Promise((res) => setTimeout(res, 150));
    }
  })();
  try {
    await page.goto(`${base}/racks`);
    await expect(page.locator('[data-test="floor-marks"]')).toContainText("a straggling GPU");
    await expect(page.locator('[data-test="floor-marks"] a[href="/reliability"]')).toBeVisible();
    const marked = page.locator('[data-test="floor-node"].straggler');
    // The live page marks a cell once the radar's alert is open (the server wrote none
    // marked: the first straggle starts after the page loaded).
    await expect(marked.first(), `no straggler marked; gantry log:\n${log().slice(-4000)}`).toBeVisible({ timeout: 120_000 });
    const node = await marked.first().getAttribute("data-node");
    expect(node).toBeTruthy();
    await expect(marked.first()).toHaveAttribute("title", /a straggling GPU/);
    // Read the truth once more before judging (the poll above runs every 150 ms).
    await new Promise((res) => setTimeout(res, 400));
    const all = await marked.evaluateAll((els) => els.map((e) => e.getAttribute("data-node") ?? ""));
    for (const n of all) {
      expect(slowed.has(n), `${n} is marked a straggler; the simulator slowed ${[...slowed].join(", ") || "nothing"}`).toBe(true);
    }
  } finally {
    watching = false;
    await watch;
  }
});
