/* register.ts — makes `require('vscode')` load the mock (preloaded with
 * `node --require`), so modules that import vscode run under Node. Names
 * the mock does not define resolve to inert classes: vscode-languageclient
 * subclasses many API classes at load time and never needs them here. */
import Module = require('module');
import * as path from 'path';

const mockPath = path.join(__dirname, 'vscode.js');
const M = Module as unknown as { _resolveFilename: (request: string, ...rest: unknown[]) => string };
const original = M._resolveFilename;
M._resolveFilename = function (request: string, ...rest: unknown[]): string {
  if (request === 'vscode') return mockPath;
  return original.call(this, request, ...rest);
};

// eslint-disable-next-line @typescript-eslint/no-require-imports
const real = require(mockPath) as Record<string, unknown>;
const inert = new Map<string, unknown>();
require.cache[mockPath]!.exports = new Proxy(real, {
  get(target, prop) {
    if (typeof prop !== 'string' || prop in target) return (target as Record<string | symbol, unknown>)[prop];
    if (!/^[A-Z]/.test(prop)) return undefined;
    if (!inert.has(prop)) inert.set(prop, class {});
    return inert.get(prop);
  },
});
