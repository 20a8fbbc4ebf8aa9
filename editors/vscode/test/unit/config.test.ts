import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  DEFAULTS,
  configurationItem,
  defaultApiKeyEnv,
  didChangeConfigurationParams,
  readSettings,
  restartReasons,
  toServerSettings,
} from '../../src/config';

const from = (m: Record<string, unknown>) => (k: string) => m[k];

test('no settings: nothing of the engine is sent, so the server applies the engine defaults', () => {
  const { settings, warnings } = readSettings(from({}));
  assert.deepEqual(warnings, []);
  assert.deepEqual(settings, DEFAULTS);
  assert.deepEqual(toServerSettings(settings), {
    backend: 'auto',
    proposer: 'builtin',
    llm: { provider: 'openai', apiKeyEnv: 'OPENAI_API_KEY' },
    budget: {},
    beam: {},
    tolerance: {},
    timeout: {},
    composeMode: 'file',
    debounceMs: 400,
    codeLens: true,
  });
});

test('every setting reaches the server object under its documented name', () => {
  const { settings, warnings } = readSettings(
    from({
      serverPath: '/opt/mk/bin/mkevolve',
      pythonPath: ' /venv/bin/python ',
      backend: 'cpu',
      proposer: 'llm',
      'llm.provider': 'anthropic',
      'llm.model': 'claude-x',
      'llm.baseUrl': 'http://localhost:8000/v1',
      'llm.apiKeyEnv': 'MY_KEY',
      'budget.proposals': 12,
      'budget.tokens': 50000,
      'budget.seconds': 90.5,
      'tolerance.atol': 1e-3,
      'tolerance.rtol': 0,
      'beam.width': 6,
      'beam.depth': 0,
      trials: 3,
      kernelBackend: 'auto',
      'timeout.capture': 20,
      'timeout.verify': 900,
      composeMode: 'inplace',
      debounceMs: 150,
      codeLens: false,
    }),
  );
  assert.deepEqual(warnings, []);
  assert.deepEqual(toServerSettings(settings), {
    pythonPath: '/venv/bin/python',
    backend: 'cpu',
    proposer: 'llm',
    llm: { provider: 'anthropic', model: 'claude-x', baseUrl: 'http://localhost:8000/v1', apiKeyEnv: 'MY_KEY' },
    budget: { proposals: 12, tokens: 50000, seconds: 90.5 },
    beam: { width: 6, depth: 0 },
    tolerance: { atol: 1e-3, rtol: 0 },
    trials: 3,
    kernelBackend: 'auto',
    timeout: { capture: 20, verify: 900 },
    composeMode: 'inplace',
    debounceMs: 150,
    codeLens: false,
  });
  // serverPath is the client's business, not the server's.
  assert.equal(JSON.stringify(toServerSettings(settings)).includes('/opt/mk'), false);
});

test('the key variable defaults by provider', () => {
  assert.equal(defaultApiKeyEnv('openai'), 'OPENAI_API_KEY');
  assert.equal(defaultApiKeyEnv('anthropic'), 'ANTHROPIC_API_KEY');
  const { settings } = readSettings(from({ 'llm.provider': 'anthropic' }));
  assert.equal(toServerSettings(settings).llm.apiKeyEnv, 'ANTHROPIC_API_KEY');
});

test('bad values fall back to defaults with a warning each', () => {
  const { settings, warnings } = readSettings(
    from({
      backend: 'tpu',
      proposer: 3,
      'budget.proposals': 0,
      'beam.width': 0,
      'budget.tokens': 1.5,
      'budget.seconds': Number.NaN,
      'tolerance.atol': 2000,
      debounceMs: -5,
      codeLens: 'yes',
      'tolerance.rtol': 'tight',
      'llm.baseUrl': 'ftp://x',
      'server.maxRestarts': 1000,
      kernelBackend: 'ptx',
    }),
  );
  assert.equal(settings.backend, 'auto');
  assert.equal(settings.proposer, 'builtin');
  assert.deepEqual(settings.budget, DEFAULTS.budget);
  assert.deepEqual(settings.tolerance, DEFAULTS.tolerance);
  assert.equal(settings.llm.baseUrl, '');
  assert.equal(settings.server.maxRestarts, DEFAULTS.server.maxRestarts);
  assert.equal(settings.debounceMs, 400);
  assert.equal(settings.codeLens, true);
  assert.deepEqual(settings.beam, {});
  assert.equal(settings.kernelBackend, undefined);
  assert.equal(warnings.length, 13);
  for (const key of ['kernelBackend', 'debounceMs', 'codeLens', 'backend', 'proposer', 'budget.proposals', 'beam.width', 'budget.tokens', 'budget.seconds', 'tolerance.atol', 'tolerance.rtol', 'llm.baseUrl', 'server.maxRestarts']) {
    assert.ok(warnings.some((w) => w.startsWith(`mkevolve.${key} `)), `warning for ${key}`);
  }
});

test('a key pasted into apiKeyEnv is dropped and never echoed', () => {
  const secret = 'sk-proj-AbC123/xyz+secret';
  const { settings, warnings } = readSettings(from({ 'llm.apiKeyEnv': secret }));
  assert.equal(settings.llm.apiKeyEnv, '');
  assert.equal(toServerSettings(settings).llm.apiKeyEnv, 'OPENAI_API_KEY');
  assert.equal(warnings.length, 1);
  assert.equal(warnings[0].includes(secret), false);
  assert.equal(JSON.stringify(toServerSettings(settings)).includes(secret), false);
});

test('an apiKey setting is ignored with a warning', () => {
  const secret = 'sk-live-123456';
  const { settings, warnings } = readSettings(from({ 'llm.apiKey': secret }));
  assert.ok(warnings.some((w) => w.includes('mkevolve.llm.apiKey')));
  assert.equal(JSON.stringify(settings).includes(secret), false);
  assert.equal(warnings.join('').includes(secret), false);
});

test('didChangeConfiguration and workspace/configuration carry the same object', () => {
  const { settings } = readSettings(from({ backend: 'cuda', 'budget.tokens': 7 }));
  const server = toServerSettings(settings);
  assert.deepEqual(didChangeConfigurationParams(settings), { settings: { mkevolve: server } });
  assert.deepEqual(configurationItem(settings, 'mkevolve'), server);
  assert.deepEqual(configurationItem(settings, 'mkevolve.llm'), server.llm);
  assert.equal(configurationItem(settings, 'mkevolve.budget.tokens'), 7);
  assert.equal(configurationItem(settings, 'mkevolve.nothing'), null);
  assert.deepEqual(configurationItem(settings, undefined), { mkevolve: server });
});

test('only spawn-time settings need a restart', () => {
  const a = readSettings(from({})).settings;
  assert.deepEqual(restartReasons(a, readSettings(from({ backend: 'cpu', 'llm.model': 'm' })).settings), []);
  assert.equal(restartReasons(a, readSettings(from({ serverPath: '/x/mkevolve' })).settings).length, 1);
  assert.equal(restartReasons(a, readSettings(from({ 'llm.provider': 'anthropic' })).settings).length, 1);
  // Same effective variable: no restart.
  assert.deepEqual(restartReasons(a, readSettings(from({ 'llm.apiKeyEnv': 'OPENAI_API_KEY' })).settings), []);
});

test('an explicit 0 tolerance is sent as 0, not dropped for a default', () => {
  const { settings, warnings } = readSettings(from({ 'tolerance.atol': 0, 'tolerance.rtol': 0 }));
  assert.deepEqual(warnings, []);
  assert.deepEqual(toServerSettings(settings).tolerance, { atol: 0, rtol: 0 });
});
