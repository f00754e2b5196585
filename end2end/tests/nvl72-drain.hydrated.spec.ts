// A rack's drain preview in the browser, in the units jobs ask for, against the truth's
// idle nodes per block before and after the preview (one block per rack in this profile:
// rack A01 is block b01). A Gantry of its own at wall-clock speed, so the cluster holds
// still between the truth and the preview; a preview that a job's start or end overtook
// is taken again.
import { expect, ownGantry, OwnGantry, test } from "./fixtures";

test.describe("NVL72 drain preview", () => {
  let own: OwnGantry | undefined;
  test.beforeAll(async () => {
    own = await ownGantry("nvl72-drain", { GANTRY_SIM_PROFILE: "nvl72", GANTRY_SIM_NODES: "144" }, [["operator1", "operator"]]);
  });
  test.afterAll(async () => own?.stop());

  type Seg = { base: number; largest_free_segment: number; blocks: [string, number][] };
  /** The preview's words for draining every node of `block`, from the truth's idle nodes. */
  function expected(t: Seg, block: string): { words: string[]; largestChanges: boolean } {
    const idle = t.blocks.find(([b]) => b === block)?.[1] ?? 0;
    const words = idle > 0 ? [`block ${block} goes from ${idle} to 0 free nodes`] : [];
    const after = Math.max(0, ...t.blocks.filter(([b]) => b !== block).map(([, i]) => Math.min(i, t.base)));
    const largestChanges = after < t.largest_free_segment;
    if (largestChanges) words.push(`the largest free segment goes from ${t.largest_free_segment} to ${after} nodes`);
    return { words, largestChanges };
  }

  test("a rack's drain preview says what the truth's free nodes and segments say", async ({ page, request }) => {
    test.setTimeout(90_000);
    const base = own!.base;
    await expect
      .poll(async () => (await request.get(`${base}/healthz`).catch(() => undefined))?.status(), {
        timeout: 30_000,
        message: `gantry did not start; log:\n${own?.log()}`,
      })
      .toBe(200);
    await page.goto(`${base}/login?next=${encodeURIComponent("/nodes")}`);
    await page.getByLabel("User name").fill("operator1");
    await page.getByLabel("Password").fill(own!.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page.locator('[data-test="nodes-page"]')).toHaveAttribute("data-hydrated", "true");
    const truth = async (): Promise<Seg> => (await (await request.get(`${base}/sim/truth`)).json()).truth.segments[0];
    const panel = page.locator('[data-test="action-panel"]');
    let checked = false;
    for (let attempt = 0; attempt < 5 && !checked; attempt++) {
      const before = await truth();
      await page.locator("#rack-pick").selectOption("A01");
      await page.locator('[data-test="drain-rack"]').click();
      const summary = panel.locator('[data-test="preview-summary"]');
      await expect(summary).toContainText(/Drain \d+ node\(s\)/, { timeout: 10_000 });
      const text = (await summary.textContent()) ?? "";
      const after = await truth();
      await page.keyboard.press("Escape");
      await expect(panel).toBeHidden();
      if (JSON.stringify(before) !== JSON.stringify(after)) continue;
      const { words, largestChanges } = expected(before, "b01");
      for (const w of words) expect(text, `at truth ${JSON.stringify(before)}`).toContain(w);
      if (!largestChanges) expect(text).not.toContain("the largest free segment goes");
      if (words.length === 0) expect(text).not.toContain("Segments:");
      checked = true;
    }
    expect(checked, "the cluster never held still for a preview").toBe(true);
  });
});
