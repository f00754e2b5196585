import { defineConfig } from "@playwright/test";

// Gantry is started by `cargo xtask test`, which passes its address in GANTRY_URL.
const baseURL = process.env.GANTRY_URL ?? "http://127.0.0.1:3000";

// Debian's Chromium; never a downloaded browser. The flags keep it off the closed network.
const launchOptions = {
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
};

export default defineConfig({
  testDir: "./tests",
  timeout: 30_000,
  retries: 0,
  workers: 1,
  reporter: [["list"]],
  use: { baseURL, launchOptions, trace: "off" },
  projects: [
    { name: "hydrated", testMatch: /.*\.hydrated\.spec\.ts/, use: { javaScriptEnabled: true } },
    { name: "nojs", testMatch: /.*\.nojs\.spec\.ts/, use: { javaScriptEnabled: false } },
  ],
});
