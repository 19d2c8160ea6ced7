// Starts the real `gql-demo` binary on a free loopback port for one test file, and stops it
// by its PID.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '../../../..');
export const nodeModules = path.join(here, 'node_modules');

/** The binary under test: GQL_DEMO_BIN, or the debug build in the cargo target dir. */
export function binaryPath() {
  if (process.env.GQL_DEMO_BIN) return process.env.GQL_DEMO_BIN;
  const target = process.env.CARGO_TARGET_DIR ?? path.join(repoRoot, 'target');
  return path.join(target, 'debug', 'gql-demo');
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Runs the server with local explorer assets; resolves to { url, stop }. */
export async function startServer(env = {}) {
  const child = spawn(binaryPath(), [], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', GQL_ASSETS_DIR: nodeModules, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  const lines = readline.createInterface({ input: child.stdout });
  const firstLine = new Promise((resolve, reject) => {
    lines.once('line', resolve);
    child.once('error', reject);
    exited.then(([code]) => reject(new Error(`gql-demo exited early with ${code}`)));
  });
  const line = await withTimeout(firstLine, 15000, 'starting gql-demo');
  const url = line.match(/http:\/\/\S+\/graphql/)?.[0];
  if (!url) throw new Error(`unexpected first line from gql-demo: ${line}`);
  return {
    url,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      const [code, signal] = await withTimeout(exited, 10000, 'stopping gql-demo');
      if (code !== 0) throw new Error(`gql-demo exited with ${code ?? signal}`);
    },
  };
}

/** POSTs a GraphQL request; resolves to { status, body }. */
export async function post(url, request) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(request),
    signal: AbortSignal.timeout(10000),
  });
  return { status: response.status, body: await response.json() };
}
