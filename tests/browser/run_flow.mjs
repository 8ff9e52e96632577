#!/usr/bin/env node
// What a new user does with the mouse only, in a real JupyterLab with headless Chromium.
//
// Usage:
//   node run_flow.mjs --base-url http://127.0.0.1:8888 --notebook editor_demo.ipynb \
//       --artifacts DIR --computer DIR --result seen.json --database tuning_db/records.jsonl \
//       --expect expect.json [--function mm_relu] [--chromium /usr/bin/chromium] \
//       [--timeout 45000] [--stages looptree,editor,transfer,dark,viewer,database,launcher,replay]
//
// --computer is "the user's computer": downloads are saved there and uploads come from
// there. --result receives what the pages showed (IR texts, viewer steps, database rows
// and plot points), written after every stage, for the Python side to check. --timeout
// bounds each wait (milliseconds); no step sleeps a fixed time where a condition can be
// awaited. --expect is a JSON file the Python side computed from the models:
//   {"looptree": {"block": "C", "targets": {"reverse_compute_at": [{name, block, depth}],
//                 "compute_at": [...]}},
//    "workbench": {"workload": "matmul", "sizes": {"M": 16, ...},
//                  "rows": [{kind, name, block, depth, extent}, ...]}}
//
// Stages:
//   looptree  (in the editor, before the split) keyboard: click a row, ArrowDown/ArrowUp
//             move .wb-looptree-selected; collapse a row with its .wb-looptree-toggle and
//             with ArrowLeft (its descendants disappear), expand with the toggle and
//             ArrowRight; select block C, choose each compute-location action: the
//             .wb-looptree-target rows are exactly the model's legal targets.
//   editor    open the notebook, Run All, split `j` by 4 (loop tree row, action drop-down,
//             factor, Apply), reorder with the up/down buttons + Apply, reorder by dragging
//             a loop-tree row onto another;
//   transfer  (after editor) download the schedule file and the trace from the Trace tab,
//             Reset, upload the schedule file (file chooser), check one undo step per
//             instruction (Undo once, Redo), open the stepper and step through.
//   dark      Settings > Theme > JupyterLab Dark, screenshot of the editor, back to Light.
//   viewer    file browser: upload the downloaded schedule file (its upload button and the
//             file chooser), double-click it, check the extension's viewer: steps, a step's
//             diff.
//   database  file browser: open the database folder and its records.jsonl; read the
//             viewer's table rows and plot points.
//   launcher  File > New Launcher, the "New schedule workbench" card (section Other): pick
//             the workload and sizes in the .wb-picker dialog, Create; the new notebook's
//             code calls the workload with those sizes; Run All; its .wb-looptree shows
//             the workload's loops.
//   replay    (after viewer) right-click the uploaded schedule file, "Open in notebook":
//             <stem>_replay.ipynb opens; Run All; its .wb-stepper steps with .wb-next and
//             .wb-previous.
//
// Exits 0 on success. On any failure it prints what went wrong (plus the notebook's error
// outputs and the browser console errors), saves NAME.failure.png in --artifacts and
// exits 1.

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
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
    notebook: { type: 'string' },
    artifacts: { type: 'string' },
    computer: { type: 'string' },
    result: { type: 'string' },
    database: { type: 'string' },
    expect: { type: 'string' },
    function: { type: 'string', default: 'mm_relu' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    timeout: { type: 'string', default: '45000' },
    stages: { type: 'string', default: 'looptree,editor,transfer,dark,viewer,database,launcher,replay' },
  },
});

for (const name of ['base-url', 'notebook', 'artifacts', 'computer', 'result', 'database', 'expect']) {
  if (!opts[name]) {
    console.error(`run_flow.mjs: --${name} is required (see the usage at the top of the file)`);
    process.exit(2);
  }
}

const TIMEOUT = Number(opts.timeout);
const ARTIFACTS = resolve(opts.artifacts);
const COMPUTER = resolve(opts.computer);
const FUNC = opts.function;
const SCHEDULE_FILE = `${FUNC}.schedule.json`;
const TRACE_FILE = `${FUNC}.trace.json`;
const STAGES = new Set(opts.stages.split(','));
const EXPECT = JSON.parse(readFileSync(opts.expect, 'utf8'));
const seen = {};
const consoleErrors = [];
let currentStep = 'start';

function log(message) {
  console.log(`[run_flow] ${message}`);
}

function record(key, value) {
  seen[key] = value;
  writeFileSync(opts.result, JSON.stringify(seen, null, 1));
}

async function step(name, body) {
  currentStep = name;
  const started = Date.now();
  const result = await body();
  log(`${name} (${Date.now() - started} ms)`);
  return result;
}

async function screenshot(page, name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, name), fullPage: true });
  log(`screenshot: ${name}`);
}

/** Poll `probe()` until it returns a truthy value; fail with `what()` after the timeout. */
async function waitUntil(page, probe, what, timeout = TIMEOUT) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeout} ms: ${typeof what === 'function' ? await what() : what}`);
    }
    await page.waitForTimeout(100);
  }
}

/** A hook the page must have: wait for it, or fail naming the class that is missing. */
async function hook(locator, name, owner, timeout = TIMEOUT) {
  try {
    await locator.first().waitFor({ state: 'attached', timeout });
  } catch {
    throw new Error(`the page has no ${name} (${owner}) within ${timeout} ms`);
  }
  return locator;
}

/** The kernel status shown in the notebook toolbar ("idle", "busy", ...), or null. */
async function kernelStatus(page) {
  return page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator')
    .first()
    .getAttribute('data-status', { timeout: 1000 })
    .catch(() => null);
}

/** Wait until the kernel has been idle for `quietMs` in a row (comm round trips settle). */
async function waitForKernelIdle(page, { quietMs = 400, timeout = TIMEOUT } = {}) {
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

/** Click a JupyterLab main-menu entry: clickMenu(page, 'Run', 'Run All Cells'), or with a
 * submenu clickMenu(page, 'Settings', 'Theme', 'JupyterLab Dark'). */
async function clickMenu(page, top, ...items) {
  await page.locator('.lm-MenuBar-item', { hasText: new RegExp(`^${top}$`) }).click();
  for (const [index, item] of items.entries()) {
    const entry = page.locator('.lm-Menu:visible .lm-Menu-item:not(.lm-mod-disabled)')
      .filter({ has: page.locator('.lm-Menu-itemLabel', { hasText: new RegExp(`^${item}$`) }) })
      .last();
    if (index < items.length - 1) await entry.hover();
    else await entry.click();
  }
}

const text = async (locator) => (await locator.first().textContent()) ?? '';
const squash = (s) => s.replace(/\u00a0/g, ' ').replace(/[ \t]+\n/g, '\n').trim();

/** Notebook error outputs and the editor's error box, for failure messages. */
async function diagnostics(page) {
  const lines = [];
  try {
    const errors = await page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
      .allInnerTexts();
    for (const t of errors) lines.push(`notebook error output:\n${t.slice(0, 2000)}`);
    for (const cls of ['.wb-error', '.wb-trace', '.wb-reorder']) {
      const box = page.locator(cls).first();
      if (await box.count()) {
        lines.push(`${cls}: ${JSON.stringify((await box.textContent()).slice(0, 1500))}`);
      }
    }
    // A widget whose view could not be created: click it for its error and stack.
    const broken = page.locator('.jupyter-widgets-error-widget');
    for (let i = 0; i < Math.min(await broken.count(), 3); i++) {
      const message = await broken.nth(i).evaluate((el) => {
        el.parentElement.click(); // the view shows its message and stack when clicked
        return el.textContent;
      });
      lines.push(`widget error: ${message.slice(0, 1500)}`);
    }
    lines.push(`kernel status: ${await kernelStatus(page)}`);
  } catch (err) {
    lines.push(`(could not read the page: ${err.message})`);
  }
  for (const t of consoleErrors.slice(0, 10)) lines.push(`browser console error: ${t}`);
  return lines.join('\n');
}

// ------------------------------------------------------------------------------------
// The editor

/** Lines of `code` that start a loop: the loop variable names in order of appearance. */
function loopOrder(code) {
  return [...code.matchAll(/for ([\w, ]+) in /g)]
    .flatMap((m) => m[1].split(',').map((s) => s.trim()));
}

function assertOrder(code, names, where) {
  const order = loopOrder(code);
  const positions = names.map((n) => order.indexOf(n));
  if (positions.some((p) => p < 0) || positions.some((p, i) => i && p < positions[i - 1])) {
    throw new Error(`${where}: expected the loops ${names.join(', ')} in this order; the IR `
      + `has the loops ${order.join(', ')}`);
  }
}

/** The loop tree's shown rows as the page draws them. */
async function treeRows(tree) {
  return tree.locator('.wb-looptree-row').evaluateAll((els) => els.map((e) => ({
    kind: e.dataset.kind,
    name: e.dataset.name,
    block: e.dataset.block,
    depth: Number(e.getAttribute('aria-level')) - 1,
    extent: e.querySelector('.wb-looptree-extent')?.textContent ?? '',
    expanded: e.getAttribute('aria-expanded'),
    selected: e.classList.contains('wb-looptree-selected'),
    target: e.classList.contains('wb-looptree-target'),
  })));
}

/** A row's identity: names repeat (two loops `i`), the block below and the depth do not. */
const rowKey = (r) => `${r.kind} ${r.name}${r.kind === 'loop' ? ` above ${r.block}` : ''} at depth ${r.depth}`;

function rowLocator(tree, r) {
  return tree.locator(`.wb-looptree-row[data-kind="${r.kind}"][data-name="${r.name}"]`
    + `[data-block="${r.block}"][aria-level="${r.depth + 1}"]`).first();
}

/** The index of the notebook's active cell (JupyterLab's own arrow-key shortcuts move it). */
async function activeCell(page) {
  return page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook').first()
    .evaluate((nb) => [...nb.querySelectorAll('.jp-Cell')].findIndex((c) => c.classList.contains('jp-mod-active')));
}

async function looptreeStage(page, tree, chooseAction) {
  const want = EXPECT.looptree;
  const expectedKeys = want.rows.map(rowKey);
  const shownKeys = async () => (await treeRows(tree)).map(rowKey);
  await step('loop tree: every block and loop of the function, expanded', async () => {
    await waitUntil(page, async () => JSON.stringify(await shownKeys()) === JSON.stringify(expectedKeys),
      async () => `the loop tree shows ${JSON.stringify(await shownKeys())}; the model's tree is `
        + JSON.stringify(expectedKeys));
  });
  const all = want.rows;
  const selectedKey = async () => (await treeRows(tree)).filter((r) => r.selected).map(rowKey).join(', ');
  const waitSelected = (r, how) => waitUntil(page, async () => (await selectedKey()) === rowKey(r),
    async () => `after ${how} the selected row is "${await selectedKey()}", expected "${rowKey(r)}"`);

  await step('loop tree keyboard: ArrowDown, ArrowDown, ArrowUp move the selection', async () => {
    await rowLocator(tree, all[0]).click(); // a click also focuses the tree
    await waitSelected(all[0], 'a click on the first row');
    await waitForKernelIdle(page, { quietMs: 200 });
    const cell = await activeCell(page);
    for (const [key, to] of [['ArrowDown', 1], ['ArrowDown', 2], ['ArrowUp', 1]]) {
      await page.keyboard.press(key);
      await waitSelected(all[to], key);
    }
    await waitForKernelIdle(page, { quietMs: 200 });
    if ((await activeCell(page)) !== cell) {
      throw new Error("the arrow keys in the loop tree also moved the notebook's active cell");
    }
  });

  // The rows under row `index` (deeper, up to the next row at its depth or above).
  const descendants = (index) => {
    const out = [];
    for (let n = index + 1; n < all.length && all[n].depth > all[index].depth; n++) out.push(rowKey(all[n]));
    return out;
  };
  const waitShown = async (index, collapsed, how) => {
    const gone = new Set(collapsed ? descendants(index) : []);
    const expected = expectedKeys.filter((k) => !gone.has(k));
    await waitUntil(page, async () => JSON.stringify(await shownKeys()) === JSON.stringify(expected)
      && (await rowLocator(tree, all[index]).getAttribute('aria-expanded')) === String(!collapsed),
    async () => `after ${how} on "${rowKey(all[index])}" the tree shows ${JSON.stringify(await shownKeys())}, `
      + `expected ${JSON.stringify(expected)}`);
    await waitForKernelIdle(page, { quietMs: 200 });
  };

  await step('collapse and expand: ArrowLeft / ArrowRight, and the .wb-looptree-toggle', async () => {
    if (!descendants(1).length) throw new Error(`"${rowKey(all[1])}" has no rows under it to collapse`);
    await page.keyboard.press('ArrowLeft');
    await waitShown(1, true, 'ArrowLeft');
    await screenshot(page, '01-looptree-collapsed.png');
    await page.keyboard.press('ArrowRight');
    await waitShown(1, false, 'ArrowRight');
    // The outer loop of the other block, with the mouse: the selection stays where it is.
    const outer = all.findIndex((r) => r.kind === 'loop' && r.depth === 0 && r.block === want.block);
    const toggle = rowLocator(tree, all[outer]).locator('.wb-looptree-toggle');
    await hook(toggle, `.wb-looptree-toggle on "${rowKey(all[outer])}"`, 'T');
    await toggle.click();
    await waitShown(outer, true, 'a click on .wb-looptree-toggle');
    await toggle.click();
    await waitShown(outer, false, 'a second click on .wb-looptree-toggle');
    await waitSelected(all[1], 'collapsing and expanding another row');
  });

  await step(`block ${want.block}: the .wb-looptree-target rows of each compute-location action`, async () => {
    const block = all.find((r) => r.kind === 'block' && r.name === want.block);
    await rowLocator(tree, block).click();
    await waitSelected(block, `a click on block ${want.block}`);
    await waitForKernelIdle(page);
    const targets = async () => (await treeRows(tree)).filter((r) => r.target).map(rowKey).sort();
    // The action with legal targets first (its screenshot), then the one without.
    const actions = Object.entries(want.targets).sort(([, a], [, b]) => b.length - a.length);
    for (const [action, legal] of actions) {
      await chooseAction(action);
      const expected = legal.map(rowKey).sort();
      await waitUntil(page, async () => JSON.stringify(await targets()) === JSON.stringify(expected),
        async () => `with ${action} chosen for block ${want.block} the .wb-looptree-target rows are `
          + `${JSON.stringify(await targets())}; the legal targets are ${JSON.stringify(expected)}`);
      record(`looptree_targets_${action}`, (await treeRows(tree)).filter((r) => r.target)
        .map(({ kind, name, block, depth }) => ({ kind, name, block, depth })));
      if (legal.length) {
        await tree.first().scrollIntoViewIfNeeded();
        await screenshot(page, '02-looptree-targets.png');
      }
    }
  });
}

async function editorStage(page) {
  const nbUrl = `${opts['base-url']}/lab/tree/${opts.notebook}`;
  await step('open the notebook', async () => {
    await page.goto(nbUrl, { waitUntil: 'domcontentloaded', timeout: TIMEOUT });
    await page.locator('.jp-NotebookPanel .jp-Cell').first().waitFor({ timeout: TIMEOUT });
  });

  await step('wait for the kernel to be idle', async () => {
    // "Run All" before the kernel is connected runs nothing: wait for the status bar
    // to say "Python 3 (ipykernel) | Idle", then for the toolbar indicator to stay idle.
    await page.locator('#jp-main-statusbar', { hasText: /\|\s*Idle/ })
      .waitFor({ timeout: TIMEOUT });
    await waitForKernelIdle(page, { quietMs: 500 });
  });

  await step('run all cells (Run menu)', () => clickMenu(page, 'Run', 'Run All Cells'));

  const editor = page.locator('.wb-editor').first();
  await step('wait for the editor widget', async () => {
    const traceback = page.locator('.jp-OutputArea-output',
      { hasText: 'Traceback (most recent call last)' }).first();
    await editor.or(traceback).first().waitFor({ state: 'visible', timeout: TIMEOUT })
      .catch(() => {
        throw new Error(`no .wb-editor appeared within ${TIMEOUT} ms after Run All`);
      });
    if (!(await editor.isVisible())) {
      throw new Error('a notebook cell raised an exception instead of showing the editor');
    }
    await waitForKernelIdle(page);
  });
  await editor.scrollIntoViewIfNeeded();

  // The editor's own IR and error box (the stepper, opened later, has its own).
  const ir = editor.locator('.wb-ir:not(.wb-stepper .wb-ir)').first();
  const trace = editor.locator('.wb-trace').first();
  const error = editor.locator('.wb-error:not(.wb-stepper .wb-error)').first();
  const apply = editor.locator('.wb-apply').first();
  const action = editor.locator('.wb-action select').first();
  const tree = await hook(editor.locator('.wb-looptree'), '.wb-looptree loop tree', 'T');
  const row = (name) => tree.locator(`.wb-looptree-row[data-name="${name}"]`).first();
  const irText = async () => squash(await text(ir));
  const errorText = async () => squash(await text(error));

  async function noError(where) {
    const e = await errorText();
    if (e) throw new Error(`${where}: the editor shows an error: ${e}`);
  }

  async function applyAndWait(where, changed) {
    const before = await irText();
    await apply.click();
    await waitUntil(page, async () => (await irText()) !== before || (await errorText()),
      `${where}: the IR did not change after Apply`);
    await waitForKernelIdle(page);
    await noError(where);
    if (changed) await waitUntil(page, async () => changed(await irText()), `${where}: IR check`);
    return irText();
  }

  async function selectLoop(name) {
    await hook(row(name), `.wb-looptree-row[data-name="${name}"]`, 'T');
    await row(name).click();
    await waitUntil(page, async () => (await row(name).getAttribute('class') ?? '')
      .includes('wb-looptree-selected'),
    `the loop-tree row ${name} did not get .wb-looptree-selected after a click`);
    await waitForKernelIdle(page);
  }

  async function chooseAction(name) {
    if ((await action.inputValue()) !== name) {
      await action.selectOption({ label: name });
      await waitForKernelIdle(page);
    }
  }

  const irStart = await irText();
  record('ir_start', irStart);

  if (STAGES.has('looptree')) await looptreeStage(page, tree, chooseAction);

  await step('split j by 4: loop tree row, action drop-down, factor, Apply', async () => {
    await selectLoop('j');
    await chooseAction('split');
    const factor = editor.locator('.wb-split-factor select').first();
    await hook(factor.locator('option', { hasText: /^4$/ }), 'factor option 4 in .wb-split-factor', 'T');
    await factor.selectOption({ label: '4' });
    await waitForKernelIdle(page);
    // Time the round trip as the user sees it: from the click on Apply to the new IR in
    // the page (the kernel applies the primitive and re-renders; the front end redraws).
    await ir.evaluate((box) => {
      window.__wbRoundTrip = new Promise((done) => {
        const start = performance.now();
        const seen = new MutationObserver(() => {
          if (box.textContent.includes('j_1')) {
            seen.disconnect();
            done(performance.now() - start);
          }
        });
        seen.observe(box, { childList: true, subtree: true, characterData: true });
      });
    });
    const code = await applyAndWait('split', (t) => t.includes('j_0 * 4 + j_1'));
    const roundTrip = await page.evaluate(() => window.__wbRoundTrip);
    log(`round trip from the Apply click to the new IR on the page: ${roundTrip.toFixed(0)} ms`);
    const traceText = await text(trace);
    if (!traceText.includes('sch.split(') || !traceText.includes('factors=[None, 4]')) {
      throw new Error(`.wb-trace lacks sch.split(... factors=[None, 4] ...): ${traceText.slice(0, 600)}`);
    }
    assertOrder(code, ['i', 'j_0', 'j_1', 'k'], 'after the split');
    record('ir_split', code);
  });
  await screenshot(page, '03-split.png');

  await step('reorder with the up/down buttons: k above j_1, Apply', async () => {
    await selectLoop('i');
    await chooseAction('reorder');
    const control = await hook(editor.locator('.wb-reorder'), '.wb-reorder control', 'T');
    const items = control.locator('.wb-reorder-item');
    const names = async () => items.evaluateAll((els) => els.map((e) => e.dataset.name));
    await waitUntil(page, async () => JSON.stringify(await names())
      === JSON.stringify(['i', 'j_0', 'j_1', 'k']),
    async () => `.wb-reorder lists ${JSON.stringify(await names())}, expected the loops of `
      + 'block Y from i down: ["i","j_0","j_1","k"]');
    // One click moves one loop one place; the list must show exactly that each time.
    const move = async (name, direction) => {
      const cls = `.wb-reorder-${direction}`;
      const button = control.locator(`.wb-reorder-item[data-name="${name}"] ${cls}`).first();
      await hook(button, `${cls} on .wb-reorder-item[data-name="${name}"]`, 'T');
      const expected = await names();
      const at = expected.indexOf(name);
      const to = direction === 'up' ? at - 1 : at + 1;
      [expected[at], expected[to]] = [expected[to], expected[at]];
      await button.click();
      await waitUntil(page, async () => JSON.stringify(await names()) === JSON.stringify(expected),
        async () => `after ${cls} on ${name} the reorder list is ${JSON.stringify(await names())}, `
          + `expected ${JSON.stringify(expected)}`);
    };
    await move('k', 'up'); // i, j_0, k, j_1
    await move('j_0', 'down'); // i, k, j_0, j_1
    await move('j_0', 'up'); // i, j_0, k, j_1
    await waitForKernelIdle(page);
    const code = await applyAndWait('reorder (buttons)');
    assertOrder(code, ['i', 'j_0', 'k', 'j_1'], 'after the reorder with the buttons');
    const reorders = ((await text(trace)).match(/sch\.reorder\(/g) ?? []).length;
    if (reorders !== 1) throw new Error(`.wb-trace shows ${reorders} sch.reorder( calls, expected 1`);
    record('ir_reorder_buttons', code);
  });
  await screenshot(page, '04-reorder-buttons.png');

  await step('reorder by dragging loop row j_0 onto loop row i', async () => {
    const before = await irText();
    await row('j_0').dragTo(row('i'));
    // A drop reorders at once (the preamble's contract); wait for the new IR.
    await waitUntil(page, async () => (await irText()) !== before || (await errorText()),
      'the IR did not change after dropping j_0 onto i');
    await waitForKernelIdle(page);
    await noError('reorder (drag)');
    const code = await irText();
    assertOrder(code, ['j_0', 'i', 'k', 'j_1'], 'after dragging j_0 onto i');
    const reorders = ((await text(trace)).match(/sch\.reorder\(/g) ?? []).length;
    if (reorders !== 2) throw new Error(`.wb-trace shows ${reorders} sch.reorder( calls, expected 2`);
    record('ir_final', code);
  });
  await screenshot(page, '05-reorder-drag.png');
  if (!STAGES.has('transfer')) return;

  await step('Trace tab: download the schedule file and the trace', async () => {
    await editor.locator('.wb-tabs .lm-TabBar-tab', { hasText: /^Trace/ }).first().click();
    for (const [cls, name] of [['.wb-download-schedule', SCHEDULE_FILE],
      ['.wb-download-trace', TRACE_FILE]]) {
      const button = await hook(editor.locator(cls), cls, 'F');
      const [download] = await Promise.all([
        page.waitForEvent('download', { timeout: TIMEOUT }),
        button.first().click(),
      ]);
      const suggested = download.suggestedFilename();
      if (suggested !== name) {
        throw new Error(`${cls} downloads "${suggested}", expected "${name}"`);
      }
      await download.saveAs(join(COMPUTER, suggested));
      const failure = await download.failure();
      if (failure) throw new Error(`the download of ${name} failed: ${failure}`);
    }
  });
  await screenshot(page, '06-trace-tab.png');

  await step('Reset, then upload the schedule file from the computer', async () => {
    const irFinal = seen.ir_final;
    await editor.locator('.wb-reset').first().click();
    await waitUntil(page, async () => (await irText()) === irStart,
      'Reset did not bring the IR back to the start');
    await waitForKernelIdle(page);
    const upload = await hook(editor.locator('.wb-upload'), '.wb-upload control', 'F');
    const [chooser] = await Promise.all([
      page.waitForEvent('filechooser', { timeout: TIMEOUT }),
      upload.first().click(),
    ]);
    await chooser.setFiles(join(COMPUTER, SCHEDULE_FILE));
    await waitUntil(page, async () => (await irText()) === irFinal || (await errorText()),
      async () => `after the upload the IR is not the saved schedule's:\n${await irText()}`);
    await waitForKernelIdle(page);
    await noError('upload');
    if ((await irText()) !== irFinal) throw new Error('after the upload the IR changed again');
  });

  await step('one undo step per instruction: Undo once, then Redo', async () => {
    await editor.locator('.wb-undo').first().click();
    await waitUntil(page, async () => (await irText()) === seen.ir_reorder_buttons,
      async () => `one Undo after the upload should show the IR before the drag; it shows:\n${await irText()}`);
    await waitForKernelIdle(page);
    await editor.locator('.wb-redo').first().click();
    await waitUntil(page, async () => (await irText()) === seen.ir_final,
      'Redo did not bring back the uploaded schedule');
    await waitForKernelIdle(page);
  });
  await screenshot(page, '07-uploaded.png');

  await step('Open in stepper, step through with Next', async () => {
    await editor.locator('.wb-tabs .lm-TabBar-tab', { hasText: /^Trace/ }).first().click();
    const open = await hook(editor.locator('.wb-open-stepper'), '.wb-open-stepper', 'F');
    await open.first().click();
    const stepper = editor.locator('.wb-stepper-box .wb-stepper').first();
    await hook(stepper, '.wb-stepper-box .wb-stepper', 'F');
    await stepper.waitFor({ state: 'visible', timeout: TIMEOUT });
    await waitForKernelIdle(page);
    const next = await hook(stepper.locator('.wb-next'), '.wb-next in the stepper', 'F');
    const previous = await hook(stepper.locator('.wb-previous'), '.wb-previous in the stepper', 'F');
    // The IR the stepper shows: at step 0 its .wb-ir, later the new (right) side of its
    // side-by-side diff of the step.
    const stepperIr = async (previousIr) => squash(await stepper.evaluate((root) => {
      const shown = (el) => el && el.offsetParent !== null;
      const code = root.querySelector('.wb-ir');
      if (shown(code)) return code.textContent;
      if ([...root.querySelectorAll('.wb-diff-none')].some(shown)) return null; // unchanged
      const table = [...root.querySelectorAll('.wb-diff-side')].find(shown);
      if (!table) return '(the stepper shows neither .wb-ir nor a side-by-side .wb-diff)';
      return [...table.querySelectorAll('tr')]
        .filter((tr) => tr.cells.length === 6 && tr.cells[3].textContent.trim())
        .map((tr) => tr.cells[5].textContent).join('\n');
    }) ?? previousIr);
    // A click moves one step: wait until the stepper's text changed and the kernel is idle.
    const clickAndSettle = async (button) => {
      const before = await text(stepper);
      await button.click();
      await waitUntil(page, async () => (await text(stepper)) !== before,
        'the stepper did not change after a click on previous/next');
      await waitForKernelIdle(page, { quietMs: 200 });
    };
    const steps = JSON.parse(readFileSync(join(COMPUTER, TRACE_FILE), 'utf8'))[0].length;
    // The stepper may open at the editor's current step: go back to the start with
    // Previous, then forward through every instruction with Next.
    let clicks = 0;
    while (!(await previous.first().isDisabled())) {
      if (++clicks > steps) throw new Error(`.wb-previous is still enabled after ${steps} clicks`);
      await clickAndSettle(previous.first());
    }
    const codes = [await stepperIr()];
    record('stepper_start_ir', codes[0]);
    if (loopOrder(codes[0]).includes('j_1')) {
      throw new Error('at its first step the stepper already shows the split loop j_1');
    }
    for (clicks = 0; !(await next.first().isDisabled()); ) {
      if (++clicks > steps) throw new Error(`.wb-next is still enabled after ${steps} clicks`);
      await clickAndSettle(next.first());
      codes.push(await stepperIr(codes.at(-1)));
    }
    const flat = codes.map((c) => c.replace(/\s+/g, ' '));
    const distinct = flat.filter((c, i) => i === 0 || c !== flat[i - 1]);
    record('stepper_irs', codes);
    if (distinct.length !== 4) {
      throw new Error(`stepping through ${clicks} steps with Next showed ${distinct.length} `
        + 'different IRs; expected 4 (the start, the split and two reorders)');
    }
    assertOrder(codes.at(-1), ['j_0', 'i', 'k', 'j_1'], "the stepper's last step");
    await stepper.scrollIntoViewIfNeeded();
  });
  await screenshot(page, '08-stepper.png');
}

// ------------------------------------------------------------------------------------
// Dark theme

/** Relative luminance (0 black .. 1 white) of a CSS rgb()/rgba() colour. */
function luminance(css) {
  const m = css.match(/rgba?\(([^)]+)\)/);
  if (!m) throw new Error(`cannot read the colour ${css}`);
  const [r, g, b] = m[1].split(',').slice(0, 3).map((v) => Number(v) / 255)
    .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

async function checkIrColours(page, theme) {
  const code = page.locator('.wb-editor .wb-ir pre.wb-code').first();
  await code.waitFor({ state: 'attached', timeout: TIMEOUT });
  const dark = theme === 'dark';
  await waitUntil(page, async () => (await page.evaluate(() => document.body.dataset.jpThemeLight))
    === String(!dark), `JupyterLab did not switch to the ${theme} theme`);
  const colours = await waitUntil(page, async () => {
    const c = await code.evaluate((el) => {
      const style = getComputedStyle(el);
      return { background: style.backgroundColor, color: style.color };
    });
    const bg = luminance(c.background);
    const fg = luminance(c.color);
    return (dark ? bg < 0.25 && fg > 0.5 : bg > 0.75 && fg < 0.35) ? c : null;
  }, async () => `the IR is hard to read in the ${theme} theme`);
  log(`${theme} theme: IR text ${colours.color} on ${colours.background}`);
}

async function darkStage(page) {
  await step('the IR reads well in the light theme', () => checkIrColours(page, 'light'));
  await step('Settings > Theme > JupyterLab Dark', async () => {
    await clickMenu(page, 'Settings', 'Theme', 'JupyterLab Dark');
    await checkIrColours(page, 'dark');
    // A theme change shows JupyterLab's splash screen for a moment.
    await page.locator('#jupyterlab-splash').waitFor({ state: 'detached', timeout: TIMEOUT });
    await page.locator('.wb-editor').first().scrollIntoViewIfNeeded();
  });
  await screenshot(page, '09-editor-dark.png');
  await step('Settings > Theme > JupyterLab Light', async () => {
    await clickMenu(page, 'Settings', 'Theme', 'JupyterLab Light');
    await checkIrColours(page, 'light');
    await page.locator('#jupyterlab-splash').waitFor({ state: 'detached', timeout: TIMEOUT });
  });
}

// ------------------------------------------------------------------------------------
// The extension's viewers, from JupyterLab's file browser

async function showFileBrowser(page) {
  const browser = page.locator('#filebrowser');
  if (!(await browser.isVisible())) {
    await page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="filebrowser"]').click();
    await browser.waitFor({ state: 'visible', timeout: TIMEOUT });
  }
  return browser;
}

async function fileItem(browser, name) {
  const item = browser.locator('.jp-DirListing-item')
    .filter({ has: browser.page().locator('.jp-DirListing-itemText', { hasText: new RegExp(`^${name.replace(/\./g, '\\.')}$`) }) })
    .first();
  await item.waitFor({ state: 'visible', timeout: TIMEOUT });
  return item;
}

async function goHome(page, browser) {
  await browser.locator('.jp-BreadCrumbs-home').first().click();
  await fileItem(browser, opts.notebook);
}

/** Double-click `name` in the file browser; return the viewer `cls` it opened (visible). */
async function openFromBrowser(page, browser, name, cls) {
  await (await fileItem(browser, name)).dblclick();
  const viewer = page.locator(`${cls}:visible`).first();
  try {
    await viewer.waitFor({ state: 'visible', timeout: TIMEOUT });
  } catch {
    const tab = await page.locator('.lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current').allInnerTexts();
    throw new Error(`double-clicking ${name} in the file browser opened no ${cls} (X); the `
      + `current tab is ${JSON.stringify(tab)}`);
  }
  return viewer;
}

async function viewerStage(page) {
  const browser = await step('show the file browser', () => showFileBrowser(page));
  await step(`upload ${SCHEDULE_FILE} and ${TRACE_FILE} with the file browser's upload button`, async () => {
    await goHome(page, browser);
    const upload = browser.locator('.jp-FileBrowser-toolbar [title="Upload Files"]').first();
    const [chooser] = await Promise.all([
      page.waitForEvent('filechooser', { timeout: TIMEOUT }),
      upload.click(),
    ]);
    await chooser.setFiles([join(COMPUTER, SCHEDULE_FILE), join(COMPUTER, TRACE_FILE)]);
    await fileItem(browser, SCHEDULE_FILE);
    await fileItem(browser, TRACE_FILE);
  });

  const viewer = await step(`double-click ${SCHEDULE_FILE}: the extension's viewer`,
    () => openFromBrowser(page, browser, SCHEDULE_FILE, '.wb-schedule-viewer'));

  await step('select the split step: its diff', async () => {
    const fn = squash(await text(await hook(viewer.locator('.wb-viewer-function'), '.wb-viewer-function', 'X')));
    const steps = await hook(viewer.locator('.wb-viewer-step'), '.wb-viewer-step', 'X');
    const labels = (await steps.allTextContents()).map(squash);
    record('viewer_function', fn);
    record('viewer_steps', labels);
    const split = labels.findIndex((l) => l.includes('split'));
    if (split < 0) throw new Error(`no .wb-viewer-step mentions split: ${JSON.stringify(labels)}`);
    await steps.nth(split).click();
    await waitUntil(page, async () => ((await steps.nth(split).getAttribute('class')) ?? '')
      .includes('wb-viewer-step-selected'), 'the clicked step is not .wb-viewer-step-selected');
    const diff = await hook(viewer.locator('.wb-viewer-diff'), '.wb-viewer-diff', 'X');
    const added = diff.locator('.wb-diff-add');
    await waitUntil(page, async () => (await added.count()) > 0, '.wb-viewer-diff has no .wb-diff-add lines');
    const addedText = (await added.allTextContents()).map(squash);
    const removedText = (await diff.locator('.wb-diff-del').allTextContents()).map(squash);
    record('viewer_split_added', addedText);
    record('viewer_split_removed', removedText);
    if (!addedText.some((l) => l.includes('j_1'))) {
      throw new Error(`the split step's added lines lack j_1: ${JSON.stringify(addedText)}`);
    }
  });
  await screenshot(page, '10-schedule-viewer.png');

  await step(`double-click ${TRACE_FILE}: its instructions, no IR`, async () => {
    const traceViewer = await openFromBrowser(page, browser, TRACE_FILE, '.wb-schedule-viewer');
    const steps = await hook(traceViewer.locator('.wb-viewer-step'), '.wb-viewer-step', 'X');
    record('trace_viewer_steps', (await steps.allTextContents()).map(squash));
  });
}

async function databaseStage(page) {
  const browser = await showFileBrowser(page);
  const [folder, file] = opts.database.split('/');
  let viewer;
  await step(`open ${opts.database} from the file browser`, async () => {
    await goHome(page, browser);
    await (await fileItem(browser, folder)).dblclick();
    viewer = await openFromBrowser(page, browser, file, '.wb-db-viewer');
  });
  await step('read the database viewer: table rows and plot points', async () => {
    const table = await hook(viewer.locator('.wb-db-table'), '.wb-db-table', 'X');
    const rows = table.locator('tbody tr');
    await waitUntil(page, async () => (await rows.count()) > 0, '.wb-db-table has no body rows');
    record('db_rows', (await rows.allInnerTexts()).map(squash));
    const plot = await hook(viewer.locator('svg.wb-db-plot'), 'svg.wb-db-plot', 'X');
    const points = plot.locator('.wb-db-point');
    await waitUntil(page, async () => (await points.count()) > 0, '.wb-db-plot has no .wb-db-point');
    // Page positions of the point centres (whatever the SVG element kind).
    record('db_points', await points.evaluateAll((els) => els.map((e) => {
      const box = e.getBoundingClientRect();
      return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
    })));
  });
  await screenshot(page, '11-database-viewer.png');
}

// ------------------------------------------------------------------------------------
// Notebooks the extension creates: the launcher card and "Open in notebook"

const currentPanel = (page) => page.locator('.jp-NotebookPanel:not(.lm-mod-hidden)').first();

async function currentTab(page) {
  return squash(await page.locator('.lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel')
    .first().textContent({ timeout: 1000 }).catch(() => '') ?? '');
}

/** Wait until `name` is the notebook in front and `check(code)` (the texts of its code
 * cells, as the cell editors show them) returns nothing; else fail with its message. */
async function notebookOpened(page, name, check) {
  await waitUntil(page, async () => (await currentTab(page)) === name,
    async () => `${name} did not open (the current tab is "${await currentTab(page)}")`);
  const cells = currentPanel(page).locator('.jp-CodeCell');
  const code = () => cells.evaluateAll((els) => els.map((c) => [...c.querySelectorAll('.cm-line')]
    .map((l) => l.textContent).join('\n')));
  // The cell editors fill in after the cells appear: wait for the text, not for the cells.
  await waitUntil(page, async () => !check(await code()), async () => check(await code()));
  return code();
}

/** Run All in the notebook in front once its kernel is idle; wait for `cls` in its output. */
async function runAllAndWaitFor(page, cls, owner) {
  await page.locator('#jp-main-statusbar', { hasText: /\|\s*Idle/ }).waitFor({ timeout: TIMEOUT });
  await waitForKernelIdle(page, { quietMs: 500 });
  await clickMenu(page, 'Run', 'Run All Cells');
  const panel = currentPanel(page);
  const widget = panel.locator(cls).first();
  const traceback = panel.locator('.jp-OutputArea-output', { hasText: 'Traceback (most recent call last)' }).first();
  await widget.or(traceback).first().waitFor({ state: 'visible', timeout: TIMEOUT }).catch(() => {
    throw new Error(`no ${cls} (${owner}) appeared within ${TIMEOUT} ms after Run All`);
  });
  if (!(await widget.isVisible())) {
    throw new Error(`a notebook cell raised an exception instead of showing ${cls}: `
      + (await traceback.innerText()).slice(0, 1500));
  }
  await waitForKernelIdle(page);
  return widget;
}

async function launcherStage(page) {
  const want = EXPECT.workbench;
  const browser = await showFileBrowser(page);
  await goHome(page, browser); // the card creates its notebook in the file browser's folder
  const dialog = page.locator('.jp-Dialog').filter({ has: page.locator('.wb-picker') }).first();
  await step('File > New Launcher, the card "New schedule workbench" under Other', async () => {
    await clickMenu(page, 'File', 'New Launcher');
    const section = page.locator('.jp-Launcher-section:visible')
      .filter({ has: page.locator('.jp-Launcher-sectionTitle', { hasText: /^Other$/ }) }).first();
    const card = section.locator('.jp-LauncherCard', { hasText: 'New schedule workbench' }).first();
    await card.waitFor({ state: 'visible', timeout: TIMEOUT }).catch(() => {
      throw new Error('the launcher has no card "New schedule workbench" under Other (X)');
    });
    await card.click();
    await hook(dialog, 'dialog with a .wb-picker', 'X');
  });
  const sizes = Object.entries(want.sizes).map(([k, v]) => `${k}=${v}`).join(', ');
  await step(`pick ${want.workload}(${sizes}) in the .wb-picker, Create`, async () => {
    await dialog.locator('select.wb-picker-workload').selectOption(want.workload);
    for (const [key, value] of Object.entries(want.sizes)) {
      const input = dialog.locator(`.wb-picker-size input[data-size="${key}"]`);
      await hook(input, `.wb-picker-size input for ${key} of ${want.workload}`, 'X');
      await input.first().fill(String(value));
    }
    await screenshot(page, '12-new-workbench-dialog.png');
    await dialog.locator('.jp-Dialog-button', { hasText: /^Create$/ }).click();
    await dialog.waitFor({ state: 'detached', timeout: TIMEOUT });
  });
  const name = `${want.workload}_workbench.ipynb`;
  await step(`${name} opens with the editor on ${want.workload}(${sizes})`, async () => {
    const parts = ['ScheduleEditor(', `wb.workloads.${want.workload}(`, ...sizes.split(', ')];
    record('workbench_code', await notebookOpened(page, name, (code) => {
      const missing = parts.filter((part) => !(code[0] ?? '').includes(part));
      return missing.length ? `the first code cell of ${name} lacks ${JSON.stringify(missing)}: `
        + JSON.stringify(code[0] ?? null) : '';
    }));
  });
  await step(`Run All: the editor's loop tree shows the loops of ${want.workload}`, async () => {
    const editor = await runAllAndWaitFor(page, '.wb-editor', 'T');
    const tree = await hook(editor.locator('.wb-looptree'), '.wb-looptree in the new notebook', 'T');
    const expected = want.rows.map((r) => `${rowKey(r)}: ${r.kind === 'loop' ? `range(${r.extent})` : ''}`);
    const shown = async () => (await treeRows(tree)).map((r) => `${rowKey(r)}: ${r.kind === 'loop' ? r.extent : ''}`);
    await waitUntil(page, async () => JSON.stringify(await shown()) === JSON.stringify(expected),
      async () => `the new notebook's loop tree shows ${JSON.stringify(await shown())}; `
        + `${want.workload}(${sizes}) has ${JSON.stringify(expected)}`);
    record('workbench_rows', (await treeRows(tree))
      .map(({ kind, name, block, depth, extent }) => ({ kind, name, block, depth, extent })));
    await tree.first().scrollIntoViewIfNeeded();
  });
  await screenshot(page, '13-new-workbench.png');
}

async function replayStage(page) {
  const browser = await showFileBrowser(page);
  await goHome(page, browser);
  const name = `${SCHEDULE_FILE.replace(/\.schedule\.json$/, '')}_replay.ipynb`;
  await step(`right-click ${SCHEDULE_FILE} in the file browser, Open in notebook`, async () => {
    const item = browser.locator('.jp-DirListing-item[data-file-type="workbench-schedule"]')
      .filter({ has: page.locator('.jp-DirListing-itemText', { hasText: SCHEDULE_FILE }) });
    await hook(item, `.jp-DirListing-item[data-file-type="workbench-schedule"] for ${SCHEDULE_FILE}`, 'X');
    await item.first().click({ button: 'right' });
    const entry = page.locator('.lm-Menu:visible .lm-Menu-item:not(.lm-mod-disabled)')
      .filter({ has: page.locator('.lm-Menu-itemLabel', { hasText: /^Open in notebook$/ }) }).first();
    await entry.waitFor({ state: 'visible', timeout: TIMEOUT }).catch(() => {
      throw new Error(`the context menu of ${SCHEDULE_FILE} has no "Open in notebook" (X)`);
    });
    await entry.click();
    const call = `TraceStepper(${JSON.stringify(SCHEDULE_FILE)})`;
    record('replay_code', await notebookOpened(page, name, (code) => (code.some((c) => c.includes(call))
      ? '' : `no code cell of ${name} opens ${call}: ${JSON.stringify(code)}`)));
  });
  await step('Run All: a .wb-stepper; .wb-next, then .wb-previous', async () => {
    const stepper = await runAllAndWaitFor(page, '.wb-stepper', 'F');
    const next = (await hook(stepper.locator('.wb-next'), '.wb-next in the stepper', 'F')).first();
    const previous = (await hook(stepper.locator('.wb-previous'), '.wb-previous in the stepper', 'F')).first();
    const slider = async () => squash(await text(stepper.locator('.widget-readout')));
    const state = async () => `step ${await slider()}, previous ${await previous.isDisabled() ? 'disabled' : 'enabled'}, `
      + `next ${await next.isDisabled() ? 'disabled' : 'enabled'}`;
    const start = await text(stepper);
    if (!(await previous.isDisabled()) || (await next.isDisabled())) {
      throw new Error(`a new stepper should be at its first step: ${await state()}`);
    }
    await next.click();
    await waitUntil(page, async () => (await text(stepper)) !== start && !(await previous.isDisabled()),
      async () => `.wb-next did not move the stepper on: ${await state()}`);
    await waitForKernelIdle(page, { quietMs: 200 });
    record('replay_after_next', await state());
    await previous.click();
    await waitUntil(page, async () => (await text(stepper)) === start && (await previous.isDisabled()),
      async () => `.wb-previous did not bring the stepper back to its first step: ${await state()}`);
    await waitForKernelIdle(page, { quietMs: 200 });
    await stepper.scrollIntoViewIfNeeded();
  });
  await screenshot(page, '14-replay-notebook.png');
}

async function main() {
  mkdirSync(COMPUTER, { recursive: true });
  record('stages', []);
  let browser;
  let page;
  let failed = false;
  try {
    browser = await step('launch chromium', () => chromium.launch({
      executablePath: opts.chromium,
      headless: true,
      args: CHROMIUM_FLAGS,
      timeout: TIMEOUT,
    }));
    const context = await browser.newContext({
      viewport: { width: 1400, height: 1000 },
      acceptDownloads: true,
    });
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    page.on('console', (msg) => {
      if (msg.type() === 'error') consoleErrors.push(msg.text());
    });
    page.on('pageerror', (err) => consoleErrors.push(`${err.name}: ${err.message}`));
    const stages = [['editor', editorStage], ['dark', darkStage], ['viewer', viewerStage],
      ['database', databaseStage], ['launcher', launcherStage], ['replay', replayStage]];
    for (const [name, body] of stages) {
      if (!STAGES.has(name)) continue;
      if (name !== 'editor' && !page.url().startsWith(opts['base-url'])) {
        await page.goto(`${opts['base-url']}/lab`, { waitUntil: 'domcontentloaded' });
        await page.locator('#jp-main-dock-panel').waitFor({ timeout: TIMEOUT });
      }
      await body(page);
      record('stages', [...seen.stages, name]);
    }
  } catch (err) {
    failed = true;
    console.error(`[run_flow] FAILED at step "${currentStep}": ${err.message}`);
    if (page) {
      console.error(await diagnostics(page));
      try {
        await screenshot(page, 'failure.png');
      } catch (shotErr) {
        console.error(`[run_flow] could not save a failure screenshot: ${shotErr.message}`);
      }
    }
  } finally {
    if (browser) await browser.close().catch(() => {});
  }
  process.exit(failed ? 1 : 0);
}

main();
