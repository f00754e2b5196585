// Pages read well on a laptop and on the wall, on screen (dark, or light when the user
// chooses it with the top bar's button) and in print (light):
// nothing spills out of its container or is clipped, no text is under 12 px, and axe finds
// no contrast failure; the new words and marks of /timeline, /topology, a job page and
// /audit are there, and a job page's coverage names the run the simulator started.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { expect, test } from "./fixtures";
import { signIn } from "./a11y";
import { structure, wallProblems } from "./layout";

const axeSource = readFileSync(resolve(process.cwd(), "node_modules/axe-core/axe.min.js"), "utf8");
const PAGES = ["/", "/racks", "/thermal", "/topology", "/nodes", "/nodes/gpu001", "/jobs", "/jobs/1000", "/timeline", "/alerts", "/audit", "/reports", "/reliability"];

const MODES = [
  { name: "dark", media: "screen", theme: "dark" },
  { name: "light", media: "screen", theme: "light" },
  { name: "light (print)", media: "print", theme: "dark" },
] as const;

for (const width of [1366, 1920]) {
  for (const mode of MODES) {
    test(`every page's structure at ${width} px, ${mode.name}`, async ({ page }) => {
      test.setTimeout(180_000);
      await page.setViewportSize({ width, height: 1080 });
      await signIn(page, "admin1");
      if (mode.theme === "light") {
        // The user's choice, by the button, as a user makes it.
        await page.goto("/racks");
        await page.locator('[data-test="theme-toggle"]').click();
        await expect(page.locator("html")).toHaveAttribute("data-theme", "light");
      }
      await page.emulateMedia({ media: mode.media });
      const found: string[] = [];
      for (const path of PAGES) {
        await page.goto(path);
        await page.waitForLoadState("networkidle");
        found.push(...(await structure(page)).map((l) => `${path}: ${l}`));
        await page.evaluate(axeSource);
        const contrast: { nodes: { target: string[] }[] }[] = await page.evaluate(async () => {
          // @ts-expect-error axe is the script just evaluated
          const r = await window.axe.run(document, { runOnly: ["color-contrast"], resultTypes: ["violations"] });
          return r.violations;
        });
        for (const v of contrast) found.push(`${path}: contrast under 4.5:1 at ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")}`);
      }
      expect(found, found.join("\n")).toEqual([]);
    });
  }
}

test("the theme button switches every page and back, and stays on the page it was pressed on", async ({ page, request }) => {
  await page.goto("/topology");
  await expect(page.locator("html")).toHaveAttribute("data-theme", "dark");
  const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const dark = await bg();
  await page.locator('[data-test="theme-toggle"]').click();
  await expect(page).toHaveURL(/\/topology$/);
  await expect(page.locator("html")).toHaveAttribute("data-theme", "light");
  expect(await bg()).not.toBe(dark);
  // Another page opens light too (the server reads the cookie: no flash of dark first).
  const html = await (await page.request.get("/alerts")).text();
  expect(html).toContain('data-theme="light"');
  // An image chart is drawn for a light page: no mid-grey text, which reads at 2.4:1 on white.
  const svg = await (await page.request.get("/api/charts/throttling.svg?scope=cluster&hours=24")).text();
  expect(svg.toUpperCase()).not.toContain("#9AA7B3");
  await page.locator('[data-test="theme-toggle"]').click();
  await expect(page.locator("html")).toHaveAttribute("data-theme", "dark");
  expect(await bg()).toBe(dark);
  // The API, without the page's cookie, is untouched.
  const plain = await (await request.get("/api/charts/throttling.svg?scope=cluster&hours=24")).text();
  expect(plain.toUpperCase()).toContain("#9AA7B3");
});

test("the timeline names its rows, labels its bars, keys each state and marks now", async ({ page, request }) => {
  await page.goto("/timeline?hours=24");
  const svg = page.locator('[data-test="timeline"] svg');
  const nodes = await svg.locator("text.tl-node").allTextContents();
  const truth = (await (await request.get("/sim/truth")).json()).truth;
  expect(nodes.length).toBe(truth.nodes.length);
  expect(nodes).toContain("gpu001");
  // Job 1000 runs on eight nodes of one rack: one bar, its id and name written on it.
  await expect(svg.locator('a[data-job="1000"] text.tl-label').first()).toHaveText(/^1000( |$)/);
  await expect(svg.locator('a[data-job="1000"] title')).toContainText("gpu001");
  await expect(svg.locator('[data-test="timeline-now"]')).toHaveCount(1);
  // Each state its own fill.
  const fills = await page.evaluate(() => {
    const probe = (cls: string) => {
      const a = document.createElementNS("http://www.w3.org/2000/svg", "a");
      a.setAttribute("class", cls);
      document.querySelector("svg.timeline")!.appendChild(a);
      const f = getComputedStyle(a).fill;
      a.remove();
      return f;
    };
    return ["tl-run", "tl-run tl-done", "tl-run tl-requeued", "tl-run tl-failed", "tl-drain", "tl-down"].map(probe);
  });
  expect(new Set(fills).size, fills.join(" ")).toBe(6);
});

test("a job page's ledger says what it covers, from the run the simulator started", async ({ page, request }) => {
  const truth = (await (await request.get("/sim/truth")).json()).truth;
  const job = truth.jobs.find((j: { id: number }) => j.id === 1000);
  await page.goto("/jobs/1000");
  const start = new Date(job.start_ms).toISOString().slice(0, 16).replace("T", " ");
  await expect(page.locator('[data-test="job-coverage"]')).toContainText(`first run from ${start} UTC`);
  // It ran a day before this server started: what Gantry booked is a part, and says so.
  await expect(page.locator('[data-test="job-coverage"]')).toContainText(/It has held|Gantry counts what it watched/);
});

test("a requeue keeps its reason, and audit rows link their targets", async ({ page }) => {
  await signIn(page, "operator1");
  // A requeue with its reason, through the API as the page's form would.
  const r = await page.request.post("/api/actions/requeue?wait=20", { data: { jobs: [1003], reason: "layout test: requeue reason kept" } });
  expect(r.status(), await r.text()).toBeLessThan(300);
  await page.goto("/audit?action=requeue");
  const row = page.locator('[data-test="audit-row"]').filter({ hasText: "layout test: requeue reason kept" }).first();
  await expect(row).toBeVisible();
  await expect(row.locator('[data-test="audit-target"]')).toHaveAttribute("href", "/jobs/1003");
  await row.locator('[data-test="audit-target"]').click();
  await expect(page).toHaveURL(/\/jobs\/1003$/);
});

test("wall mode fits the 64 nodes of the default cluster on 1920 x 1080, labels 16 px or more", async ({ page }) => {
  await page.setViewportSize({ width: 1920, height: 1080 });
  await page.goto("/racks?kiosk=1");
  await expect(page.locator('[data-test="live-status"]')).toHaveClass(/\blive\b/, { timeout: 15_000 });
  await expect(page.locator('[data-test="floor-node"]')).toHaveCount(64);
  expect(await wallProblems(page)).toEqual([]);
  // Its colour chips keep the wall mode.
  expect(await page.locator('nav[aria-label="Colour nodes by"] a').first().getAttribute("href")).toContain("kiosk=1");
});
