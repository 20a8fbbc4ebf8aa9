/* activate.test.ts — the real extension bundle (dist/extension.js, with
 * the real vscode-languageclient inside) activated under the vscode mock
 * against a scripted peer process: what the server is started with, what
 * it receives, and how the extension reacts to progress, setting changes,
 * a crash and a new API key. Run after `npm run build`. */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import * as vscode from 'vscode';
import { readSettings, toServerSettings } from '../../src/config';
import { secretName } from '../../src/secrets';
import type * as Mock from '../mock/vscode';

const mock = vscode as unknown as typeof Mock;
const BUNDLE = path.resolve(__dirname, '..', '..', '..', 'dist', 'extension.js');
const KEY1 = 'sk-activation-first-key';
const KEY2 = 'sk-activation-second-key';

type Entry = { event?: string; method?: string; params?: any; argv?: string[]; key?: string | null; pid?: number };

let dir = '';
let logFile = '';
let ext: { activate(ctx: unknown): Promise<void>; deactivate(): Promise<void> };
let secrets: Mock.MemorySecretStorage;
const config = {
  'mkevolve.backend': 'cpu',
  'mkevolve.budget.tokens': 1000,
  'mkevolve.llm.model': 'm-1',
  'mkevolve.server.maxRestarts': 2,
};

function entries(): Entry[] {
  if (!fs.existsSync(logFile)) return [];
  return fs
    .readFileSync(logFile, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Entry);
}

async function until<T>(what: string, f: () => T | undefined | false, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) {
      const out = mock.recorded.outputs.get('MKEvolve')?.text ?? '';
      throw new Error(`timed out waiting for ${what}\n--- peer log ---\n${fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').slice(-2000) : ''}\n--- output ---\n${out.slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

const starts = () => entries().filter((e) => e.event === 'start');
const inits = () => entries().filter((e) => e.method === 'initialize');
const statusItem = () => mock.created.statusBarItems[mock.created.statusBarItems.length - 1];

before(async () => {
  assert.ok(fs.existsSync(BUNDLE), `${BUNDLE} exists (npm run build first)`);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mkevolve-activate-'));
  logFile = path.join(dir, 'peer.jsonl');
  const wrapper = path.join(dir, 'mkevolve');
  fs.writeFileSync(wrapper, `#!/bin/sh\nexec "${process.execPath}" "${path.join(__dirname, 'peer.js')}" "$@"\n`, { mode: 0o755 });
  process.env.PEER_LOG = logFile;
  delete process.env.OPENAI_API_KEY;
  mock.setConfig({ ...config, 'mkevolve.serverPath': wrapper });
  secrets = new mock.MemorySecretStorage();
  await secrets.store(secretName('openai'), KEY1);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  ext = require(BUNDLE);
  await ext.activate({ subscriptions: [], secrets });
});

after(async () => {
  if (ext) await ext.deactivate();
  const pids = starts().map((s) => s.pid!);
  for (const pid of pids) {
    try {
      process.kill(pid, 0);
      process.kill(pid, 'SIGKILL');
      assert.fail(`peer ${pid} was left running`);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

test('the server is started as `mkevolve lsp --stdio` with the key in its environment only', async () => {
  await until('initialize', () => inits().length === 1);
  const start = starts()[0];
  assert.deepEqual(start.argv, ['lsp', '--stdio']);
  assert.equal(start.key, KEY1);
  const init = inits()[0].params;
  const expected = toServerSettings(readSettings((k) => (config as Record<string, unknown>)[`mkevolve.${k}`]).settings);
  assert.deepEqual(init.initializationOptions, expected);
  assert.equal(init.capabilities.window.workDoneProgress, true);
  assert.equal(fs.readFileSync(logFile, 'utf8').split('\n').slice(1).join('\n').includes(KEY1), false, 'key in no message');
  assert.equal(mock.recorded.outputs.get('MKEvolve')!.text.includes(KEY1), false, 'key not in the output');
  assert.match(mock.recorded.outputs.get('MKEvolve')!.text, /OPENAI_API_KEY from secret storage/);
  assert.equal(statusItem().text, '$(zap) MKEvolve');
});

test('commands: ours registered once, other server commands by the client', async () => {
  for (const id of ['mkevolve.decompose', 'mkevolve.evolve', 'mkevolve.evolveAll', 'mkevolve.swap', 'mkevolve.restore', 'mkevolve.openReport', 'mkevolve.setApiKey', 'mkevolve.showJobs']) {
    assert.ok(mock.recorded.commands.has(id), id);
  }
  assert.ok(mock.recorded.commands.has('mkevolve.peer.extra'), 'a server-only command is still registered by the client');
  assert.deepEqual(mock.recorded.messages.filter((m) => m.level === 'error'), []);
});

test('a command with arguments (from a lens or action) is forwarded unchanged', async () => {
  const arg = { uri: 'file:///w/m.py', subkernel: 'k1' };
  const r = await mock.commands.executeCommand('mkevolve.decompose', arg);
  assert.deepEqual(r, { echo: [arg] });
  const sent = entries().filter((e) => e.method === 'workspace/executeCommand');
  assert.deepEqual(sent[sent.length - 1].params, { command: 'mkevolve.decompose', arguments: [arg] });
});

test('palette without a Python editor explains instead of sending', async () => {
  const before = entries().length;
  await mock.commands.executeCommand('mkevolve.evolve');
  assert.equal(entries().length, before);
  assert.match(mock.recorded.messages[mock.recorded.messages.length - 1].text, /open a Python file/);
});

test('palette: the code action at the cursor supplies command and arguments', async () => {
  const uri = mock.Uri.file('/w/m.py');
  const w = mock.window as unknown as { activeTextEditor: unknown };
  w.activeTextEditor = {
    document: { uri, languageId: 'python' },
    selection: { active: { line: 20, character: 8 } },
  };
  const actions = [
    { title: 'Swap subkernel conv → tile_64 (1.6x)', command: { title: 's', command: 'mkevolve.swap', arguments: [{ subkernel: 'sk0', variant: 'v3' }] } },
    { title: 'Swap subkernel conv → tile_128 (1.2x)', command: { title: 's', command: 'mkevolve.swap', arguments: [{ subkernel: 'sk0', variant: 'v4' }] } },
    { title: 'Evolve all', command: { title: 'e', command: 'mkevolve.peer.extra', arguments: [] } },
  ];
  const d = mock.commands.registerCommand('vscode.executeCodeActionProvider', async () => actions);
  try {
    mock.recorded.pickIndex = 1;
    assert.deepEqual(await mock.commands.executeCommand('mkevolve.swap'), { echo: [{ subkernel: 'sk0', variant: 'v4' }] });
    assert.equal((mock.recorded.quickPicks.at(-1) as unknown[]).length, 2, 'both variants offered');
    mock.recorded.pickIndex = -1; // dismissed: nothing is sent
    const n = entries().length;
    assert.equal(await mock.commands.executeCommand('mkevolve.swap'), undefined);
    assert.equal(entries().length, n);
    mock.recorded.pickIndex = 0;
    // No matching action: the editor's document and cursor are sent.
    assert.deepEqual(await mock.commands.executeCommand('mkevolve.evolve'), {
      echo: [{ uri: uri.toString(), position: { line: 20, character: 8 } }],
    });
  } finally {
    d.dispose();
    w.activeTextEditor = undefined;
  }
});

test('progress from the server drives the status bar item', async () => {
  await mock.commands.executeCommand('mkevolve.evolveAll', { uri: 'file:///w/m.py' });
  await until('job in the status bar', () => statusItem().text === '$(sync~spin) Evolve all: subkernel 1/2 50%');
  await mock.commands.executeCommand('mkevolve.peer.extra');
  await until('idle status', () => statusItem().text === '$(zap) MKEvolve');
  assert.match(String(statusItem().tooltip), /Last job: Evolve all — done/);
});

test('a setting change reaches the server as didChangeConfiguration', async () => {
  mock.setConfig({ 'mkevolve.tolerance.atol': 0.01 });
  const e = await until('didChangeConfiguration', () =>
    entries().find((x) => x.method === 'workspace/didChangeConfiguration' && x.params?.settings?.mkevolve?.tolerance?.atol === 0.01),
  );
  assert.equal(e.params.settings.mkevolve.llm.model, 'm-1');
  assert.equal(JSON.stringify(e.params).includes(KEY1), false);
  assert.equal(starts().length, 1, 'no restart for a live setting');
});

test('a crashed server is restarted and serves again', async () => {
  void mock.commands.executeCommand('mkevolve.restore', { crash: true });
  await until('second start', () => inits().length === 2);
  await until('running again', () => statusItem().text === '$(zap) MKEvolve');
  assert.equal(inits()[1].params.initializationOptions.tolerance.atol, 0.01, 'restart sends the current settings');
  const r = await mock.commands.executeCommand('mkevolve.decompose', { uri: 'file:///w/again.py' });
  assert.deepEqual(r, { echo: [{ uri: 'file:///w/again.py' }] });
});

test('a new stored key restarts the server with it', async () => {
  await secrets.store(secretName('openai'), KEY2);
  await until('third start', () => inits().length === 3);
  assert.equal(starts()[2].key, KEY2);
  assert.equal(mock.recorded.outputs.get('MKEvolve')!.text.includes(KEY2), false);
});

test('crashes past the limit stop the restarts and say so', async () => {
  // maxRestarts = 2 (the key restart above reset the count): two crashes
  // are restarted, the third is not.
  for (const n of [4, 5]) {
    void mock.commands.executeCommand('mkevolve.restore', { crash: true });
    await until(`start ${n}`, () => inits().length === n);
    await until('running', () => statusItem().text === '$(zap) MKEvolve');
  }
  void mock.commands.executeCommand('mkevolve.restore', { crash: true });
  await until('failed status', () => statusItem().text === '$(error) MKEvolve');
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(inits().length, 5, 'not restarted again');
  assert.ok(mock.recorded.messages.some((m) => m.level === 'error' && /will not be restarted/.test(m.text)));
  // A manual restart resets the policy.
  await mock.commands.executeCommand('mkevolve.restartServer');
  await until('sixth start', () => inits().length === 6);
  await until('running after manual restart', () => statusItem().text === '$(zap) MKEvolve');
});
