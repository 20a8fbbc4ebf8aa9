/* The manifest (package.json) and the code agree: every setting the
 * extension reads is contributed with the same default, every command the
 * code registers is contributed, and activation/engines are what VS Code
 * needs. The packaged .vsix is checked again by tests/suites/50-vscode.sh. */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { CLIENT_COMMANDS, SERVER_COMMAND_IDS } from '../../src/commands';
import { DEFAULTS, readSettings } from '../../src/config';

const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'package.json'), 'utf8'));

function at(obj: unknown, dotted: string): unknown {
  return dotted.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], obj);
}

test('every setting read is contributed with the same default', () => {
  const props = pkg.contributes.configuration.properties as Record<string, { default: unknown }>;
  const read: string[] = [];
  readSettings((k) => {
    read.push(k);
    return undefined;
  });
  for (const key of read) {
    if (key === 'llm.apiKey') continue; // read only to warn about it
    const decl = props[`mkevolve.${key}`];
    assert.ok(decl, `mkevolve.${key} is contributed`);
    assert.deepEqual(decl.default, at(DEFAULTS, key), `default of mkevolve.${key}`);
  }
  assert.equal(props['mkevolve.llm.apiKey'], undefined, 'no setting holds a key');
  assert.ok(props['mkevolve.trace.server'], 'trace setting for the client');
});

test('commands, activation and engines', () => {
  const contributed = new Set((pkg.contributes.commands as { command: string }[]).map((c) => c.command));
  for (const id of [...SERVER_COMMAND_IDS, ...Object.values(CLIENT_COMMANDS)]) assert.ok(contributed.has(id), id);
  assert.ok(pkg.activationEvents.includes('onLanguage:python'));
  assert.equal(pkg.engines.vscode, '^1.82.0');
  assert.equal(pkg.main, './dist/extension.js');
});
