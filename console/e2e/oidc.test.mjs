// The console's "Sign in with …" in a real browser (Debian's Chromium, headless, playwright-core): the
// local mode trusting the suite's OpenID provider (tests/oidc-provider, built by scripts/oidc-provider)
// with its login configured; the person signs in on the provider's own page; the authorization request
// carries an S256 code challenge (PKCE), the verifier and the token never appear in a URL, and the
// console ends up signed in as the provider's user. Run by `make console-e2e`.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
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
const SECRET = 'yuxi-console-test-secret';
const WAIT = 15_000;

let work;
let provider;
let server;
let base;
let issuer;
let browser;
const problems = [];


async function waitFor(what, check, log) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch {
      // Not answering yet.
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} within 30 s: ${fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : ''}`);
}

before(async () => {
  assert.ok(fs.existsSync(BIN), `the binary ${BIN} exists (make build)`);
  fs.mkdirSync(SHOTS, { recursive: true });
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'yuxi-console-oidc-'));
  const binary = execFileSync(path.join(ROOT, 'scripts', 'oidc-provider'), { encoding: 'utf8' }).trim().split('\n').pop();
  // The provider's TLS certificate: its own CA, made with openssl.
  const file = (name) => path.join(work, name);
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', file('ca.key'),
    '-out', file('ca.crt'), '-days', '1', '-subj', '/CN=yuxi-console-test-ca'], { stdio: 'ignore' });
  execFileSync('openssl', ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', file('tls.key'),
    '-out', file('tls.csr'), '-subj', '/CN=127.0.0.1'], { stdio: 'ignore' });
  fs.writeFileSync(file('san.cnf'), 'subjectAltName=IP:127.0.0.1\n');
  execFileSync('openssl', ['x509', '-req', '-in', file('tls.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial',
    '-out', file('tls.crt'), '-days', '1', '-extfile', file('san.cnf')], { stdio: 'ignore' });
  fs.writeFileSync(file('users.json'), JSON.stringify([
    { id: 'dora', password: 'dora-password', name: 'Dora', groups: ['research'], role: 'user', department: 3 },
  ]));
  fs.writeFileSync(file('client-secret'), SECRET);
  const providerPort = await freePort();
  const port = await freePort();
  issuer = `https://127.0.0.1:${providerPort}`;
  base = `http://127.0.0.1:${port}`;
  const providerLog = path.join(SHOTS, 'oidc-provider.log');
  provider = spawn(binary, [`-issuer=${issuer}`, `-cert=${file('tls.crt')}`, `-key=${file('tls.key')}`, `-users=${file('users.json')}`,
    `-redirect=${base}/api/auth/oidc/callback`, `-secret=${SECRET}`], { stdio: ['ignore', 'ignore', fs.openSync(providerLog, 'w')] });
  await waitFor('the provider answers', async () => {
    const answer = execFileSync('curl', ['-sf', '--cacert', file('ca.crt'), `${issuer}/.well-known/openid-configuration`]);
    return answer.length > 0;
  }, providerLog);
  fs.writeFileSync(file('oidc.yaml'), [
    `issuer: ${issuer}`, 'audiences: [yuxi-facade]', "usernamePrefix: 'oidc:'", 'groupsClaim: groups', 'departmentClaim: yuxi_department',
    `certificateAuthority: ${file('ca.crt')}`, 'login:', '  clientId: yuxi-facade', `  clientSecretFile: ${file('client-secret')}`,
    `  redirectUrl: ${base}/api/auth/oidc/callback`, '  providerName: Example SSO', '',
  ].join('\n'));
  const serverLog = path.join(SHOTS, 'server-oidc.log');
  const env = { ...process.env };
  delete env.REDIS_URL;
  server = spawn(BIN, ['local', '--manifests', 'examples', '--users', 'examples/local-users.yaml', '--data-dir', file('data'),
    '--listen', `127.0.0.1:${port}`, '--default-model', 'scripted/auto', '--oidc-config', file('oidc.yaml')],
  { cwd: ROOT, env, stdio: ['ignore', fs.openSync(serverLog, 'w'), fs.openSync(serverLog, 'a')] });
  await waitFor('the local mode is ready', async () => (await fetch(`${base}/readyz`)).ok, serverLog);
  browser = await chromium.launchPersistentContext(path.join(work, 'profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    // The provider's certificate is of a CA made for this test, which the browser's store lacks.
    ignoreHTTPSErrors: true,
    viewport: { width: 1280, height: 800 },
    locale: 'en-US',
  });
  browser.setDefaultTimeout(WAIT);
});

after(async () => {
  await browser?.close();
  for (const child of [server, provider]) if (child && child.exitCode === null) child.kill('SIGTERM');
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

test('signing in with the OIDC provider uses PKCE and ends signed in as its user', async () => {
  const page = browser.pages()[0] ?? (await browser.newPage());
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  const visited = [];
  page.on('request', (request) => {
    if (request.isNavigationRequest()) visited.push(request.url());
  });
  const redirects = [];
  page.on('response', (response) => {
    const location = response.headers()['location'];
    if (location) redirects.push(location);
  });
  await page.goto(`${base}/console/`);
  await page.getByRole('button', { name: 'Sign in with Example SSO' }).click();
  await page.waitForURL((url) => url.href.startsWith(issuer));
  await page.screenshot({ path: path.join(SHOTS, 'oidc-provider-login.png'), fullPage: true });
  await page.locator('input[name="username"]').fill('dora');
  await page.locator('input[name="password"]').fill('dora-password');
  await page.locator('button[type="submit"], input[type="submit"]').first().click();
  await page.getByRole('heading', { name: 'Agents' }).waitFor();
  await page.screenshot({ path: path.join(SHOTS, 'oidc-signed-in.png'), fullPage: true });

  const authorize = new URL(visited.find((url) => url.startsWith(`${issuer}/auth?`)));
  assert.equal(authorize.searchParams.get('code_challenge_method'), 'S256');
  assert.match(authorize.searchParams.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/);
  assert.equal(authorize.searchParams.get('client_id'), 'yuxi-facade');
  const token = await page.evaluate(() => sessionStorage.getItem('yuxi.token'));
  assert.match(token, /^ey/, 'the bearer token is the provider\'s ID token');
  for (const url of [...visited, ...redirects]) {
    assert.ok(!url.includes(token), `the token is in no address: ${url}`);
    assert.ok(!/code_verifier/.test(url), `the verifier is in no address: ${url}`);
  }
  const me = await (await fetch(`${base}/api/auth/me`, { headers: { Authorization: `Bearer ${token}` } })).json();
  assert.match(me.uid, /^oidc-dora-[0-9a-f]{16}$/, JSON.stringify(me));
  assert.equal(me.department_id, 3);
  await page.getByText(`Signed in as ${me.uid}`).waitFor();
  // The one-time code was used: the same code again is refused.
  const callback = redirects.find((url) => url.includes('#/oidc?code='));
  assert.ok(callback, `the browser came back with a one-time code: ${redirects.join(' ')}`);
  const reused = await page.evaluate(async (code) => (await fetch('/api/auth/oidc/exchange-code', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ code }),
  })).status, new URL(callback.replace('#/oidc?', '?'), base).searchParams.get('code'));
  assert.equal(reused, 400);
  assert.deepEqual(problems, []);
});
