// The hydrated tests' `test`: Playwright's, failing any test whose page panicked or broke
// Gantry's Content-Security-Policy. A panic in the browser's wasm (a hydration mismatch, or
// a bug) is written to the console by the panic hook, and the page can look alive after it
// (effects made before the panic keep running), so every hydrated test watches for one.
// The policy is enforced (Playwright's `bypassCSP` stays off): every violation the browser
// reports (`securitypolicyviolation`, seen by a script the browser runs outside the page's
// policy) fails the test, unless the test takes it as expected from `cspViolations`.
import { ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test as base, expect as expectOf } from "@playwright/test";

export { expect } from "@playwright/test";
export type { Page } from "@playwright/test";

const CSP_MARK = "gantry-csp-violation:";

export const test = base.extend<{ noPanics: void; cspViolations: string[] }>({
  cspViolations: async ({}, use) => {
    await use([]);
  },
  noPanics: [
    async ({ page, cspViolations }, use) => {
      const panics: string[] = [];
      await page.addInitScript((mark) => {
        document.addEventListener("securitypolicyviolation", (e) => {
          console.error(`${mark} ${e.effectiveDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber}`);
        });
      }, CSP_MARK);
      page.on("console", (m) => {
        const t = m.text();
        if (m.type() === "error" && /panicked at|hydration error/i.test(t)) panics.push(t);
        if (t.startsWith(CSP_MARK) || /Content Security Policy/.test(t)) cspViolations.push(t);
      });
      page.on("pageerror", (e) => panics.push(`uncaught: ${e.message}`));
      await use();
      if (panics.length > 0) throw new Error(`the page panicked:\n${panics.join("\n---\n")}`);
      if (cspViolations.length > 0) throw new Error(`the page broke the CSP:\n${cspViolations.join("\n")}`);
    },
    { auto: true },
  ],
});

/** A port on loopback that nothing listens on now, for a test's own servers. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      s.close(() => (a && typeof a === "object" ? resolve(a.port) : reject(new Error("no port"))));
    });
  });
}

/** A Gantry of a test's own (the binary `cargo xtask test` passes in GANTRY_BIN) on a free
 * port with its own SQLite database, anonymous read on, `env` over that, and `users` (name,
 * role) added with `gantry user add` before it starts, all with `password`; `log()` is what
 * it printed so far, `stop()` ends it and removes its directory. */
export interface OwnGantry {
  base: string;
  password: string;
  log: () => string;
  stop: () => void;
}

export async function ownGantry(
  name: string,
  env: Record<string, string>,
  users: [string, string][] = [],
): Promise<OwnGantry> {
  const bin = process.env.GANTRY_BIN;
  expectOf(bin, "GANTRY_BIN: the gantry binary (cargo xtask test sets it)").toBeTruthy();
  const dir = mkdtempSync(join(tmpdir(), `gantry-${name}-`));
  const db = `sqlite://${join(dir, "gantry.db")}`;
  const password = randomBytes(18).toString("base64url");
  for (const [user, role] of users) {
    execFileSync(bin!, ["user", "add", user, "--role", role], {
      env: { ...process.env, GANTRY_DATABASE_URL: db, GANTRY_PASSWORD: password, RUST_LOG: "warn" },
      stdio: ["ignore", "ignore", "inherit"],
    });
  }
  const port = await freePort();
  let log = "";
  const child: ChildProcess = spawn(bin!, [], {
    env: {
      ...process.env,
      GANTRY_LISTEN: `127.0.0.1:${port}`,
      GANTRY_DATABASE_URL: db,
      GANTRY_ANONYMOUS_READ: "true",
      RUST_LOG: "warn",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.on("data", (d) => (log += d));
  child.stderr?.on("data", (d) => (log += d));
  return {
    base: `http://127.0.0.1:${port}`,
    password,
    log: () => log,
    stop: () => {
      child.kill("SIGTERM");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
