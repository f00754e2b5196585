// The hydrated tests' `test`: Playwright's, failing any test whose page panicked. A panic in
// the browser's wasm (a hydration mismatch, or a bug) is written to the console by the panic
// hook, and the page can look alive after it (effects made before the panic keep running),
// so every hydrated test watches for one.
import { createServer } from "node:net";
import { test as base } from "@playwright/test";

export { expect } from "@playwright/test";
export type { Page } from "@playwright/test";

export const test = base.extend<{ noPanics: void }>({
  noPanics: [
    async ({ page }, use) => {
      const panics: string[] = [];
      page.on("console", (m) => {
        if (m.type() === "error" && /panicked at|hydration error/i.test(m.text())) panics.push(m.text());
      });
      page.on("pageerror", (e) => panics.push(`uncaught: ${e.message}`));
      await use();
      if (panics.length > 0) throw new Error(`the page panicked:\n${panics.join("\n---\n")}`);
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
