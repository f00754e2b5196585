// `cargo xtask bench browser`: /racks of a 2,048-node simulated cluster in headless
// Chromium, measured through the DevTools protocol. Prints first contentful paint, the
// main-thread time per live update (all main-thread work between two updates, average and
// p95), and the bytes of each server-sent update.
import { chromium } from "playwright-core";

const url = process.env.GANTRY_URL ?? "http://127.0.0.1:3000";
const secs = Number(process.env.GANTRY_BENCH_SECONDS ?? 60);

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
const cdp = await page.context().newCDPSession(page);
await cdp.send("Network.enable");
await cdp.send("Performance.enable");

async function taskMs() {
  const { metrics } = await cdp.send("Performance.getMetrics");
  const get = (n) => 1000 * (metrics.find((m) => m.name === n)?.value ?? 0);
  // Where the time goes: script, style recalculation, layout (the rest is paint and other).
  split.script = get("ScriptDuration");
  split.style = get("RecalcStyleDuration");
  split.layout = get("LayoutDuration");
  return get("TaskDuration");
}
const split = { script: 0, style: 0, layout: 0 };
let splitStart = null;

let measuring = false;
let last = null;
const perUpdate = [];
const sizes = { snapshot: [], delta: [] };
cdp.on("Network.eventSourceMessageReceived", async (e) => {
  (sizes[e.eventName] ?? (sizes[e.eventName] = [])).push(Buffer.byteLength(e.data));
  if (!measuring) return;
  const t = await taskMs();
  if (splitStart === null) splitStart = { ...split };
  if (last !== null) perUpdate.push(t - last);
  last = t;
});

const t0 = Date.now();
const resp = await page.goto(`${url}/racks`, { waitUntil: "load" });
const loadMs = Date.now() - t0;
const htmlBytes = Number(resp?.headers()["content-length"] ?? 0) || (await resp?.body())?.length || 0;
const fcp = await page.evaluate(() => performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? null);
await page.waitForSelector('[data-test="live-status"].live', { timeout: 120_000 });
const nodes = await page.locator('[data-test="floor-node"]').count();
// Let the first snapshot settle, then measure.
await page.waitForTimeout(3000);
sizes.delta.length = 0;
measuring = true;
await page.waitForTimeout(secs * 1000);
measuring = false;
await browser.close();

const sorted = [...perUpdate].sort((a, b) => a - b);
const avg = (xs) => xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);
const p95 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))] ?? NaN;
const kb = (b) => (b / 1024).toFixed(1);
console.log(`nodes on the floor:          ${nodes}`);
console.log(`page HTML:                   ${kb(htmlBytes)} KB, load event after ${loadMs} ms`);
console.log(`first contentful paint:      ${fcp === null ? "n/a" : fcp.toFixed(0) + " ms"}   (goal: under 1,500 ms)`);
console.log(`main-thread time per update: average ${avg(perUpdate).toFixed(1)} ms, p95 ${p95.toFixed(1)} ms over ${perUpdate.length} updates   (goal: under 16 ms)`);
const n = Math.max(perUpdate.length, 1);
if (splitStart !== null) {
  console.log(
    `  of which per update:       script ${((split.script - splitStart.script) / n).toFixed(1)} ms, style ${((split.style - splitStart.style) / n).toFixed(1)} ms, layout ${((split.layout - splitStart.layout) / n).toFixed(1)} ms`,
  );
}
console.log(`bytes per SSE update:        average ${kb(avg(sizes.delta))} KB, max ${kb(Math.max(0, ...sizes.delta))} KB over ${sizes.delta.length} deltas; snapshot ${kb(Math.max(0, ...sizes.snapshot))} KB   (goal: under 64 KB)`);
