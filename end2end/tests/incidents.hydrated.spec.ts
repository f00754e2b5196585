// Incidents in the browser: `/` leads with what needs action and `/alerts` with the
// incidents, critical first, each naming its place with a link and what to do, as
// /api/incidents says; the badge counts the critical ones.
import { audit } from "./a11y";
import { expect, test } from "./fixtures";

const rank = (s: string | null) => (s === "critical" ? 0 : s === "warning" ? 1 : 2);

function sortedBySeverity(sev: (string | null)[]) {
  const r = sev.map(rank);
  return r.every((x, i) => i === 0 || r[i - 1] <= x);
}

test("/ leads with what needs action: critical first, each with its place and what to do", async ({ page, request }) => {
  await page.goto("/");
  const board = page.locator('[data-test="needs-action"]');
  await expect(board).toBeVisible();
  // Before the cluster's numbers.
  const [b, s] = [await board.boundingBox(), await page.locator('[data-test="gpus-total"]').boundingBox()];
  expect(b!.y).toBeLessThan(s!.y);
  const api = await (await request.get("/api/incidents")).json();
  expect(api.incidents.length).toBeGreaterThan(0);
  const items = board.locator('[data-test="attention-item"]');
  await expect(items.first()).toBeVisible();
  const sev = await items.evaluateAll((els) => els.map((e) => e.getAttribute("data-severity")));
  expect(sortedBySeverity(sev), sev.join(",")).toBe(true);
  const places = new Set(api.incidents.map((i: { place_link: string }) => i.place_link));
  const actions = new Set(api.incidents.map((i: { action: string }) => i.action));
  for (let i = 0; i < (await items.count()); i++) {
    const item = items.nth(i);
    expect(places.has(await item.locator("a").first().getAttribute("href"))).toBe(true);
    expect(actions.has((await item.locator("strong").innerText()).trim())).toBe(true);
  }
  // The first one's link opens its place.
  await items.first().locator("a").first().click();
  await expect(page).not.toHaveURL(/\/$/);
});

test("/alerts leads with the incidents, critical first, their alerts folded under them", async ({ page, request }) => {
  await page.goto("/alerts");
  const list = page.locator('[data-test="incidents"]');
  await expect(list).toBeVisible();
  const rows = list.locator('[data-test="incident"]');
  const sev = await rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-severity")));
  expect(sortedBySeverity(sev), sev.join(",")).toBe(true);
  const api = await (await request.get("/api/incidents")).json();
  const ids = new Set(api.incidents.map((i: { id: number }) => String(i.id)));
  for (const id of await rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-id")))) {
    expect(ids.has(id!)).toBe(true);
  }
  // An incident holding alerts shows them on request.
  const folded = list.locator("details").first();
  if ((await folded.count()) > 0) {
    await expect(folded.locator('[data-test="incident-alert"]').first()).toBeHidden();
    await folded.locator("summary").click();
    await expect(folded.locator('[data-test="incident-alert"]').first()).toBeVisible();
  }
  // The badge names the critical ones when there are.
  const critical = api.incidents.filter((i: { severity: string }) => i.severity === "critical").length;
  const badge = page.locator('[data-test="alert-badge"]');
  if (critical > 0) {
    await expect(badge).toHaveClass(/\bcritical\b/, { timeout: 10_000 });
    await expect(badge).toContainText("critical");
  }
});

test("an incident's timeline opens from /alerts, tells its story in order, and passes axe", async ({ page, request }) => {
  const api = await (await request.get("/api/incidents")).json();
  expect(api.incidents.length).toBeGreaterThan(0);
  const id = api.incidents[0].id;
  await page.goto("/alerts");
  await page.locator(`[data-test="incident"][data-id="${id}"] [data-test="incident-timeline"]`).click();
  await expect(page).toHaveURL(new RegExp(`/incidents/${id}$`));
  await expect(page.getByRole("heading", { name: `Incident ${id}`, level: 1 })).toBeVisible();
  await expect(page.locator('[data-test="incident-state"]')).toHaveAttribute("data-state", "open");
  const story = await (await request.get(`/api/incidents/${id}`)).json();
  const entries = page.locator('[data-test="timeline-entry"]');
  await expect(entries).toHaveCount(story.timeline.length);
  await expect(entries.first()).toContainText("cause fired");
  const times: number[] = story.timeline.map((e: { at_ms: number }) => e.at_ms);
  expect(times.every((t, i) => i === 0 || times[i - 1] <= t)).toBe(true);
  expect(await audit(page, `/incidents/${id}`)).toEqual([]);
  // An id no alert has: a page that says so.
  await page.goto("/incidents/999999999");
  await expect(page.getByRole("heading", { name: "No such incident" })).toBeVisible();
});
