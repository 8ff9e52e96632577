#!/usr/bin/env node
// Every lesson, top to bottom, in a real JupyterLab with headless Chromium.
//
// Usage:
//   node run_lessons.mjs --base-url http://127.0.0.1:8888 --lessons lessons.json \
//       --artifacts DIR --result result.json [--chromium /usr/bin/chromium] \
//       [--lesson-timeout 90000] [--widget-wait 5000]
//
// --lessons is a JSON list of notebook paths relative to the lab's root folder
// (["notebooks/00_start_here.ipynb", ...]); they run in that order in one browser page.
// JupyterLab must run with --LabApp.expose_app_in_browser=True (window.jupyterapp): the
// notebooks are opened with the file browser's own command (docmanager:open) instead of
// reloading the page for each one.
//
// For each lesson: open it, wait for its kernel to be idle, Run > Run All Cells (the menu),
// wait until every code cell has an execution count and the kernel has been idle for a
// moment (or a cell failed, which stops Run All), grow the viewport to the notebook's
// height (every cell on screen, as if the reader had scrolled through), then check
//   - no error output, and no stderr output that looks like a Python warning or traceback;
//   - every widget output rendered: no "Loading widget..." / "Error displaying widget" /
//     .jupyter-widgets-error-widget and no empty widget view (each gets --widget-wait ms);
//   - no browser console error or page error from the project's code (the workbench widgets,
//     the schedule-workbench extension, anywidget);
// save a screenshot of the whole notebook panel as ARTIFACTS/lesson-<notebook stem>.png,
// then shut its kernel down and close it (without saving).
// A lesson that is not done within --lesson-timeout ms fails naming the cell it was stuck on.
//
// --result receives, after every lesson, [{lesson, ok, problems: [...], seconds: {...},
// cells, screenshot}]. Exits 0 when every lesson passed, 1 otherwise (the problems are
// printed too), 2 on bad arguments.

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
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
    'base-url': { type: 'string' },
    lessons: { type: 'string' },
    artifacts: { type: 'string' },
    result: { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    'lesson-timeout': { type: 'string', default: '90000' },
    'widget-wait': { type: 'string', default: '5000' },
  },
});

for (const name of ['base-url', 'lessons', 'artifacts', 'result']) {
  if (!opts[name]) {
    console.error(`run_lessons.mjs: --${name} is required (see the usage at the top of the file)`);
    process.exit(2);
  }
}

const BASE = opts['base-url'];
const LESSONS = JSON.parse(readFileSync(opts.lessons, 'utf8'));
const LESSON_TIMEOUT = Number(opts['lesson-timeout']);
const WIDGET_WAIT = Number(opts['widget-wait']);
const ARTIFACTS = resolve(opts.artifacts);
const VIEWPORT = { width: 1400, height: 1000 };
// A bound on the screenshot's height (pixels): a longer notebook is cut there.
const MAX_SHOT_HEIGHT = 32000;
// Where console errors from our code come from (script URLs, stack frames, messages).
const OUR_CODE = /schedule-workbench|workbench|anywidget|\bwb-/i;
// stderr text that is a Python warning or a traceback.
const PYTHON_TROUBLE = /Traceback \(most recent call last\)|\b\w*Warning: |^\w*(Error|Exception): /m;

const results = [];
let consoleErrors = new Map(); // first line -> the whole message

function log(message) {
  console.log(`[lessons] ${message}`);
}

const seconds = (ms) => Math.round(ms / 100) / 10;

/** The current notebook's state, read from JupyterLab's models in the page. */
function notebookState(page) {
  return page.evaluate(() => {
    const panel = window.jupyterapp.shell.currentWidget;
    if (!panel || !panel.content || !panel.content.model) return null;
    const kernel = panel.sessionContext.session?.kernel;
    const cells = [];
    const { model } = panel.content;
    for (let index = 0; index < model.cells.length; index++) {
      const cell = model.cells.get(index);
      if (cell.type !== 'code') continue;
      cells.push({
        index,
        firstLine: cell.sharedModel.getSource().split('\n')[0].slice(0, 80),
        count: cell.executionCount,
        state: cell.executionState ?? null,
        outputs: cell.outputs.toJSON(),
      });
    }
    return {
      path: panel.context.path,
      ready: panel.context.isReady && panel.sessionContext.isReady,
      kernel: kernel ? kernel.status : null,
      cells,
    };
  });
}

const describe = (cell) => `cell ${cell.index} (${JSON.stringify(cell.firstLine)})`;

function outputProblems(cell) {
  const problems = [];
  for (const out of cell.outputs) {
    if (out.output_type === 'error') {
      const trace = (out.traceback ?? []).join('\n').replace(/\x1b\[[0-9;]*m/g, '');
      problems.push(`${describe(cell)} raised ${out.ename}: ${out.evalue}\n${trace.slice(-1500)}`);
    } else if (out.output_type === 'stream' && out.name === 'stderr') {
      const text = Array.isArray(out.text) ? out.text.join('') : out.text;
      if (PYTHON_TROUBLE.test(text)) {
        problems.push(`${describe(cell)} wrote a warning or traceback to stderr:\n${text.slice(0, 1500)}`);
      }
    }
  }
  return problems;
}

/** Wait until every code cell has run (or a cell failed) and the kernel stays idle. */
async function waitForRun(page, deadline) {
  let idleSince = null;
  let state = null;
  while (Date.now() < deadline) {
    state = await notebookState(page);
    const running = state.cells.some((c) => c.state === 'running');
    const done = state.cells.every((c) => c.count !== null);
    const failed = state.cells.some((c) => c.outputs.some((o) => o.output_type === 'error'));
    if (state.kernel === 'idle' && !running && (done || failed)) {
      idleSince ??= Date.now();
      if (Date.now() - idleSince >= 300) return { state, timedOut: false };
    } else {
      idleSince = null;
    }
    await page.waitForTimeout(100);
  }
  return { state, timedOut: true };
}

/** The widget outputs that did not render, after up to WIDGET_WAIT ms; [] when all did. */
async function widgetProblems(page) {
  // detail: open each error widget (a click shows its message and stack) for the report.
  const probe = (detail) => page.evaluate((detail) => {
    const panel = window.jupyterapp.shell.currentWidget;
    const found = [];
    const VIEW = 'application/vnd.jupyter.widget-view+json';
    const VISIBLE = 'img,svg,canvas,input,button,select,textarea,iframe,video';
    panel.content.widgets.forEach((cell, index) => {
      if (cell.model.type !== 'code') return;
      const where = `cell ${index}`;
      const area = cell.outputArea;
      area.widgets.forEach((child, n) => {
        const out = child.node.querySelector('.jp-OutputArea-output') ?? child.node; // no prompt
        const error = out.querySelector('.jupyter-widgets-error-widget');
        const text = (out.textContent ?? '').trim();
        if (error || text.includes('Error displaying widget')) {
          if (detail && error) error.parentElement.click();
          const message = (out.textContent ?? '').replace(/\s+/g, ' ').trim();
          found.push(`${where}: a widget failed to display: ${message.slice(0, 400)}`);
        } else if (text.includes('Loading widget...')) {
          found.push(`${where}: a widget is still "Loading widget..."`);
        } else if (n < area.model.length && VIEW in (area.model.get(n).data ?? {})
                   && out.offsetParent !== null) {
          // (A collapsed, hidden output area is not judged: it has no size.)
          const box = out.getBoundingClientRect();
          if ((!text && !out.querySelector(VISIBLE)) || box.height < 2) {
            found.push(`${where}: a widget view rendered empty (no text, no image, no control)`);
          }
        }
      });
    });
    return found;
  }, detail);
  const deadline = Date.now() + WIDGET_WAIT;
  let found = await probe(false);
  while (found.length && Date.now() < deadline) {
    await page.waitForTimeout(200);
    found = await probe(false);
  }
  return found.length ? probe(true) : found;
}

/** Grow the viewport to the notebook's height (up to MAX_SHOT_HEIGHT): every cell is then on
 * screen, as if the reader had scrolled through, and one screenshot holds the lesson. */
async function showWholeNotebook(page) {
  const extra = await page.evaluate(() => {
    const panel = window.jupyterapp.shell.currentWidget;
    const scroller = panel.content.node.querySelector('.jp-WindowedPanel-outer') ?? panel.content.node;
    return scroller.scrollHeight - scroller.clientHeight;
  });
  const height = Math.min(VIEWPORT.height + Math.max(extra, 0), MAX_SHOT_HEIGHT);
  if (height > VIEWPORT.height) {
    await page.setViewportSize({ width: VIEWPORT.width, height });
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  }
  return height;
}

/** Shut the lesson's kernel down and close its tab without saving. */
async function closeLesson(page) {
  await page.evaluate(async () => {
    const panel = window.jupyterapp.shell.currentWidget;
    if (!panel || !panel.sessionContext) return;
    await panel.sessionContext.shutdown();
    panel.dispose();
  });
  if (VIEWPORT.height !== page.viewportSize().height) await page.setViewportSize(VIEWPORT);
  // The server must have no kernel left before the next lesson starts its own.
  const deadline = Date.now() + 10000;
  for (;;) {
    const kernels = await (await fetch(`${BASE}/api/kernels`)).json();
    if (!kernels.length) return;
    if (Date.now() > deadline) throw new Error(`kernels still running after closing: ${JSON.stringify(kernels)}`);
    await page.waitForTimeout(100);
  }
}

/** Click a JupyterLab main-menu entry, e.g. clickMenu(page, 'Run', 'Run All Cells'). */
async function clickMenu(page, top, item) {
  await page.locator('.lm-MenuBar-item', { hasText: new RegExp(`^${top}$`) }).click();
  await page.locator('.lm-Menu:visible .lm-Menu-item:not(.lm-mod-disabled)')
    .filter({ has: page.locator('.lm-Menu-itemLabel', { hasText: new RegExp(`^${item}$`) }) })
    .last()
    .click();
}

async function runLesson(page, path) {
  const stem = basename(path, '.ipynb');
  const result = { lesson: path, ok: false, problems: [], seconds: {}, cells: 0, screenshot: null };
  results.push(result);
  consoleErrors = new Map();
  const started = Date.now();
  const deadline = started + LESSON_TIMEOUT;
  const phase = (name, since) => { result.seconds[name] = seconds(Date.now() - since); };
  let t = Date.now();
  try {
    await page.evaluate(async (p) => {
      await window.jupyterapp.commands.execute('docmanager:open', { path: p, factory: 'Notebook' });
    }, path);
    let state = null;
    while (Date.now() < deadline) {
      state = await notebookState(page);
      if (state && state.path === path && state.ready && state.kernel === 'idle') break;
      if (state && state.path === path && result.seconds.shown === undefined) phase('shown', t);
      await page.waitForTimeout(100);
    }
    if (!state || state.path !== path || state.kernel !== 'idle') {
      throw new Error(`${path}: the notebook's kernel was not idle ${LESSON_TIMEOUT} ms after opening it `
        + `(kernel: ${state?.kernel ?? 'none'})`);
    }
    result.cells = state.cells.length;
    phase('open', t);

    t = Date.now();
    await clickMenu(page, 'Run', 'Run All Cells');
    const run = await waitForRun(page, deadline);
    phase('run', t);
    state = run.state;
    for (const cell of state.cells) result.problems.push(...outputProblems(cell).map((p) => `${path}: ${p}`));
    if (run.timedOut) {
      const stuck = state.cells.find((c) => c.state === 'running') ?? state.cells.find((c) => c.count === null);
      result.problems.push(`${path}: not done within ${LESSON_TIMEOUT / 1000} s: stuck at `
        + `${stuck ? describe(stuck) : 'no cell (the kernel never went idle)'}; kernel ${state.kernel}`);
    } else if (!result.problems.length) {
      const missed = state.cells.filter((c) => c.count === null);
      if (missed.length) result.problems.push(`${path}: Run All left ${missed.map(describe).join(', ')} unexecuted`);
    }

    // Every cell on screen; then each widget gets up to WIDGET_WAIT ms to render.
    t = Date.now();
    result.shownHeight = await showWholeNotebook(page);
    result.problems.push(...(await widgetProblems(page)).map((p) => `${path}: ${p}`));
    phase('widgets', t);
    t = Date.now();
    const file = join(ARTIFACTS, `lesson-${stem}.png`);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.locator('.jp-NotebookPanel:not(.lm-mod-hidden)').first().screenshot({ path: file });
    result.screenshot = file;
    phase('screenshot', t);
    for (const e of consoleErrors.values()) result.problems.push(`${path}: browser console error from our code: ${e}`);
  } catch (err) {
    result.problems.push(`${path}: ${err.message}`);
  }
  t = Date.now();
  try {
    await closeLesson(page);
  } catch (err) {
    result.problems.push(`${path}: closing it failed: ${err.message}`);
  }
  phase('close', t);
  result.seconds.total = seconds(Date.now() - started);
  result.ok = !result.problems.length;
  writeFileSync(opts.result, JSON.stringify(results, null, 1));
  const phases = Object.entries(result.seconds).map(([k, v]) => `${k} ${v} s`).join(', ');
  log(`${result.ok ? 'ok  ' : 'FAIL'} ${path}: ${result.cells} code cells; ${phases}`);
  for (const p of result.problems) log(`  ${p.split('\n').join('\n    ')}`);
}

async function main() {
  writeFileSync(opts.result, '[]');
  const started = Date.now();
  let browser;
  let failed = false;
  try {
    browser = await chromium.launch({ executablePath: opts.chromium, headless: true, args: CHROMIUM_FLAGS });
    const page = await (await browser.newContext({ viewport: VIEWPORT })).newPage();
    page.setDefaultTimeout(30000);
    const ours = (...texts) => texts.some((s) => s && OUR_CODE.test(s));
    const keep = (text) => {
      const first = text.split('\n')[0];
      if (!consoleErrors.has(first)) consoleErrors.set(first, text.slice(0, 1500));
    };
    page.on('console', (msg) => {
      if (msg.type() === 'error' && ours(msg.text(), msg.location()?.url)) keep(msg.text());
    });
    page.on('pageerror', (err) => {
      if (ours(err.message, err.stack)) keep(err.stack ?? `${err.name}: ${err.message}`);
    });
    let t = Date.now();
    // ?reset: an empty workspace (no notebook from an earlier run reopened with its kernel).
    await page.goto(`${BASE}/lab?reset`, { waitUntil: 'domcontentloaded' });
    await page.waitForFunction(() => window.jupyterapp?.shell && document.querySelector('#jp-main-dock-panel'));
    await page.evaluate(() => window.jupyterapp.restored);
    log(`JupyterLab loaded (${seconds(Date.now() - t)} s)`);
    for (const path of LESSONS) await runLesson(page, path);
  } catch (err) {
    failed = true;
    console.error(`[lessons] FAILED: ${err.message}`);
  } finally {
    if (browser) await browser.close().catch(() => {});
  }
  failed ||= results.length !== LESSONS.length || results.some((r) => !r.ok);
  writeFileSync(opts.result, JSON.stringify(results, null, 1));
  log(`${results.filter((r) => r.ok).length}/${LESSONS.length} lessons passed in ${seconds(Date.now() - started)} s`);
  process.exit(failed ? 1 : 0);
}

main();
