/* register.ts — makes `require('vscode')` load the mock below (preloaded
 * with `node --require`), so modules that import vscode run under Node. */
import Module = require('module');
import * as path from 'path';

const mock = path.join(__dirname, 'vscode.js');
const M = Module as unknown as { _resolveFilename: (request: string, ...rest: unknown[]) => string };
const original = M._resolveFilename;
M._resolveFilename = function (request: string, ...rest: unknown[]): string {
  if (request === 'vscode') return mock;
  return original.call(this, request, ...rest);
};
