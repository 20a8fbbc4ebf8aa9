/* server.test.ts — the client-server conversation end to end: the VS Code
 * client stack (vscode-jsonrpc, vscode-languageclient's capabilities and
 * answers, the extension's own settings mapping and key environment)
 * against the real `mkevolve lsp --stdio`.
 *
 * The binary: $MKEVOLVE_BIN, else ../../build/mkevolve from editors/vscode.
 * Skipped, with the reason, when the binary does not exist at the default
 * place or has no `lsp` subcommand yet; a missing $MKEVOLVE_BIN fails. One
 * session is shared by the tests in order, like one editor window. */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test, TestContext } from 'node:test';
import { SERVER_COMMANDS, SERVER_COMMAND_IDS } from '../../src/commands';
import { configurationItem, didChangeConfigurationParams, effectiveApiKeyEnv, ExtensionSettings, readSettings, toServerSettings } from '../../src/config';
import { RestartPolicy } from '../../src/restart';
import { buildServerEnv } from '../../src/secrets';
import { Diagnostic, fileUri, ProgressEvent, Session, VSCODE_CAPABILITIES } from './lspClient';

const EXT = path.resolve(__dirname, '..', '..', '..'); // editors/vscode
const REPO = path.resolve(EXT, '..', '..');
const EXPLICIT_BIN = process.env.MKEVOLVE_BIN;
const BIN = path.resolve(EXT, EXPLICIT_BIN ?? path.join('..', '..', 'build', 'mkevolve'));
const EXAMPLE = path.join(REPO, 'examples', 'conv_bias_relu.py');
const FAKE_KEY = `sk-e2e-${process.pid}-${Date.now().toString(36)}-do-not-echo`;

// Analysis starts a Python worker (torch import) and candidates run under
// the Triton interpreter on CPU in CI: generous limits, failures still fail.
const T_INIT = 20_000;
const T_ANALYSIS = 120_000;
const T_JOB = 300_000;

let skipReason: string | undefined;
let session: Session | undefined;
let workspace = '';
let moduleUri = '';
let moduleText = '';
let settings: ExtensionSettings;
let initResult: { capabilities: Record<string, any>; serverInfo?: { name: string; version?: string } } | undefined;

function testSettings(): ExtensionSettings {
  const venvPython = path.join(REPO, '.venv', 'bin', 'python');
  return readSettings((k) =>
    (
      ({
        pythonPath: fs.existsSync(venvPython) ? venvPython : undefined,
        backend: 'cpu',
        proposer: 'builtin',
        'budget.proposals': 4,
        'budget.seconds': 120,
        'tolerance.atol': 1e-4,
        'tolerance.rtol': 1e-4,
        composeMode: 'file',
        debounceMs: 100,
      }) as Record<string, unknown>
    )[k],
  ).settings;
}

function startSession(): Session {
  const env = buildServerEnv(process.env, effectiveApiKeyEnv(settings), FAKE_KEY).env;
  env.TRITON_INTERPRET = '1';
  return new Session(BIN, env, workspace, (section) => configurationItem(settings, section));
}

async function initialize(s: Session): Promise<typeof initResult> {
  const params = {
    processId: process.pid,
    clientInfo: { name: 'Visual Studio Code', version: '1.82.0' },
    locale: 'en',
    rootPath: workspace,
    rootUri: fileUri(workspace),
    workspaceFolders: [{ uri: fileUri(workspace), name: path.basename(workspace) }],
    capabilities: VSCODE_CAPABILITIES,
    initializationOptions: toServerSettings(settings),
    trace: 'off',
  };
  const exited = s.waitFor('exit', () => s.exited !== undefined, T_INIT).then(
    () => 'exited' as const,
    () => 'timeout' as const,
  );
  const reply = s.request<typeof initResult>('initialize', params).then((r) => ({ r }));
  const first = await Promise.race([reply, exited]);
  if (first === 'exited' || first === 'timeout') {
    return undefined;
  }
  return first.r;
}

function ready(t: TestContext): Session | undefined {
  if (skipReason) {
    t.skip(skipReason);
    return undefined;
  }
  assert.ok(session, 'session started');
  return session;
}

/* For tests of the engine features (commands, lenses, actions, hover
 * tables, jobs): the server offers them (checked in `before`), so they run
 * whenever the server does. */
function readyForFeatures(t: TestContext): Session | undefined {
  return ready(t);
}

function latestDiagnostics(s: Session, uri: string): Diagnostic[] | undefined {
  const l = s.diagnostics.get(uri);
  return l && l.length > 0 ? l[l.length - 1].diagnostics : undefined;
}

function lineOf(text: string, needle: string): number {
  const i = text.split('\n').findIndex((l) => l.includes(needle));
  assert.ok(i >= 0, `"${needle}" in the module`);
  return i;
}

/* Sends a command and follows the job it starts: the first progress token
 * begun after `since` and its end. */
async function runJob(s: Session, command: string, args: unknown[]): Promise<{ result: unknown; events: ProgressEvent[] }> {
  const since = s.progress.length;
  const reply = s.request('workspace/executeCommand', { command, arguments: args });
  let settled: { ok: boolean; value: unknown } | undefined;
  reply.then(
    (v) => (settled = { ok: true, value: v }),
    (e) => (settled = { ok: false, value: e }),
  );
  await s.waitFor(
    `progress begin for ${command}`,
    () => s.progress.slice(since).some((p) => p.value.kind === 'begin') || (settled !== undefined && !settled.ok),
    T_JOB,
  );
  if (settled !== undefined && !settled.ok) throw settled.value;
  const token = s.progress.slice(since).find((p) => p.value.kind === 'begin')!.token;
  await s.waitFor(`progress end for ${command}`, () => s.progress.slice(since).some((p) => p.token === token && p.value.kind === 'end'), T_JOB);
  const result = await reply;
  assert.ok(settled?.ok, `${command} answered without error`);
  return { result, events: s.progress.slice(since).filter((p) => p.token === token) };
}

function checkProgressShape(events: ProgressEvent[]): void {
  assert.equal(events[0].value.kind, 'begin', 'progress starts with begin');
  assert.equal(events[events.length - 1].value.kind, 'end', 'progress ends with end');
  assert.equal(events.filter((e) => e.value.kind === 'begin').length, 1);
  assert.equal(events.filter((e) => e.value.kind === 'end').length, 1);
  assert.ok(typeof events[0].value.title === 'string' && events[0].value.title.length > 0, 'begin has a title');
  let last = -1;
  let sawPct = false;
  for (const e of events) {
    if (e.value.kind === 'end' || e.value.percentage === undefined) continue;
    sawPct = true;
    const p = e.value.percentage;
    assert.ok(Number.isInteger(p) && p >= 0 && p <= 100, `percentage ${p} in 0..100`);
    assert.ok(p >= last, `percentage does not go back (${last} → ${p})`);
    last = p;
  }
  assert.ok(sawPct, 'the job reports a percentage');
}

before(async () => {
  if (!fs.existsSync(BIN)) {
    if (EXPLICIT_BIN) throw new Error(`MKEVOLVE_BIN=${EXPLICIT_BIN} does not exist`);
    skipReason = `no mkevolve binary at ${BIN} (build it, or set MKEVOLVE_BIN)`;
    return;
  }
  workspace = fs.mkdtempSync(path.join(os.tmpdir(), 'mkevolve-vscode-e2e-'));
  const file = path.join(workspace, 'conv_bias_relu.py');
  fs.copyFileSync(EXAMPLE, file);
  moduleText = fs.readFileSync(file, 'utf8');
  moduleUri = fileUri(file);
  settings = testSettings();
  const s = startSession();
  initResult = await initialize(s);
  if (initResult === undefined) {
    const lacksLsp = s.exited !== undefined && /unknown command|usage:/i.test(s.stderr) && !/\bpanic|sanitizer|segmentation/i.test(s.stderr);
    await s.close();
    if (lacksLsp) {
      skipReason = `${BIN} has no working \`lsp\` subcommand yet (the language server of issue 6 is not merged): ${s.stderr.split('\n')[0]}`;
      return;
    }
    throw new Error(`the server did not answer initialize (${JSON.stringify(s.exited) ?? 'still running'})${s.tail()}`);
  }
  session = s;
  const offered: string[] = initResult.capabilities.executeCommandProvider?.commands ?? [];
  if (!SERVER_COMMAND_IDS.some((id) => offered.includes(id))) {
    // The engine backend (lsp/engine/lsp_engine.c) offers them: none at all is a regression.
    throw new Error(`the server offers none of ${SERVER_COMMAND_IDS.join(', ')} (offers: [${offered.join(', ')}])`);
  }
});

after(async () => {
  if (session) await session.close();
  if (workspace) fs.rmSync(workspace, { recursive: true, force: true });
});

test('initialize: the capabilities VS Code relies on', (t) => {
  if (!ready(t)) return;
  const caps = initResult!.capabilities;
  assert.match(initResult!.serverInfo?.name ?? '', /mkevolve/i);
  const sync = caps.textDocumentSync;
  const change = typeof sync === 'number' ? sync : sync?.change;
  assert.equal(change, 2, 'incremental document sync');
  if (typeof sync === 'object') assert.equal(sync.openClose, true);
  assert.ok(caps.positionEncoding === undefined || caps.positionEncoding === 'utf-16', 'UTF-16 positions');
  assert.ok(caps.hoverProvider, 'hover');
  assert.ok(caps.codeActionProvider, 'code actions');
  assert.ok(caps.codeLensProvider, 'code lenses (the client supports them)');
  assert.ok(caps.executeCommandProvider, 'executeCommandProvider');
});

test('initialize: the server offers the six mkevolve commands', (t) => {
  if (!readyForFeatures(t)) return;
  const commands: string[] = initResult!.capabilities.executeCommandProvider?.commands ?? [];
  const missing = SERVER_COMMAND_IDS.filter((id) => !commands.includes(id));
  assert.deepEqual(missing, [], `executeCommandProvider.commands lacks ${missing.join(', ')} (editors/vscode/README.md, "Commands")`);
});

test('initialized + configuration push and pull are accepted', async (t) => {
  const s = ready(t);
  if (!s) return;
  await s.notify('initialized', {});
  // What the extension sends on start (synchronize.configurationSection).
  await s.notify('workspace/didChangeConfiguration', didChangeConfigurationParams(settings));
  // A malformed push must not kill the server.
  await s.notify('workspace/didChangeConfiguration', { settings: { mkevolve: { budget: 'lots', tolerance: null } } });
  await s.notify('workspace/didChangeConfiguration', didChangeConfigurationParams(settings));
  // A request still gets its one answer (a result or an error) afterwards.
  await s.request('textDocument/hover', { textDocument: { uri: 'file:///nonexistent.py' }, position: { line: 0, character: 0 } }).catch(() => undefined);
  assert.equal(s.exited, undefined, 'server alive after configuration changes');
});

test('opening a KernelBench module publishes diagnostics', async (t) => {
  const s = ready(t);
  if (!s) return;
  await s.didOpen(moduleUri, moduleText);
  await s.waitFor('publishDiagnostics for the module', () => s.diagnostics.has(moduleUri), T_ANALYSIS);
  for (const d of latestDiagnostics(s, moduleUri)!) {
    assert.ok(d.range.start.line >= 0 && d.range.end.line < moduleText.split('\n').length, 'diagnostic inside the file');
    assert.ok([1, 2, 3, 4].includes(d.severity ?? 1), 'severity');
    assert.ok(d.message.length > 0);
  }
});

test('code lenses over forward', async (t) => {
  const s = readyForFeatures(t);
  if (!s) return;
  const forward = lineOf(moduleText, 'def forward');
  let lenses = await s.request<{ range: { start: { line: number } }; command?: { title: string; command: string } }[] | null>(
    'textDocument/codeLens',
    { textDocument: { uri: moduleUri } },
  );
  assert.ok(Array.isArray(lenses) && lenses.length > 0, 'lenses offered');
  if (initResult!.capabilities.codeLensProvider?.resolveProvider) {
    lenses = await Promise.all(lenses.map((l) => (l.command ? l : s.request<typeof l>('codeLens/resolve', l))));
  }
  assert.ok(lenses.some((l) => l.range.start.line === forward), `a lens on "def forward" (line ${forward})`);
  for (const l of lenses) {
    assert.ok(l.command, 'resolved lens has a command');
    assert.ok(l.command!.title.length > 0);
    assert.match(l.command!.command, /^mkevolve\./, 'lens runs a mkevolve command');
  }
});

test('code actions at a forward statement offer decompose', async (t) => {
  const s = readyForFeatures(t);
  if (!s) return;
  const line = lineOf(moduleText, 'x = self.conv(x)');
  const actions = await s.request<{ title: string; command?: { command: string } | string; edit?: unknown }[] | null>('textDocument/codeAction', {
    textDocument: { uri: moduleUri },
    range: { start: { line, character: 8 }, end: { line, character: 8 } },
    context: { diagnostics: [], triggerKind: 1 },
  });
  assert.ok(Array.isArray(actions) && actions.length > 0, 'actions offered');
  const ids = actions.map((a) => (typeof a.command === 'string' ? a.command : a.command?.command));
  assert.ok(ids.includes(SERVER_COMMANDS.decompose) || actions.some((a) => /decompose/i.test(a.title)), 'a decompose action');
});

test('decompose writes the composed ModelNew through workspace/applyEdit', async (t) => {
  const s = readyForFeatures(t);
  if (!s) return;
  const edits = s.appliedEdits.length;
  await s.request('workspace/executeCommand', { command: SERVER_COMMANDS.decompose, arguments: [{ uri: moduleUri }] });
  await s.waitFor('workspace/applyEdit from decompose', () => s.appliedEdits.length > edits, T_ANALYSIS);
  const composed = [...s.open.entries()].find(([uri, d]) => uri !== moduleUri && /class\s+ModelNew\b/.test(d.text));
  assert.ok(composed, `a composed file with class ModelNew was written (edits: ${JSON.stringify(s.appliedEdits.slice(edits)).slice(0, 400)})`);
  assert.ok(fs.existsSync(new URL(composed[0])), 'on disk');
  assert.equal(s.protocolErrors.length, 0, s.protocolErrors.join('; '));
});

test('evolve all: a cancellable background job with progress, then new diagnostics', async (t) => {
  const s = readyForFeatures(t);
  if (!s) return;
  const before = s.diagnostics.get(moduleUri)?.length ?? 0;
  const { events } = await runJob(s, SERVER_COMMANDS.evolveAll, [{ uri: moduleUri }]);
  checkProgressShape(events);
  assert.equal(events[0].value.cancellable, true, 'evolve is cancellable');
  await s.waitFor('diagnostics after evolve', () => (s.diagnostics.get(moduleUri)?.length ?? 0) > before, T_ANALYSIS);
  assert.equal(s.protocolErrors.length, 0, s.protocolErrors.join('; '));
});

test('hover on a forward statement shows a markdown table of variants', async (t) => {
  const s = readyForFeatures(t);
  if (!s) return;
  const line = lineOf(moduleText, 'x = self.conv(x)');
  const h = await s.request<{ contents: { kind: string; value: string } } | null>('textDocument/hover', {
    textDocument: { uri: moduleUri },
    position: { line, character: 10 },
  });
  assert.ok(h, 'hover result');
  assert.equal(h.contents.kind, 'markdown');
  assert.match(h.contents.value, /\|.*\|\n\|\s*:?-+/, 'a markdown table');
});

test('a cancelled job ends promptly', async (t) => {
  const s = readyForFeatures(t);
  if (!s) return;
  // A larger budget so the run cannot come straight from the cache.
  const bigger = { ...settings, budget: { ...settings.budget, proposals: 64, seconds: 600 } };
  await s.notify('workspace/didChangeConfiguration', didChangeConfigurationParams(bigger));
  const since = s.progress.length;
  let failed: unknown;
  const reply = s
    .request('workspace/executeCommand', { command: SERVER_COMMANDS.evolveAll, arguments: [{ uri: moduleUri }] })
    .catch((e) => (failed = e));
  await s.waitFor('progress begin', () => s.progress.slice(since).some((p) => p.value.kind === 'begin') || failed !== undefined, T_JOB);
  if (failed !== undefined && !s.progress.slice(since).some((p) => p.value.kind === 'begin')) throw failed;
  const token = s.progress.slice(since).find((p) => p.value.kind === 'begin')!.token;
  await s.notify('window/workDoneProgress/cancel', { token });
  await s.waitFor('progress end after cancel', () => s.progress.slice(since).some((p) => p.token === token && p.value.kind === 'end'), 30_000);
  await reply;
  await s.notify('workspace/didChangeConfiguration', didChangeConfigurationParams(settings));
});

test('edit + save re-verifies and republishes diagnostics', async (t) => {
  const s = ready(t);
  if (!s) return;
  const line = lineOf(moduleText, 'return torch.relu(x - 0.1)');
  const col = moduleText.split('\n')[line].indexOf('0.1');
  const before = s.diagnostics.get(moduleUri)?.length ?? 0;
  await s.didChange(moduleUri, { range: { start: { line, character: col }, end: { line, character: col + 3 } }, newText: '0.2' });
  await s.didSave(moduleUri);
  await s.waitFor('diagnostics after save', () => (s.diagnostics.get(moduleUri)?.length ?? 0) > before, T_JOB);
});

test('an unknown command is an error reply and the server lives on', async (t) => {
  const s = ready(t);
  if (!s) return;
  await assert.rejects(s.request('workspace/executeCommand', { command: 'mkevolve.noSuchCommand', arguments: [] }));
  // A document the server does not have: an error reply, or a message to
  // the user (window/showMessage, Error or Warning) — never silence.
  const shown = s.messages.length;
  const r = await s
    .request('workspace/executeCommand', { command: SERVER_COMMANDS.evolve, arguments: [{ uri: 'file:///not/open.py', position: { line: 0, character: 0 } }] })
    .then(
      () => 'answered',
      () => 'error',
    );
  if (r === 'answered') {
    await s.waitFor('a message about the unknown document', () =>
      s.messages.slice(shown).some((m) => m.method === 'window/showMessage' && [1, 2].includes((m.params as { type: number }).type)), 5_000);
  }
  assert.equal(s.exited, undefined);
});

test('the API key is never echoed by the server', (t) => {
  const s = ready(t);
  if (!s) return;
  assert.equal(s.stdout.includes(FAKE_KEY), false, 'not in any LSP message');
  assert.equal(s.stderr.includes(FAKE_KEY), false, 'not in the log');
});

test('shutdown and exit end the process with code 0', async (t) => {
  const s = ready(t);
  if (!s) return;
  assert.equal(s.unexpectedRequests.length, 0, `requests VS Code would refuse: ${s.unexpectedRequests.join(', ')}`);
  assert.equal(await s.request('shutdown', null), null);
  await s.notify('exit', null);
  await s.waitFor('process exit', () => s.exited !== undefined, 10_000);
  assert.deepEqual(s.exited, { code: 0, signal: null });
});

test('a killed server is restarted under the policy and serves again', async (t) => {
  if (skipReason) return t.skip(skipReason);
  const policy = new RestartPolicy(settings.server.maxRestarts, settings.server.restartWindowSeconds * 1000);
  const victim = startSession();
  assert.ok(await initialize(victim), 'first server initialised');
  victim.proc.kill('SIGKILL');
  await victim.waitFor('death', () => victim.exited !== undefined, 10_000);
  await victim.close();
  const d = policy.onCrash(Date.now());
  assert.equal(d.restart, true);
  await new Promise((r) => setTimeout(r, d.delayMs));
  const again = startSession();
  try {
    const r = await initialize(again);
    assert.ok(r, 'restarted server initialised');
    await again.notify('initialized', {});
    await again.didOpen(moduleUri, moduleText);
    await again.waitFor('diagnostics from the restarted server', () => again.diagnostics.has(moduleUri), T_ANALYSIS);
    assert.equal(await again.request('shutdown', null), null);
    await again.notify('exit', null);
    await again.waitFor('exit', () => again.exited !== undefined, 10_000);
    assert.equal(again.exited?.code, 0);
  } finally {
    await again.close();
  }
});
