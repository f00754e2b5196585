// axe-core on every page as the server writes it, before any of Gantry's JavaScript runs,
// as each role. axe itself needs a script engine, so this context has one but refuses the
// page's own bundle: what axe sees is the HTML a browser without JavaScript shows.
import { expect, test } from "@playwright/test";
import { auditAll, WHO } from "./a11y";

test.use({ javaScriptEnabled: true });

for (const who of WHO) {
  test(`axe finds no serious or critical violation on any page without JavaScript, as ${who}`, async ({ page }) => {
    test.setTimeout(120_000);
    await page.route(/\/pkg\/.*\.(js|wasm)$/, (r) => r.abort());
    const all = await auditAll(page, who);
    expect(all, all.join("\n")).toEqual([]);
  });
}
