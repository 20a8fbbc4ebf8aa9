/* lsp-bench-client.mjs — what the language-server benchmarks share
 * (bench-lsp-latency.mjs, bench-lsp-save.mjs): the repository root, the
 * client stack vscode-languageclient uses (vscode-jsonrpc, from
 * editors/vscode/node_modules), a timer, order statistics and one server
 * process with its conversation. Not a benchmark itself. */
import * as cp from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(REPO, 'editors', 'vscode', 'package.json'));
let rpc;
try {
  rpc = require('vscode-jsonrpc/node');
} catch {
  console.error(`${path.basename(process.argv[1] ?? 'bench')}: vscode-jsonrpc missing; run \`npm ci\` in editors/vscode`);
  process.exit(2);
}

export const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

export function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))];
  return { n: s.length, min: s[0], median: q(0.5), p95: q(0.95), max: s[s.length - 1], mean: s.reduce((a, b) => a + b, 0) / s.length };
}

/* One server process and its conversation. */
export class Server {
  constructor(bin, env, cwd) {
    this.proc = cp.spawn(bin, ['lsp', '--stdio'], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.stderr = '';
    this.proc.stderr.on('data', (b) => (this.stderr += b.toString('utf8')));
    this.proc.on('exit', (code, signal) => {
      this.exited = { code, signal };
      this.poke();
    });
    this.proc.stdin.on('error', () => undefined);
    this.conn = rpc.createMessageConnection(new rpc.StreamMessageReader(this.proc.stdout), new rpc.StreamMessageWriter(this.proc.stdin));
    this.waiters = [];
    this.publishes = new Map(); // uri -> [{version, diagnostics, at}]
    this.messages = [];
    const c = this.conn;
    c.onNotification('textDocument/publishDiagnostics', (p) => {
      const l = this.publishes.get(p.uri) ?? [];
      l.push({ version: p.version, diagnostics: p.diagnostics, at: nowMs() });
      this.publishes.set(p.uri, l);
      this.poke();
    });
    c.onNotification('$/progress', () => undefined);
    c.onNotification('window/showMessage', (p) => this.messages.push(p));
    c.onNotification('window/logMessage', () => undefined);
    c.onRequest('window/workDoneProgress/create', () => null);
    c.onRequest('workspace/configuration', (p) => p.items.map(() => null));
    c.onRequest('workspace/codeLens/refresh', () => null);
    c.onRequest('workspace/applyEdit', () => ({ applied: false, failureReason: 'benchmark' }));
    c.onRequest('client/registerCapability', () => null);
    c.listen();
  }

  poke() {
    const ready = this.waiters.filter((w) => w.pred() || this.exited);
    this.waiters = this.waiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.done();
  }

  waitFor(what, pred, ms) {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`timed out after ${ms} ms waiting for ${what}\n${this.stderr.slice(-2000)}`));
      }, ms);
      const waiter = {
        pred,
        done: () => {
          clearTimeout(timer);
          if (pred()) resolve();
          else reject(new Error(`server exited ${JSON.stringify(this.exited)} while waiting for ${what}\n${this.stderr.slice(-2000)}`));
        },
      };
      this.waiters.push(waiter);
    });
  }

  request(method, params) {
    return this.conn.sendRequest(method, params);
  }

  notify(method, params) {
    return this.conn.sendNotification(method, params);
  }

  async stop() {
    try {
      await this.request('shutdown', null);
      await this.notify('exit', null);
    } catch {
      /* reported by the exit status below */
    }
    await this.waitFor('exit', () => this.exited !== undefined, 20_000).catch(() => this.proc.kill('SIGKILL'));
    this.conn.dispose();
  }
}

/* The machine in one line, for a report's header. */
export function machine() {
  const cpus = os.cpus();
  let lscpu = '';
  try {
    lscpu = cp.execFileSync('uname', ['-srm'], { encoding: 'utf8' }).trim();
  } catch {
    lscpu = `${os.type()} ${os.release()} ${os.arch()}`;
  }
  return `${cpus.length} × ${cpus[0]?.model?.trim() ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB RAM, ${lscpu}, Node ${process.version}`;
}

/* CMAKE_BUILD_TYPE of the build directory holding the binary. */
export function buildType(bin) {
  try {
    const m = /^CMAKE_BUILD_TYPE:STRING=(.*)$/m.exec(fs.readFileSync(path.join(path.dirname(bin), 'CMakeCache.txt'), 'utf8'));
    return m && m[1] ? m[1] : 'unknown';
  } catch {
    return 'unknown';
  }
}

/* The checkout's HEAD, short ("unknown" outside a checkout). */
export function headCommit() {
  try {
    return cp.execFileSync('git', ['-C', REPO, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}
