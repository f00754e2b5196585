// The truth test on the real source, in the browser: a Gantry of its own with
// `source = "slurm"` on the real 16-node Slurm of the tests (`cargo xtask test` passes its
// configuration in GANTRY_TEST_SLURM_CONF), scraping exporters that this test serves with
// known readings. /thermal, /racks and /topology, hydrated and live, show what those
// readings imply: GPU-hours lost to throttling as time passes, each rack's power, GPUs
// throttling per rack, allocation and SM activity per leaf switch.
import { ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, freePort, test } from "./fixtures";

/** These nodes' GPUs throttle (SW thermal, DCGM reason bit 0x20) at 198 MHz: a deficit of 0.9. */
const THROTTLED = ["gpu001", "gpu002", "gpu003", "gpu004"];
const HOST_WATTS = 1000;
const gpuWatts = (node: string) => (THROTTLED.includes(node) ? 600 : 400);
const smActive = (node: string) => (THROTTLED.includes(node) ? 0.45 : 0.9);

const conf = process.env.GANTRY_TEST_SLURM_CONF ?? "";

const slurm = (program: string, args: string[]) =>
  execFileSync(program, args, { env: { ...process.env, SLURM_CONF: conf }, encoding: "utf8" });

/** dcgm-exporter's text for one node, as its default counters and profiling fields write it. */
function dcgm(node: string, gpus: number): string {
  const families: [string, string, (g: number) => string][] = [
    ["DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", () => (THROTTLED.includes(node) ? "198" : "1980")],
    ["DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", () => (THROTTLED.includes(node) ? "88" : "60")],
    ["DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", () => gpuWatts(node).toFixed(6)],
    ["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Throttling reasons.", () => (THROTTLED.includes(node) ? "32" : "0")],
    ["DCGM_FI_PROF_SM_ACTIVE", "Ratio of cycles an SM has at least 1 warp assigned.", () => smActive(node).toFixed(6)],
  ];
  let out = "";
  for (const [name, help, value] of families) {
    out += `# HELP ${name} ${help}\n# TYPE ${name} gauge\n`;
    for (let g = 0; g < gpus; g++) {
      const uuid = `GPU-${node}-0000-4000-8000-00000000000${g}`;
      out += `${name}{gpu="${g}",UUID="${uuid}",pci_bus_id="00000000:${(0x18 + 0x11 * g).toString(16)}:00.0",device="nvidia${g}",modelName="NVIDIA H100 80GB HBM3",Hostname="${node}",DCGM_FI_DRIVER_VERSION="580.105.08"} ${value(g)}\n`;
    }
  }
  return out;
}

/** ipmi_exporter's DCMI power and inlet sensor for one node. */
function ipmi(node: string, gpus: number): string {
  return (
    "# HELP ipmi_dcmi_power_consumption_watts Current power consumption in Watts.\n" +
    "# TYPE ipmi_dcmi_power_consumption_watts gauge\n" +
    `ipmi_dcmi_power_consumption_watts ${HOST_WATTS + gpus * gpuWatts(node)}\n` +
    "# HELP ipmi_temperature_celsius Temperature reading in degree Celsius.\n" +
    "# TYPE ipmi_temperature_celsius gauge\n" +
    'ipmi_temperature_celsius{id="1",name="Inlet Temp"} 30\n'
  );
}

let gantry: ChildProcess | undefined;
let exporters: Server | undefined;
let dir = "";
let base = "";
let log = "";
let job = "";
/** GPUs per node, as Slurm's GRES says. */
const gpusOf = new Map<string, number>();

// Locally without the test cluster the file is skipped; under CI it must run.
test.skip(!conf && !process.env.CI, "GANTRY_TEST_SLURM_CONF not set (run `cargo xtask test`)");

test.beforeAll(async () => {
  expect(conf, "GANTRY_TEST_SLURM_CONF: the real Slurm (cargo xtask test sets it)").toBeTruthy();
  const bin = process.env.GANTRY_BIN;
  expect(bin, "GANTRY_BIN: the gantry binary (cargo xtask test sets it)").toBeTruthy();
  for (const line of slurm("sinfo", ["-h", "-N", "-o", "%N %G"]).trim().split("\n")) {
    const [node, gres] = line.trim().split(/\s+/);
    gpusOf.set(node, Number(/(\d+)(\(|$)/.exec(gres ?? "")?.[1] ?? 0));
  }
  expect(gpusOf.size).toBe(16);
  exporters = createHttpServer((req, res) => {
    const [, kind, node] = (req.url ?? "").split("/");
    const gpus = gpusOf.get(node ?? "");
    if (gpus === undefined || (kind !== "dcgm" && kind !== "ipmi")) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4" });
    res.end(kind === "dcgm" ? dcgm(node, gpus) : ipmi(node, gpus));
  });
  const exporterPort = await freePort();
  await new Promise<void>((resolve) => exporters!.listen(exporterPort, "127.0.0.1", resolve));

  dir = mkdtempSync(join(tmpdir(), "gantry-real-source-"));
  writeFileSync(
    join(dir, "layout.toml"),
    '[[rack]]\nname = "R1"\nrow = "A"\npower_limit_kw = 40\nnodes = "gpu[001-008]"\n' +
      '[[rack]]\nname = "R2"\nrow = "A"\npower_limit_kw = 40\nnodes = "gpu[009-016]"\n',
  );
  writeFileSync(
    join(dir, "topology.conf"),
    "SwitchName=leaf1 Nodes=gpu[001-008]\nSwitchName=leaf2 Nodes=gpu[009-016]\nSwitchName=spine Switches=leaf[1-2]\n",
  );
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  gantry = spawn(bin!, [], {
    env: {
      ...process.env,
      GANTRY_LISTEN: `127.0.0.1:${port}`,
      GANTRY_DATABASE_URL: `sqlite://${join(dir, "gantry.db")}`,
      GANTRY_ANONYMOUS_READ: "true",
      GANTRY_SOURCE: "slurm",
      GANTRY_SLURM_CONF: conf,
      GANTRY_SLURM_POLL_INTERVAL_MS: "500",
      GANTRY_SLURM_LAYOUT: join(dir, "layout.toml"),
      GANTRY_SLURM_TOPOLOGY: join(dir, "topology.conf"),
      GANTRY_GPU_EXPORTER_URL: `http://127.0.0.1:${exporterPort}/dcgm/{node}`,
      GANTRY_BMC_EXPORTER_URL: `http://127.0.0.1:${exporterPort}/ipmi/{node}`,
      GANTRY_SCRAPE_INTERVAL_MS: "500",
      RUST_LOG: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  gantry.stdout?.on("data", (d) => (log += d));
  gantry.stderr?.on("data", (d) => (log += d));
  // Serving, and a first poll of Slurm published.
  await expect
    .poll(async () => (await fetch(`${base}/healthz`).catch(() => undefined))?.status ?? 0, {
      timeout: 60_000,
      intervals: [250],
      message: `gantry did not come up on the real Slurm; its log:\n${log}`,
    })
    .toBe(200);
  // This test's own job on gpu002 (leaf1, throttled): the leaf's allocation and SM activity.
  job = slurm("sbatch", [
    "--parsable", "-N1", "-w", "gpu002", "--exclusive", "-p", "gpu", "--output=/dev/null",
    "-J", "gantry-e2e-truth", "--wrap", "sleep 300",
  ]).trim().split(";")[0];
});

test.afterAll(async () => {
  if (job) {
    try {
      slurm("scancel", [job]);
    } catch {
      // Already gone.
    }
  }
  gantry?.kill("SIGTERM");
  exporters?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const rackNodes = (rack: "R1" | "R2") =>
  [...gpusOf.keys()].filter((n) => (rack === "R1" ? n <= "gpu008" : n > "gpu008"));

test("a real Slurm with known exporters: /thermal, /racks and /topology show what the readings imply", async ({ page }) => {
  test.setTimeout(120_000);
  const throttled = sum(THROTTLED.map((n) => gpusOf.get(n) ?? 0));
  expect(throttled).toBeGreaterThan(0);

  // /thermal: throttling now, in all and per rack, and GPU-hours lost growing at the rate the
  // readings imply (each throttled GPU's 0.9 deficit).
  await page.goto(`${base}/thermal`);
  await expect(page.locator('[data-test="thermal-throttling"]'), `gantry log:\n${log}`).toHaveText(String(throttled), { timeout: 30_000 });
  await expect(page.locator('tr[data-rack="R1"] [data-test="rack-throttling"]')).toHaveText(String(throttled));
  await expect(page.locator('tr[data-rack="R2"] [data-test="rack-throttling"]')).toHaveText("0");
  const lost = async () => Number.parseFloat((await page.locator('[data-test="thermal-lost"]').innerText()).replace(" GPU-h", ""));
  await expect.poll(lost, { timeout: 30_000 }).toBeGreaterThan(0);
  const [l0, t0] = [await lost(), Date.now()];
  await page.waitForTimeout(12_000);
  const [l1, t1] = [await lost(), Date.now()];
  const want = (throttled * 0.9 * (t1 - t0)) / 3_600_000;
  // Two roundings to 0.01 GPU-h and a live interval either side.
  expect(Math.abs(l1 - l0 - want), `lost ${l0} -> ${l1} GPU-h in ${t1 - t0} ms; the readings imply ${want}`).toBeLessThanOrEqual(0.02);

  // /racks: each rack's power is the sum of its nodes' BMC readings.
  await page.goto(`${base}/racks`);
  for (const rack of ["R1", "R2"] as const) {
    const watts = sum(rackNodes(rack).map((n) => HOST_WATTS + (gpusOf.get(n) ?? 0) * gpuWatts(n)));
    await expect(
      page.locator(`[data-test="floor-rack"][data-rack="${rack}"] [data-test="floor-rack-head"]`),
    ).toHaveAttribute("data-power-watts", watts.toFixed(1), { timeout: 15_000 });
  }

  // /topology: this test's job is the only one running, on gpu002 in leaf1.
  expect(slurm("squeue", ["-h", "-t", "R", "-o", "%i"]).trim(), "no other job runs on the test cluster").toBe(job);
  await page.goto(`${base}/topology`);
  const leaf1 = page.locator('tr[data-domain="leaf1"]');
  await expect(leaf1).toHaveAttribute("data-allocated", String(gpusOf.get("gpu002")), { timeout: 15_000 });
  await expect(leaf1.locator("td").nth(5)).toHaveText(`${Math.round(smActive("gpu002") * 100)}%`);
  await expect(page.locator('tr[data-domain="leaf2"]')).toHaveAttribute("data-allocated", "0");
});
