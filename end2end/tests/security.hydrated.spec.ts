// The Content-Security-Policy is enforced and Gantry's pages live with it: every page's
// response carries a fresh nonce, the hydration script carries it, and a script injected
// without it does not run (the browser reports the violation, which this test expects; any
// other test fails on one). Frames of Gantry are refused.
import { expect, test } from "./fixtures";

test("pages carry a fresh CSP nonce, hydrate with it, and refuse an injected script", async ({ page, cspViolations }) => {
  const first = await page.goto("/");
  const csp = first?.headers()["content-security-policy"] ?? "";
  const nonce = /'nonce-([^']+)'/.exec(csp)?.[1];
  expect(nonce, csp).toBeTruthy();
  expect(csp).not.toMatch(/script-src[^;]*'unsafe-inline'/);
  expect(csp).toContain("frame-ancestors 'none'");
  await expect(page.locator('[data-test="live-status"]')).toHaveClass(/\blive\b/, { timeout: 15_000 });
  // The page's own inline script (hydration) ran with the nonce; the nonce is per response.
  const again = await page.request.get("/");
  expect(again.headers()["content-security-policy"]).not.toContain(`'nonce-${nonce}'`);

  await page.addScriptTag({ content: "window.__gantryInjected = 1;" }).catch(() => {});
  expect(await page.evaluate(() => (window as unknown as { __gantryInjected?: number }).__gantryInjected)).toBeUndefined();
  await expect.poll(() => cspViolations.some((v) => /script-src/.test(v))).toBe(true);
  cspViolations.length = 0;
});

test("every response has the security headers, and a frame of Gantry is refused", async ({ page, request, cspViolations }) => {
  for (const path of ["/", "/login", "/api/overview", "/pkg/gantry.css", "/healthz", "/no/such/page"]) {
    const r = await request.get(path);
    const h = r.headers();
    expect(h["x-frame-options"], path).toBe("DENY");
    expect(h["x-content-type-options"], path).toBe("nosniff");
    expect(h["referrer-policy"], path).toBe("same-origin");
    expect(h["content-security-policy"], path).toContain("frame-ancestors 'none'");
  }
  // A page elsewhere framing Gantry: the browser refuses the frame (and says so).
  const base = String(test.info().project.use.baseURL);
  await page.setContent(`<iframe id="f" src="${new URL("/", base).href}"></iframe>`);
  await expect.poll(() => cspViolations.some((v) => /frame-ancestors/.test(v)), { timeout: 5_000 }).toBe(true);
  await expect(page.frameLocator("#f").locator('[data-test="live-status"]')).toHaveCount(0);
  cspViolations.length = 0;
});
