/* peer.ts — a scripted LSP peer for the activation test: it plays the
 * server's side just enough to observe the extension (what it is started
 * with, what it sends) and to drive it (progress, a crash). It is not the
 * MKEvolve server; the real one is exercised by test/e2e. Every message
 * received is appended to $PEER_LOG as a JSON line. */
import * as fs from 'node:fs';
import * as rpc from 'vscode-jsonrpc/node';

const log = process.env.PEER_LOG!;
const record = (what: unknown) => fs.appendFileSync(log, JSON.stringify(what) + '\n');
record({ event: 'start', argv: process.argv.slice(2), key: process.env[process.env.PEER_KEY_VAR ?? 'OPENAI_API_KEY'] ?? null, pid: process.pid });

const c = rpc.createMessageConnection(new rpc.StreamMessageReader(process.stdin), new rpc.StreamMessageWriter(process.stdout));
const commands = ['mkevolve.decompose', 'mkevolve.evolve', 'mkevolve.evolveAll', 'mkevolve.swap', 'mkevolve.restore', 'mkevolve.openReport', 'mkevolve.peer.extra'];
let shutdown = false;

c.onRequest('initialize', (p: unknown) => {
  record({ method: 'initialize', params: p });
  return { capabilities: { textDocumentSync: 2, executeCommandProvider: { commands } }, serverInfo: { name: 'peer' } };
});
c.onNotification((method: string, params: unknown) => record({ method, params }));
c.onRequest('workspace/executeCommand', async (p: { command: string; arguments?: unknown[] }) => {
  record({ method: 'workspace/executeCommand', params: p });
  if (p.command === 'mkevolve.evolveAll') {
    await c.sendRequest('window/workDoneProgress/create', { token: 'job-1' });
    await c.sendNotification('$/progress', { token: 'job-1', value: { kind: 'begin', title: 'Evolve all', percentage: 0, cancellable: true } });
    await c.sendNotification('$/progress', { token: 'job-1', value: { kind: 'report', message: 'subkernel 1/2', percentage: 50 } });
    return { started: 'job-1' };
  }
  if (p.command === 'mkevolve.peer.extra') {
    await c.sendNotification('$/progress', { token: 'job-1', value: { kind: 'end', message: 'done' } });
    return null;
  }
  const first = (p.arguments ?? [])[0] as { crash?: boolean } | undefined;
  if (p.command === 'mkevolve.restore' && first?.crash) process.exit(3);
  if (p.command === 'mkevolve.openReport') return { uri: 'file:///tmp/report.html' };
  return { echo: p.arguments ?? [] };
});
c.onRequest('shutdown', () => {
  shutdown = true;
  return null;
});
c.onNotification('exit', () => process.exit(shutdown ? 0 : 1));
c.onRequest((method: string, params: unknown) => {
  record({ method, params });
  return null;
});
c.listen();
