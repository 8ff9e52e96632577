#!/usr/bin/env node
// Drive the ScheduleEditor widget in a real JupyterLab with headless Chromium.
//
// Usage:
//   node run_editor.mjs --url http://127.0.0.1:8888/lab/tree/editor_demo.ipynb \
//       --screenshot artifacts/editor.png [--chromium /usr/bin/chromium] [--timeout 30000] \
//       [--loop j] [--factor 4] [--theme light|dark]
//
// --timeout bounds each step (milliseconds); --loop and --factor choose what to split;
// --theme is the JupyterLab theme the server was set up with: the script checks that
// the IR is drawn in that theme's colours (dark text on a light background or the
// reverse), then opens the "Last step" tab and saves a second screenshot (NAME-diff.png)
// of the diff.
//
// Steps: open the notebook, wait for the kernel to be idle, run all cells from the
// "Run" menu, wait for the editor (.wb-editor), select the loop `j` in the tree, pick
// the action "split" and the factor 4, click Apply, wait until the IR shows `j_1`, check
// the trace shows `sch.split(...)`, and save a full-page screenshot.
//
// Exits 0 on success. On any failure it prints what went wrong (plus the notebook's
// error outputs and the browser console errors), saves a screenshot of the failure state
// next to the requested one (NAME.failure.png) and exits 1.

import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

import { chromium } from 'playwright-core';

const CHROMIUM_FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const { values: opts } = parseArgs({
  options: {
    url: { type: 'string' },
    screenshot: { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    timeout: { type: 'string', default: '30000' },
    loop: { type: 'string', default: 'j' },
    factor: { type: 'string', default: '4' },
    theme: { type: 'string', default: 'light' },
  },
});

if (!opts.url || !opts.screenshot || !['light', 'dark'].includes(opts.theme)) {
  console.error('usage: node run_editor.mjs --url NOTEBOOK_URL --screenshot OUT.png '
    + '[--chromium PATH] [--timeout MS] [--loop NAME] [--factor N] [--theme light|dark]');
  process.exit(2);
}

const STEP_TIMEOUT = Number(opts.timeout);
const screenshotPath = resolve(opts.screenshot);
const failurePath = screenshotPath.replace(/(\.png)?$/i, '.failure.png');
const diffPath = screenshotPath.replace(/(\.png)?$/i, '-diff.png');
const consoleErrors = [];
let currentStep = 'start';

function log(message) {
  console.log(`[run_editor] ${message}`);
}

async function step(name, body) {
  currentStep = name;
  const started = Date.now();
  const result = await body();
  log(`${name} (${Date.now() - started} ms)`);
  return result;
}

/** The kernel status shown in the notebook toolbar ("idle", "busy", ...), or null. */
async function kernelStatus(page) {
  return page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator')
    .first()
    .getAttribute('data-status', { timeout: 1000 })
    .catch(() => null);
}

/** Wait until the kernel has been idle for `quietMs` in a row (comm round trips settle). */
async function waitForKernelIdle(page, { quietMs = 300, timeout = STEP_TIMEOUT } = {}) {
  const deadline = Date.now() + timeout;
  let idleSince = null;
  let last = null;
  while (Date.now() < deadline) {
    last = await kernelStatus(page);
    if (last === 'idle') {
      idleSince ??= Date.now();
      if (Date.now() - idleSince >= quietMs) return;
    } else {
      idleSince = null;
    }
    await page.waitForTimeout(50);
  }
  throw new Error(`the kernel did not become idle within ${timeout} ms (last status: ${last})`);
}

/** Click a JupyterLab main-menu entry, e.g. clickMenu(page, 'Run', 'Run All Cells'). */
async function clickMenu(page, top, item) {
  await page.locator('.lm-MenuBar-item', { hasText: new RegExp(`^${top}$`) }).click();
  const entry = page.locator('.lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel',
    { hasText: new RegExp(`^${item}$`) });
  await entry.first().click();
}

/** Index of the first tree option that is the loop `name` ("  for name in range(N)"). */
async function loopOptionIndex(tree, name) {
  const labels = await tree.locator('option').allTextContents();
  const pattern = new RegExp(`^for ${name} in range\\(\\d+\\)`);
  const index = labels.findIndex((label) => pattern.test(label.replace(/\u00a0/g, ' ').trim()));
  if (index < 0) {
    throw new Error(`no option "for ${name} in range(...)" in .wb-tree; options are: `
      + JSON.stringify(labels.map((l) => l.replace(/\u00a0/g, ' '))));
  }
  return { index, label: labels[index].replace(/\u00a0/g, ' ') };
}

async function selectedLabel(select) {
  return select.evaluate((el) => (el.selectedIndex < 0 ? null
    : el.options[el.selectedIndex].textContent.replace(/\u00a0/g, ' ')));
}

/** Notebook error outputs and the editor's error box, for failure messages. */
async function diagnostics(page) {
  const lines = [];
  try {
    const errors = await page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
      .allInnerTexts();
    for (const text of errors) lines.push(`notebook error output:\n${text.slice(0, 2000)}`);
    for (const cls of ['.wb-error', '.wb-ir', '.wb-trace']) {
      const box = page.locator(cls).first();
      if (await box.count()) {
        lines.push(`${cls}: ${JSON.stringify((await box.textContent()).slice(0, 1500))}`);
      }
    }
    lines.push(`kernel status: ${await kernelStatus(page)}`);
  } catch (err) {
    lines.push(`(could not read the page: ${err.message})`);
  }
  for (const text of consoleErrors.slice(0, 10)) lines.push(`browser console error: ${text}`);
  return lines.join('\n');
}

async function run(page) {
  await step('open the notebook', async () => {
    await page.goto(opts.url, { waitUntil: 'domcontentloaded', timeout: STEP_TIMEOUT });
    await page.locator('.jp-NotebookPanel .jp-Cell').first().waitFor({ timeout: STEP_TIMEOUT });
  });

  await step('wait for the kernel to be idle', async () => {
    // "Run All" before the kernel is connected runs nothing: wait for the status bar
    // to say "Python 3 (ipykernel) | Idle", then for the toolbar indicator to stay idle.
    await page.locator('#jp-main-statusbar', { hasText: /\|\s*Idle/ })
      .waitFor({ timeout: STEP_TIMEOUT });
    await waitForKernelIdle(page, { quietMs: 500 });
  });

  await step('run all cells', () => clickMenu(page, 'Run', 'Run All Cells'));

  const editor = page.locator('.wb-editor').first();
  await step('wait for the editor widget', async () => {
    // Stop early when a cell raised instead of waiting for an editor that never comes.
    const traceback = page.locator('.jp-OutputArea-output',
      { hasText: 'Traceback (most recent call last)' }).first();
    await editor.or(traceback).first().waitFor({ state: 'visible', timeout: STEP_TIMEOUT })
      .catch(() => {
        throw new Error(`no .wb-editor appeared within ${STEP_TIMEOUT} ms after Run All`);
      });
    if (!(await editor.isVisible())) {
      throw new Error('a notebook cell raised an exception instead of showing the editor');
    }
    await waitForKernelIdle(page);
  });
  await editor.scrollIntoViewIfNeeded();

  const tree = editor.locator('.wb-tree select');
  const action = editor.locator('.wb-action select');
  const factor = editor.locator('.wb-split-factor select');
  const apply = editor.locator('.wb-apply');
  const ir = editor.locator('.wb-ir');
  const trace = editor.locator('.wb-trace');
  const error = editor.locator('.wb-error');

  // Each choice is a comm round trip, and the kernel may answer by rewriting the other
  // controls (a new loop gets its own divisors). Make the three choices, let the kernel
  // settle, and check they all still hold before clicking Apply.
  const loop = await step(`choose loop ${opts.loop}, split, factor ${opts.factor}`, async () => {
    const found = await loopOptionIndex(tree, opts.loop);
    for (let attempt = 1; ; attempt++) {
      const current = await selectedLabel(tree);
      if (current !== found.label) {
        await tree.selectOption({ index: found.index });
        await waitForKernelIdle(page);
      }
      if ((await selectedLabel(action)) !== 'split') {
        await action.selectOption({ label: 'split' });
        await waitForKernelIdle(page);
      }
      await factor.locator('option', { hasText: new RegExp(`^${opts.factor}$`) })
        .first().waitFor({ state: 'attached', timeout: STEP_TIMEOUT })
        .catch(async () => {
          const labels = await factor.locator('option').allTextContents();
          throw new Error(`.wb-split-factor has no option "${opts.factor}" for loop `
            + `${opts.loop}; options are ${JSON.stringify(labels)}`);
        });
      if ((await selectedLabel(factor)) !== opts.factor) {
        await factor.selectOption({ label: opts.factor });
        await waitForKernelIdle(page);
      }
      const state = [await selectedLabel(tree), await selectedLabel(action),
        await selectedLabel(factor)];
      if (state[0] === found.label && state[1] === 'split' && state[2] === opts.factor) {
        return found.label.trim();
      }
      if (attempt >= 5) {
        throw new Error(`the editor did not keep the choices [loop, action, factor] = `
          + `${JSON.stringify([found.label, 'split', opts.factor])}; it shows `
          + JSON.stringify(state));
      }
    }
  });
  log(`selected "${loop}"`);

  const traceBefore = await trace.textContent();
  // Time the round trip as the user sees it: from the click to the new IR in the page
  // (the kernel applies the primitive and re-renders; the front end redraws).
  await apply.evaluate((button, loopName) => {
    const box = button.closest('.wb-editor').querySelector('.wb-ir');
    window.__wbRoundTrip = new Promise((done) => {
      const start = performance.now();
      const seen = new MutationObserver(() => {
        if (box.textContent.includes(`${loopName}_1`)) {
          seen.disconnect();
          done(performance.now() - start);
        }
      });
      seen.observe(box, { childList: true, subtree: true, characterData: true });
    });
  }, opts.loop);
  await step('click Apply', () => apply.click());

  await step(`wait for ${opts.loop}_1 in the IR`, async () => {
    try {
      await ir.filter({ hasText: `${opts.loop}_1` }).waitFor({ timeout: STEP_TIMEOUT });
    } catch {
      throw new Error(`.wb-ir never showed "${opts.loop}_1" after Apply`);
    }
    await waitForKernelIdle(page);
  });
  const roundTrip = await page.evaluate(() => window.__wbRoundTrip);
  log(`round trip from the Apply click to the new IR on the page: ${roundTrip.toFixed(0)} ms`);

  await step('check the IR, trace and error box', async () => {
    // The trace sits in another tab of the editor: read its text, shown or not.
    const irText = await ir.innerText();
    const traceText = await trace.textContent();
    const errorText = (await error.textContent()).trim();
    const problems = [];
    if (errorText) problems.push(`.wb-error is not empty: ${JSON.stringify(errorText)}`);
    // The split's new iter binding: j_0 * 4 + j_1.
    const binding = `${opts.loop}_0 * ${opts.factor} + ${opts.loop}_1`;
    if (!irText.includes(binding)) problems.push(`.wb-ir lacks "${binding}"`);
    if (!traceText.includes('sch.split(')) {
      problems.push(`.wb-trace lacks "sch.split(": ${JSON.stringify(traceText.slice(0, 500))}`);
    } else if (!traceText.includes(`factors=[None, ${opts.factor}]`)) {
      problems.push(`.wb-trace lacks "factors=[None, ${opts.factor}]": `
        + JSON.stringify(traceText.slice(0, 500)));
    }
    if (traceBefore.includes('sch.split(')) {
      problems.push('.wb-trace already showed "sch.split(" before Apply');
    }
    if (problems.length) throw new Error(problems.join('; '));
  });

  await step('save the screenshot', async () => {
    await editor.scrollIntoViewIfNeeded();
    mkdirSync(dirname(screenshotPath), { recursive: true });
    await page.screenshot({ path: screenshotPath, fullPage: true });
  });
  log(`screenshot: ${screenshotPath}`);

  await step(`check the IR is drawn in ${opts.theme} theme colours`, async () => {
    const colours = await ir.locator('pre.wb-code').first().evaluate((el) => {
      const style = getComputedStyle(el);
      return { background: style.backgroundColor, color: style.color,
        themeLight: document.body.dataset.jpThemeLight };
    });
    const bg = luminance(colours.background);
    const fg = luminance(colours.color);
    const dark = opts.theme === 'dark';
    if (colours.themeLight !== String(!dark)) {
      throw new Error(`JupyterLab is not in the ${opts.theme} theme `
        + `(data-jp-theme-light=${colours.themeLight})`);
    }
    if (dark ? !(bg < 0.25 && fg > 0.5) : !(bg > 0.75 && fg < 0.35)) {
      throw new Error(`the IR is hard to read in the ${opts.theme} theme: text `
        + `${colours.color} (luminance ${fg.toFixed(2)}) on ${colours.background} `
        + `(luminance ${bg.toFixed(2)})`);
    }
    log(`IR text ${colours.color} on ${colours.background}`);
  });

  await step('open the "Last step" tab and save its screenshot', async () => {
    await editor.locator('.wb-tabs .lm-TabBar-tab', { hasText: 'Last step' }).first().click();
    const changed = editor.locator('.wb-diff tr.wb-diff-replace').first();
    await changed.waitFor({ state: 'visible', timeout: STEP_TIMEOUT });
    const text = (await changed.innerText()).replace(/\s+/g, ' ');
    if (!text.includes('for i, j, k in T.grid')) {
      throw new Error(`the first changed row of the diff is not the loop header: ${text}`);
    }
    await editor.scrollIntoViewIfNeeded();
    await page.screenshot({ path: diffPath, fullPage: true });
  });
  log(`screenshot: ${diffPath}`);
}

/** Relative luminance (0 black .. 1 white) of a CSS rgb()/rgba() colour. */
function luminance(css) {
  const m = css.match(/rgba?\(([^)]+)\)/);
  if (!m) throw new Error(`cannot read the colour ${css}`);
  const [r, g, b] = m[1].split(',').slice(0, 3).map((v) => Number(v) / 255)
    .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

async function main() {
  const userDataDir = mkdtempSync(join(tmpdir(), 'wb-chromium-'));
  let context;
  let page;
  let failed = false;
  try {
    context = await step('launch chromium', () => chromium.launchPersistentContext(userDataDir, {
      executablePath: opts.chromium,
      headless: true,
      args: CHROMIUM_FLAGS,
      viewport: { width: 1400, height: 1000 },
      timeout: STEP_TIMEOUT,
    }));
    page = context.pages()[0] ?? await context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT);
    page.on('console', (msg) => {
      if (msg.type() === 'error') consoleErrors.push(msg.text());
    });
    page.on('pageerror', (err) => consoleErrors.push(`${err.name}: ${err.message}`));
    await run(page);
  } catch (err) {
    failed = true;
    console.error(`[run_editor] FAILED at step "${currentStep}": ${err.message}`);
    if (page) {
      console.error(await diagnostics(page));
      try {
        mkdirSync(dirname(failurePath), { recursive: true });
        await page.screenshot({ path: failurePath, fullPage: true });
        console.error(`[run_editor] failure screenshot: ${failurePath}`);
      } catch (shotErr) {
        console.error(`[run_editor] could not save a failure screenshot: ${shotErr.message}`);
      }
    }
  } finally {
    if (context) await context.close().catch(() => {});
    rmSync(userDataDir, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
}

main();
