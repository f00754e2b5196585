// `cargo xtask bench browser`: /racks (or the live page GANTRY_BENCH_PAGE names) of a
// 2,048-node simulated cluster in headless Chromium, measured through the DevTools protocol. Prints first contentful paint, the
// main-thread time per live update (average and p95, in the first window after the page
// goes live and in the next), and the bytes of each server-sent update.
//
// Main-thread time comes from a performance trace of the measuring window: every top-level
// task of the page's main thread, assigned to the live update (server-sent event) it
// follows. Nothing is asked of the page while it is measured, so the measurement costs the
// page nothing (asking for metrics at every update would itself take main-thread time).
//
// Each task is measured twice: its wall time (the goal's figure, what a frame waits for)
// and its thread CPU time (the work itself). Where cores are few the two differ: the main
// thread waits for a core while Chromium's software compositor (no GPU here), the trace
// and the server run, and that wait is billed to the wall time.
import { cpus } from "node:os";
import { chromium } from "playwright-core";

const url = process.env.GANTRY_URL ?? "http://127.0.0.1:3000";
const secs = Number(process.env.GANTRY_BENCH_SECONDS ?? 60);
const path = process.env.GANTRY_BENCH_PAGE ?? "/racks";

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
const cdp = await page.context().newCDPSession(page);
await cdp.send("Network.enable");

const sizes = { snapshot: [], delta: [] };
const liveRequests = new Set();
cdp.on("Network.eventSourceMessageReceived", (e) => {
  liveRequests.add(e.requestId);
  (sizes[e.eventName] ?? (sizes[e.eventName] = [])).push(Buffer.byteLength(e.data));
});
// `/nodes` and `/jobs` are not fed by the event stream: they poll the scheduler's view
// (`/api/nodes_view`), and each answer that finishes is their update.
const polledRequests = new Set();
cdp.on("Network.requestWillBeSent", (e) => {
  if (e.request.url.includes("/api/nodes_view")) polledRequests.add(e.requestId);
});

const t0 = Date.now();
const resp = await page.goto(`${url}${path}`, { waitUntil: "load" });
const loadMs = Date.now() - t0;
const htmlBytes = Number(resp?.headers()["content-length"] ?? 0) || (await resp?.body())?.length || 0;
const fcp = await page.evaluate(() => performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? null);
await page.waitForSelector('[data-test="live-status"].live, [data-test="poll-status"].live', { timeout: 120_000 });
const nodes = await page.locator('[data-test="floor-node"]').count();
// Let the first snapshot settle, then measure two windows of `secs`: the first after the
// page went live, which holds the collection of the load's garbage (Chromium runs it about
// half a minute after the load), and the next, the steady state. Garbage collections are
// billed to the updates they fall in, and counted per window.
await page.waitForTimeout(3000);
sizes.delta.length = 0;

const chunks = [];
cdp.on("Tracing.dataCollected", (e) => chunks.push(...e.value));
const done = new Promise((resolve) => cdp.once("Tracing.tracingComplete", resolve));
await cdp.send("Tracing.start", {
  categories: "devtools.timeline,disabled-by-default-devtools.timeline",
  transferMode: "ReportEvents",
});
await page.waitForTimeout(2 * secs * 1000);
await cdp.send("Tracing.end");
await done;
await browser.close();

// The renderer's main thread: the thread named CrRendererMain of the page's process.
const mainThreads = new Set(
  chunks
    .filter((e) => e.ph === "M" && e.name === "thread_name" && e.args?.name === "CrRendererMain")
    .map((e) => `${e.pid}:${e.tid}`),
);
const onMain = (e) => mainThreads.has(`${e.pid}:${e.tid}`);
// Top-level tasks, and the moments server-sent updates reached the page.
const tasks = chunks.filter((e) => onMain(e) && e.ph === "X" && e.name === "RunTask" && e.dur);
// Each server-sent update arrives as a chunk of the event stream's response; other
// responses (the alert badge's poll) are work between updates, not updates.
// The stream's request began before the trace, so its id comes from the network events.
const polled = path.startsWith("/nodes") || path.startsWith("/jobs");
const updates = chunks
  .filter((e) => onMain(e) && (polled
    ? e.name === "ResourceFinish" && polledRequests.has(e.args?.data?.requestId)
    : e.name === "ResourceReceivedData" && liveRequests.has(e.args?.data?.requestId)))
  .map((e) => e.ts)
  .sort((a, b) => a - b);
const perUpdate = []; // [update's time, main-thread ms, of which on a core]
if (updates.length < 2) {
  // Say what the trace held, so a renamed trace event is found quickly.
  const names = {};
  for (const e of chunks.filter(onMain)) names[`${e.name}/${e.args?.data?.type ?? ""}`] = (names[`${e.name}/${e.args?.data?.type ?? ""}`] ?? 0) + 1;
  console.error(`no live updates found in the trace (${mainThreads.size} main threads); events:`,
    Object.entries(names).sort((a, b) => b[1] - a[1]).slice(0, 25));
}
if (updates.length >= 2) {
  const busy = new Array(updates.length - 1).fill(0);
  const onCore = new Array(updates.length - 1).fill(0);
  for (const t of tasks) {
    // The update whose interval the task ends in: the task that receives an update
    // starts a moment before the update is marked, and belongs to it.
    const end = t.ts + t.dur;
    let lo = 0;
    let hi = updates.length - 1;
    if (end < updates[0] || end >= updates[hi]) continue;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (updates[mid] <= end) lo = mid;
      else hi = mid;
    }
    busy[lo] += t.dur / 1000;
    onCore[lo] += (t.tdur ?? t.dur) / 1000;
  }
  perUpdate.push(...busy.map((ms, i) => [updates[i], ms, onCore[i]]));
}

const majorGcs = chunks.filter((e) => onMain(e) && e.ph === "X" && e.name === "MajorGC" && e.dur);
const avg = (xs) => xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);
const kb = (b) => (b / 1024).toFixed(1);
const p95Of = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))] ?? NaN;
};
// One window's figures: updates from `from` (trace time) for `secs`.
const windowLine = (from) => {
  const to = from + secs * 1e6;
  const inWindow = perUpdate.filter(([t]) => t >= from && t < to);
  const ms = inWindow.map(([, m]) => m);
  const cpu = inWindow.map(([, , c]) => c);
  const p95 = p95Of(ms);
  const gcs = majorGcs.filter((e) => e.ts >= from && e.ts < to);
  const gcMs = gcs.reduce((a, e) => a + e.dur / 1000, 0);
  // The longest single task: what blocks a frame. An update's time may be spread over
  // several tasks (a GC's incremental marking runs in short ones of its own).
  const longest = Math.max(0, ...tasks.filter((t) => t.ts >= from && t.ts < to).map((t) => t.dur / 1000));
  return (
    `average ${avg(ms).toFixed(1)} ms, p95 ${p95.toFixed(1)} ms over ${ms.length} updates; ${gcs.length} major GCs, ${gcMs.toFixed(1)} ms; longest task ${longest.toFixed(1)} ms\n` +
    `    of which on a core:         average ${avg(cpu).toFixed(1)} ms, p95 ${p95Of(cpu).toFixed(1)} ms (thread CPU time)`
  );
};
const start = updates[0] ?? 0;
console.log(`page:                        ${path}${path === "/racks" ? `, ${nodes} nodes on the floor` : ""}`);
console.log(`page HTML:                   ${kb(htmlBytes)} KB, load event after ${loadMs} ms`);
console.log(`first contentful paint:      ${fcp === null ? "n/a" : fcp.toFixed(0) + " ms"}   (goal: under 1,500 ms)`);
console.log(`main-thread time per update   (goal: under 16 ms; a GC's incremental marking runs in the updates' tasks)`);
console.log(`  wall time, and the thread's CPU time within it (${cpus().length} cores, shared by Chromium, the trace and the server)`);
console.log(`  first ${secs} s after going live: ${windowLine(start)}`);
console.log(`  the next ${secs} s:               ${windowLine(start + secs * 1e6)}`);
console.log(`bytes per SSE update:        average ${kb(avg(sizes.delta))} KB, max ${kb(Math.max(0, ...sizes.delta))} KB over ${sizes.delta.length} deltas; ${sizes.snapshot.length ? `snapshot ${kb(Math.max(...sizes.snapshot))} KB` : "no snapshot (the page's sequence was current)"}   (goal: under 64 KB)`);
// One line for xtask to compare runs by (bench browser with GANTRY_BENCH_PROFILE=nvl72).
{
  const steady = perUpdate.filter(([t]) => t >= start + secs * 1e6 && t < start + 2 * secs * 1e6).map(([, m]) => m);
  const figures = { fcp_ms: fcp ?? NaN, steady_avg_ms: avg(steady), steady_p95_ms: p95Of(steady), delta_kb_avg: avg(sizes.delta) / 1024, html_kb: htmlBytes / 1024 };
  console.log(`BENCH ${Object.entries(figures).map(([k, v]) => `${k}=${v}`).join(" ")}`);
}
