// Drives the solidq web dashboard in Debian's Chromium, as an operator
// would: visits every page (each saved as a full-page PNG), then clicks
// the actions of a plan (retry, discard, pause and resume, run now, cancel,
// retry of a selection), accepting their confirm dialogs and waiting for
// the `?done=` page each one navigates to. Prints a JSON report on stdout;
// exits 1 with a message on stderr at the first thing that is wrong.
//
//   node tests/e2e/dashboard.mjs BASE_URL SCREENSHOT_DIR [PLAN_JSON]
//
// BASE_URL, SCREENSHOT_DIR and PLAN_JSON may also come from
// SOLIDQ_E2E_URL, SOLIDQ_E2E_SCREENSHOTS and SOLIDQ_E2E_PLAN. Without a
// plan it only visits the pages. tests/web_e2e.rs seeds a database, serves
// it with `solidq web` and writes the plan: job ids and names to act on,
// the counts each status tab must show, and a secret that no page may
// show.
//
// Any script that runs from stored text (an `alert`, or a dialog nobody
// asked for) is recorded in `window.__xss` and fails the run.
//
// Every page must work under the server's Content-Security-Policy (no
// inline script or style, no eval, no framing): any `securitypolicyviolation`
// event or console message about the policy fails the run. Each page's
// answer must carry the policy and the other browser headers; the live
// parts must poll, the charts draw, the filters filter. At the end two
// probes (an inline script and an inline style added to a page) must be
// blocked and reported, so the watch is shown to work, and a page of
// another origin framing the dashboard must get nothing.
//
// playwright-core downloads no browser: it drives /usr/bin/chromium
// (Debian's package), in a fresh profile, with no network of its own.

import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const CHROMIUM = process.env.SOLIDQ_E2E_CHROMIUM || '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--no-first-run',
];
// The navigation, in the order of the header's links.
const NAV = ['queues', 'jobs', 'processes', 'recurring', 'concurrency', 'charts', 'audit', 'database'];
const TABS = ['failed', 'ready', 'running', 'claimed', 'blocked', 'waiting', 'scheduled', 'retrying', 'finished', 'discarded'];
const TIMEOUT_MS = 15_000;
const XSS_PROBE = '<script>alert(1)</script>';

class Failure extends Error {}

function fail(message) {
  throw new Failure(message);
}

/** A pattern matching `text` whole, and nothing else. */
function exactly(text) {
  return new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`);
}

function usage() {
  return 'usage: node tests/e2e/dashboard.mjs BASE_URL SCREENSHOT_DIR [PLAN_JSON]';
}

function readArgs() {
  const base = (process.argv[2] || process.env.SOLIDQ_E2E_URL || '').replace(/\/+$/, '');
  const shots = process.argv[3] || process.env.SOLIDQ_E2E_SCREENSHOTS || '';
  const planText = process.argv[4] || process.env.SOLIDQ_E2E_PLAN || '';
  if (!/^https?:\/\//.test(base)) fail(`no base URL (got ${JSON.stringify(base)}); ${usage()}`);
  if (!shots) fail(`no screenshot directory; ${usage()}`);
  let plan = null;
  if (planText) {
    try {
      plan = JSON.parse(planText);
    } catch (e) {
      fail(`the plan is not JSON: ${e.message}`);
    }
  }
  return { base, shots, plan };
}

const report = {
  base: null,
  chromium: null,
  pages: [],
  actions: [],
  screenshots: [],
  confirms: [],
  xss: [],
  consoleErrors: [],
  failedRequests: [],
  csp: { violations: [], probes: {}, headersChecked: 0 },
  polls: [],
  charts: null,
  filters: [],
  framing: null,
  ms: 0,
};

// What every answer of a page must say to the browser.
const REQUIRED_HEADERS = {
  'x-frame-options': /^DENY$/,
  'x-content-type-options': /^nosniff$/,
  'referrer-policy': /^same-origin$/,
  'cache-control': /^no-store$/,
};
const CSP_DIRECTIVES = ["frame-ancestors 'none'", "script-src 'self'", "style-src 'self'", "default-src 'none'"];

async function main() {
  const started = Date.now();
  const { base, shots, plan } = readArgs();
  report.base = base;
  if (!fs.existsSync(CHROMIUM)) fail(`${CHROMIUM} is missing (apt-get install chromium)`);
  fs.mkdirSync(shots, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'solidq-e2e-chromium-'));
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ARGS,
      viewport: { width: 1280, height: 900 },
      timeout: 30_000,
    });
    report.chromium = context.browser()?.version() ?? null;
    await drive(context, base, shots, plan);
  } finally {
    if (context) await context.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
  }
  report.ms = Date.now() - started;
}

async function drive(context, base, shots, plan) {
  context.setDefaultTimeout(TIMEOUT_MS);
  // Survives navigations, unlike window.__xss: what ran is never lost.
  await context.exposeBinding('__solidqXss', ({ page }, what) => {
    report.xss.push({ url: page.url(), what: String(what) });
  });
  // Every violation of the Content-Security-Policy, on any page, from
  // the start of each document.
  await context.exposeBinding('__solidqCsp', ({ page }, v) => {
    report.csp.violations.push({ url: page.url(), ...v });
  });
  await context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__solidqCsp?.({
        directive: e.violatedDirective,
        blocked: e.blockedURI,
        source: e.sourceFile,
        line: e.lineNumber,
        sample: e.sample,
      });
    });
  });
  await context.addInitScript(() => {
    window.__xss = [];
    const note = (how, message) => {
      const what = `${how}(${String(message)})`;
      window.__xss.push(what);
      window.__solidqXss?.(what);
    };
    window.alert = (message) => note('alert', message);
    window.prompt = (message) => {
      note('prompt', message);
      return null;
    };
  });
  const page = context.pages()[0] ?? (await context.newPage());
  // The page's clock runs as the real one, except that `polls` moves it
  // ahead by the live parts' refresh interval instead of waiting it out.
  await page.clock.install();
  // Only the confirm dialog of the button being clicked is accepted.
  let expectedConfirm = null;
  let confirmed = [];
  page.on('dialog', async (dialog) => {
    const message = dialog.message();
    if (dialog.type() === 'confirm' && expectedConfirm?.test(message)) {
      confirmed.push(message);
      report.confirms.push(message);
      await dialog.accept();
    } else {
      report.xss.push({ url: page.url(), what: `${dialog.type()} dialog: ${message}` });
      await dialog.dismiss();
    }
  });
  page.on('pageerror', (e) => report.consoleErrors.push({ url: page.url(), text: `page error: ${e.message}` }));
  page.on('console', (m) => {
    if (m.type() === 'error') report.consoleErrors.push({ url: page.url(), text: m.text() });
    if (/Content[- ]Security[- ]Policy/i.test(m.text())) {
      report.csp.violations.push({ url: page.url(), console: m.text() });
    }
  });
  page.on('response', (r) => {
    if (r.status() >= 400) report.failedRequests.push({ url: r.url(), method: r.request().method(), status: r.status() });
  });

  let shot = 0;
  const screenshot = async (name) => {
    shot += 1;
    const file = path.join(shots, `${String(shot).padStart(2, '0')}-${name}.png`);
    await page.screenshot({ path: file, fullPage: true });
    report.screenshots.push(file);
  };

  const checkClean = async (where) => {
    const ran = await page.evaluate(() => window.__xss ?? []);
    if (ran.length > 0 || report.xss.length > 0) {
      fail(`script from stored text ran on ${where}: ${JSON.stringify([...ran, ...report.xss])}`);
    }
    if (plan?.secret) {
      const html = await page.content();
      if (html.includes(plan.secret)) fail(`${where} shows the secret argument (${plan.secret}) unfiltered`);
    }
    const pageErrors = report.consoleErrors.filter((e) => e.text.startsWith('page error'));
    if (pageErrors.length > 0) fail(`script errors on ${where}: ${JSON.stringify(pageErrors)}`);
    if (report.csp.violations.length > 0) {
      fail(`Content-Security-Policy violations on ${where}: ${JSON.stringify(report.csp.violations)}`);
    }
  };

  // The headers of a page's answer: the policy and the others.
  const checkHeaders = async (response, where) => {
    const headers = await response.allHeaders();
    const csp = headers['content-security-policy'] ?? '';
    for (const directive of CSP_DIRECTIVES) {
      if (!csp.includes(directive)) fail(`${where}: Content-Security-Policy ${JSON.stringify(csp)} lacks ${directive}`);
    }
    if (/unsafe-/.test(csp)) fail(`${where}: Content-Security-Policy ${JSON.stringify(csp)} allows unsafe code`);
    for (const [name, pattern] of Object.entries(REQUIRED_HEADERS)) {
      if (!pattern.test(headers[name] ?? '')) fail(`${where}: ${name} is ${JSON.stringify(headers[name])}, expected ${pattern}`);
    }
    report.csp.headersChecked += 1;
  };

  // Waits for the next htmx poll of `path` (a GET htmx makes by itself)
  // and for `selector` to be on the page after its swap.
  const polls = async (path, selector) => {
    const t0 = Date.now();
    const polled = page
      .waitForResponse((r) => new URL(r.url()).pathname === path && r.request().headers()['hx-request'] === 'true', { timeout: TIMEOUT_MS })
      .catch(() => fail(`${page.url()}: no htmx poll of ${path} within ${TIMEOUT_MS} ms`));
    // The dashboard's refresh interval (solidq_web::LIVE_REFRESH, in the
    // plan) in the page's time: htmx's `every 2s` fires without the test
    // waiting for it.
    await page.clock.fastForward(plan?.liveRefreshMs ?? 2_000);
    const answer = await polled;
    if (answer.status() !== 200) fail(`${page.url()}: the poll of ${path} answered ${answer.status()}`);
    await checkHeaders(answer, `the poll of ${path}`);
    await page.locator(selector).first().waitFor({ state: 'attached' });
    report.polls.push({ page: new URL(page.url()).pathname, path, ms: Date.now() - t0 });
  };

  const checkNav = async (where) => {
    for (const name of NAV) {
      const link = page.locator(`header a[href$="/${name}"]`);
      if ((await link.count()) !== 1) fail(`${where}: the navigation has no single link to /${name}`);
    }
  };

  // Opens `target`, expects 200 and the navigation, runs `check`, saves a
  // screenshot.
  const visit = async (name, target, check) => {
    const t0 = Date.now();
    const response = await page.goto(base + target, { waitUntil: 'load' });
    const status = response?.status();
    if (status !== 200) {
      const body = (await response?.text().catch(() => '')) ?? '';
      fail(`GET ${target} answered ${status}: ${body.slice(0, 300)}`);
    }
    await checkHeaders(response, `GET ${target}`);
    await checkNav(target);
    if (check) await check();
    await checkClean(target);
    await screenshot(name);
    report.pages.push({ page: name, path: target, status, ms: Date.now() - t0 });
  };

  // Clicks `button` and waits for its POST and the `?done=` page it leads
  // to. `confirm` is the confirm dialog's text, or null for a button that
  // asks nothing.
  const act = async (action, target, button, confirm) => {
    const t0 = Date.now();
    if ((await button.count()) !== 1) fail(`${action} ${target}: expected one button on ${page.url()}, found ${await button.count()}`);
    expectedConfirm = confirm;
    confirmed = [];
    const post = page.waitForResponse((r) => r.request().method() === 'POST', { timeout: TIMEOUT_MS });
    const landed = page.waitForResponse(
      (r) => r.request().isNavigationRequest() && new URL(r.url()).searchParams.has('done'),
      { timeout: TIMEOUT_MS },
    );
    landed.catch(() => {});
    await button.click();
    let answer;
    try {
      answer = await post;
    } catch {
      fail(`${action} ${target}: no POST after the click (confirm dialogs seen: ${JSON.stringify(confirmed)})`);
    }
    if (answer.status() !== 200) {
      const body = await answer.text().catch(() => '');
      fail(`${action} ${target}: POST ${new URL(answer.url()).pathname} answered ${answer.status()}: ${body.trim().slice(0, 300)}`);
    }
    let response;
    try {
      response = await landed;
    } catch {
      fail(`${action} ${target}: the page did not navigate to ?done= after the POST (now at ${page.url()})`);
    }
    // The response comes before the page commits to its URL.
    const destination = response.url();
    await page.waitForURL((u) => u.href === destination, { waitUntil: 'load' });
    if (confirm && confirmed.length !== 1) fail(`${action} ${target}: expected one confirm dialog matching ${confirm}, saw ${JSON.stringify(confirmed)}`);
    if (!confirm && confirmed.length !== 0) fail(`${action} ${target}: unexpected confirm dialogs ${JSON.stringify(confirmed)}`);
    expectedConfirm = null;
    if (response.status() !== 200) fail(`${action} ${target}: landed on ${response.url()} with ${response.status()}`);
    const done = new URL(page.url()).searchParams.get('done');
    const flash = (await page.locator('#flash .flash').textContent().catch(() => null))?.trim();
    if (!flash) fail(`${action} ${target}: no #flash .flash on ${page.url()}`);
    if (flash !== done) fail(`${action} ${target}: the flash says ${JSON.stringify(flash)}, ?done= says ${JSON.stringify(done)}`);
    await checkNav(page.url());
    await checkClean(page.url());
    const entry = { action, target, flash, landed: new URL(page.url()).pathname, confirm: confirmed[0] ?? null, ms: Date.now() - t0 };
    report.actions.push(entry);
    return entry;
  };

  const expectText = async (locator, pattern, what) => {
    const text = (await locator.textContent().catch(() => null))?.trim() ?? null;
    if (text === null || !pattern.test(text)) fail(`${what}: expected ${pattern}, found ${JSON.stringify(text)} on ${page.url()}`);
    return text;
  };
  const expectCount = async (locator, atLeast, what) => {
    const n = await locator.count();
    if (n < atLeast) fail(`${what}: expected at least ${atLeast}, found ${n} on ${page.url()}`);
    return n;
  };
  const badge = async (id, status, what) => {
    await expectText(page.locator('h1 [data-status]'), new RegExp(`^${status}$`), `${what}: job ${id}'s badge`);
    const shown = await page.locator('h1 [data-status]').getAttribute('data-status');
    if (shown !== status) fail(`${what}: job ${id} is ${shown}, expected ${status}`);
  };

  // ---- Every page, before any action --------------------------------
  await visit('queues', '/queues', async () => {
    await expectCount(page.locator('table#queues tr[data-queue]'), 1, 'queue rows');
    await polls('/queues/live', 'table#queues tr[data-queue]');
    if (plan?.pauseQueue) await expectCount(page.locator(`tr[data-queue="${plan.pauseQueue}"]`), 1, `queue ${plan.pauseQueue}`);
    if (plan?.pausedQueue) {
      await expectText(page.locator(`tr[data-queue="${plan.pausedQueue}"] .badge`), /^paused$/, `queue ${plan.pausedQueue}`);
    }
  });
  for (const status of TABS) {
    await visit(`jobs-${status}`, `/jobs?status=${status}`, async () => {
      const tab = page.locator(`nav.tabs a[data-status="${status}"]`);
      if (!(await tab.getAttribute('class'))?.split(' ').includes('on')) fail(`the ${status} tab is not marked current`);
      for (const [s, n] of Object.entries(plan?.counts ?? {})) {
        await expectText(page.locator(`nav.tabs a[data-status="${s}"] span.count`), new RegExp(`^${n}$`), `the ${s} tab's count`);
      }
      const expected = plan?.counts?.[status];
      if (expected !== undefined) {
        const rows = await page.locator('table#jobs tr[data-job]').count();
        if (rows !== Math.min(expected, 25)) fail(`the ${status} tab lists ${rows} jobs, expected ${expected}`);
      }
      if (status === 'failed') await polls('/jobs/live', `nav.tabs a[data-status="failed"] span.count`);
      // The running jobs (and their progress bars) refresh in place.
      if (status === 'running' && plan?.counts?.running) {
        await polls('/jobs', 'table#jobs tr[data-job] progress.bar');
      }
    });
  }
  // The filters: a kind narrows the failed tab, another kind empties it.
  if (plan?.filter) {
    const { kind, count, other } = plan.filter;
    for (const [value, expected] of [[kind, count], [other, 0]]) {
      await visit(`jobs-filter-${value}`, '/jobs?status=failed', async () => {
        await page.locator('form.filters input[name="kind"]').fill(value);
        await Promise.all([page.waitForURL((u) => u.searchParams.get('kind') === value), page.locator('form.filters button[type="submit"]').click()]);
        const rows = await page.locator('table#jobs tr[data-job]').count();
        if (rows !== expected) fail(`the failed tab filtered by kind ${value} lists ${rows} jobs, expected ${expected}`);
        await expectText(page.locator(`nav.tabs a[data-status="failed"] span.count`), new RegExp(`^${expected}$`), `the failed count filtered by kind ${value}`);
        await checkClean(page.url());
        report.filters.push({ kind: value, rows });
      });
    }
  }
  for (const [name, id] of Object.entries(plan?.visit ?? {})) {
    await visit(`job-${name}`, `/jobs/${id}`, async () => {
      await expectCount(page.locator('h1 [data-status]'), 1, `job ${id}'s status badge`);
      await expectCount(page.locator('details pre#raw'), 1, `job ${id}'s raw JSON`);
    });
  }
  if (plan?.backtrace) {
    await visit('job-backtrace', `/jobs/${plan.backtrace}`, async () => {
      await badge(plan.backtrace, 'failed', 'the job with a backtrace');
      // The user's frames behind one toggle, the whole backtrace behind a
      // second one inside it.
      const details = page.locator('table#errors details').first();
      await details.locator(':scope > summary').click();
      await expectText(details.locator(':scope > pre'), /^panicked at /, `job ${plan.backtrace}'s backtrace`);
      const whole = details.locator(':scope > details');
      await whole.locator(':scope > summary').click();
      await expectText(whole.locator(':scope > pre'), /^panicked at /, `job ${plan.backtrace}'s whole backtrace`);
      await page.locator('details:has(pre#raw) summary').click();
      await expectText(page.locator('pre#raw'), /"arguments"/, `job ${plan.backtrace}'s raw JSON`);
      if (plan.secret) await expectText(page.locator('pre#raw'), /\[FILTERED\]/, 'the filtered password');
    });
  }
  if (plan?.xssJob) {
    await visit('job-xss', `/jobs/${plan.xssJob}`, async () => {
      // Shown as text: the probe is on the page, and did not run.
      const kind = page.locator('dl.kv dt:text-is("Kind") + dd');
      await expectText(kind, exactly(XSS_PROBE), 'the kind with a script tag');
      await expectCount(page.locator('pre', { hasText: XSS_PROBE }), 1, 'the argument with a script tag');
    });
  }
  await visit('processes', '/processes', async () => {
    await expectCount(page.locator('table#processes tr[data-process]'), 1, 'process rows');
    await polls('/processes', 'table#processes tr[data-process]');
  });
  await visit('recurring', '/recurring', async () => {
    await expectCount(page.locator('table#recurring tr[data-task]'), 1, 'recurring tasks');
  });
  if (plan?.recurring) {
    await visit('recurring-ledger', `/recurring/${encodeURIComponent(plan.recurring)}`, async () => {
      await expectCount(page.locator('table#ledger tbody tr'), plan.ticks ?? 1, `the ledger of ${plan.recurring}`);
      await expectText(page.locator('#ledger-verdict'), /\S/, 'the ledger verdict');
    });
  }
  await visit('concurrency', '/concurrency', async () => {
    await expectCount(page.locator('table#concurrency tr[data-key]'), plan?.counts?.blocked ? 1 : 0, 'concurrency keys');
  });
  // The charts: drawn by the vendored uPlot from /charts/data (60
  // minutes), and again with a filter.
  const drawn = async (what) => {
    await page.locator('#charts[data-loaded="60"]').waitFor({ state: 'attached' }).catch(() => fail(`${what}: the charts were not drawn`));
    for (const id of ['throughput', 'latency']) await expectCount(page.locator(`#${id} canvas`), 1, `${what}: the ${id} chart's canvas`);
  };
  await visit('charts', '/charts', async () => {
    await drawn('/charts');
    const queues = await page.locator('form.filters select[name="queue"] option').evaluateAll((os) => os.map((o) => o.value).filter(Boolean));
    if (queues.length === 0) fail('/charts: no queue to filter by');
    await page.locator('form.filters select[name="queue"]').selectOption(queues[0]);
    await Promise.all([page.waitForURL((u) => u.searchParams.get('queue') === queues[0]), page.locator('form.filters button[type="submit"]').click()]);
    await drawn(`/charts?queue=${queues[0]}`);
    report.charts = { drawn: true, filteredBy: queues[0] };
  });
  for (const name of ['audit', 'database']) await visit(name, `/${name}`);
  // A flash message is text from the query string: shown, never run.
  await visit('flash-probe', `/queues?done=${encodeURIComponent(XSS_PROBE)}`, async () => {
    await expectText(page.locator('#flash .flash'), exactly(XSS_PROBE), 'the reflected flash');
  });

  if (!plan) return;

  // ---- Actions --------------------------------------------------------
  const q = plan.pauseQueue;
  if (q) {
    await visit('queues-before-pause', '/queues');
    await act('pause', q, page.locator(`tr[data-queue="${q}"] button[data-action="pause"]`), /^Pause queue /);
    await expectText(page.locator(`tr[data-queue="${q}"] .badge`), /^paused$/, `queue ${q} after pause`);
    await screenshot('queues-paused');
    await act('resume', q, page.locator(`tr[data-queue="${q}"] button[data-action="resume"]`), null);
    await expectText(page.locator(`tr[data-queue="${q}"] .badge`), /^active$/, `queue ${q} after resume`);
    await screenshot('queues-resumed');
  }
  if (plan.retry) {
    await visit('job-to-retry', `/jobs/${plan.retry}`, () => badge(plan.retry, 'failed', 'before retry'));
    await act('retry', `job ${plan.retry}`, page.locator('.actions button[data-action="retry"]'), /^Retry job \d+\?$/);
    await badge(plan.retry, 'ready', 'after retry');
    await screenshot('job-retried');
  }
  if (plan.discard) {
    // From the failed list: a discarded failed job is deleted, so its own
    // page has nothing to come back to.
    await visit('failed-before-discard', '/jobs?status=failed');
    await page.locator(`tr[data-job="${plan.discard}"] input[name="id"]`).check();
    await act('discard', `job ${plan.discard}`, page.locator('button[data-action="discard"][data-scope="selected"]'), /^Discard the selected jobs\?$/);
    await expectText(page.locator('#flash .flash'), /^1 job discarded\.$/, 'the discard flash');
    if ((await page.locator(`tr[data-job="${plan.discard}"]`).count()) !== 0) fail(`job ${plan.discard} is still listed after discard`);
    await screenshot('failed-after-discard');
  }
  if (plan.runNow) {
    await visit('job-to-run-now', `/jobs/${plan.runNow}`, () => badge(plan.runNow, 'scheduled', 'before run now'));
    await act('run-now', `job ${plan.runNow}`, page.locator('.actions button[data-action="run-now"]'), /^Run job \d+ now\?$/);
    await badge(plan.runNow, 'ready', 'after run now');
    await screenshot('job-run-now');
  }
  if (plan.recurring) {
    await visit('recurring-before-run', '/recurring');
    const entry = await act(
      'run',
      `task ${plan.recurring}`,
      page.locator(`tr[data-task="${plan.recurring}"] button[data-action="run"]`),
      /^Enqueue .+ now\?$/,
    );
    const m = /enqueued as job (\d+)/.exec(entry.flash);
    if (!m) fail(`run ${plan.recurring}: the flash says ${JSON.stringify(entry.flash)}, not a new job`);
    entry.job = Number(m[1]);
    await screenshot('recurring-run');
  }
  if (plan.cancel) {
    await visit('job-to-cancel', `/jobs/${plan.cancel}`, () => badge(plan.cancel, 'ready', 'before cancel'));
    await act('cancel', `job ${plan.cancel}`, page.locator('.actions button[data-action="cancel"]'), /^Cancel job \d+\?$/);
    await badge(plan.cancel, 'discarded', 'after cancel');
    await screenshot('job-cancelled');
  }
  if (plan.retrySelected?.length) {
    await visit('failed-before-retry-selected', '/jobs?status=failed');
    for (const id of plan.retrySelected) await page.locator(`tr[data-job="${id}"] input[name="id"]`).check();
    const n = plan.retrySelected.length;
    await act('retry-selected', `jobs ${plan.retrySelected.join(', ')}`, page.locator('button[data-action="retry"][data-scope="selected"]'), /^Retry the selected jobs\?$/);
    await expectText(page.locator('#flash .flash'), new RegExp(`^${n} jobs? retried\\.$`), 'the retry flash');
    for (const id of plan.retrySelected) {
      if ((await page.locator(`tr[data-job="${id}"]`).count()) !== 0) fail(`job ${id} is still failed after retry`);
    }
    await screenshot('failed-after-retry-selected');
  }
  await visit('queues-after', '/queues');
  await visit('jobs-ready-after', '/jobs?status=ready');
  await probeThePolicy(context, page, base);
}

// Shows the watch works: an inline script and an inline style added to a
// dashboard page are blocked and reported (then forgotten: they were
// ours); a page of another origin framing the dashboard gets an error
// page instead.
async function probeThePolicy(context, page, base) {
  await page.goto(`${base}/queues`, { waitUntil: 'load' });
  const before = report.csp.violations.length;
  if (before > 0) fail(`violations before the probes: ${JSON.stringify(report.csp.violations)}`);
  const probes = {
    script: () => page.addScriptTag({ content: 'window.__solidqProbeRan = true;' }),
    style: () => page.addStyleTag({ content: 'body { outline: 3px solid red; }' }),
  };
  for (const [name, add] of Object.entries(probes)) {
    const seen = report.csp.violations.length;
    await add().catch(() => {});
    const deadline = Date.now() + TIMEOUT_MS;
    while (!report.csp.violations.slice(seen).some((v) => v.directive)) {
      if (Date.now() > deadline) fail(`the inline ${name} probe was not reported as a violation`);
      await page.waitForTimeout(20);
    }
    report.csp.probes[name] = report.csp.violations.slice(seen).find((v) => v.directive).directive;
  }
  if (await page.evaluate(() => window.__solidqProbeRan === true)) fail('the inline script probe ran');
  const outline = await page.evaluate(() => getComputedStyle(document.body).outlineStyle);
  if (outline === 'solid') fail('the inline style probe applied');
  report.csp.violations = [];

  const framer = await context.newPage();
  try {
    await framer.setContent(`<iframe id="framed" src="${base}/queues"></iframe>`);
    const frame = await (await framer.waitForSelector('iframe#framed')).contentFrame();
    await frame.waitForLoadState('load').catch(() => {});
    const deadline = Date.now() + TIMEOUT_MS;
    while (frame.url() === 'about:blank' && Date.now() < deadline) await framer.waitForTimeout(20);
    const headers = await frame.locator('header').count().catch(() => 0);
    report.framing = { url: frame.url(), dashboardShown: headers > 0 };
    if (headers > 0 || !frame.url().startsWith('chrome-error:')) {
      fail(`the dashboard was shown in another origin's frame: ${JSON.stringify(report.framing)}`);
    }
  } finally {
    await framer.close();
  }
  // The framer's own violation report (frame-ancestors) is not the
  // dashboard's.
  report.csp.violations = report.csp.violations.filter((v) => !v.url.startsWith('about:'));
  if (report.csp.violations.length > 0) fail(`violations after the probes: ${JSON.stringify(report.csp.violations)}`);
}

main().then(
  () => {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  },
  (e) => {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    const message = e instanceof Failure ? e.message : (e?.stack ?? String(e));
    process.stderr.write(`dashboard.mjs: FAILED: ${message}\n`);
    process.exit(1);
  },
);
