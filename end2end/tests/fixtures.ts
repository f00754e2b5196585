// The hydrated tests' `test`: Playwright's, failing any test whose page panicked or broke
// Gantry's Content-Security-Policy. A panic in the browser's wasm (a hydration mismatch, or
// a bug) is written to the console by the panic hook, and the page can look alive after it
// (effects made before the panic keep running), so every hydrated test watches for one.
// The policy is enforced (Playwright's `bypassCSP` stays off): every violation the browser
// reports (`securitypolicyviolation`, seen by a script the browser runs outside the page's
// policy) fails the test, unless the test takes it as expected from `cspViolations`.
import { createServer } from "node:net";
import { test as base } from "@playwright/test";

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
