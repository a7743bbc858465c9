// The person at the browser for spec/login_spec.lua: luamcp login runs
// $BROWSER with the authorization address; BROWSER is
// "NODE spec/clients/login_browser.mjs CHROMIUM OUT %s". It opens the
// address in Debian's Chromium, headless, through puppeteer-core, signs in
// on the authorization server's page (oidc-provider's login form in
// spec/helpers/oidc_provider.mjs with pages: true) and allows the access on
// its consent page, then waits for luamcp's own page on 127.0.0.1 ("You
// can close this window").
//
// Usage: node login_browser.mjs CHROMIUM OUT URL
//   OUT: a file that gets one JSON line: {steps, final, text} or {error}
//   (luamcp login runs the browser in the background, so the spec reads
//   what happened there).
import puppeteer from "puppeteer-core";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";

// As a desktop's opener does, this returns at once and the browser lives
// on in a session of its own: luamcp call on a terminal (script(1) in the
// spec) ends right after the login, and its terminal's end must not take
// the browser with it.
if (!process.env.LOGIN_BROWSER_DETACHED) {
  spawn(process.execPath, process.argv.slice(1), {
    detached: true, stdio: "ignore", env: { ...process.env, LOGIN_BROWSER_DETACHED: "1" },
  }).unref();
  process.exit(0);
}

const [chromium, outFile, url] = process.argv.slice(2);
const WAIT = 60000;
const out = { steps: [] };
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "luamcp-login-chromium-"));
let browser;

// Whatever happens, the browser is killed and its profile removed.
const hardStop = setTimeout(() => finish(new Error("the login took longer than 180 s")), 180000);
async function finish(err) {
  clearTimeout(hardStop);
  if (err) out.error = String((err && err.stack) || err);
  try {
    if (browser) {
      const p = browser.process();
      await Promise.race([browser.close(), new Promise((r) => setTimeout(r, 5000))]);
      if (p && p.exitCode === null) p.kill("SIGKILL");
    }
  } catch { /* already gone */ }
  fs.rmSync(profile, { recursive: true, force: true });
  fs.appendFileSync(outFile, JSON.stringify(out) + "\n");
  process.exit(err ? 1 : 0);
}

try {
  browser = await puppeteer.launch({
    executablePath: chromium, headless: true, userDataDir: profile, timeout: WAIT, protocolTimeout: 60000,
    args: ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
      "--no-default-browser-check"],
  });
  const page = await browser.newPage();
  page.setDefaultTimeout(WAIT);
  await page.goto(url, { waitUntil: "load" });
  // The sign-in page, as a person fills it in.
  await page.waitForSelector("#login");
  out.steps.push(await page.title());
  await page.type("#login", "alice");
  await page.type("#password", "wonderland");
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click("#submit")]);
  // The consent page: what is asked for, then Allow.
  await page.waitForSelector("#allow");
  out.steps.push(await page.title());
  out.asked = await page.$eval("#scope", (e) => e.textContent);
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click("#allow")]);
  // Back at luamcp's listener.
  await page.waitForFunction(() => /close this window/.test(document.body.textContent), { timeout: WAIT });
  out.final = page.url().replace(/\?.*/, "");
  out.text = await page.$eval("body", (e) => e.textContent);
  await finish();
} catch (err) {
  await finish(err);
}
