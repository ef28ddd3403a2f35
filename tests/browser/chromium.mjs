// Debian's Chromium as the tests and the App bench launch it: one place for the flags
// (without the background-networking ones, Chromium keeps trying hosts this machine
// cannot reach) and the page settings the committed screenshots were taken with.

import { chromium } from "playwright-core";

/** Chromium's flags: headless, no sandbox (root in CI), nothing reaching the network. */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Launches `executablePath` with a fresh profile in `profileDir`; `extra` adds options. */
export function launchChromium(executablePath, profileDir, extra = {}) {
  return chromium.launchPersistentContext(profileDir, {
    executablePath,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 700, height: 900 },
    deviceScaleFactor: 1,
    colorScheme: "light",
    reducedMotion: "reduce",
    locale: "en-US",
    timezoneId: "UTC",
    ...extra,
  });
}
