/* lspClient.ts — a client for the end-to-end test that behaves like
 * VS Code with vscode-languageclient 9 on the wire: the same JSON-RPC stack
 * (vscode-jsonrpc), the capabilities it announces, and the answers VS Code
 * gives to server requests (applyEdit applied to disk, workDoneProgress
 * tokens accepted, workspace/configuration answered from the extension's
 * own settings mapping, unknown requests refused with MethodNotFound). */
import * as cp from 'node:child_process';
import * as fs from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as rpc from 'vscode-jsonrpc/node';

export interface Position {
  line: number;
  character: number;
}
export interface Range {
  start: Position;
  end: Position;
}
export interface TextEdit {
  range: Range;
  newText: string;
}
export interface Diagnostic {
  range: Range;
  severity?: number;
  message: string;
  source?: string;
  relatedInformation?: { location: { uri: string; range: Range }; message: string }[];
}

/* What vscode-languageclient 9.0 announces (the parts a server can act on). */
export const VSCODE_CAPABILITIES = {
  general: {
    positionEncodings: ['utf-16'],
    regularExpressions: { engine: 'ECMAScript', version: 'ES2020' },
    markdown: { parser: 'marked', version: '1.1.0' },
    staleRequestSupport: {
      cancel: true,
      retryOnContentModified: ['textDocument/semanticTokens/full', 'textDocument/semanticTokens/range', 'textDocument/semanticTokens/full/delta'],
    },
  },
  workspace: {
    applyEdit: true,
    workspaceEdit: {
      documentChanges: true,
      resourceOperations: ['create', 'rename', 'delete'],
      failureHandling: 'textOnlyTransactional',
      normalizesLineEndings: true,
      changeAnnotationSupport: { groupsOnLabel: true },
    },
    configuration: true,
    workspaceFolders: true,
    didChangeConfiguration: { dynamicRegistration: true },
    didChangeWatchedFiles: { dynamicRegistration: true, relativePatternSupport: true },
    executeCommand: { dynamicRegistration: true },
    codeLens: { refreshSupport: true },
    diagnostics: { refreshSupport: true },
    inlayHint: { refreshSupport: true },
    semanticTokens: { refreshSupport: true },
  },
  textDocument: {
    synchronization: { dynamicRegistration: true, willSave: true, willSaveWaitUntil: true, didSave: true },
    publishDiagnostics: {
      relatedInformation: true,
      versionSupport: false,
      tagSupport: { valueSet: [1, 2] },
      codeDescriptionSupport: true,
      dataSupport: true,
    },
    hover: { dynamicRegistration: true, contentFormat: ['markdown', 'plaintext'] },
    codeAction: {
      dynamicRegistration: true,
      isPreferredSupport: true,
      disabledSupport: true,
      dataSupport: true,
      resolveSupport: { properties: ['edit'] },
      codeActionLiteralSupport: {
        codeActionKind: {
          valueSet: ['', 'quickfix', 'refactor', 'refactor.extract', 'refactor.inline', 'refactor.rewrite', 'source', 'source.organizeImports'],
        },
      },
      honorsChangeAnnotations: false,
    },
    codeLens: { dynamicRegistration: true },
    completion: { dynamicRegistration: true, contextSupport: true, completionItem: { snippetSupport: true, markdown: true } },
    documentSymbol: { dynamicRegistration: true, hierarchicalDocumentSymbolSupport: true },
  },
  window: {
    showMessage: { messageActionItem: { additionalPropertiesSupport: true } },
    showDocument: { support: true },
    workDoneProgress: true,
  },
};

export interface ProgressEvent {
  token: string | number;
  value: { kind: 'begin' | 'report' | 'end'; title?: string; message?: string; percentage?: number; cancellable?: boolean };
  at: number;
}

type Waiter = { pred: () => boolean; resolve: () => void };

/* One server process and its conversation, recorded. */
export class Session {
  readonly proc: cp.ChildProcess;
  readonly conn: rpc.MessageConnection;
  stdout = '';
  stderr = '';
  exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  readonly diagnostics = new Map<string, { diagnostics: Diagnostic[]; at: number }[]>();
  readonly progress: ProgressEvent[] = [];
  readonly createdTokens = new Set<string>();
  readonly appliedEdits: unknown[] = [];
  readonly messages: { method: string; params: unknown }[] = [];
  readonly unexpectedRequests: string[] = [];
  readonly protocolErrors: string[] = [];
  readonly shownDocuments: unknown[] = [];
  /* Documents the client has open (VS Code opens a file an edit touches). */
  readonly open = new Map<string, { version: number; text: string }>();
  private waiters: Waiter[] = [];

  constructor(
    bin: string,
    env: NodeJS.ProcessEnv,
    cwd: string,
    private readonly configuration: (section: string | undefined) => unknown,
  ) {
    this.proc = cp.spawn(bin, ['lsp', '--stdio'], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc.stdout!.on('data', (b: Buffer) => (this.stdout += b.toString('utf8')));
    this.proc.stderr!.on('data', (b: Buffer) => (this.stderr += b.toString('utf8')));
    this.proc.on('exit', (code, signal) => {
      this.exited = { code, signal };
      this.poke();
    });
    this.proc.stdin!.on('error', () => undefined); // EPIPE after a crash is reported by `exited`
    this.conn = rpc.createMessageConnection(
      new rpc.StreamMessageReader(this.proc.stdout!),
      new rpc.StreamMessageWriter(this.proc.stdin!),
    );
    this.install();
    this.conn.listen();
  }

  private install(): void {
    const c = this.conn;
    c.onNotification('textDocument/publishDiagnostics', (p: { uri: string; diagnostics: Diagnostic[] }) => {
      const list = this.diagnostics.get(p.uri) ?? [];
      list.push({ diagnostics: p.diagnostics, at: Date.now() });
      this.diagnostics.set(p.uri, list);
      this.poke();
    });
    c.onNotification('$/progress', (p: { token: string | number; value: ProgressEvent['value'] }) => {
      if (!this.createdTokens.has(String(p.token))) this.protocolErrors.push(`$/progress for token ${p.token} that was never created`);
      this.progress.push({ token: p.token, value: p.value, at: Date.now() });
      this.poke();
    });
    for (const m of ['window/logMessage', 'window/showMessage', '$/logTrace', 'telemetry/event']) {
      c.onNotification(m, (params: unknown) => {
        this.messages.push({ method: m, params });
        this.poke();
      });
    }
    c.onRequest('window/workDoneProgress/create', (p: { token: string | number }) => {
      this.createdTokens.add(String(p.token));
      return null;
    });
    c.onRequest('workspace/applyEdit', (p: { edit: unknown }) => {
      this.appliedEdits.push(p.edit);
      try {
        this.applyWorkspaceEdit(p.edit as WorkspaceEdit);
        this.poke();
        return { applied: true };
      } catch (e) {
        this.protocolErrors.push(`workspace/applyEdit: ${(e as Error).message}`);
        return { applied: false, failureReason: (e as Error).message };
      }
    });
    c.onRequest('workspace/configuration', (p: { items: { section?: string }[] }) => p.items.map((i) => this.configuration(i.section)));
    c.onRequest('workspace/workspaceFolders', () => null);
    c.onRequest('client/registerCapability', () => null);
    c.onRequest('client/unregisterCapability', () => null);
    c.onRequest('window/showMessageRequest', (p: unknown) => {
      this.messages.push({ method: 'window/showMessageRequest', params: p });
      return null;
    });
    c.onRequest('window/showDocument', (p: unknown) => {
      this.shownDocuments.push(p);
      return { success: true };
    });
    for (const m of ['workspace/codeLens/refresh', 'workspace/diagnostic/refresh', 'workspace/inlayHint/refresh', 'workspace/semanticTokens/refresh']) {
      c.onRequest(m, () => null);
    }
    c.onRequest((method: string) => {
      this.unexpectedRequests.push(method);
      return new rpc.ResponseError(rpc.ErrorCodes.MethodNotFound, `Unhandled method ${method}`);
    });
  }

  private poke(): void {
    const ready = this.waiters.filter((w) => w.pred());
    this.waiters = this.waiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.resolve();
  }

  /* Resolves once `pred` holds; rejects after `ms` or if the server dies. */
  waitFor(what: string, pred: () => boolean, ms: number): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`timed out after ${ms} ms waiting for ${what}${this.tail()}`));
      }, ms);
      const waiter: Waiter = {
        pred: () => pred() || this.exited !== undefined,
        resolve: () => {
          clearTimeout(timer);
          if (pred()) resolve();
          else reject(new Error(`server exited (${JSON.stringify(this.exited)}) while waiting for ${what}${this.tail()}`));
        },
      };
      this.waiters.push(waiter);
    });
  }

  tail(): string {
    return this.stderr ? `\n--- server stderr (tail) ---\n${this.stderr.slice(-3000)}` : '';
  }

  request<R>(method: string, params: unknown): Promise<R> {
    return this.conn.sendRequest(method, params) as Promise<R>;
  }

  notify(method: string, params: unknown): Promise<void> {
    return this.conn.sendNotification(method, params);
  }

  didOpen(uri: string, text: string): Promise<void> {
    this.open.set(uri, { version: 1, text });
    return this.notify('textDocument/didOpen', { textDocument: { uri, languageId: 'python', version: 1, text } });
  }

  /* Incremental change, as VS Code sends it (one range edit). */
  async didChange(uri: string, edit: TextEdit): Promise<void> {
    const doc = this.open.get(uri);
    if (!doc) throw new Error(`${uri} is not open`);
    doc.text = applyTextEdits(doc.text, [edit]);
    doc.version += 1;
    await this.notify('textDocument/didChange', {
      textDocument: { uri, version: doc.version },
      contentChanges: [{ range: edit.range, text: edit.newText }],
    });
  }

  /* Saves the open document to disk and tells the server. */
  async didSave(uri: string): Promise<void> {
    const doc = this.open.get(uri);
    if (!doc) throw new Error(`${uri} is not open`);
    fs.writeFileSync(fileURLToPath(uri), doc.text);
    await this.notify('textDocument/didSave', { textDocument: { uri }, text: doc.text });
  }

  /* Applies an edit the way VS Code does: to the open buffer if the file is
   * open (then didChange), else to disk and the file is opened (didOpen),
   * since VS Code loads a model for every file an edit touches. */
  private applyWorkspaceEdit(edit: WorkspaceEdit): void {
    const touch = (uri: string, edits: TextEdit[]) => {
      const doc = this.open.get(uri);
      if (doc) {
        const before = doc.text;
        doc.text = applyTextEdits(doc.text, edits);
        doc.version += 1;
        void this.notify('textDocument/didChange', {
          textDocument: { uri, version: doc.version },
          contentChanges: [{ range: fullRange(before), text: doc.text }],
        });
      } else {
        const file = fileURLToPath(uri);
        const text = applyTextEdits(fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '', edits);
        fs.writeFileSync(file, text);
        if (file.endsWith('.py')) void this.didOpen(uri, text);
      }
    };
    if (edit.documentChanges) {
      for (const ch of edit.documentChanges) {
        if ('kind' in ch) {
          const file = fileURLToPath(ch.kind === 'rename' ? ch.oldUri : ch.uri);
          if (ch.kind === 'create') {
            if (!fs.existsSync(file) || ch.options?.overwrite) fs.writeFileSync(file, '');
            else if (!ch.options?.ignoreIfExists) throw new Error(`create: ${file} exists`);
          } else if (ch.kind === 'delete') {
            fs.rmSync(file, { force: ch.options?.ignoreIfNotExists === true });
          } else {
            fs.renameSync(file, fileURLToPath(ch.newUri));
          }
        } else {
          touch(ch.textDocument.uri, ch.edits);
        }
      }
    }
    for (const [uri, edits] of Object.entries(edit.changes ?? {})) touch(uri, edits);
  }

  async close(): Promise<void> {
    this.conn.dispose();
    if (this.exited === undefined) {
      this.proc.kill('SIGKILL');
      await new Promise<void>((r) => (this.exited ? r() : this.proc.once('exit', () => r())));
    }
  }
}

export interface WorkspaceEdit {
  changes?: Record<string, TextEdit[]>;
  documentChanges?: (
    | { textDocument: { uri: string; version: number | null }; edits: TextEdit[] }
    | { kind: 'create'; uri: string; options?: { overwrite?: boolean; ignoreIfExists?: boolean } }
    | { kind: 'rename'; oldUri: string; newUri: string }
    | { kind: 'delete'; uri: string; options?: { ignoreIfNotExists?: boolean } }
  )[];
}

/* Offset of an LSP position in a JS string (both count UTF-16 units). */
export function offsetAt(text: string, pos: Position): number {
  let line = 0;
  let i = 0;
  while (line < pos.line) {
    const nl = text.indexOf('\n', i);
    if (nl < 0) return text.length;
    i = nl + 1;
    line += 1;
  }
  let end = text.indexOf('\n', i);
  if (end < 0) end = text.length;
  if (end > i && text[end - 1] === '\r') end -= 1;
  return Math.min(i + pos.character, end);
}

export function applyTextEdits(text: string, edits: TextEdit[]): string {
  const withOffsets = edits
    .map((e, k) => ({ s: offsetAt(text, e.range.start), e: offsetAt(text, e.range.end), t: e.newText, k }))
    .sort((a, b) => b.s - a.s || b.k - a.k);
  let out = text;
  for (const w of withOffsets) {
    if (w.e < w.s) throw new Error('inverted range');
    out = out.slice(0, w.s) + w.t + out.slice(w.e);
  }
  return out;
}

export function fullRange(text: string): Range {
  const lines = text.split('\n');
  return { start: { line: 0, character: 0 }, end: { line: lines.length - 1, character: lines[lines.length - 1].length } };
}

export function fileUri(p: string): string {
  return pathToFileURL(p).toString();
}
