/* extension.ts — the MKEvolve VS Code extension: starts `mkevolve lsp
 * --stdio` for Python files, keeps it configured and running, and gives
 * the server's actions a palette, a status bar item and an API key store.
 *
 * Everything decided here without VS Code (settings mapping, restart
 * policy, status text, key checks) lives in the small modules next to this
 * one and is unit-tested; this file wires them to the editor. */
import * as cp from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import {
  CloseAction,
  CloseHandlerResult,
  DidChangeConfigurationNotification,
  ErrorAction,
  ErrorHandlerResult,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  Message,
  State,
  StreamInfo,
  WorkDoneProgressCancelNotification,
} from 'vscode-languageclient/node';
import { CLIENT_COMMANDS, SERVER_COMMANDS, SERVER_COMMAND_IDS, actionsFor, needsDocument, paletteArgument, reportUri } from './commands';
import {
  ExtensionSettings,
  Provider,
  configurationItem,
  didChangeConfigurationParams,
  effectiveApiKeyEnv,
  readSettings,
  restartReasons,
  toServerSettings,
} from './config';
import { RestartPolicy } from './restart';
import { ApiKeyStore, buildServerEnv, checkKey, redact } from './secrets';
import { ResolveEnv, expandPath, resolveServerPath } from './serverPath';
import { ProgressValue, StatusBar } from './status';

const CLIENT_ID = 'mkevolve';
const CLIENT_NAME = 'MKEvolve';
const REQUEST_CANCELLED = -32800;
const STOP_TIMEOUT_MS = 5000;

const COMMAND_TITLES: Record<string, string> = {
  [SERVER_COMMANDS.decompose]: 'Decompose into subkernels',
  [SERVER_COMMANDS.evolve]: 'Evolve subkernel',
  [SERVER_COMMANDS.evolveAll]: 'Evolve all subkernels',
  [SERVER_COMMANDS.swap]: 'Swap subkernel variant',
  [SERVER_COMMANDS.restore]: 'Restore PyTorch reference',
  [SERVER_COMMANDS.openReport]: 'Open report',
  [SERVER_COMMANDS.editVariant]: 'Edit subkernel variant',
};

const PROVIDER_LABELS: Record<Provider, string> = {
  openai: 'OpenAI-compatible (OpenAI, vLLM, SGLang, Ollama, OpenRouter, DeepSeek…)',
  anthropic: 'Anthropic',
};

function readNow(): { settings: ExtensionSettings; warnings: string[] } {
  const cfg = vscode.workspace.getConfiguration('mkevolve');
  const r = readSettings((key) => {
    // Only what the user (or a workspace) set counts; unset keys take our
    // defaults, which equal those declared in package.json.
    const i = cfg.inspect(key);
    if (!i) return undefined;
    return i.workspaceFolderValue ?? i.workspaceValue ?? i.globalValue;
  });
  // The server gets an absolute interpreter path, written the way users
  // write paths in VS Code settings (~, ${workspaceFolder}, relative).
  if (r.settings.pythonPath !== '') {
    const folder = firstFolder();
    const p = expandPath(r.settings.pythonPath, { ...pathEnv(), workspaceFolder: folder });
    r.settings.pythonPath = path.isAbsolute(p) || folder === undefined ? p : path.resolve(folder, p);
  }
  return r;
}

function pathEnv(): ResolveEnv {
  return {
    pathVar: process.env.PATH,
    home: process.env.HOME ?? process.env.USERPROFILE,
    workspaceFolder: firstFolder(),
    platform: process.platform,
    pathExt: process.env.PATHEXT,
    isExecutable,
  };
}

function isExecutable(file: string): boolean {
  try {
    const st = fs.statSync(file);
    if (!st.isFile()) return false;
    if (process.platform === 'win32') return true;
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function firstFolder(): string | undefined {
  const f = vscode.workspace.workspaceFolders;
  return f && f.length > 0 && f[0].uri.scheme === 'file' ? f[0].uri.fsPath : undefined;
}

function alive(proc: cp.ChildProcess): boolean {
  return proc.exitCode === null && proc.signalCode === null;
}

/* Waits for a server process to end after shutdown/exit; SIGTERM after a
 * grace period, SIGKILL after another. */
async function reap(proc: cp.ChildProcess): Promise<void> {
  const exited = new Promise<void>((r) => (alive(proc) ? proc.once('exit', () => r()) : r()));
  const within = (ms: number) =>
    Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
  if (await within(1000)) return;
  proc.kill('SIGTERM');
  if (await within(2000)) return;
  proc.kill('SIGKILL');
  await within(2000);
}

/* Owns the LanguageClient and the server process across restarts. */
class Server implements vscode.Disposable {
  client: LanguageClient | undefined;
  private proc: cp.ChildProcess | undefined;
  private settings: ExtensionSettings;
  private readonly shownWarnings = new Set<string>();
  private readonly policy: RestartPolicy;
  private failed = false;
  private starting: Promise<boolean> | undefined;
  private storedKey: string | undefined;

  constructor(
    readonly output: vscode.OutputChannel,
    private readonly trace: vscode.OutputChannel,
    readonly status: StatusBar,
    readonly keys: ApiKeyStore,
  ) {
    const r = readNow();
    this.settings = r.settings;
    this.showWarnings(r.warnings);
    this.policy = new RestartPolicy(this.settings.server.maxRestarts, this.settings.server.restartWindowSeconds * 1000);
  }

  get current(): ExtensionSettings {
    return this.settings;
  }

  isRunning(): boolean {
    return this.client !== undefined && this.client.state === State.Running;
  }

  private showWarnings(warnings: string[]): void {
    for (const w of warnings) {
      if (this.shownWarnings.has(w)) continue;
      this.shownWarnings.add(w);
      this.output.appendLine(`[settings] ${w}`);
      void vscode.window.showWarningMessage(`MKEvolve: ${w}`);
    }
  }

  /* Starts the client unless it is running; resolves to whether it runs. */
  start(): Promise<boolean> {
    if (this.isRunning()) return Promise.resolve(true);
    if (!this.starting) this.starting = this.doStart().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async doStart(): Promise<boolean> {
    this.failed = false;
    const resolved = resolveServerPath(this.settings.serverPath, pathEnv());
    if (!resolved.ok) {
      this.fail(resolved.message, true);
      return false;
    }
    const serverPath = resolved.path;
    this.output.appendLine(`[client] server: ${serverPath} lsp --stdio`);

    const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, () => this.spawn(serverPath), this.clientOptions());
    this.ownServerCommands(client);
    client.onDidChangeState((e) => {
      if (this.client !== client) return;
      if (e.newState === State.Starting) this.status.setServer('starting');
      else if (e.newState === State.Running) this.status.setServer('running');
      else if (!this.failed) this.status.setServer('stopped');
    });
    this.client = client;
    this.status.setServer('starting');
    try {
      await client.start();
      return true;
    } catch (e) {
      if (this.client === client) this.fail(`The MKEvolve server did not start: ${(e as Error).message}`, false);
      return false;
    }
  }

  /* Spawns the server with the key in its environment; stderr goes to the
   * output channel with the key redacted. Called again on every restart,
   * so a restart after a crash picks up the current key and settings. */
  private async spawn(serverPath: string): Promise<StreamInfo> {
    const variable = effectiveApiKeyEnv(this.settings);
    this.storedKey = await this.keys.get(this.settings.llm.provider);
    const env = buildServerEnv(process.env, variable, this.storedKey);
    this.output.appendLine(`[client] API key: ${env.source === 'none' ? `none (${variable} unset)` : `${variable} from ${env.source}`}`);
    const cwd = firstFolder() ?? path.dirname(serverPath);
    const proc = cp.spawn(serverPath, ['lsp', '--stdio'], { cwd, env: env.env, stdio: ['pipe', 'pipe', 'pipe'] });
    await new Promise<void>((resolve, reject) => {
      proc.once('spawn', () => resolve());
      proc.once('error', (err) => reject(new Error(`cannot run ${serverPath}: ${err.message}`)));
    });
    this.proc = proc;
    const key = this.storedKey;
    proc.stderr!.setEncoding('utf8');
    proc.stderr!.on('data', (chunk: string) => this.output.append(redact(chunk, [key, process.env[variable]])));
    proc.on('exit', (code, signal) => {
      this.output.appendLine(`[client] server process ${proc.pid} exited (${signal ? `signal ${signal}` : `code ${code}`})`);
      if (this.proc === proc) this.proc = undefined;
    });
    return { reader: proc.stdout!, writer: proc.stdin! };
  }

  private clientOptions(): LanguageClientOptions {
    return {
      documentSelector: [
        { scheme: 'file', language: 'python' },
        { scheme: 'untitled', language: 'python' },
      ],
      outputChannel: this.output,
      traceOutputChannel: this.trace,
      diagnosticCollectionName: 'mkevolve',
      // A function: a restart after a crash sends the current settings.
      initializationOptions: () => toServerSettings(this.settings),
      synchronize: { configurationSection: 'mkevolve' },
      markdown: { isTrusted: { enabledCommands: [...SERVER_COMMAND_IDS] }, supportHtml: false },
      errorHandler: {
        error: (_error: Error, _message: Message | undefined, count: number | undefined): ErrorHandlerResult =>
          count !== undefined && count <= 3 ? { action: ErrorAction.Continue } : { action: ErrorAction.Shutdown },
        closed: () => this.onClosed(),
      },
      initializationFailedHandler: (error) => {
        this.output.appendLine(`[client] initialize failed: ${error instanceof Error ? error.message : String(error)}`);
        return false;
      },
      middleware: {
        handleWorkDoneProgress: (token, params, next) => {
          this.status.progress(token, params as ProgressValue);
          next(token, params);
        },
        workspace: {
          // Push: one shape for every change, read fresh so the order of
          // VS Code's change listeners does not matter.
          didChangeConfiguration: async () => {
            const c = this.client;
            if (c) await c.sendNotification(DidChangeConfigurationNotification.type, didChangeConfigurationParams(readNow().settings));
          },
          // Pull: answer "mkevolve…" sections from the mapped object too.
          configuration: async (params, token, next) => {
            const s = readNow().settings;
            const theirs = await next(params, token);
            return params.items.map((item, i) =>
              item.section !== undefined && (item.section === 'mkevolve' || item.section.startsWith('mkevolve.'))
                ? configurationItem(s, item.section)
                : Array.isArray(theirs)
                  ? theirs[i]
                  : null,
            );
          },
        },
      },
    };
  }

  /* The six server commands are registered by the extension (they work
   * from the palette without arguments); the client must not register the
   * same ids again when the server lists them in executeCommandProvider. */
  private ownServerCommands(client: LanguageClient): void {
    const feature = client.getFeature(ExecuteCommandRequest.method);
    const register = feature.register.bind(feature);
    feature.register = (data) => {
      const commands = (data.registerOptions.commands ?? []).filter((c) => !SERVER_COMMAND_IDS.includes(c));
      register({ ...data, registerOptions: { ...data.registerOptions, commands } });
    };
  }

  private async onClosed(): Promise<CloseHandlerResult> {
    const d = this.policy.onCrash(Date.now());
    this.output.appendLine(`[client] ${d.message}`);
    if (d.restart) {
      this.status.setServer('restarting', d.message);
      await new Promise((r) => setTimeout(r, d.delayMs));
      return { action: CloseAction.Restart, handled: true };
    }
    this.fail(d.message, true);
    return { action: CloseAction.DoNotRestart, handled: true };
  }

  private fail(message: string, offerSettings: boolean): void {
    this.failed = true;
    this.status.setServer('failed', message);
    this.output.appendLine(`[client] ${message}`);
    const buttons = ['Restart Server', 'Show Output', ...(offerSettings ? ['Open Settings'] : [])];
    void vscode.window.showErrorMessage(`MKEvolve: ${message}`, ...buttons).then((b) => {
      if (b === 'Restart Server') void vscode.commands.executeCommand(CLIENT_COMMANDS.restartServer);
      else if (b === 'Show Output') this.output.show(true);
      else if (b === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'mkevolve');
    });
  }

  async stop(): Promise<void> {
    const client = this.client;
    const proc = this.proc;
    this.client = undefined;
    if (client) {
      try {
        await client.stop(STOP_TIMEOUT_MS);
      } catch (e) {
        this.output.appendLine(`[client] stop: ${(e as Error).message}`);
      }
      await client.dispose().catch(() => undefined);
    }
    // A server that ignored shutdown/exit is not left behind.
    if (proc) await reap(proc);
    this.status.setServer('stopped');
  }

  async restart(reason: string): Promise<void> {
    this.output.appendLine(`[client] restarting: ${reason}`);
    this.policy.reset();
    await this.stop();
    await this.start();
  }

  /* Settings changed: restart when the server cannot take the change
   * live; didChangeConfiguration is sent by the client's sync feature. */
  async onSettingsChanged(): Promise<void> {
    const r = readNow();
    this.showWarnings(r.warnings);
    const before = this.settings;
    this.settings = r.settings;
    this.policy.configure(r.settings.server.maxRestarts, r.settings.server.restartWindowSeconds * 1000);
    const reasons = restartReasons(before, r.settings);
    if (reasons.length > 0 && (this.client !== undefined || this.failed)) await this.restart(reasons.join(', '));
  }

  async onKeyChanged(provider: Provider): Promise<void> {
    if (provider !== this.settings.llm.provider) return;
    const now = await this.keys.get(provider);
    if (now === this.storedKey) return;
    if (this.client !== undefined) await this.restart('the stored API key changed');
  }

  dispose(): void {
    void this.stop();
  }
}

async function sendServerCommand(server: Server, command: string, args: unknown[]): Promise<unknown> {
  if (!(await server.start()) || !server.client) {
    void vscode.window.showErrorMessage('MKEvolve: the server is not running.', 'Show Output').then((b) => b && server.output.show(true));
    return undefined;
  }
  try {
    return await server.client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
  } catch (e) {
    const err = e as { code?: number; message?: string };
    if (err.code === REQUEST_CANCELLED) return undefined;
    void vscode.window.showErrorMessage(`MKEvolve: ${COMMAND_TITLES[command] ?? command} failed: ${err.message ?? String(e)}`);
    return undefined;
  }
}

async function openReport(result: unknown): Promise<void> {
  const u = reportUri(result);
  if (!u) return;
  const uri = vscode.Uri.parse(u);
  if (/\.html?$/i.test(uri.path)) await vscode.env.openExternal(uri);
  else if (/\.md$/i.test(uri.path)) await vscode.commands.executeCommand('markdown.showPreview', uri);
  else await vscode.commands.executeCommand('vscode.open', uri);
}

/* A server command run from a code lens / code action (with arguments) or
 * from the palette (without: the server's matching code action at the
 * cursor, else one argument built from the active editor). */
async function runServerCommand(server: Server, command: string, args: unknown[]): Promise<unknown> {
  let send = command;
  let finalArgs = args;
  if (args.length === 0) {
    const editor = vscode.window.activeTextEditor;
    const doc = editor && editor.document.languageId === 'python' ? editor.document : undefined;
    if (needsDocument(command) && (!editor || !doc)) {
      void vscode.window.showWarningMessage(`MKEvolve: open a Python file with a PyTorch module to run "${COMMAND_TITLES[command]}".`);
      return undefined;
    }
    const picked = editor && doc ? await pickFromCodeActions(server, command, editor) : undefined;
    if (picked === null) return undefined; // the user dismissed the choice
    if (picked !== undefined) {
      send = picked.command;
      finalArgs = picked.arguments;
    } else if (command === SERVER_COMMANDS.swap) {
      void vscode.window.showInformationMessage(
        'MKEvolve: no verified variant to swap at the cursor. Put the cursor on a subkernel that has been evolved.',
      );
      return undefined;
    } else {
      const pos = editor?.selection.active;
      finalArgs = [paletteArgument(command, doc?.uri.toString(), pos && { line: pos.line, character: pos.character })];
    }
  }
  const result = await sendServerCommand(server, send, finalArgs);
  if (command === SERVER_COMMANDS.openReport) await openReport(result);
  return result;
}

/* Asks the server's code actions at the cursor for the ones that run
 * `command`: undefined when there are none, null when the user dismissed
 * the pick, else the command and arguments to send. */
async function pickFromCodeActions(
  server: Server,
  command: string,
  editor: vscode.TextEditor,
): Promise<{ command: string; arguments: unknown[] } | null | undefined> {
  if (!(await server.start())) return undefined;
  const actions =
    (await vscode.commands.executeCommand<(vscode.CodeAction | vscode.Command)[]>(
      'vscode.executeCodeActionProvider',
      editor.document.uri,
      editor.selection,
    )) ?? [];
  const found = actionsFor(command, actions as Parameters<typeof actionsFor>[1]);
  if (found.length === 0) return undefined;
  let chosen = found[0];
  if (found.length > 1 || command === SERVER_COMMANDS.swap) {
    const item = await vscode.window.showQuickPick(
      found.map((f) => ({ label: f.title, f })),
      { placeHolder: COMMAND_TITLES[command] },
    );
    if (!item) return null;
    chosen = item.f;
  }
  const edit = (chosen.action as vscode.CodeAction).edit;
  if (edit instanceof vscode.WorkspaceEdit) await vscode.workspace.applyEdit(edit);
  return { command: chosen.command, arguments: chosen.arguments };
}

async function setApiKey(server: Server): Promise<void> {
  const current = server.current.llm.provider;
  const order: Provider[] = current === 'anthropic' ? ['anthropic', 'openai'] : ['openai', 'anthropic'];
  const pick = await vscode.window.showQuickPick(
    order.map((p) => ({ label: PROVIDER_LABELS[p], p })),
    { placeHolder: 'Which provider is this key for?' },
  );
  if (!pick) return;
  const variable = pick.p === current ? effectiveApiKeyEnv(server.current) : pick.p === 'anthropic' ? 'ANTHROPIC_API_KEY' : 'OPENAI_API_KEY';
  const key = await vscode.window.showInputBox({
    title: `MKEvolve: API key for ${PROVIDER_LABELS[pick.p]}`,
    prompt: `Stored in VS Code's secret storage (never in settings.json) and given to the server as ${variable}.`,
    password: true,
    ignoreFocusOut: true,
    validateInput: (v) => {
      const c = checkKey(v);
      return c.ok ? undefined : c.message;
    },
  });
  if (key === undefined) return;
  await server.keys.set(pick.p, key);
  void vscode.window.showInformationMessage(
    `MKEvolve: API key stored for ${pick.p}.` + (pick.p === current ? ' The server restarts to pick it up.' : ''),
  );
}

async function clearApiKey(server: Server): Promise<void> {
  const stored: Provider[] = [];
  for (const p of ['openai', 'anthropic'] as Provider[]) if (await server.keys.get(p)) stored.push(p);
  if (stored.length === 0) {
    void vscode.window.showInformationMessage('MKEvolve: no API key is stored.');
    return;
  }
  const pick = await vscode.window.showQuickPick(
    stored.map((p) => ({ label: PROVIDER_LABELS[p], p })),
    { placeHolder: 'Remove the stored API key for…' },
  );
  if (!pick) return;
  await server.keys.delete(pick.p);
  void vscode.window.showInformationMessage(`MKEvolve: API key for ${pick.p} removed from secret storage.`);
}

async function showJobs(server: Server): Promise<void> {
  type Item = vscode.QuickPickItem & { run: () => void };
  const items: Item[] = server.status.model.activeJobs().map((j) => ({
    label: `${j.cancellable ? '$(close) Cancel: ' : '$(sync) '}${j.title}`,
    description: j.percentage !== undefined ? `${j.percentage}%` : undefined,
    detail: j.message || undefined,
    run: () => {
      if (j.cancellable && server.client) {
        void server.client.sendNotification(WorkDoneProgressCancelNotification.type, { token: j.rawToken });
      }
    },
  }));
  items.push(
    { label: '$(output) Show Output', run: () => server.output.show(true) },
    { label: '$(debug-restart) Restart Server', run: () => void vscode.commands.executeCommand(CLIENT_COMMANDS.restartServer) },
  );
  const pick = await vscode.window.showQuickPick(items, { placeHolder: items.length > 2 ? 'MKEvolve jobs' : 'No MKEvolve job is running' });
  pick?.run();
}

let server: Server | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel(CLIENT_NAME);
  const trace = vscode.window.createOutputChannel(`${CLIENT_NAME} Trace`);
  const status = new StatusBar(CLIENT_COMMANDS.showJobs);
  const keys = new ApiKeyStore(context.secrets);
  const s = new Server(output, trace, status, keys);
  server = s;
  context.subscriptions.push(output, trace, status, s);

  for (const id of SERVER_COMMAND_IDS) {
    context.subscriptions.push(vscode.commands.registerCommand(id, (...args: unknown[]) => runServerCommand(s, id, args)));
  }
  context.subscriptions.push(
    vscode.commands.registerCommand(CLIENT_COMMANDS.setApiKey, () => setApiKey(s)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.clearApiKey, () => clearApiKey(s)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.restartServer, () => s.restart('requested by the user')),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showOutput, () => output.show(true)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showJobs, () => showJobs(s)),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('mkevolve')) void s.onSettingsChanged();
    }),
    keys.onDidChange((p) => void s.onKeyChanged(p)),
  );
  await s.start();
}

export async function deactivate(): Promise<void> {
  const s = server;
  server = undefined;
  if (s) await s.stop();
}
