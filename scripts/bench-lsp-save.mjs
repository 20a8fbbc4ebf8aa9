#!/usr/bin/env node
/* bench-lsp-save.mjs — save -> diagnostic latency of editable variants
 * (issue #18 item 5: "saving a change to one CUDA subkernel re-verifies
 * just that subkernel; measure save -> diagnostic ... warm (target < 2 s)").
 *
 * Starts the real `mkevolve lsp --stdio`, opens examples/conv_bias_relu.py
 * in a temp workspace, waits for its analysis, runs mkevolve.editVariant on
 * its subkernel and opens the edit file (its first verification: warm-up).
 * Then, N times per row, it changes the edit file (didChange, waits for
 * that version's publication), saves it (didSave; the file is written
 * first, as an editor does) and measures didSave -> the publishDiagnostics
 * that carries the verdict on the edit file:
 *   - a CUDA candidate with an undeclared identifier: NVRTC compiles it in
 *     the server (no GPU, no worker) and the error lands at its line; each
 *     save changes a comment inside the CUDA source, so every save is a
 *     real compile (no cache hit);
 *   - a correct PyTorch edit (the reference with a changing comment): a
 *     verification in a worker, a cache miss every time; untimed on a CPU
 *     worker, timed (trials) on a GPU one.
 * The session (workers, torch imported) is warm: this is the editing loop.
 *
 * Usage: node scripts/bench-lsp-save.mjs [--bin build/mkevolve] [--n 20]
 *          [--python .venv/bin/python] [--backend cpu|auto|cuda] [--out docs/bench/lsp-save-cpu.md]
 * Needs editors/vscode/node_modules. Not a test: it fails only when the
 * server misbehaves (a wrong or missing verdict), never on numbers. */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { REPO, Server, headCommit, machine, nowMs, stats } from './lsp-bench-client.mjs';

function parseArgs(argv) {
  const o = {
    bin: process.env.MKEVOLVE_BIN || path.join(REPO, 'build', 'mkevolve'),
    n: 20,
    python: fs.existsSync(path.join(REPO, '.venv', 'bin', 'python')) ? path.join(REPO, '.venv', 'bin', 'python') : undefined,
    backend: 'cpu',
    out: undefined,
    timeoutMs: 300_000,
  };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--bin') o.bin = path.resolve(v());
    else if (a === '--n') o.n = Number(v());
    else if (a === '--python') o.python = path.resolve(v());
    else if (a === '--backend') o.backend = v();
    else if (a === '--out') o.out = path.resolve(v());
    else if (a === '--timeout-ms') o.timeoutMs = Number(v());
    else if (a === '-h' || a === '--help') {
      console.log('usage: node scripts/bench-lsp-save.mjs [--bin PATH] [--n 20] [--python PATH] [--backend cpu|auto|cuda] [--out FILE.md]');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(o.n) || o.n < 1) throw new Error('--n must be a positive integer');
  if (!fs.existsSync(o.bin)) throw new Error(`no server binary at ${o.bin} (cmake --build build, or --bin)`);
  return o;
}

const cudaEdit = (k) => `import torch

MK_BACKEND = "cuda"
MK_CUDA_SOURCE = r"""
// save ${k}
extern "C" __global__ void k(const float *x, float *y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = fmaxf(x[i] * undeclared_scale, 0.0f);
}
"""
MK_CUDA_KERNELS = {"k": "ffq"}


def run(x, *rest):
    y = torch.empty_like(x)
    _mk_cuda.launch("k", ((y.numel() + 255) // 256,), (256,), (x.contiguous(), y, y.numel()))
    return y
`;
const CUDA_ERROR_LINE = 9; // 1-based line of undeclared_scale in cudaEdit

const codeOf = (d) => String(d.code ?? '');

/* didChange to `text` (waits for that version's publication), then didSave;
 * the time until the first publication after the save that `done` accepts. */
async function saveAndWait(srv, doc, text, done) {
  doc.version++;
  const version = doc.version;
  fs.writeFileSync(doc.path, text);
  await srv.notify('textDocument/didChange', { textDocument: { uri: doc.uri, version }, contentChanges: [{ text }] });
  await srv.waitFor(`publication of version ${version}`, () => (srv.publishes.get(doc.uri) ?? []).some((p) => p.version === version), 30_000);
  const before = srv.publishes.get(doc.uri).length;
  const t0 = nowMs();
  await srv.notify('textDocument/didSave', { textDocument: { uri: doc.uri } });
  const found = () => (srv.publishes.get(doc.uri) ?? []).slice(before).find((p) => done(p.diagnostics));
  await srv.waitFor('the verdict after the save', () => found() !== undefined, 120_000);
  const p = found();
  return { ms: p.at - t0, diagnostics: p.diagnostics };
}

async function run(o) {
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'mk-bench-save-'));
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mk-bench-save-cache-'));
  const file = path.join(ws, 'conv_bias_relu.py');
  const text = fs.readFileSync(path.join(REPO, 'examples', 'conv_bias_relu.py'), 'utf8');
  fs.writeFileSync(file, text);
  const env = { ...process.env, MKEVOLVE_CACHE_DIR: cacheDir };
  if (o.backend === 'cpu') env.TRITON_INTERPRET = '1';
  const srv = new Server(o.bin, env, ws);
  const uri = pathToFileURL(file).href;
  try {
    const settings = { backend: o.backend, proposer: 'builtin', debounceMs: 0, codeLens: false };
    if (o.python) settings.pythonPath = o.python;
    await srv.request('initialize', {
      processId: process.pid,
      rootUri: pathToFileURL(ws).href,
      capabilities: { window: { workDoneProgress: true }, textDocument: { publishDiagnostics: {} } },
      initializationOptions: settings,
    });
    await srv.notify('initialized', {});
    await srv.notify('textDocument/didOpen', { textDocument: { uri, languageId: 'python', version: 1, text } });
    await srv.waitFor('the module analysis', () => (srv.publishes.get(uri) ?? []).some((p) => p.diagnostics.some((d) => codeOf(d).startsWith('subkernel-'))), o.timeoutMs);
    const t0 = nowMs();
    const r = await srv.request('workspace/executeCommand', { command: 'mkevolve.editVariant', arguments: [{ uri, subkernel: 0 }] });
    const editCommandMs = nowMs() - t0;
    if (!r || typeof r.uri !== 'string') throw new Error(`editVariant answered ${JSON.stringify(r)}`);
    const doc = { uri: r.uri, path: fileURLToPath(r.uri), version: 1 };
    const reference = fs.readFileSync(doc.path, 'utf8');
    const t1 = nowMs();
    await srv.notify('textDocument/didOpen', { textDocument: { uri: doc.uri, languageId: 'python', version: 1, text: reference } });
    const verdict = (d) => d.some((x) => codeOf(x) === 'edit-verified');
    await srv.waitFor('the first verification (didOpen)', () => (srv.publishes.get(doc.uri) ?? []).some((p) => verdict(p.diagnostics)), o.timeoutMs);
    const firstMs = (srv.publishes.get(doc.uri).find((p) => verdict(p.diagnostics)).at) - t1;
    const firstMsg = srv.publishes.get(doc.uri).find((p) => verdict(p.diagnostics)).diagnostics.find((x) => codeOf(x) === 'edit-verified').message;

    const cuda = [];
    let nvrtcMsg = '';
    for (let i = 0; i < o.n + 2; i++) {
      const { ms, diagnostics } = await saveAndWait(srv, doc, cudaEdit(i), (d) => d.some((x) => codeOf(x) === 'edit-compile-error'));
      const e = diagnostics.find((x) => codeOf(x) === 'edit-compile-error');
      nvrtcMsg = e.message;
      if (!/need NVRTC/.test(e.message) && e.range.start.line !== CUDA_ERROR_LINE - 1)
        throw new Error(`the CUDA error is on line ${e.range.start.line + 1}, not ${CUDA_ERROR_LINE}: ${e.message}`);
      if (i >= 2) cuda.push(ms); // 2 warm-up saves
    }
    const good = [];
    let goodMsg = '';
    for (let i = 0; i < o.n + 2; i++) {
      const { ms, diagnostics } = await saveAndWait(srv, doc, `${reference}\n# save ${i}\n`, (d) => d.some((x) => codeOf(x) === 'edit-verified' || codeOf(x).startsWith('edit-')));
      const v = diagnostics.find((x) => codeOf(x) === 'edit-verified');
      if (!v) throw new Error(`the correct edit did not verify: ${JSON.stringify(diagnostics)}`);
      goodMsg = v.message;
      if (i >= 2) good.push(ms);
    }
    return { editCommandMs, firstMs, firstMsg, cuda: stats(cuda), nvrtcMsg, good: stats(good), goodMsg };
  } finally {
    await srv.stop();
    fs.rmSync(ws, { recursive: true, force: true });
    fs.rmSync(cacheDir, { recursive: true, force: true });
  }
}

const fmt = (x) => x.toFixed(1);

async function main() {
  const o = parseArgs(process.argv);
  process.stderr.write(`bench-lsp-save: backend ${o.backend}, N=${o.n}...\n`);
  const r = await run(o);
  const command = `node scripts/bench-lsp-save.mjs ${process.argv.slice(2).join(' ')}`.trim();
  const commit = headCommit();
  const onCpu = o.backend === 'cpu';
  let md = `# Save an edit file → diagnostics (\`scripts/bench-lsp-save.mjs\`)\n\n`;
  md += `Generated by the script; see its header for what is measured. Target (issue #18 item 5): < 2 s warm, on a GPU.\n\n`;
  if (onCpu)
    md += `**CPU numbers** (backend=cpu: no GPU; the worker verifies on the CPU, untimed). The GPU warm number is measured on the device machine with:\n\n` +
      '```\ncmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build -j\n' +
      'node scripts/bench-lsp-save.mjs --bin build/mkevolve --python .venv/bin/python --backend auto --n 20 --out docs/bench/lsp-save-gpu.md\n```\n\n';
  md += `- Machine: ${machine()}\n`;
  md += `- Server: \`${path.relative(REPO, o.bin) || o.bin}\` (\`mkevolve lsp --stdio\`), backend=${o.backend}, debounceMs=0; commit ${commit}; ${new Date().toISOString()}\n`;
  md += `- Command: \`${command}\`\n`;
  md += `- Module: examples/conv_bias_relu.py (one subkernel: conv2d + add + mul + gelu + sub + relu); N=${o.n} saves per row after 2 warm-up saves; a fresh engine cache, every save a new text (no cache hit)\n\n`;
  md += `| save of the edit file → publishDiagnostics | n | median ms | p95 ms | max ms | min ms |\n|---|---:|---:|---:|---:|---:|\n`;
  md += `| CUDA candidate, compile error (NVRTC in the server, no worker) | ${r.cuda.n} | ${fmt(r.cuda.median)} | ${fmt(r.cuda.p95)} | ${fmt(r.cuda.max)} | ${fmt(r.cuda.min)} |\n`;
  md += `| correct PyTorch edit (verified in a ${onCpu ? 'CPU worker, untimed' : 'worker'}) | ${r.good.n} | ${fmt(r.good.median)} | ${fmt(r.good.p95)} | ${fmt(r.good.max)} | ${fmt(r.good.min)} |\n\n`;
  md += `Once, before the rows: \`mkevolve.editVariant\` answered in ${fmt(r.editCommandMs)} ms; opening the edit file → its first verdict ${fmt(r.firstMs)} ms.\n\n`;
  md += `The verdicts as the editor shows them:\n\n- CUDA: \`${r.nvrtcMsg}\` (line ${CUDA_ERROR_LINE})\n- correct edit: \`${r.goodMsg}\`\n`;
  process.stdout.write(md);
  if (o.out) {
    fs.mkdirSync(path.dirname(o.out), { recursive: true });
    fs.writeFileSync(o.out, md);
    process.stderr.write(`bench-lsp-save: wrote ${path.relative(REPO, o.out)}\n`);
  }
}

main().catch((e) => {
  console.error(`bench-lsp-save: ${e.stack ?? e}`);
  process.exit(1);
});
