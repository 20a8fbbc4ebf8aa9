// Bundles the extension into dist/extension.js (vscode stays external: the
// editor provides it). `--production` minifies and drops source maps.
import * as esbuild from 'esbuild';

const production = process.argv.includes('--production');
await esbuild.build({
  entryPoints: ['src/extension.ts'],
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node18', // VS Code 1.82's Electron ships Node 18
  outfile: 'dist/extension.js',
  external: ['vscode'],
  minify: production,
  sourcemap: !production,
  logLevel: 'warning',
});
