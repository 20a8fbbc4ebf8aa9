import assert from 'node:assert/strict';
import { test } from 'node:test';
import type * as vscodeTypes from 'vscode';
import { ApiKeyStore, buildServerEnv, checkKey, redact, secretName } from '../../src/secrets';
import { MemorySecretStorage } from '../mock/vscode';

const storage = () => new MemorySecretStorage();
const asSecretStorage = (s: MemorySecretStorage) => s as unknown as vscodeTypes.SecretStorage;

test('keys are stored per provider under our own names, trimmed', async () => {
  const s = storage();
  const store = new ApiKeyStore(asSecretStorage(s));
  await store.set('openai', '  sk-openai-1  ');
  await store.set('anthropic', 'sk-ant-2');
  assert.equal(await store.get('openai'), 'sk-openai-1');
  assert.equal(await store.get('anthropic'), 'sk-ant-2');
  assert.deepEqual([...s.data.keys()].sort(), [secretName('anthropic'), secretName('openai')].sort());
  await store.delete('openai');
  assert.equal(await store.get('openai'), undefined);
  assert.equal(await store.get('anthropic'), 'sk-ant-2');
});

test('bad keys are refused and nothing is stored', async () => {
  const s = storage();
  const store = new ApiKeyStore(asSecretStorage(s));
  for (const bad of ['', '   ', 'two\nlines', 'has space', 'x'.repeat(5000)]) {
    assert.equal(checkKey(bad).ok, false, JSON.stringify(bad.slice(0, 20)));
    await assert.rejects(store.set('openai', bad));
  }
  assert.equal(s.data.size, 0);
});

test('onDidChange reports our providers only', async () => {
  const s = storage();
  const store = new ApiKeyStore(asSecretStorage(s));
  const seen: string[] = [];
  const d = store.onDidChange((p) => seen.push(p));
  await store.set('anthropic', 'k1');
  await s.store('someone.else', 'x');
  await store.delete('anthropic');
  d.dispose();
  await store.set('openai', 'k2');
  assert.deepEqual(seen, ['anthropic', 'anthropic']);
});

test('server env: stored key overrides the inherited variable', () => {
  const e = buildServerEnv({ PATH: '/bin', OPENAI_API_KEY: 'from-env', EMPTY: undefined }, 'OPENAI_API_KEY', 'from-store');
  assert.equal(e.env.OPENAI_API_KEY, 'from-store');
  assert.equal(e.env.PATH, '/bin');
  assert.equal('EMPTY' in e.env, false);
  assert.equal(e.source, 'secret storage');
});

test('server env: the environment is used when nothing is stored, and nothing invented', () => {
  assert.equal(buildServerEnv({ ANTHROPIC_API_KEY: 'k' }, 'ANTHROPIC_API_KEY', undefined).source, 'environment');
  const none = buildServerEnv({ PATH: '/bin' }, 'MY_KEY', undefined);
  assert.equal(none.source, 'none');
  assert.equal('MY_KEY' in none.env, false);
  assert.equal(buildServerEnv({ MY_KEY: '' }, 'MY_KEY', '').source, 'none');
});

test('server env: the base environment is not modified', () => {
  const base: Record<string, string | undefined> = { A: '1' };
  buildServerEnv(base, 'OPENAI_API_KEY', 'secret');
  assert.deepEqual(base, { A: '1' });
});

test('server env: a bad variable name is refused without echoing anything', () => {
  assert.throws(() => buildServerEnv({}, 'sk-live-key', 'secret'), (e: Error) => !e.message.includes('sk-live-key') && !e.message.includes('secret'));
});

test('redact removes every occurrence of the keys', () => {
  const out = redact('auth failed for key sk-abcdef (sk-abcdef)', ['sk-abcdef', undefined, 'xy']);
  assert.equal(out.includes('sk-abcdef'), false);
  assert.equal(out, 'auth failed for key «redacted» («redacted»)');
});
