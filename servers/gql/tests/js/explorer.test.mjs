// The explorer in Debian's headless Chromium, with GraphiQL served from the local
// node_modules: the page loads with no outside request, runs a query, shows the answer, and
// a screenshot of it is saved for a person to look at. A GET link with a query opens the
// explorer with that query (and its variables) in the editors, and nothing in it runs as
// script.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { chromium } from 'playwright-core';
import { repoRoot, startServer } from './server.mjs';

const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';
const SHOTS =
  process.env.GQL_SCREENSHOT_DIR ??
  path.join(process.env.CARGO_TARGET_DIR ?? path.join(repoRoot, 'target'), 'gql-screenshots');
const QUERY = `{
  creature(name: "Cragmammoth") {
    id
    name
    weight { minimum maximum }
    attacks { special { name damage } }
  }
}`;

let server;
let context;
let profile;
const outside = [];
const pageErrors = [];

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: run scripts/deps.sh`);
  server = await startServer();
  profile = mkdtempSync(path.join(os.tmpdir(), 'gql-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    timeout: 30000,
    viewport: { width: 1400, height: 800 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  // Any request that leaves the test server would fail offline: record it and refuse it.
  const origin = new URL(server.url).origin;
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(origin) || url.startsWith('data:')) return route.continue();
    outside.push(url);
    return route.abort();
  });
});

after(async () => {
  await context?.close();
  await server?.stop();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

test('explorer runs a query with local assets and shows the result', { timeout: 90000 }, async () => {
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.setDefaultTimeout(30000);
  const response = await page.goto(server.url);
  assert.equal(response.status(), 200);
  assert.match(response.headers()['content-type'], /text\/html/);
  await page.waitForSelector('.graphiql-container');
  await page.waitForSelector('.graphiql-query-editor .CodeMirror');

  await page.evaluate((query) => {
    document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror.setValue(query);
  }, QUERY);
  await page.click('.graphiql-execute-button');
  const resultText = () =>
    page.evaluate(
      () => document.querySelector('.graphiql-response .CodeMirror')?.CodeMirror.getValue() ?? '',
    );
  await page.waitForFunction(
    () =>
      (document.querySelector('.graphiql-response .CodeMirror')?.CodeMirror.getValue() ?? '').includes(
        'Quarry Quake',
      ),
  );
  const result = JSON.parse(await resultText());
  assert.deepEqual(result.data.creature.weight, { minimum: '358.75kg', maximum: '461.25kg' });
  assert.equal(result.data.creature.id, '009');
  assert.deepEqual(Object.keys(result.data.creature), ['id', 'name', 'weight', 'attacks']);
  // The answer is on screen, not only in the editor's model.
  await page.waitForSelector('.graphiql-response >> text=Quarry Quake');

  mkdirSync(SHOTS, { recursive: true });
  const shot = path.join(SHOTS, 'gql-explorer.png');
  await page.screenshot({ path: shot });
  assert.ok(statSync(shot).size > 20000, 'screenshot has content');
  console.log(`screenshot: ${shot}`);

  // The Docs pane is built from introspection: the root query type lists our fields.
  await page.click('button[aria-label="Show Documentation Explorer"]');
  await page.click('.graphiql-doc-explorer a >> text="Query"');
  await page.waitForSelector('.graphiql-doc-explorer >> text=creatureById');
  await page.waitForSelector('.graphiql-doc-explorer >> text=getMessage');
  await page.screenshot({ path: path.join(SHOTS, 'gql-explorer-docs.png') });

  assert.deepEqual(outside, [], 'the page made no request outside the test server');
  assert.deepEqual(pageErrors, []);
});

test('a GET link with a query opens the explorer with it filled in, safely', { timeout: 90000 }, async () => {
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const dialogs = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    return d.dismiss();
  });
  page.setDefaultTimeout(30000);
  // A comment that would end the page's script if the server pasted it in unescaped.
  const query = '{ creature(id: "16") { id name } } # </script><script>alert(1)</script>';
  const variables = '{"unused": "</script>"}';
  const link = new URL(server.url);
  link.searchParams.set('query', query);
  link.searchParams.set('variables', variables);
  const response = await page.goto(link.href);
  assert.match(response.headers()['content-type'], /text\/html/);
  const editorText = (selector) =>
    page.evaluate((s) => document.querySelector(s)?.CodeMirror.getValue() ?? null, selector);
  await page.waitForFunction(
    (q) => document.querySelector('.graphiql-query-editor .CodeMirror')?.CodeMirror.getValue() === q,
    query,
  );
  // The first editor of the tools pane is the variables editor (the headers one follows).
  assert.equal(await editorText('.graphiql-editor-tool .CodeMirror'), variables);

  await page.click('.graphiql-execute-button');
  await page.waitForFunction(() =>
    (document.querySelector('.graphiql-response .CodeMirror')?.CodeMirror.getValue() ?? '').includes('Sparkit'),
  );
  const result = JSON.parse(await editorText('.graphiql-response .CodeMirror'));
  assert.deepEqual(result, { data: { creature: { id: '016', name: 'Sparkit' } } });

  assert.deepEqual(dialogs, [], 'nothing from the URL ran as script');
  assert.deepEqual(outside, []);
  assert.deepEqual(pageErrors, []);
  await page.close();
});
