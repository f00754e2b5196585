import { expect, test } from "./fixtures";

async function truthNow(request: import("@playwright/test").APIRequestContext) {
  const r = await request.get("/sim/truth");
  expect(r.status()).toBe(200);
  return (await r.json()).truth;
}

test("a training job's page shows the simulator's checkpoints, last good checkpoint and work at risk", async ({
  page,
  request,
}) => {
  // The page is read between two looks at the truth; work at risk only grows between
  // checkpoints, so the page's value lies between the two (to its 0.1 GPU-h rounding).
  // When a save finishes in between, look again.
  let checked = false;
  for (let attempt = 0; attempt < 5 && !checked; attempt++) {
    const before = await truthNow(request);
    const job = before.jobs
      .filter((j: any) => j.checkpoints >= 2 && j.last_good_ms !== null)
      .sort((a: any, b: any) => b.checkpoints - a.checkpoints)[0];
    expect(job, "the simulator runs a training job that has checkpointed").toBeTruthy();
    await page.goto(`/jobs/${job.id}`);
    await expect(page.locator('[data-test="job-page"]')).toHaveAttribute("data-job", String(job.id));
    const shownRisk = parseFloat((await page.locator('[data-test="work-at-risk"]').textContent()) ?? "");
    const markers = await page.locator('[data-test="checkpoint"]').count();
    const lastGood = (await page.locator('[data-test="last-good"]').getAttribute("title")) ?? "";
    const after = (await truthNow(request)).jobs.find((j: any) => j.id === job.id);
    if (!after || after.last_good_ms !== job.last_good_ms || after.checkpoints !== job.checkpoints) {
      continue;
    }
    expect(markers).toBe(job.checkpoints);
    expect(shownRisk).toBeGreaterThanOrEqual(Math.floor(job.work_at_risk_gpu_hours * 10) / 10 - 0.05);
    expect(shownRisk).toBeLessThanOrEqual(Math.ceil(after.work_at_risk_gpu_hours * 10) / 10 + 0.05);
    // The last good checkpoint's end, on hover, in UTC as the page writes times.
    const t = new Date(job.last_good_ms).toISOString().replace("T", " ").slice(0, 19);
    expect(lastGood).toBe(`ended ${t} UTC`);
    checked = true;
  }
  expect(checked, "five tries without a checkpoint finishing mid-read").toBe(true);
});

const KIND: Record<string, string> = {
  Resources: "resources",
  Priority: "priority",
  Dependency: "dependency",
  QOSMaxGRESPerUser: "limit",
  JobHeldUser: "held",
  BeginTime: "held",
};

test("/jobs says why each pending job waits, as the simulator's scheduler holds it, and filters by it", async ({
  page,
  request,
}) => {
  let compared = false;
  for (let attempt = 0; attempt < 5 && !compared; attempt++) {
    const before = (await truthNow(request)).pending;
    await page.goto("/jobs");
    await expect(page.locator('[data-test="jobs-page"]')).toHaveAttribute("data-hydrated", "true");
    const shown: Record<string, string> = {};
    for (const row of await page.locator('[data-test="job-row"][data-state="pending"]').all()) {
      shown[(await row.getAttribute("data-job")) ?? ""] = (await row.getAttribute("data-wait")) ?? "";
    }
    const after = (await truthNow(request)).pending;
    if (JSON.stringify(before) !== JSON.stringify(after)) continue;
    expect(Object.keys(shown).length).toBe(before.length);
    for (const p of before) {
      expect(shown[String(p.job)], `job ${p.job} (${p.reason})`).toBe(KIND[p.reason]);
    }
    compared = true;
  }
  expect(compared, "the queue never held still for a comparison").toBe(true);
  // The filter: a form without JavaScript, its choice kept in the URL.
  await page.locator('[data-test="wait-filter"]').selectOption("limit");
  await page.getByRole("button", { name: "Show" }).click();
  await expect(page).toHaveURL(/\/jobs\?wait=limit$/);
  const rows = page.locator('[data-test="job-row"]');
  await expect(rows.first()).toBeVisible();
  for (const row of await rows.all()) {
    await expect(row).toHaveAttribute("data-wait", "limit");
  }
  await expect(rows.first().locator('[data-test="job-wait"]')).toContainText("QOSMaxGRESPerUser");
});
