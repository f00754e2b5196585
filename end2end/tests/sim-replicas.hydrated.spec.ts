// Two replicas of the simulator on one PostgreSQL (`cargo xtask test` passes
// GANTRY_TEST_PG_URL): the standby runs no simulator, so an action sent to it is recorded
// there and run by the leader; the standby answers as the leader would (202 and where to
// follow it), and the verified end shows on both replicas' live pages in Chromium.
import { ChildProcess, execFileSync, spawn } from "node:child_process";
import { expect, freePort, test } from "./fixtures";

const NODE = "gpu014";
const admin = process.env.GANTRY_TEST_PG_URL ?? "";
const password = process.env.GANTRY_E2E_PASSWORD ?? "";

test.skip(!admin && !process.env.CI, "GANTRY_TEST_PG_URL not set (run `cargo xtask test`)");

type Replica = { proc: ChildProcess; base: string; log: string };
const replicas: Replica[] = [];
let db = "";

async function start(bin: string): Promise<Replica> {
  const port = await freePort();
  const r: Replica = { proc: undefined as unknown as ChildProcess, base: `http://127.0.0.1:${port}`, log: "" };
  r.proc = spawn(bin, [], {
    env: {
      ...process.env,
      GANTRY_LISTEN: `127.0.0.1:${port}`,
      GANTRY_DATABASE_URL: db,
      GANTRY_ANONYMOUS_READ: "true",
      GANTRY_SIM_NODES: "16",
      RUST_LOG: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  r.proc.stdout?.on("data", (d) => (r.log += d));
  r.proc.stderr?.on("data", (d) => (r.log += d));
  await expect
    .poll(async () => (await fetch(`${r.base}/healthz`).catch(() => undefined))?.status ?? 0, {
      timeout: 60_000,
      intervals: [250],
      message: `a replica did not come up; its log:\n${r.log}`,
    })
    .toBe(200);
  replicas.push(r);
  return r;
}

const term = async (r: Replica) => {
  const text = await (await fetch(`${r.base}/metrics`)).text();
  return Number(/^gantry_leader_term (\d+)/m.exec(text)?.[1] ?? 0);
};

test.beforeAll(async () => {
  const bin = process.env.GANTRY_BIN;
  expect(bin, "GANTRY_BIN: the gantry binary (cargo xtask test sets it)").toBeTruthy();
  expect(password, "GANTRY_E2E_PASSWORD").toBeTruthy();
  const name = `gantry_e2e_sim_replicas_${process.pid}_${Date.now()}`;
  execFileSync("psql", [admin, "-q", "-c", `CREATE DATABASE ${name}`]);
  db = admin.replace(/\/[^/]*$/, `/${name}`);
  execFileSync(bin!, ["user", "add", "operator1", "--role", "operator"], {
    env: { ...process.env, GANTRY_DATABASE_URL: db, GANTRY_PASSWORD: password },
    stdio: "ignore",
  });
});

test.afterAll(async () => {
  for (const r of replicas) r.proc.kill("SIGTERM");
});

test("a drain sent to the simulator's standby is run by the leader and shows on both", async ({ page, browser, playwright }) => {
  test.setTimeout(120_000);
  const a = await start(process.env.GANTRY_BIN!);
  await expect.poll(() => term(a), { timeout: 10_000, message: "A leads" }).toBeGreaterThan(0);
  const b = await start(process.env.GANTRY_BIN!);
  expect(await term(b), "B stands by").toBe(0);

  const onB = await playwright.request.newContext({ baseURL: b.base, extraHTTPHeaders: { Origin: b.base } });
  const signedIn = await onB.post("/auth/login", { form: { name: "operator1", password, next: "/" }, maxRedirects: 0 });
  expect(signedIn.status()).toBe(303);

  // Both replicas' /nodes, hydrated and live.
  await page.goto(`${a.base}/nodes`);
  await expect(page.locator('[data-test="nodes-page"]')).toHaveAttribute("data-hydrated", "true");
  const rowA = page.locator(`[data-test="node-row"][data-node="${NODE}"]`);
  await expect(rowA).not.toHaveAttribute("data-state", /draining|drained/, { timeout: 10_000 });
  const pageB = await browser.newPage();
  await pageB.goto(`${b.base}/nodes`);
  await expect(pageB.locator('[data-test="nodes-page"]')).toHaveAttribute("data-hydrated", "true");
  const rowB = pageB.locator(`[data-test="node-row"][data-node="${NODE}"]`);

  // Sent to B without waiting: answered at once, as the leader answers, with where to follow it.
  const drained = await onB.post("/api/actions/drain", { data: { nodes: [NODE], reason: "e2e: sim replicas" } });
  expect(drained.status(), await drained.text()).toBe(202);
  const id = (await drained.json()).id;
  expect(drained.headers()["location"]).toBe(`/api/actions/${id}`);
  // Followed on B to its verified end.
  await expect
    .poll(async () => (await (await onB.get(`/api/actions/${id}?wait=5`)).json()).state, {
      timeout: 30_000,
      message: "the action ends",
    })
    .toBe("done");
  for (const row of [rowA, rowB]) {
    await expect(row).toHaveAttribute("data-state", /draining|drained/, { timeout: 5_000 });
    await expect(row.locator('[data-test="node-reason"]')).toHaveText("operator1: e2e: sim replicas");
  }
  await pageB.close();
  await onB.dispose();
});
