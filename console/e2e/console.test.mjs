// The console in a real browser: Debian's Chromium, headless, driven by playwright-core, against the local
// mode started here over examples/ (the in-process store, the examples' scripted models). The two
// subagents of deep-research get scripts of their own that take a moment (research-explorer about 4 s,
// fact-verifier about 0.3 s), so that one is still running while the other has ended. Screenshots of
// each page go to .run/console/. Run by `make console-e2e` (YUXI_BIN names the binary).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS, freePort } from './support.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = process.env.YUXI_BIN || path.join(ROOT, 'target', 'debug', 'yuxi-operator');
const CHROMIUM = process.env.YUXI_CHROMIUM || '/usr/bin/chromium';
const SHOTS = path.join(ROOT, '.run', 'console');
const QUESTION = 'Which solid electrolytes conduct lithium best?';
const EXPLORER_SAYS = 'Sulfide electrolytes lead at room temperature; oxides are steadier.';
// Playwright's waits: long enough for a loaded machine, far shorter than the suite's budget.
const WAIT = 15_000;

let server;
let serverLog;
let base;
let browser;
let page;
let work;
const problems = [];


async function waitReady(url) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (server.exitCode !== null) throw new Error(`the local mode exited with ${server.exitCode}: ${fs.readFileSync(serverLog, 'utf8')}`);
    try {
      const answer = await fetch(`${url}/readyz`);
      if (answer.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the local mode was not ready within 30 s: ${fs.readFileSync(serverLog, 'utf8')}`);
}

/** Watches a page for what must never happen: a CSP violation, an uncaught error, a failed asset. */
function watch(p) {
  p.on('console', (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) problems.push(`CSP: ${message.text()}`);
  });
  p.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  p.on('response', (response) => {
    if (response.url().includes('/console/') && response.status() >= 400) problems.push(`${response.status()} ${response.url()}`);
  });
}

/** A new tab of the browser, signed in as alice (the token is kept per tab). */
async function signedInPage(viewport) {
  const p = await browser.newPage();
  watch(p);
  if (viewport) await p.setViewportSize(viewport);
  await p.addInitScript((token) => sessionStorage.setItem('yuxi.token', token), 'alice-token');
  return p;
}

/** What the conversation shown says, item by item: each item's kind and its whole text (folded parts too). */
async function transcriptSignature(p = page) {
  return p
    .locator('.transcript-box > ol.transcript > li')
    .evaluateAll((items) => items.map((li) => `${li.className} | ${li.textContent.replace(/\s+/g, ' ').trim()}`));
}

/** Whether the conversation shown is scrolled to its end (within a second): its last item's bottom in the transcript's box. */
async function atTheEnd(p = page) {
  for (let tries = 0; tries < 10; tries++) {
    const seen = await p.locator('.transcript-box').evaluate((box) => {
      const last = box.querySelector('ol.transcript > li:last-child');
      if (!last) return false;
      const outer = box.getBoundingClientRect();
      const inner = last.getBoundingClientRect();
      return inner.bottom <= outer.bottom + 1 && inner.bottom >= outer.top;
    });
    if (seen) return true;
    await p.waitForTimeout(100);
  }
  return false;
}

/** The conversations of the suite as they were shown live, by thread, to compare with them reopened. */
const lived = new Map();

/** Keeps the conversation shown as it is live, once its approvals are answered and recorded. */
async function remember() {
  const transcript = page.getByRole('log', { name: 'Conversation' });
  await page.locator('.transcript-box[data-settled="true"]').waitFor();
  await transcript.locator('li.approval-item').first().waitFor({ state: 'detached' });
  const thread = decodeURIComponent(page.url().split('#/chat/')[1]);
  // The view followed the run to its end: its last item is in sight.
  assert.ok(await atTheEnd(), `the conversation ${thread} is shown to its end`);
  lived.set(thread, await transcriptSignature());
}

async function shot(name, p = page) {
  await p.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

before(async () => {
  assert.ok(fs.existsSync(BIN), `the binary ${BIN} exists (make build)`);
  assert.ok(fs.existsSync(CHROMIUM), `Chromium at ${CHROMIUM} (scripts/apt-install chromium)`);
  fs.mkdirSync(SHOTS, { recursive: true });
  for (const old of fs.readdirSync(SHOTS)) if (old.endsWith('.png')) fs.rmSync(path.join(SHOTS, old));
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'yuxi-console-e2e-'));
  const scripts = path.join(work, 'scripts');
  fs.mkdirSync(scripts);
  for (const script of ['deep-research.yaml', 'note-taker.yaml']) {
    fs.copyFileSync(path.join(ROOT, 'examples', 'scripts', script), path.join(scripts, script));
  }
  fs.writeFileSync(path.join(scripts, 'research-explorer.yaml'), `- delay_ms: 4000\n  content: "${EXPLORER_SAYS}"\n`);
  fs.writeFileSync(path.join(scripts, 'fact-verifier.yaml'), '- delay_ms: 300\n  content: "Both claims hold: LGPS and argyrodites conduct best."\n');
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  serverLog = path.join(SHOTS, 'server.log');
  const env = { ...process.env };
  delete env.REDIS_URL;
  const log = fs.openSync(serverLog, 'w');
  server = spawn(
    BIN,
    [
      'local', '--manifests', 'examples', '--users', 'examples/local-users.yaml', '--data-dir', path.join(work, 'data'),
      '--listen', `127.0.0.1:${port}`, '--default-model', 'scripted/auto', '--scripts-dir', scripts,
    ],
    { cwd: ROOT, env, stdio: ['ignore', log, log] },
  );
  await waitReady(base);
  browser = await chromium.launchPersistentContext(path.join(work, 'profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 800 },
    locale: 'en-US',
  });
  browser.setDefaultTimeout(WAIT);
  page = browser.pages()[0] ?? (await browser.newPage());
  watch(page);
});

after(async () => {
  await browser?.close();
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await new Promise((resolve) => {
      const timer = setTimeout(() => (server.kill('SIGKILL'), resolve()), 5000);
      server.once('exit', () => (clearTimeout(timer), resolve()));
    });
  }
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

test('the console is served at /console with a strict Content-Security-Policy', async () => {
  const answer = await fetch(`${base}/console/`);
  assert.equal(answer.status, 200);
  const policy = answer.headers.get('content-security-policy');
  assert.match(policy, /default-src 'self'/);
  assert.match(policy, /script-src 'self'/);
  assert.match(policy, /connect-src 'self'/);
  assert.doesNotMatch(policy, /unsafe-inline/);
});

test('the login takes a username and password from the keyboard and keeps the token for the session', async () => {
  await page.goto(`${base}/console`);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await shot('login');
  await page.getByLabel('Username').focus();
  await page.keyboard.type('alice');
  await page.keyboard.press('Tab');
  await page.keyboard.type('alice-password');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Agents' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('yuxi.token')), 'alice-token');
  await page.getByText('Signed in as alice').waitFor();
  await page.reload();
  await page.getByRole('heading', { name: 'Agents' }).waitFor();
  assert.equal(await page.getByRole('heading', { name: 'Sign in' }).count(), 0, 'still signed in after a reload');
});

test('the first Tab reaches the skip link, which moves the focus to the content', async () => {
  await page.evaluate(() => (document.activeElement instanceof HTMLElement ? document.activeElement.blur() : undefined));
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to the content');
  await page.keyboard.press('Enter');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'main');
});

test('the agents page lists agents and subagents with backend, subagent flag, sharing, default and access', async () => {
  await page.goto(`${base}/console/#/agents`);
  const row = (slug) => page.locator(`tr[data-slug="${slug}"]`);
  await row('deep-research').waitFor();
  const cells = async (slug) => (await row(slug).locator('td').allInnerTexts()).map((s) => s.trim());
  const deep = await cells('deep-research');
  assert.match(deep[0], /Deep research/);
  assert.equal(deep[1], 'ChatbotAgent');
  assert.equal(deep[2], 'no');
  assert.match(deep[3], /read: everyone/);
  assert.equal(deep[4], 'yes');
  assert.match(deep[5], /read-only/);
  const explorer = await cells('research-explorer');
  assert.equal(explorer[1], 'SubAgentBackend');
  assert.equal(explorer[2], 'yes');
  assert.equal(explorer[4], 'no');
  assert.match(await row('general-purpose').innerText(), /built in/);
  assert.ok(await row('fact-verifier').isVisible());
  await shot('agents');
});

test("in a cluster the list shows each agent's Accepted and Ready conditions (the list mocked: the local mode writes no status)", async () => {
  const answer = await fetch(`${base}/api/agent?include_subagents=true`, { headers: { Authorization: 'Bearer alice-token' } });
  const { agents } = await answer.json();
  assert.ok(agents.every((a) => a.conditions === undefined), 'the local mode has no conditions');
  const explorer = agents.find((a) => a.slug === 'research-explorer');
  explorer.conditions = [
    { type: 'Accepted', status: 'True', reason: 'Valid', message: '' },
    { type: 'Ready', status: 'False', reason: 'KnowledgeBaseNotReady', message: 'research-notes is indexing' },
  ];
  await page.route('**/api/agent?include_subagents=true', (route) => route.fulfill({ json: { agents } }));
  try {
    await page.reload();
    const conditions = page.locator('tr[data-slug="research-explorer"] ul.conditions li');
    await conditions.first().waitFor();
    assert.deepEqual(await conditions.allInnerTexts(), [
      'Accepted: True',
      'Ready: False (KnowledgeBaseNotReady: research-notes is indexing)',
    ]);
    assert.equal(await page.locator('tr[data-slug="research-explorer"] ul.conditions li.bad').count(), 1);
  } finally {
    await page.unrouteAll({ behavior: 'ignoreErrors' });
  }
});

test("an admin sees the manifest files the local mode did not apply, each with its errors (the problem mocked into the real answer)", async () => {
  const answer = await fetch(`${base}/api/agent?include_subagents=true`, { headers: { Authorization: 'Bearer admin-token' } });
  const listing = await answer.json();
  assert.deepEqual(listing.manifests.problems, [], 'the examples all apply');
  listing.manifests.problems = [
    {
      file: 'examples/note-taker.yaml',
      errors: ['examples/note-taker.yaml: spec.context.tools[1]: no built-in tool "read_fiel"; did you mean "read_file"?'],
      last_good_in_force: true,
    },
  ];
  const admin = await browser.newPage();
  watch(admin);
  await admin.route('**/api/agent?include_subagents=true', (route) => route.fulfill({ json: listing }));
  try {
    await admin.goto(`${base}/console/`);
    await admin.getByLabel('Bearer token').fill('admin-token');
    await admin.getByRole('button', { name: 'Use this token' }).click();
    const problem = admin.locator('.manifest-problems li[data-file="examples/note-taker.yaml"]');
    await problem.waitFor();
    assert.match(await problem.innerText(), /its last good version is in force/);
    assert.match(await problem.innerText(), /did you mean "read_file"\?/);
    // Alice is no administrator: the facade gives her no manifests, and the page shows none.
    const mine = await fetch(`${base}/api/agent?include_subagents=true`, { headers: { Authorization: 'Bearer alice-token' } });
    assert.equal((await mine.json()).manifests, undefined);
  } finally {
    await admin.close();
  }
});

test('a read-only agent opens with every control disabled and no save button', async () => {
  await page.getByRole('link', { name: 'View Deep research' }).click();
  await page.getByRole('heading', { name: 'Deep research (read-only)' }).waitFor();
  await page.getByText('You may read this agent but not change it.').waitFor();
  await page.locator('#agent-system_prompt').waitFor();
  assert.ok(await page.getByLabel('Name', { exact: true }).isDisabled());
  assert.ok(await page.getByLabel('System prompt').isDisabled());
  assert.match(await page.getByLabel('System prompt').inputValue(), /well-sourced research reports/);
  assert.equal(await page.getByRole('button', { name: 'Save' }).count(), 0);
  await shot('agent-read-only');
});

test("an admin sees a manifest file's agent read-only, told to change its file", async () => {
  const admin = await browser.newPage();
  watch(admin);
  try {
    await admin.goto(`${base}/console/`);
    await admin.getByLabel('Bearer token').fill('admin-token');
    await admin.getByRole('button', { name: 'Use this token' }).click();
    await admin.locator('tr[data-slug="research-explorer"]').waitFor();
    assert.match(await admin.locator('tr[data-slug="research-explorer"]').innerText(), /read-only/);
    await admin.getByRole('link', { name: 'View Research explorer' }).click();
    await admin.getByText('This agent is defined by a file of the manifests folder: change it there.').waitFor();
    assert.ok(await admin.getByLabel('System prompt').isDisabled());
    assert.equal(await admin.getByRole('button', { name: 'Save' }).count(), 0);
  } finally {
    await admin.close();
  }
});

test("the form shows each rule's error on its field, then creates a subagent", async () => {
  await page.goto(`${base}/console/#/agents/new/subagent`);
  await page.getByRole('heading', { name: 'New subagent' }).waitFor();
  assert.equal(await page.getByLabel('Backend').inputValue(), 'SubAgentBackend');
  assert.equal(await page.getByRole('group', { name: 'Subagents it may delegate to' }).count(), 0, 'no subagents for a subagent');
  await page.getByLabel('Name', { exact: true }).fill('Console notes helper');
  await page.getByLabel('Slug (optional; made from the name)').fill('Bad Slug');
  await page.getByLabel('System prompt').fill('Keep short notes.');
  await page.getByRole('group', { name: 'Tools' }).getByLabel('read_file').check();
  await page.getByRole('button', { name: 'Create' }).click();
  // The slug rule, on the slug field, which gets the focus.
  const slugError = page.locator('#agent-slug-error');
  await slugError.waitFor();
  assert.match(await slugError.innerText(), /^"Bad Slug" is not a valid slug/);
  assert.equal(await page.locator('#agent-slug').getAttribute('aria-invalid'), 'true');
  assert.match(await page.locator('#agent-slug').getAttribute('aria-describedby'), /agent-slug-error/);
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'agent-slug');
  await shot('agent-form-error');
  // The share rule, on the read scope.
  await page.getByLabel('Slug (optional; made from the name)').fill('');
  await page.locator('#agent-read_scope-level').selectOption('user');
  await page.getByRole('button', { name: 'Create' }).click();
  const scopeError = page.locator('#agent-read_scope-error');
  await scopeError.waitFor();
  assert.match(await scopeError.innerText(), /^a User scope needs at least one user uid/);
  assert.equal(await page.locator('#agent-slug-error').count(), 0, 'the slug error is gone');
  // Fixed: created.
  await page.locator('#agent-read_scope-uids').fill('alice, bob');
  await page.getByRole('button', { name: 'Create' }).click();
  await page.getByRole('heading', { name: 'Edit Console notes helper' }).waitFor();
  await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
  assert.match(page.url(), /#\/agents\/edit\/console-notes-helper$/);
  await shot('agent-form');
  // Listed as a subagent the user manages, shared with the users named.
  await page.goto(`${base}/console/#/agents`);
  const row = page.locator('tr[data-slug="console-notes-helper"]');
  await row.waitFor();
  const cells = (await row.locator('td').allInnerTexts()).map((s) => s.trim());
  assert.equal(cells[1], 'SubAgentBackend');
  assert.equal(cells[2], 'yes');
  assert.match(cells[3], /users alice, bob/);
  assert.match(cells[5], /can edit/);
  // What was saved is what the facade answers.
  const answer = await fetch(`${base}/api/agent/console-notes-helper`, { headers: { Authorization: 'Bearer alice-token' } });
  const { agent } = await answer.json();
  assert.deepEqual(agent.config_json.context.tools, ['read_file']);
  assert.equal(agent.config_json.context.system_prompt, 'Keep short notes.');
  assert.equal(agent.is_subagent, true);
});

test("the MCP servers are a pick list with each server's tools; unticking one narrows the agent to the rest (the lists mocked, the write caught)", async () => {
  const servers = [
    { slug: 'docs', name: 'Docs', description: '3 tools', status: 'ready', tool_count: 3, tools: ['search', 'fetch', 'purge'] },
    { slug: 'tickets', name: 'tickets', description: '', status: 'unavailable', tool_count: 0, tools: [] },
  ];
  const docsTools = [
    { name: 'search', description: 'Search the docs', destructive: false, read_only: true, input_schema: {} },
    { name: 'fetch', description: 'Fetch a page', destructive: false, read_only: true, input_schema: {} },
    { name: 'purge', description: 'Delete the index', destructive: true, read_only: false, input_schema: {} },
  ];
  let sent = null;
  await page.route('**/api/system/mcp-servers', (route) => route.fulfill({ json: { success: true, data: servers } }));
  await page.route('**/api/system/mcp-servers/docs/tools', (route) => route.fulfill({ json: { success: true, data: docsTools } }));
  await page.route('**/api/agent', async (route) => {
    if (route.request().method() !== 'POST') return route.fallback();
    sent = route.request().postDataJSON();
    await route.fulfill({
      status: 422,
      json: { detail: 'config_json.context.mcp_tools: the MCP server "docs" offers no tool "purge"', field: 'config_json.context.mcp_tools' },
    });
  });
  try {
    await page.goto(`${base}/console/#/agents/new`);
    await page.getByRole('heading', { name: 'New agent' }).waitFor();
    const picker = page.getByRole('group', { name: 'MCP servers' });
    const docs = picker.locator('[data-server="docs"]');
    await docs.waitFor();
    assert.match(await docs.innerText(), /ready/);
    assert.match(await picker.locator('[data-server="tickets"]').innerText(), /unavailable/);
    assert.equal(await picker.getByRole('group', { name: 'Tools of Docs the agent may call' }).count(), 0, 'no tools until the server is chosen');
    await docs.getByLabel('Docs').check();
    const tools = picker.getByRole('group', { name: 'Tools of Docs the agent may call' });
    await tools.waitFor();
    assert.deepEqual(await tools.getByRole('checkbox').evaluateAll((boxes) => boxes.map((b) => [b.value, b.checked])), [
      ['search', true],
      ['fetch', true],
      ['purge', true],
    ]);
    assert.match(await tools.locator('label', { hasText: 'purge' }).innerText(), /needs approval/);
    await tools.getByLabel('purge').uncheck();
    await page.getByLabel('Name', { exact: true }).fill('Docs reader');
    const first = page.waitForRequest((r) => r.url().endsWith('/api/agent') && r.method() === 'POST');
    await page.getByRole('button', { name: 'Create' }).click();
    await first;
    const error = page.locator('#agent-mcps-error');
    await error.waitFor();
    assert.deepEqual(sent.config_json.context.mcps, ['docs']);
    assert.deepEqual(sent.config_json.context.mcp_tools, { docs: ['search', 'fetch'] });
    assert.equal(await error.innerText(), 'the MCP server "docs" offers no tool "purge"');
    await shot('agent-form-mcp-picker');
    // Ticking it again lifts the narrowing: every tool, so no entry.
    await tools.getByLabel('purge').check();
    const posted = page.waitForRequest((r) => r.url().endsWith('/api/agent') && r.method() === 'POST');
    await page.getByRole('button', { name: 'Create' }).click();
    await (await posted).response();
    assert.equal(sent.config_json.context.mcp_tools, undefined, 'no narrowing is sent when every tool is ticked');
  } finally {
    await page.unrouteAll({ behavior: 'ignoreErrors' });
  }
});

let threadId;

test('a deep-research run streams live; the panel shows both children, one followed live while it runs', async () => {
  await page.goto(`${base}/console/#/chat`);
  await page.getByLabel('Agent', { exact: true }).waitFor();
  await page.locator('#chat-agent option[value="deep-research"]').waitFor({ state: 'attached' });
  assert.equal(await page.getByLabel('Agent', { exact: true }).inputValue(), 'deep-research', 'the default agent is chosen');
  await page.getByLabel('Message').fill(QUESTION);
  await page.getByRole('button', { name: 'Send' }).click();
  // Live: the first message and the folded tool calls, before the run ends.
  const transcript = page.getByRole('log', { name: 'Conversation' });
  await transcript.getByText('I will explore the question and check the claims in parallel').waitFor();
  await page.waitForURL(/#\/chat\/t-/);
  threadId = decodeURIComponent(page.url().split('#/chat/')[1]);
  const panel = page.getByRole('complementary', { name: 'Subagents' });
  const explorer = panel.locator('li.run-node[data-slug="research-explorer"]');
  const verifier = panel.locator('li.run-node[data-slug="fact-verifier"]');
  await verifier.locator('.badge', { hasText: 'completed' }).waitFor();
  // The verifier has ended, the explorer still runs (its script waits 4 s).
  assert.match(await explorer.locator('.badge').innerText(), /running|pending/);
  assert.equal(await panel.locator('section.run-group').count(), 1, 'one run, one group');
  assert.match(await verifier.locator('.progress').innerText(), /Both claims hold/);
  // Before it says anything, a child's line is the task it was given.
  await explorer.locator('.progress', { hasText: 'Explore this research question' }).waitFor();
  await shot('chat-running');
  // Opening the running explorer follows its own stream until it ends.
  await explorer.getByRole('button', { name: 'Open research-explorer' }).click();
  const dialog = page.getByRole('dialog', { name: 'Subagent research-explorer' });
  await dialog.getByText('Following its events live.').waitFor();
  assert.equal(await dialog.getAttribute('data-mode'), 'live');
  await dialog.getByText(EXPLORER_SAYS).waitFor();
  await dialog.getByRole('status').filter({ hasText: 'completed' }).waitFor();
  await shot('child-live');
  await page.keyboard.press('Escape');
  await dialog.waitFor({ state: 'detached' });
  // The run goes on to its end; the tool calls are folded, and open from the keyboard.
  await transcript.locator('li.msg.end.status-completed').waitFor();
  await transcript.getByText('The report is written to /home/gem/user-data/outputs/report.md').waitFor();
  await remember();
  const start = transcript.locator('li.msg.tool[data-tool="subagent_start"]').first();
  const summary = start.locator('summary');
  assert.match(await summary.innerText(), /Called subagent_start ✓/);
  assert.equal(await start.locator('details').getAttribute('open'), null, 'folded');
  await summary.focus();
  await page.keyboard.press('Enter');
  await start.locator('pre').first().getByText('"subagent_slug": "research-explorer"').waitFor();
  assert.match(await explorer.locator('.badge').innerText(), /completed/);
  assert.equal(await page.getByRole('status').filter({ hasText: /^Run .*: completed$/ }).count(), 1);
  await shot('chat');
});

test("a finished child's history is read from its persisted messages", async () => {
  const panel = page.getByRole('complementary', { name: 'Subagents' });
  const messages = page.waitForResponse((r) => /\/api\/threads\/[^/]+_sub_fact-verifier_[^/]+\/messages$/.test(r.url()));
  await panel.getByRole('button', { name: 'Open fact-verifier' }).click();
  assert.equal((await messages).status(), 200);
  const dialog = page.getByRole('dialog', { name: 'Subagent fact-verifier' });
  await dialog.getByText('Its persisted messages.').waitFor();
  assert.equal(await dialog.getAttribute('data-mode'), 'history');
  await dialog.getByText(`List the claims this question rests on and check each one: ${QUESTION}`).waitFor();
  await dialog.getByText('Both claims hold: LGPS and argyrodites conduct best.').waitFor();
  await shot('child-history');
  await dialog.getByRole('button', { name: 'Close' }).click();
  await dialog.waitFor({ state: 'detached' });
});

test("the conversation's files: deep-research's report.md opens rendered, and no markup of a file runs script", async () => {
  await page.goto(`${base}/console/#/chat/${encodeURIComponent(threadId)}`);
  // The conversation's line: its title, agent, time and its last run's status.
  const line = page.getByRole('complementary', { name: 'Conversations' }).locator('li', { has: page.locator(`a[href="#/chat/${threadId}"]`) });
  await line.locator('.badge', { hasText: 'completed' }).waitFor();
  assert.match(await line.innerText(), /Which solid electrolytes/);
  assert.equal(await line.locator('.agent').innerText(), 'deep-research');
  assert.ok(await line.locator('time').getAttribute('datetime'), 'a time');
  const files = page.getByRole('region', { name: 'Files' });
  await files.getByRole('button', { name: 'report.md' }).click();
  const view = files.getByRole('article', { name: 'report.md' });
  await view.locator('.markdown h1', { hasText: 'Research report' }).waitFor();
  assert.deepEqual(await view.locator('.markdown h2').allInnerTexts(), [
    'What the material says (research-explorer)',
    'What holds up (fact-verifier)',
    'From the knowledge base',
  ]);
  assert.match(await view.locator('.markdown').innerText(), /Sulfide electrolytes lead/);
  await shot('files-report');
  // A run's file with markup that would run script, were it not sanitised.
  const outputs = path.join(work, 'data', 'users', 'alice', 'threads', threadId, 'outputs');
  fs.writeFileSync(
    path.join(outputs, 'hostile.md'),
    [
      '# Hostile',
      '<script>window.__ran = "script"</script>',
      '<img src="/console/favicon.svg" onload="window.__ran = \'onload\'" alt="icon">',
      '[click me](javascript:window.__ran="link")',
      '<iframe src="/console/"></iframe>',
      '<style>body { display: none }</style>',
      '<a href="https://example.com/" onclick="window.__ran = \'onclick\'">out</a>',
      '[the docs](https://example.com/)',
    ].join('\n\n'),
  );
  await files.getByRole('button', { name: 'Outputs' }).click();
  await files.getByRole('button', { name: 'hostile.md' }).click();
  const hostile = files.getByRole('article', { name: 'hostile.md' }).locator('.markdown');
  await hostile.locator('h1', { hasText: 'Hostile' }).waitFor();
  assert.equal(await hostile.locator('script, iframe, style, img').count(), 0);
  // Raw HTML is shown as the text it is.
  await hostile.getByText('<script>window.__ran = "script"</script>').waitFor();
  const handlers = await hostile.evaluate((root) =>
    [...root.querySelectorAll('*')].flatMap((el) => [...el.attributes].map((a) => a.name)).filter((n) => n.startsWith('on')),
  );
  assert.deepEqual(handlers, []);
  const hrefs = await hostile.locator('a').evaluateAll((links) => links.map((a) => [a.getAttribute('href'), a.getAttribute('rel')]));
  assert.ok(hrefs.every(([href]) => !String(href).startsWith('javascript:')), JSON.stringify(hrefs));
  assert.ok(hrefs.some(([href, rel]) => href === 'https://example.com/' && rel === 'noopener noreferrer'), JSON.stringify(hrefs));
  assert.equal(await page.evaluate(() => window.__ran), undefined, 'nothing ran');
  await shot('files-hostile');
});

/** A one-page PDF saying `text`, whose opening action is a script (which must never run). */
function pdfWithScript(text) {
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R /OpenAction 5 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 144] /Contents 4 0 R /Resources << /Font << /F1 6 0 R >> >> >>',
    null,
    "<< /S /JavaScript /JS (app.alert('pdf'); window.__ran = 'pdf';) >>",
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ];
  const content = `BT /F1 28 Tf 40 60 Td (${text}) Tj ET`;
  objects[3] = `<< /Length ${content.length} >>\nstream\n${content}\nendstream`;
  let body = '%PDF-1.4\n';
  const offsets = objects.map((object, n) => {
    const at = body.length;
    body += `${n + 1} 0 obj\n${object}\nendobj\n`;
    return at;
  });
  const xref = body.length;
  body += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const at of offsets) body += `${String(at).padStart(10, '0')} 00000 n \n`;
  body += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return body;
}

test("a run's code is highlighted and its PDF drawn page by page, and neither runs anything", async () => {
  const outputs = path.join(work, 'data', 'users', 'alice', 'threads', threadId, 'outputs');
  fs.writeFileSync(
    path.join(outputs, 'analysis.py'),
    'def conductivity(material):\n    """Looks it up."""\n    return {"LGPS": 12.0}.get(material, "<script>window.__ran = \'code\'</script>")\n',
  );
  fs.writeFileSync(path.join(outputs, 'summary.pdf'), pdfWithScript('Sulfides lead'));
  await page.goto(`${base}/console/#/chat/${encodeURIComponent(threadId)}`);
  const files = page.getByRole('region', { name: 'Files' });
  await files.getByRole('button', { name: 'Outputs' }).click();
  await files.getByRole('button', { name: 'analysis.py' }).click();
  const code = files.getByRole('article', { name: 'analysis.py' }).locator('code.hljs.language-python');
  await code.locator('.hljs-keyword', { hasText: 'def' }).waitFor();
  assert.ok((await code.locator('.hljs-string').count()) >= 2, 'strings are marked');
  // Markup in code is text: no element but the highlighter's spans.
  assert.deepEqual(await code.evaluate((root) => [...new Set([...root.querySelectorAll('*')].map((el) => el.tagName))]), ['SPAN']);
  assert.match(await code.innerText(), /<script>window\.__ran = 'code'<\/script>/);
  await shot('files-code');
  await files.getByRole('button', { name: 'summary.pdf' }).click();
  const sheet = files.getByRole('article', { name: 'summary.pdf' }).getByRole('img', { name: 'summary.pdf, page 1 of 1' });
  await sheet.waitFor();
  // The page is drawn: its canvas has ink on it.
  let ink = 0;
  for (let tries = 0; tries < 20 && ink === 0; tries++) {
    ink = await sheet.evaluate((canvas) => {
      const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      let dark = 0;
      for (let i = 0; i < pixels.length; i += 4) if (pixels[i + 3] > 0 && pixels[i] < 128) dark++;
      return dark;
    });
    if (ink === 0) await page.waitForTimeout(100);
  }
  assert.ok(ink > 50, `the page has ink (${ink} dark pixels)`);
  assert.equal(await page.evaluate(() => window.__ran), undefined, 'nothing ran');
  await shot('files-pdf');
});

test('the thread continues with a second run, which can be cancelled', async () => {
  await page.getByLabel('Continue the conversation').fill('And which is the most stable?');
  await page.getByRole('button', { name: 'Send' }).click();
  const panel = page.getByRole('complementary', { name: 'Subagents' });
  await panel.locator('section.run-group').nth(1).locator('li.run-node[data-slug="research-explorer"]').waitFor();
  await page.getByRole('button', { name: 'Cancel the run' }).click();
  const transcript = page.getByRole('log', { name: 'Conversation' });
  await transcript.locator('li.msg.end.status-cancelled').waitFor();
  await page.getByRole('status').filter({ hasText: /: cancelled$/ }).waitFor();
  // Cancelling the parent cancels its unfinished children.
  await panel.locator('section.run-group').nth(1).locator('li.run-node[data-slug="research-explorer"] .badge', { hasText: 'cancelled' }).waitFor();
  assert.equal(await page.getByRole('button', { name: 'Cancel the run' }).count(), 0);
  assert.equal(decodeURIComponent(page.url().split('#/chat/')[1]), threadId, 'the same thread');
  await remember();
});

test('reopening the conversation rebuilds it from what the facade persisted', async () => {
  await page.reload();
  const transcript = page.getByRole('log', { name: 'Conversation' });
  await transcript.locator('li.msg.user', { hasText: QUESTION }).waitFor();
  await transcript.locator('li.msg.user', { hasText: 'And which is the most stable?' }).waitFor();
  await transcript.locator('li.msg.assistant', { hasText: 'The report is written to' }).waitFor();
  const panel = page.getByRole('complementary', { name: 'Subagents' });
  await panel.locator('li.run-node[data-slug="fact-verifier"] .badge', { hasText: 'completed' }).first().waitFor();
  // The conversation is listed, titled after its first question, and marked as the one shown.
  const current = page.getByRole('complementary', { name: 'Conversations' }).locator('a[aria-current="page"]');
  assert.match(await current.innerText(), /^Which solid electrolytes/);
  assert.equal(await panel.locator('section.run-group').count(), 2, 'both runs that started subagents');
  // The latest run, the cancelled one, links to its timeline, read from the thread's history.
  const latest = await panel.locator('section.run-group').nth(1).getAttribute('data-root');
  await page.locator('.run-line').getByRole('link', { name: `Timeline of run ${latest.slice(0, 8)}` }).waitFor();
  assert.equal(await page.locator('.run-line a').getAttribute('href'), `#/runs/${latest}`);
});

/** The facade's answer for `path` with alice's token. */
async function asAlice(path) {
  const answer = await fetch(`${base}${path}`, { headers: { Authorization: 'Bearer alice-token' } });
  assert.equal(answer.status, 200, `GET ${path}`);
  return answer.json();
}

let timelineRun;

test("a deep-research run's timeline: a row per span the API answers, refreshed until the run ends", async () => {
  await page.goto(`${base}/console/#/chat`);
  await page.locator('#chat-agent option[value="deep-research"]').waitFor({ state: 'attached' });
  await page.getByLabel('Message').fill(QUESTION);
  await page.getByRole('button', { name: 'Send' }).click();
  const link = page.locator('.run-line').getByRole('link', { name: /^Timeline of run / });
  await link.waitFor();
  timelineRun = (await link.getAttribute('href')).replace('#/runs/', '');
  // The panel links each subagent's own timeline.
  const explorerLink = page.getByRole('complementary', { name: 'Subagents' }).getByRole('link', { name: 'Timeline of research-explorer' });
  await explorerLink.waitFor();
  assert.match(await explorerLink.getAttribute('href'), /^#\/runs\/[0-9a-f]+$/);
  const asked = [];
  const counting = (request) => {
    if (request.url().endsWith(`/api/agent/runs/${timelineRun}/trace`)) asked.push(Date.now());
  };
  // The timeline opens in a tab of its own; the conversation goes on live in this one.
  const tl = await signedInPage();
  tl.on('request', counting);
  try {
    await tl.goto(`${base}/console/#/runs/${timelineRun}`);
    await tl.getByRole('heading', { name: 'Run timeline' }).waitFor();
    assert.equal(await tl.getByRole('navigation', { name: 'Sections' }).locator('a[aria-current="page"]').innerText(), 'Runs');
    const table = tl.locator('table.timeline');
    await table.waitFor();
    // The explorer's script takes 4 s: the tree usually still runs when the page opens.
    const openedRunning = (await table.getAttribute('data-ended')) === 'false';
    if (openedRunning) {
      await tl.getByRole('status').filter({ hasText: 'refreshed every 2 s' }).waitFor();
      await shot('timeline-running', tl);
    }
    await tl.locator('table.timeline[data-ended="true"]').waitFor();
    if (openedRunning) assert.ok(asked.length >= 2, `read again while it ran (${asked.length} reads)`);
    await tl.getByRole('status').filter({ hasText: /^completed deep-research: / }).waitFor();
    await shot('timeline', tl);
    // What the page shows is what the facade answers for the run, span by span.
    const trace = await asAlice(`/api/agent/runs/${timelineRun}/trace`);
    assert.equal(trace.run_id, timelineRun);
    assert.notEqual(trace.spans[0].end, null, 'the root has ended');
    const rows = tl.locator('tr[data-span-id]');
    assert.equal(await rows.count(), trace.spans.length, 'a row per span');
    const shown = await rows.evaluateAll((trs) =>
      trs.map((tr) => ({ id: tr.dataset.spanId, depth: Number(tr.dataset.depth), name: tr.querySelector('.span-name').textContent })),
    );
    assert.deepEqual(new Set(shown.map((r) => r.id)), new Set(trace.spans.map((s) => s.span_id)), 'each span once');
    const byId = new Map(shown.map((r, at) => [r.id, { ...r, at }]));
    for (const span of trace.spans) {
      const row = byId.get(span.span_id);
      assert.equal(row.name, span.name, `the name of ${span.span_id}`);
      const bar = tl.locator(`tr[data-span-id="${span.span_id}"] .timeline-bar`);
      assert.match(await bar.getAttribute('class'), new RegExp(`\\btimeline-${span.kind}\\b`));
      if (span.parent_span_id === null) {
        assert.equal(row.depth, 0);
      } else {
        // Under its parent: after it, one level deeper.
        const parent = byId.get(span.parent_span_id);
        assert.ok(row.at > parent.at, `${span.span_id} after its parent`);
        assert.equal(row.depth, parent.depth + 1, `${span.span_id} one level under its parent`);
      }
    }
    // The tree: deep-research and its two children, each under the tool call that started it.
    const runs = trace.spans.filter((s) => s.kind === 'run');
    assert.deepEqual(runs.map((s) => s.name).sort(), ['invoke_agent deep-research', 'invoke_agent fact-verifier', 'invoke_agent research-explorer']);
    for (const child of runs.slice(1)) assert.match(child.parent_span_id, new RegExp(`^${timelineRun}/tool/`));
    assert.equal(await tl.locator('.timeline-bar.timeline-run').count(), 3);
    // A model call shows its tokens, a tool call its result's size.
    const chat = trace.spans.find((s) => s.kind === 'chat');
    assert.match(
      await tl.locator(`tr[data-span-id="${chat.span_id}"] .timeline-details`).innerText(),
      new RegExp(`${chat.attributes['gen_ai.usage.input_tokens']} in / ${chat.attributes['gen_ai.usage.output_tokens']} out tokens`),
    );
    const tool = trace.spans.find((s) => s.kind === 'tool');
    assert.match(await tl.locator(`tr[data-span-id="${tool.span_id}"] .timeline-details`).innerText(), /result \d+ bytes/);
    // No tracing backend here: no trace link, and nothing was cut.
    assert.equal(trace.trace_url, null);
    assert.equal(await tl.getByRole('link', { name: /View trace/ }).count(), 0);
    assert.equal(await tl.locator('.notice').count(), 0);
    // Once it has ended, the page stops asking.
    const reads = asked.length;
    await tl.waitForTimeout(2500);
    assert.equal(asked.length, reads, 'no read after the run ended');
  } finally {
    tl.off('request', counting);
    await tl.close();
  }
  await page.getByRole('log', { name: 'Conversation' }).locator('li.msg.end.status-completed').waitFor();
  await remember();
});

test("another user's run is not shown: the timeline says so", async () => {
  const started = await fetch(`${base}/api/agent/runs`, {
    method: 'POST',
    headers: { Authorization: 'Bearer bob-token', 'Content-Type': 'application/json' },
    body: JSON.stringify({ query: 'What is a garnet electrolyte?', agent_slug: 'deep-research' }),
  });
  assert.equal(started.status, 200);
  const { run_id: bobs } = await started.json();
  const denied = await fetch(`${base}/api/agent/runs/${bobs}/trace`, { headers: { Authorization: 'Bearer alice-token' } });
  assert.equal(denied.status, 404);
  await page.goto(`${base}/console/#/runs/${bobs}`);
  await page.getByRole('heading', { name: 'Run timeline' }).waitFor();
  await page.getByRole('alert').filter({ hasText: `No run ${bobs} is visible to you` }).waitFor();
  assert.equal(await page.locator('tr[data-span-id]').count(), 0);
  await shot('timeline-not-found');
});

test('a timeline marks failed spans, links the trace in a new tab and says when it was cut (the answer mocked)', async () => {
  const at = (ms) => new Date(Date.UTC(2026, 0, 1, 0, 0, 0, ms)).toISOString().replace('Z', '123Z');
  const span = (id, parent, kind, name, start, duration, status, attributes) => ({
    span_id: id, parent_span_id: parent, run_id: 'run-mocked', kind, name, start: at(start), end: at(start + duration),
    duration_ms: duration, status, attributes,
  });
  const answer = {
    run_id: 'run-mocked',
    trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
    trace_url: 'https://traces.example/trace/4bf92f3577b34da6a3ce929d0e0e4736',
    langfuse_url: 'https://traces.example/trace/4bf92f3577b34da6a3ce929d0e0e4736',
    truncated: true,
    spans: [
      span('run-mocked', null, 'run', 'invoke_agent deep-research', 0, 2400, 'failed', { 'gen_ai.agent.name': 'deep-research' }),
      span('run-mocked/chat/1', 'run-mocked', 'chat', 'chat gpt-4o-mini', 10, 900, 'ok', {
        'gen_ai.usage.input_tokens': 456, 'gen_ai.usage.output_tokens': 7, 'yuxi.cost': '0.0012 USD', 'yuxi.time_to_first_token_ms': 40,
      }),
      span('run-mocked/tool/call_1', 'run-mocked', 'tool', 'execute_tool read_file', 950, 50, 'error', { 'yuxi.tool.result_bytes': 12 }),
      span('run-mocked/chat/2', 'run-mocked', 'chat', 'chat gpt-4o-mini', 1100, 1300, 'error', { 'error.type': 'fatal' }),
    ],
  };
  await page.route('**/api/agent/runs/run-mocked/trace', (route) => route.fulfill({ json: answer }));
  try {
    await page.goto(`${base}/console/#/runs/run-mocked`);
    const view = page.getByRole('link', { name: 'View trace (opens in a new tab)' });
    await view.waitFor();
    assert.equal(await view.getAttribute('href'), answer.trace_url);
    assert.equal(await view.getAttribute('target'), '_blank');
    assert.equal(await view.getAttribute('rel'), 'noopener noreferrer');
    await page.locator('.notice', { hasText: 'only its first spans are shown' }).waitFor();
    const row = (id) => page.locator(`tr[data-span-id="${id}"]`);
    assert.match(await row('run-mocked').getAttribute('class'), /timeline-error/);
    assert.match(await row('run-mocked/tool/call_1').locator('.badge').innerText(), /✕ error/);
    assert.equal(await page.locator('.timeline-bar.timeline-error').count(), 3, 'the failed run, tool call and model call');
    assert.doesNotMatch(await row('run-mocked/chat/1').getAttribute('class'), /timeline-error/);
    assert.match(await row('run-mocked/chat/1').innerText(), /900 ms/);
    const details = await row('run-mocked/chat/1').locator('.timeline-details').innerText();
    assert.match(details, /456 in \/ 7 out tokens/);
    assert.match(details, /cost 0\.0012 USD/);
    assert.match(await row('run-mocked/tool/call_1').locator('.timeline-details').innerText(), /result 12 bytes/);
    assert.match(await row('run-mocked').innerText(), /2\.40 s/);
    await shot('timeline-failed');
  } finally {
    await page.unrouteAll({ behavior: 'ignoreErrors' });
  }
});

test('knowledge bases: indexing status, search, a new base and an upload', async () => {
  await page.goto(`${base}/console/#/knowledge`);
  const notes = page.locator('.kb-list li[data-slug="research-notes"]');
  await notes.waitFor();
  assert.match(await notes.innerText(), /ready · \d+ documents, \d+ chunks/);
  await notes.getByRole('link').click();
  await page.getByRole('heading', { name: 'Documents' }).waitFor();
  await page.getByText('This knowledge base takes no uploads').waitFor();
  await page.getByRole('searchbox', { name: 'Query' }).fill('which electrolytes conduct lithium at room temperature');
  await page.getByRole('search').getByRole('button', { name: 'Search' }).click();
  await page.locator('ol.results li').first().waitFor();
  assert.match(await page.locator('ol.results').innerText(), /solid-electrolytes\.md/);
  await shot('knowledge');
  await page.getByLabel('Name', { exact: true }).fill('Console uploads');
  await page.getByRole('button', { name: 'Create' }).click();
  await page.getByRole('heading', { name: 'Console uploads' }).waitFor();
  await page.getByLabel('File').setInputFiles({
    name: 'garnets.md',
    mimeType: 'text/markdown',
    buffer: Buffer.from('# Garnets\n\nLLZO is a garnet oxide electrolyte, stable against lithium metal.\n'),
  });
  await page.getByRole('button', { name: 'Upload' }).click();
  await page.getByText('Uploaded garnets.md.').waitFor();
  await page.locator('ul.documents').getByText('garnets.md').waitFor();
  await page.locator('.kb-list li[data-slug="console-uploads"]').getByText(/ready · 1 documents/).waitFor();
  await page.getByRole('searchbox', { name: 'Query' }).fill('garnet stable against lithium');
  await page.getByRole('search').getByRole('button', { name: 'Search' }).click();
  await page.locator('ol.results').getByText('garnets.md', { exact: false }).waitFor();
  await shot('knowledge-upload');
});

test('the language switch shows the console in Chinese and back', async () => {
  await page.goto(`${base}/console/#/agents`);
  await page.getByRole('button', { name: '中文' }).click();
  await page.getByRole('heading', { name: '智能体' }).waitFor();
  assert.equal(await page.evaluate(() => document.documentElement.lang), 'zh-CN');
  assert.ok(await page.getByRole('navigation', { name: '栏目' }).getByRole('link', { name: '对话' }).isVisible());
  assert.match(await page.locator('tr[data-slug="deep-research"]').innerText(), /只读/);
  await shot('agents-zh');
  await page.goto(`${base}/console/#/chat/${encodeURIComponent(threadId)}`);
  await page.getByRole('complementary', { name: '子智能体' }).locator('li.run-node').first().waitFor();
  await shot('chat-zh');
  await page.getByRole('button', { name: 'English' }).click();
  await page.getByRole('complementary', { name: 'Subagents' }).waitFor();
  assert.equal(await page.evaluate(() => document.documentElement.lang), 'en');
});

test('at a phone width a pasted token signs in and no page is wider than the screen', async () => {
  const phone = await browser.newPage();
  watch(phone);
  await phone.setViewportSize({ width: 390, height: 844 });
  await phone.goto(`${base}/console/`);
  await phone.getByLabel('Bearer token').fill('alice-token');
  await phone.getByRole('button', { name: 'Use this token' }).click();
  await phone.getByRole('heading', { name: 'Agents' }).waitFor();
  const overflow = () => phone.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  for (const [name, hash, ready] of [
    ['agents-phone', '#/agents', 'tr[data-slug="deep-research"]'],
    ['chat-phone', `#/chat/${encodeURIComponent(threadId)}`, 'li.run-node'],
    ['knowledge-phone', '#/knowledge/research-notes', 'ul.documents li'],
    ['agent-form-phone', '#/agents/edit/console-notes-helper', '#agent-system_prompt'],
    ['timeline-phone', `#/runs/${timelineRun}`, 'tr[data-span-id]'],
  ]) {
    await phone.goto(`${base}/console/${hash}`);
    await phone.locator(ready).first().waitFor();
    assert.ok((await overflow()) <= 0, `${name}: the page is ${await overflow()} px wider than the screen`);
    await shot(name, phone);
  }
  await phone.close();
});

test("approval buttons answer an interrupt of two calls with the contract's resume body (the API mocked, to script the stream)", async () => {
  const resumed = [];
  let decided;
  const decision = new Promise((resolve) => (decided = resolve));
  const envelope = (event, payload) =>
    `event: ${event}\ndata: ${JSON.stringify({ run_id: 'run-approval', thread_id: 'thread-approval', event, payload, parent_run_id: null, parent_tool_call_id: null })}\n\n`;
  await page.route('**/api/agent/runs', async (route) => {
    const body = route.request().postDataJSON();
    if (body.resume) {
      resumed.push(body);
      decided();
      return route.fulfill({ json: { run_id: 'run-approval', thread_id: 'thread-approval', status: 'running' } });
    }
    return route.fulfill({ json: { run_id: 'run-approval', thread_id: 'thread-approval', status: 'pending' } });
  });
  let streams = 0;
  await page.route('**/api/agent/runs/run-approval/events**', async (route) => {
    streams += 1;
    const headers = { 'content-type': 'text/event-stream' };
    if (streams === 1) {
      return route.fulfill({
        headers,
        body:
          `id: 1\n${envelope('messages', { type: 'message_delta', message_id: 'm1', content: 'I need to write two files.' })}` +
          `id: 2\n${envelope('interrupt', {
            type: 'approval_required',
            expires_at: '2030-01-01T00:00:00Z',
            action_requests: [
              { tool_call_id: 'call_a', name: 'write_file', arguments: { path: '/tmp/a.md', content: 'a' }, allowed_decisions: ['approve', 'edit', 'reject'], description: 'Writes a.md' },
              { tool_call_id: 'call_b', name: 'execute', arguments: { command: 'rm -rf /tmp/b' }, allowed_decisions: ['approve', 'reject'], description: 'Runs a command' },
            ],
          })}`,
      });
    }
    // The reconnection after the first stream closed waits for the decision, as the run does.
    assert.equal(route.request().headers()['last-event-id'], '2');
    await decision;
    return route.fulfill({
      headers,
      body: `id: 3\n${envelope('messages', { type: 'message_delta', message_id: 'm2', content: 'Wrote a.md; did not run the command.' })}id: 4\n${envelope('end', { status: 'completed', error: null })}`,
    });
  });
  try {
    await page.goto(`${base}/console/#/chat`);
    await page.locator('#chat-agent option[value="deep-research"]').waitFor({ state: 'attached' });
    await page.getByLabel('Message').fill('Write the files.');
    await page.getByRole('button', { name: 'Send' }).click();
    const card = page.getByRole('form', { name: 'Approval needed' });
    await card.waitFor();
    await page.getByRole('status').filter({ hasText: 'waiting for you' }).waitFor();
    const send = card.getByRole('button', { name: 'Send the decisions' });
    assert.ok(await send.isDisabled(), 'not until every request has a decision');
    const first = card.getByRole('group', { name: 'Decision for write_file' });
    const second = card.getByRole('group', { name: 'Decision for execute' });
    assert.equal(await second.getByRole('button', { name: 'Edit and approve' }).count(), 0, 'only the allowed decisions');
    await first.getByRole('button', { name: 'Edit and approve' }).click();
    await card.getByLabel('Arguments of write_file (JSON)').fill('{"path": "/tmp/a.md", "content": "edited"}');
    await second.getByRole('button', { name: 'Reject' }).click();
    assert.equal(await second.getByRole('button', { name: 'Reject' }).getAttribute('aria-pressed'), 'true');
    await card.getByLabel('Message to the agent (optional)').fill('Do not delete anything.');
    await shot('approval');
    await send.click();
    await card.getByText('Decisions sent.').waitFor();
    await page.getByRole('log', { name: 'Conversation' }).getByText('Wrote a.md; did not run the command.').waitFor();
    await page.getByRole('status').filter({ hasText: /: completed$/ }).waitFor();
    assert.deepEqual(resumed, [
      {
        resume: {
          run_id: 'run-approval',
          decisions: [
            { tool_call_id: 'call_a', decision: 'edit', arguments: { path: '/tmp/a.md', content: 'edited' }, message: 'Do not delete anything.' },
            { tool_call_id: 'call_b', decision: 'reject', message: 'Do not delete anything.' },
          ],
        },
      },
    ]);
  } finally {
    await page.unrouteAll({ behavior: 'ignoreErrors' });
  }
});

test("a real run of note-taker waits for approval, and the person's Approve lets it write its note", async () => {
  await page.goto(`${base}/console/#/chat`);
  await page.locator('#chat-agent option[value="note-taker"]').waitFor({ state: 'attached' });
  await page.getByLabel('Agent', { exact: true }).selectOption('note-taker');
  await page.getByLabel('Message').fill('Order more LLZO.');
  await page.getByRole('button', { name: 'Send' }).click();
  const card = page.getByRole('form', { name: 'Approval needed' });
  await card.waitFor();
  await page.getByRole('status').filter({ hasText: 'waiting for you' }).waitFor();
  const group = card.getByRole('group', { name: 'Decision for write_file' });
  await group.getByRole('button', { name: 'Approve', exact: true }).click();
  await shot('approval-real');
  await card.getByRole('button', { name: 'Send the decisions' }).click();
  const transcript = page.getByRole('log', { name: 'Conversation' });
  await transcript.getByText(/^Done: /).waitFor();
  await page.getByRole('status').filter({ hasText: /: completed$/ }).waitFor();
  const threadOf = decodeURIComponent(page.url().split('#/chat/')[1]);
  const note = path.join(work, 'data', 'users', 'alice', 'threads', threadOf, 'outputs', 'note.md');
  assert.match(fs.readFileSync(note, 'utf8'), /Order more LLZO\./);
  // The approval is recorded: who decided what.
  await transcript.locator('li.msg.decided', { hasText: 'write_file: approved by alice' }).waitFor();
  await remember();
});

test('the runs page finds a run by its words, status and kind, and its page shows its result, files and timeline', async () => {
  await page.goto(`${base}/console/#/runs`);
  await page.getByRole('heading', { name: 'Runs', exact: true }).waitFor();
  const search = page.getByRole('search', { name: 'Find runs' });
  await search.locator('#runs-q').fill('solid electrolytes');
  await search.locator('#runs-status').selectOption('completed');
  await search.locator('#runs-kind').selectOption('chat');
  const rows = page.locator('table.runs tbody tr');
  await page.locator(`table.runs tr[data-run="${timelineRun}"]`).waitFor();
  // Every row is a completed conversation run about the question, the newest first.
  for (const text of await rows.allInnerTexts()) assert.match(text, /Which solid electrolytes[\s\S]*completed[\s\S]*deep-research[\s\S]*conversation/);
  assert.equal(await rows.first().getAttribute('data-run'), timelineRun, 'the newest first');
  await shot('runs');
  // The subagents' runs, each linked to the run that delegated it.
  await search.locator('#runs-kind').selectOption('subagent');
  await search.locator('#runs-agent').selectOption('research-explorer');
  await rows.first().getByRole('link', { name: /^subagent : the run that delegated/ }).waitFor();
  assert.ok((await rows.count()) >= 2, 'the explorer ran for each deep-research run');
  // A search that matches nothing says so.
  await search.locator('#runs-q').fill('no such words anywhere');
  await page.getByText('No run matches.').waitFor();
  // The run's page: what it was asked, its result rendered, the runs it started, its files, its timeline.
  await page.goto(`${base}/console/#/runs/${timelineRun}`);
  const facts = page.locator('dl.run-facts');
  await facts.getByText(QUESTION).waitFor();
  const result = page.getByRole('region', { name: 'Result' });
  await result.locator('.markdown', { hasText: 'The report is written to' }).waitFor();
  assert.match(await result.innerText(), /\d+ tokens in, \d+ out/);
  assert.deepEqual((await facts.locator('.run-children a').allInnerTexts()).map((t) => t.split(' ')[0]).sort(), ['fact-verifier', 'research-explorer']);
  const files = page.getByRole('region', { name: 'Files' });
  await files.getByRole('button', { name: 'report.md' }).click();
  await files.getByRole('article', { name: 'report.md' }).locator('.markdown h1', { hasText: 'Research report' }).waitFor();
  await page.locator('table.timeline[data-ended="true"] tr[data-span-id]').first().waitFor();
  await shot('run');
  // A child's page names the run that delegated it.
  await facts.locator('.run-children a', { hasText: 'fact-verifier' }).click();
  await page.locator('dl.run-facts').getByRole('link', { name: new RegExp(`run ${timelineRun.slice(0, 8)} of deep-research`) }).waitFor();
});

test('every conversation of the suite reopens as it was shown live', async () => {
  assert.ok(lived.size >= 3, `conversations kept: ${lived.size}`);
  for (const [thread, live] of lived) {
    const p = await signedInPage();
    await p.goto(`${base}/console/#/chat/${encodeURIComponent(thread)}`);
    await p.locator('.transcript-box[data-settled="true"]').waitFor();
    assert.deepEqual(await transcriptSignature(p), live, `conversation ${thread}`);
    assert.ok(await atTheEnd(p), `the reopened conversation ${thread} opens at its end`);
    await p.close();
  }
});

/** Runs axe-core on the page: the violations of impact serious or critical, each as `rule: target`. */
async function seriousViolations(p) {
  await p.evaluate(fs.readFileSync(path.join(ROOT, 'console', 'node_modules', 'axe-core', 'axe.min.js'), 'utf8'));
  const results = await p.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  return results.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .flatMap((v) => v.nodes.map((n) => `${v.id}: ${n.target.join(' ')}`));
}

test('every page passes axe-core with no serious violation, and is shot in both languages and at phone width', async () => {
  const pages = [
    ['agents', '#/agents', 'tr[data-slug="deep-research"]'],
    ['agent-form', '#/agents/edit/console-notes-helper', '#agent-system_prompt'],
    ['chat', `#/chat/${encodeURIComponent(threadId)}`, 'li.msg.end'],
    ['runs', '#/runs', 'table.runs tbody tr'],
    ['run', `#/runs/${timelineRun}`, 'tr[data-span-id]'],
    ['knowledge', '#/knowledge/research-notes', 'ul.documents li'],
  ];
  const found = [];
  for (const [lang, viewport] of [['en', null], ['zh', null], ['en', { width: 390, height: 844 }]]) {
    const p = await signedInPage(viewport);
    await p.addInitScript((chosen) => localStorage.setItem('yuxi.lang', chosen), lang);
    for (const [name, hash, ready] of pages) {
      await p.goto(`${base}/console/${hash}`);
      await p.locator(ready).first().waitFor();
      assert.equal(await p.evaluate(() => document.documentElement.lang), lang === 'zh' ? 'zh-CN' : 'en');
      found.push(...(await seriousViolations(p)).map((v) => `${name} (${lang}${viewport ? ', phone' : ''}): ${v}`));
      await shot(`page-${name}-${viewport ? 'phone' : lang}`, p);
    }
    await p.close();
  }
  assert.deepEqual(found, []);
});

test('no page broke the Content-Security-Policy, threw, or missed a file', () => {
  assert.deepEqual(problems, []);
});
