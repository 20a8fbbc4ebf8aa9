import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ResolveEnv, resolveServerPath } from '../../src/serverPath';

function env(executables: string[], over: Partial<ResolveEnv> = {}): ResolveEnv {
  const set = new Set(executables);
  return {
    pathVar: '/usr/local/bin:/usr/bin::/opt/mk/bin',
    home: '/home/u',
    workspaceFolder: '/ws',
    platform: 'linux',
    isExecutable: (f) => set.has(f),
    ...over,
  };
}

test('found on PATH, first match wins', () => {
  assert.deepEqual(resolveServerPath('', env(['/opt/mk/bin/mkevolve', '/usr/bin/mkevolve'])), { ok: true, path: '/usr/bin/mkevolve' });
});

test('not on PATH: a message that says how to fix it', () => {
  const r = resolveServerPath('', env([]));
  assert.equal(r.ok, false);
  assert.match((r as { message: string }).message, /mkevolve\.serverPath/);
});

test('configured path: absolute, home, workspace-relative, ${workspaceFolder}', () => {
  assert.deepEqual(resolveServerPath('/x/mkevolve', env(['/x/mkevolve'])), { ok: true, path: '/x/mkevolve' });
  assert.deepEqual(resolveServerPath('~/bin/mkevolve', env(['/home/u/bin/mkevolve'])), { ok: true, path: '/home/u/bin/mkevolve' });
  assert.deepEqual(resolveServerPath('build/mkevolve', env(['/ws/build/mkevolve'])), { ok: true, path: '/ws/build/mkevolve' });
  assert.deepEqual(resolveServerPath('${workspaceFolder}/build/mkevolve', env(['/ws/build/mkevolve'])), { ok: true, path: '/ws/build/mkevolve' });
});

test('configured path is never silently replaced by PATH', () => {
  const r = resolveServerPath('/missing/mkevolve', env(['/usr/bin/mkevolve']));
  assert.equal(r.ok, false);
  assert.match((r as { message: string }).message, /not an executable/);
});

test('relative path without a folder is an error', () => {
  assert.equal(resolveServerPath('build/mkevolve', env(['/ws/build/mkevolve'], { workspaceFolder: undefined })).ok, false);
  assert.equal(resolveServerPath('${workspaceFolder}/m', env([], { workspaceFolder: undefined })).ok, false);
});

test('Windows: PATHEXT and ; separator', () => {
  const e = env(['C:\\mk\\mkevolve.exe'], { platform: 'win32', pathVar: 'C:\\mk;C:\\other', pathExt: '.EXE;.CMD' });
  assert.deepEqual(resolveServerPath('', e), { ok: true, path: 'C:\\mk\\mkevolve.exe' });
  assert.deepEqual(resolveServerPath('C:\\mk\\mkevolve', e), { ok: true, path: 'C:\\mk\\mkevolve.exe' });
});
