// The accessibility audit shared by the hydrated and the JavaScript-off suites: axe-core (a
// checker others wrote) on every page, signed in as each role and anonymous; a test fails
// on any serious or critical violation, naming the rule, the elements and the page.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { Page } from "@playwright/test";

// Playwright runs in end2end/, where npm installed axe-core.
const axeSource = readFileSync(resolve(process.cwd(), "node_modules/axe-core/axe.min.js"), "utf8");

export const PAGES = ["/", "/racks", "/thermal", "/topology", "/nodes", "/nodes/gpu001", "/jobs", "/jobs/1000", "/timeline", "/alerts", "/remediation", "/audit", "/reports", "/reliability", "/admin", "/login", "/no/such/page"];
export const WHO = ["anonymous", "viewer1", "operator1", "manager1", "admin1"];

type Violation = { id: string; impact: string; help: string; nodes: { target: string[] }[] };

/** The serious and critical violations axe finds on `path`, one line each. */
export async function audit(page: Page, path: string): Promise<string[]> {
  await page.goto(path);
  await page.waitForLoadState("networkidle");
  // Evaluated through the browser's debugger protocol, as Playwright's own scripts are, so
  // the page's CSP (which refuses any inline script) stays as it is, and so it runs with
  // the page's JavaScript off too.
  await page.evaluate(axeSource);
  const found: Violation[] = await page.evaluate(async () => {
    // @ts-expect-error axe is the script just evaluated
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations;
  });
  return found
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${path}: ${v.id} (${v.impact}) ${v.help}: ${v.nodes.slice(0, 5).map((n) => n.target.join(" ")).join(", ")}${v.nodes.length > 5 ? ` and ${v.nodes.length - 5} more` : ""}`);
}

/** Signs `who` in through the form (works with JavaScript off). */
export async function signIn(page: Page, who: string) {
  await page.goto("/login");
  await page.getByLabel("User name").fill(who);
  await page.getByLabel("Password").fill(process.env.GANTRY_E2E_PASSWORD ?? "");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL((u) => !u.pathname.startsWith("/login"));
}

/** Every page's violations as `who` (the role-only pages are skipped when anonymous). */
export async function auditAll(page: Page, who: string): Promise<string[]> {
  if (who !== "anonymous") await signIn(page, who);
  const all: string[] = [];
  for (const path of PAGES) {
    if (who === "anonymous" && ["/audit", "/remediation", "/reports", "/reliability", "/admin"].includes(path)) continue;
    all.push(...(await audit(page, path)));
  }
  return all;
}
