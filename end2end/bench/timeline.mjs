// `cargo xtask bench timeline`: /timeline of 2,048 simulated nodes over 7 days. Prints the
// server's time for the page (5 requests), its size and bar count, and in headless
// Chromium: first contentful paint, the main-thread time of the load, the longest task,
// and the time of a pan to the previous half window (client-side navigation).
import { chromium } from "playwright-core";

const url = process.env.GANTRY_URL ?? "http://127.0.0.1:3000";
const path = "/timeline?hours=168";

const times = [];
let bytes = 0;
let html = "";
for (let i = 0; i < 5; i++) {
  const t = performance.now();
  const r = await fetch(url + path);
  html = await r.text();
  times.push(performance.now() - t);
  bytes = Buffer.byteLength(html);
}
const rects = (html.match(/<rect /g) ?? []).length;
const jobs = new Set([...html.matchAll(/data-job="(\d+)"/g)].map((m) => m[1])).size;
times.sort((a, b) => a - b);

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
const cdp = await page.context().newCDPSession(page);
await cdp.send("Performance.enable");
const taskMs = async () => {
  const { metrics } = await cdp.send("Performance.getMetrics");
  return 1000 * (metrics.find((m) => m.name === "TaskDuration")?.value ?? 0);
};
await page.addInitScript(() => {
  window.__long = [];
  new PerformanceObserver((l) => l.getEntries().forEach((e) => window.__long.push(e.duration))).observe({ type: "longtask", buffered: true });
});
const t0 = Date.now();
await page.goto(url + path, { waitUntil: "load" });
const loadMs = Date.now() - t0;
const fcp = await page.evaluate(() => performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? null);
await page.waitForTimeout(1500);
const loadTask = await taskMs();
const longest = await page.evaluate(() => Math.max(0, ...window.__long));
// Pan: the "earlier" link (a page load from the server, see pages/timeline.rs).
const before = await taskMs();
const tp = Date.now();
const oldSvg = await page.locator('[data-test="timeline"] > svg > title').textContent();
await page.getByRole("link", { name: "← earlier" }).click();
await page.waitForFunction(
  (old) => document.querySelector('[data-test="timeline"] > svg > title')?.textContent !== old,
  oldSvg,
  { timeout: 60_000 },
);
const panMs = Date.now() - tp;
// The window links load a new page: its main-thread time counts from zero again.
const after = await taskMs();
const panTask = after >= before ? after - before : after;
const longestAll = await page.evaluate(() => Math.max(0, ...window.__long));
await browser.close();

const kb = (b) => (b / 1024).toFixed(0);
console.log(`timeline page:               ${kb(bytes)} KB HTML (compressed on the wire), ${rects} rects, ${jobs} jobs`);
console.log(`server time for the page:    median ${times[2].toFixed(0)} ms, worst ${times[4].toFixed(0)} ms`);
console.log(`first contentful paint:      ${fcp === null ? "n/a" : fcp.toFixed(0) + " ms"}, load event after ${loadMs} ms   (goal: under 1,500 ms)`);
console.log(`main-thread time of load:    ${loadTask.toFixed(0)} ms; longest task ${longest.toFixed(0)} ms`);
console.log(`pan to the previous 3.5 days: ${panMs} ms, main-thread ${panTask.toFixed(0)} ms; longest task so far ${longestAll.toFixed(0)} ms   (goal: under 1,000 ms)`);
