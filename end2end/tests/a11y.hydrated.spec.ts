// axe-core on every hydrated page, as each role: no serious or critical violation.
import { auditAll, WHO } from "./a11y";
import { expect, test } from "./fixtures";

for (const who of WHO) {
  test(`axe finds no serious or critical violation on any page, as ${who}`, async ({ page }) => {
    test.setTimeout(120_000);
    const all = await auditAll(page, who);
    expect(all, all.join("\n")).toEqual([]);
  });
}
