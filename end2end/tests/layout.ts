// The structure checks of a page as it is drawn: nothing spills out of its container or
// is clipped, no text is under 12 px. Shared by the layout tests; pure DOM reads.
import type { Page } from "@playwright/test";

/** What breaks the page's structure, one line each (empty: none). */
export async function structure(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    const name = (e: Element) => {
      const id = e.id ? `#${e.id}` : "";
      const test = e.getAttribute("data-test");
      const cls = typeof e.className === "string" && e.className ? `.${e.className.trim().split(/\s+/).join(".")}` : "";
      return `${e.tagName.toLowerCase()}${id}${cls}${test ? `[data-test=${test}]` : ""}`;
    };
    const hidden = (e: Element) => {
      const r = e.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) return true;
      for (let p: Element | null = e; p; p = p.parentElement) {
        const s = getComputedStyle(p);
        if (s.display === "none" || s.visibility === "hidden") return true;
        if (p.classList.contains("sr-only") || p.classList.contains("skip-link")) return true;
      }
      return false;
    };
    const scrolls = (e: Element) => {
      for (let p: Element | null = e.parentElement; p; p = p.parentElement) {
        const o = getComputedStyle(p).overflowX;
        if ((o === "auto" || o === "scroll") && p !== document.documentElement && p !== document.body) return true;
      }
      return false;
    };
    // The page itself never scrolls sideways.
    const doc = document.documentElement;
    if (doc.scrollWidth > window.innerWidth + 1) out.push(`the page is ${doc.scrollWidth} px wide in a ${window.innerWidth} px window`);
    // No block spills out of its box or is clipped (scrolling wraps are allowed to hold more).
    for (const e of Array.from(document.querySelectorAll("main *, header *, nav *"))) {
      if (e instanceof SVGElement && !(e instanceof SVGSVGElement)) continue;
      if (hidden(e) || scrolls(e)) continue;
      const s = getComputedStyle(e);
      if (s.display.startsWith("inline") && s.display !== "inline-block" && s.display !== "inline-flex") continue;
      if (s.overflowX === "auto" || s.overflowX === "scroll") continue;
      if (e.scrollWidth > e.clientWidth + 2 && e.clientWidth > 0) {
        out.push(`${name(e)} holds ${e.scrollWidth} px in ${e.clientWidth} px${s.overflowX === "hidden" || s.overflowX === "clip" ? " (clipped)" : ""}`);
      }
    }
    // Text of 12 px or more, HTML and the timeline's SVG alike.
    for (const e of Array.from(document.querySelectorAll("main *, header *"))) {
      const own = Array.from(e.childNodes).some((n) => n.nodeType === Node.TEXT_NODE && (n.textContent ?? "").trim() !== "");
      if (!own || hidden(e)) continue;
      let px = parseFloat(getComputedStyle(e).fontSize);
      const svg = e.closest("svg");
      if (svg && e instanceof SVGGraphicsElement) {
        // The size it is drawn at: the SVG's scale applies.
        const vb = svg.viewBox.baseVal;
        if (vb && vb.width > 0) px *= svg.getBoundingClientRect().width / vb.width;
      }
      if (px < 11.95) out.push(`${name(e)} "${(e.textContent ?? "").trim().slice(0, 30)}" is ${px.toFixed(1)} px`);
    }
    return Array.from(new Set(out)).slice(0, 40);
  });
}

/** What of `/racks?kiosk=1` does not fit the window or reads under 16 px (empty: all fits). */
export async function wallProblems(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    const [w, h] = [window.innerWidth, window.innerHeight];
    const cells = Array.from(document.querySelectorAll('[data-test="floor-node"], .rack-name'));
    if (cells.length === 0) out.push("no floor drawn");
    for (const c of cells) {
      const r = c.getBoundingClientRect();
      if (r.right > w + 0.5 || r.bottom > h + 0.5) out.push(`${c.textContent} at (${Math.round(r.right)}, ${Math.round(r.bottom)}), outside ${w} x ${h}`);
      const px = parseFloat(getComputedStyle(c).fontSize);
      if (px < 16) out.push(`${c.textContent} is ${px} px`);
    }
    if (document.querySelector(".topbar nav")?.getBoundingClientRect().width) out.push("the navigation shows on the wall");
    return out.slice(0, 20);
  });
}
