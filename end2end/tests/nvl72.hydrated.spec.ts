// The GB200 NVL72 profile in the browser, against the simulator's truth: /topology's free
// segments per size and its largest free segment, live, equal the truth's at the sequence
// the page shows; a coolant leak reaches /racks (the rack's head names its trays and is
// critical) and /alerts (the alert names the rack, the trays and the jobs the truth has
// there) within two live intervals of the tick whose truth first has it critical; a power
// shelf down lowers its rack's limit on /racks to the truth's and its alert names the
// shelf, the limit and the jobs; an NVLink switch tray down (NMX-T) shows on /racks with
// the truth's compute trays cut, and its alert names them. A Gantry of its own: 144 trays
// at 60x, so the switch tray goes down 6 s after start, the shelf at 8 s and the leak
// turns critical at 12 s.
// The drain preview: nvl72-drain.hydrated.spec.ts.
import { audit } from "./a11y";
import { expect, ownGantry, OwnGantry, test } from "./fixtures";
import { wallProblems } from "./layout";
import { shownSegments } from "./truth";

let gantry: OwnGantry | undefined;
let base = "";
const INTERVAL_MS = 1000;

test.beforeAll(async () => {
  gantry = await ownGantry("nvl72", {
    GANTRY_SIM_PROFILE: "nvl72",
    GANTRY_SIM_NODES: "144",
    GANTRY_SIM_SPEED: "60",
    GANTRY_SIM_START_MS: "1795968000000",
    GANTRY_LIVE_INTERVAL_MS: String(INTERVAL_MS),
  });
  base = gantry.base;
});

test.afterAll(async () => {
  gantry?.stop();
});

async function started(request: any) {
  await expect
    .poll(async () => (await request.get(`${base}/healthz`).catch(() => undefined))?.status(), {
      timeout: 30_000,
      message: `gantry did not start; log:\n${gantry?.log()}`,
    })
    .toBe(200);
}

test("NVL72: free segments per size and the largest free segment are the truth's, live", async ({ page, request }) => {
  test.setTimeout(60_000);
  await started(request);
  await page.goto(`${base}/topology`);
  await expect(page.locator('[data-test="live-status"]')).toHaveClass(/\blive\b/, { timeout: 15_000 });
  for (let round = 0; round < 3; round++) {
    const before = Number(await page.locator("[data-seq]").first().getAttribute("data-seq"));
    await expect.poll(async () => Number(await page.locator("[data-seq]").first().getAttribute("data-seq")), { timeout: 10_000 }).toBeGreaterThan(before);
    const shown = await shownSegments(page);
    const r = await request.get(`${base}/sim/truth?seq=${shown.seq}`);
    expect(r.status(), `truth of seq ${shown.seq}`).toBe(200);
    const seg = (await r.json()).truth.segments[0];
    expect(seg.base).toBe(18);
    expect(shown.largest).toBe(String(seg.largest_free_segment));
    // 1, 2, 4, 8, 16 and the base, and the sizes pending jobs ask for.
    for (const s of [1, 2, 4, 8, 16, 18]) expect(shown.sizes.map((x) => x.size)).toContain(s);
    for (const s of shown.sizes) {
      const want = (seg.sizes as [number, number][]).find(([size]) => size === s.size);
      expect(want, `size ${s.size}`).toBeTruthy();
      expect(s.free, `size ${s.size} at seq ${shown.seq}`).toBe(String(want![1]));
    }
  }
});

test("NVL72: a coolant leak shows on /racks and fires an alert naming rack, trays and jobs within two intervals", async ({ page, request }) => {
  test.setTimeout(90_000);
  await started(request);
  // Watch the truth each tick: when a rack's leak first turns critical, and which jobs run
  // in that rack at every tick from then.
  type Rack = { name: string; leaking?: [string, string][]; jobs: number[] };
  let critical: { at: number; rack: Rack } | undefined;
  const jobsSeen: string[] = [];
  await page.goto(`${base}/racks`);
  await expect(page.locator('[data-test="live-status"]')).toHaveClass(/\blive\b/, { timeout: 15_000 });
  await expect
    .poll(
      async () => {
        const r = await request.get(`${base}/sim/truth`).catch(() => undefined);
        if (r?.status() !== 200) return false;
        const racks: Rack[] = (await r.json()).truth.racks;
        const rack = racks.find((x) => (x.leaking ?? []).some(([, s]) => s === "critical"));
        if (rack && !critical) critical = { at: Date.now(), rack };
        if (critical) {
          const now = racks.find((x) => x.name === critical!.rack.name)!;
          jobsSeen.push([...now.jobs].sort((a, b) => a - b).join(","));
        }
        return critical !== undefined && Date.now() - critical.at >= 2 * INTERVAL_MS;
      },
      { timeout: 60_000, intervals: [100], message: `no critical leak in the truth; log:\n${gantry?.log().slice(-3000)}` },
    )
    .toBe(true);
  const { rack } = critical!;
  const trays = (rack.leaking ?? []).map(([n]) => n);
  // Two intervals on: the live floor already says so.
  const head = page.locator(`[data-test="floor-rack"][data-rack="${rack.name}"] [data-test="floor-rack-head"]`);
  // (An off-screen rack is painted every second tick: one interval of slack.)
  await expect(head).toHaveClass(/sev-critical/, { timeout: INTERVAL_MS });
  await expect(head).toContainText(`LEAK (Critical) at ${trays.join(", ")}`, { timeout: INTERVAL_MS });
  // And the alert is open, in the store: /alerts lists it.
  await page.goto(`${base}/alerts`);
  const row = page.locator(`[data-test="alert"][data-rule="coolant_leak"][data-subject="rack:${rack.name}"]`);
  await expect(row).toHaveCount(1, { timeout: 1 });
  const text = (await row.textContent()) ?? "";
  expect(text).toContain(`at tray ${trays.join(", ")};`);
  const named = (text.split("running jobs: ")[1] ?? "").split(";")[0].split(", ").map(Number).filter((x) => x > 0).sort((a, b) => a - b).join(",");
  expect(jobsSeen, `the alert names jobs ${named}`).toContain(named);
  expect(await page.locator('[data-test="alert"][data-rule="coolant_leak"]').count()).toBe(1);
  // The pages in their leak and low-flow states pass the accessibility audit too.
  const found: string[] = [];
  for (const path of ["/racks", "/thermal", "/alerts"]) found.push(...(await audit(page, `${base}${path}`)));
  expect(found, found.join("\n")).toEqual([]);
});

test("NVL72: a power shelf down lowers its rack's limit on /racks to the truth's, and its alert names shelf, limit and jobs", async ({ page, request }) => {
  test.setTimeout(90_000);
  await started(request);
  type Rack = { name: string; power_limit_watts: number; shelves_down?: string[]; shelves_degraded?: string[]; jobs: number[] };
  await page.goto(`${base}/racks`);
  await expect(page.locator('[data-test="live-status"]')).toHaveClass(/\blive\b/, { timeout: 15_000 });
  let down: { at: number; rack: Rack } | undefined;
  let degraded: Rack | undefined;
  await expect
    .poll(
      async () => {
        const r = await request.get(`${base}/sim/truth`).catch(() => undefined);
        if (r?.status() !== 200) return false;
        const racks: Rack[] = (await r.json()).truth.racks;
        degraded = racks.find((x) => (x.shelves_degraded ?? []).length > 0);
        const rack = racks.find((x) => (x.shelves_down ?? []).length > 0);
        if (rack && !down) down = { at: Date.now(), rack };
        return down !== undefined && Date.now() - down.at >= 2 * INTERVAL_MS;
      },
      { timeout: 60_000, intervals: [100], message: `no shelf down in the truth; log:\n${gantry?.log().slice(-3000)}` },
    )
    .toBe(true);
  const { rack } = down!;
  const shelf = rack.shelves_down!.join(", ");
  // The live page: the rack's row in "Power shelves" says which shelf is down and shows
  // the truth's lowered limit; the rack's head says so too.
  const row = page.locator(`[data-test="shelves"] tr[data-rack="${rack.name}"]`);
  await expect(row.locator('[data-test="shelves-state"]')).toContainText(`7 of 8 delivering; down: ${shelf}`, { timeout: INTERVAL_MS });
  await expect(row.locator('[data-test="shelves-limit"]')).toHaveAttribute("data-limit-watts", String(rack.power_limit_watts));
  expect(rack.power_limit_watts).toBeLessThan(132_000);
  const head = page.locator(`[data-test="floor-rack"][data-rack="${rack.name}"] [data-test="floor-rack-head"]`);
  await expect(head).toContainText(`shelf down: ${shelf}`, { timeout: INTERVAL_MS });
  await expect(head).toHaveClass(/sev-(warning|critical)/);
  // The degraded shelf's rack has a row of its own, with its limit.
  expect(degraded, "the truth has a degraded shelf").toBeTruthy();
  const drow = page.locator(`[data-test="shelves"] tr[data-rack="${degraded!.name}"]`);
  await expect(drow.locator('[data-test="shelves-state"]')).toContainText(`degraded: ${degraded!.shelves_degraded!.join(", ")}`);
  await expect(drow.locator('[data-test="shelves-limit"]')).toHaveAttribute("data-limit-watts", String(degraded!.power_limit_watts));
  // The alert is open: it names the shelf, the limit against the bus bar, and the jobs.
  await page.goto(`${base}/alerts`);
  const alert = page.locator(`[data-test="alert"][data-rule="power_shelf_down"][data-subject="rack:${rack.name}"]`);
  await expect(alert).toHaveCount(1, { timeout: 1 });
  const text = (await alert.textContent()) ?? "";
  expect(text).toContain(`power shelf down: ${shelf} (7 of 8 shelves delivering); its limit is ${(rack.power_limit_watts / 1000).toFixed(1)} kW against the bus bar's 132.0 kW`);
  const named = (text.split("drawing its power: ")[1] ?? "")
    .split("), ")
    .map((j) => Number(j.replace(/^job /, "").split(" ")[0]))
    .filter((x) => x > 0)
    .sort((a, b) => a - b)
    .join(",");
  // The jobs the truth had in the rack at the tick the shelf went down and the two after
  // (the alert fires within two intervals; the server keeps the last 300 ticks' truths).
  const truthAt = async (seq: number): Promise<Rack | undefined> => {
    const r = await request.get(`${base}/sim/truth?seq=${seq}`);
    if (r.status() !== 200) return undefined;
    return ((await r.json()).truth.racks as Rack[]).find((x) => x.name === rack.name);
  };
  let seq = (await (await request.get(`${base}/sim/truth`)).json()).seq ?? 0;
  if (!seq) {
    await page.goto(`${base}/racks`);
    seq = Number(await page.locator("[data-seq]").first().getAttribute("data-seq"));
  }
  let first = seq;
  while (first > 1) {
    const t = await truthAt(first - 1);
    if (!t || (t.shelves_down ?? []).length === 0) break;
    first--;
  }
  const jobsAt: string[] = [];
  for (let s = first; s <= first + 2; s++) {
    const t = await truthAt(s);
    if (t) jobsAt.push([...t.jobs].sort((a, b) => a - b).join(","));
  }
  expect(jobsAt.length, `truths from seq ${first}`).toBeGreaterThan(0);
  expect(jobsAt, `the alert names jobs ${named}`).toContain(named);
});

test("NVL72: an NVLink switch tray down shows on /racks with the truth's compute trays cut, and its alert names them", async ({ page, request }) => {
  test.setTimeout(90_000);
  await started(request);
  type Rack = { name: string; nvlink_down?: string[]; nvlink_cut?: string[]; nvlink_links_down?: number };
  let down: { at: number; rack: Rack } | undefined;
  let links: Rack | undefined;
  // NMX-T is read at most every 5 s: wait that and two live intervals past the truth.
  await expect
    .poll(
      async () => {
        const r = await request.get(`${base}/sim/truth`).catch(() => undefined);
        if (r?.status() !== 200) return false;
        const racks: Rack[] = (await r.json()).truth.racks;
        links = racks.find((x) => (x.nvlink_down ?? []).length === 0 && (x.nvlink_links_down ?? 0) > 0);
        const rack = racks.find((x) => (x.nvlink_down ?? []).length > 0);
        if (rack && !down) down = { at: Date.now(), rack };
        return down !== undefined && Date.now() - down.at >= 5_000 + 2 * INTERVAL_MS;
      },
      { timeout: 60_000, intervals: [100], message: `no switch tray down in the truth; log:\n${gantry?.log().slice(-3000)}` },
    )
    .toBe(true);
  const { rack } = down!;
  const trays = rack.nvlink_down!.join(", ");
  await page.goto(`${base}/racks`);
  await expect(page.locator('[data-test="live-status"]')).toHaveClass(/\blive\b/, { timeout: 15_000 });
  // The rack's row in "NVLink switch trays": the switch tray down, its links, every
  // compute tray the truth has cut; its head says so and is critical.
  const row = page.locator(`[data-test="fabric"] tr[data-rack="${rack.name}"]`);
  await expect(row.locator('[data-test="fabric-state"]')).toContainText(`8 of 9 up; down: ${trays}`);
  await expect(row.locator('[data-test="fabric-links"]')).toHaveText("1152 of 1296");
  await expect(row.locator('[data-test="fabric-cut"] a')).toHaveText(rack.nvlink_cut!);
  const head = page.locator(`[data-test="floor-rack"][data-rack="${rack.name}"] [data-test="floor-rack-head"]`);
  await expect(head).toContainText(`NVLink switch tray down: ${trays}`);
  await expect(head).toHaveClass(/sev-critical/);
  // The rack with one link down names the tray the truth has (where DCGM places it).
  expect(links, "the truth has a rack with a link down").toBeTruthy();
  const lrow = page.locator(`[data-test="fabric"] tr[data-rack="${links!.name}"]`);
  await expect(lrow.locator('[data-test="fabric-cut"] a')).toHaveText(links!.nvlink_cut!);
  await expect(lrow.locator('[data-test="fabric-links"]')).toHaveText(`${1296 - links!.nvlink_links_down!} of 1296`);
  // The alert is open and names the switch tray and the compute trays cut.
  await page.goto(`${base}/alerts`);
  const alert = page.locator(`[data-test="alert"][data-rule="nvlink_switch_tray_down"][data-subject="rack:${rack.name}"]`);
  await expect(alert).toHaveCount(1, { timeout: 1 });
  const text = (await alert.textContent()) ?? "";
  expect(text).toContain(`NVLink switch tray down: ${trays} (8 of 9 switch trays up; 1152 of 1296 GPU links active); compute trays cut: ${rack.nvlink_cut!.join(", ")};`);
});

test("NVL72: wall mode fits eight racks of trays on 1920 x 1080, labels 16 px or more, colours scaled per tray", async ({ page, request }) => {
  await started(request);
  await page.setViewportSize({ width: 1920, height: 1080 });
  await page.goto(`${base}/racks?kiosk=1`);
  await expect(page.locator('[data-test="live-status"]')).toHaveClass(/\blive\b/, { timeout: 15_000 });
  await expect(page.locator('[data-test="floor-rack"]')).toHaveCount(8);
  await expect(page.locator('[data-test="floor-node"]')).toHaveCount(144);
  expect(await wallProblems(page)).toEqual([]);
  // Busy and idle trays in different bands: power per GPU, not the 8-GPU node's kW (where
  // every tray was one of the lowest two).
  const buckets = new Set(await page.locator('[data-test="floor-node"]').evaluateAll((cs) => cs.map((c) => c.getAttribute("data-bucket"))));
  buckets.delete(null);
  expect([...buckets].some((b) => Number(b) >= 2), [...buckets].join(",")).toBe(true);
});
