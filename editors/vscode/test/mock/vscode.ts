/* vscode.ts — the slice of the VS Code API the unit-tested modules use,
 * recording what they do so tests can assert on it. */

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export class ThemeColor {
  constructor(readonly id: string) {}
}

export class Disposable {
  constructor(private readonly fn: () => void) {}
  dispose(): void {
    this.fn();
  }
}

export class EventEmitter<T> {
  private listeners: ((e: T) => void)[] = [];
  event = (listener: (e: T) => void): Disposable => {
    this.listeners.push(listener);
    return new Disposable(() => (this.listeners = this.listeners.filter((l) => l !== listener)));
  };
  fire(e: T): void {
    for (const l of [...this.listeners]) l(e);
  }
  dispose(): void {
    this.listeners = [];
  }
}

export interface MockStatusBarItem {
  id: string;
  alignment: StatusBarAlignment;
  priority: number | undefined;
  name: string | undefined;
  text: string;
  tooltip: string | undefined;
  command: string | undefined;
  backgroundColor: ThemeColor | undefined;
  visible: boolean;
  disposed: boolean;
  show(): void;
  hide(): void;
  dispose(): void;
}

export const created: { statusBarItems: MockStatusBarItem[] } = { statusBarItems: [] };

export const window = {
  createStatusBarItem(id: string, alignment: StatusBarAlignment, priority?: number): MockStatusBarItem {
    const item: MockStatusBarItem = {
      id,
      alignment,
      priority,
      name: undefined,
      text: '',
      tooltip: undefined,
      command: undefined,
      backgroundColor: undefined,
      visible: false,
      disposed: false,
      show() {
        this.visible = true;
      },
      hide() {
        this.visible = false;
      },
      dispose() {
        this.disposed = true;
      },
    };
    created.statusBarItems.push(item);
    return item;
  },
};

/* An in-memory SecretStorage, as VS Code's behaves (onDidChange on store
 * and delete). */
export class MemorySecretStorage {
  readonly data = new Map<string, string>();
  private readonly emitter = new EventEmitter<{ key: string }>();
  readonly onDidChange = this.emitter.event;
  async get(key: string): Promise<string | undefined> {
    return this.data.get(key);
  }
  async store(key: string, value: string): Promise<void> {
    this.data.set(key, value);
    this.emitter.fire({ key });
  }
  async delete(key: string): Promise<void> {
    if (this.data.delete(key)) this.emitter.fire({ key });
  }
}

/* ---- The rest of the surface vscode-languageclient touches, enough to
 * activate the real extension bundle under Node (test/activation). ---- */

export const version = '1.82.0';

export class CancellationError extends Error {}

export class CancellationTokenSource {
  private readonly emitter = new EventEmitter<void>();
  token = { isCancellationRequested: false, onCancellationRequested: this.emitter.event };
  cancel(): void {
    this.token.isCancellationRequested = true;
    this.emitter.fire();
  }
  dispose(): void {}
}

export enum ProgressLocation {
  SourceControl = 1,
  Window = 10,
  Notification = 15,
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly path: string,
    private readonly raw: string,
  ) {}
  static parse(s: string): Uri {
    const m = /^([a-z][a-z0-9+.-]*):(?:\/\/[^/]*)?(.*)$/i.exec(s);
    return new Uri(m ? m[1] : 'file', m ? decodeURIComponent(m[2]) : s, s);
  }
  static file(p: string): Uri {
    return new Uri('file', p, 'file://' + encodeURI(p));
  }
  get fsPath(): string {
    return this.path;
  }
  toString(): string {
    return this.raw;
  }
  with(): Uri {
    return this;
  }
}

export class WorkspaceEdit {}

export const recorded = {
  commands: new Map<string, (...args: unknown[]) => unknown>(),
  executed: [] as { id: string; args: unknown[] }[],
  messages: [] as { level: 'error' | 'warning' | 'info'; text: string }[],
  outputs: new Map<string, { text: string }>(),
  config: {} as Record<string, unknown>,
  quickPicks: [] as unknown[][],
  pickIndex: 0,
};

const configEmitter = new EventEmitter<{ affectsConfiguration(section: string): boolean }>();

/* Changes settings as the Settings editor would, firing the change event. */
export function setConfig(values: Record<string, unknown>): void {
  Object.assign(recorded.config, values);
  const keys = Object.keys(values);
  configEmitter.fire({ affectsConfiguration: (s) => keys.some((k) => k === s || k.startsWith(s + '.')) });
}

function event<T>(): (listener: (e: T) => void) => Disposable {
  return new EventEmitter<T>().event;
}

function namespace<T extends object>(known: T): T {
  return new Proxy(known, {
    get(target, prop: string) {
      if (prop in target) return (target as Record<string, unknown>)[prop];
      if (prop.startsWith('onDid') || prop.startsWith('onWill')) return event();
      if (prop.startsWith('register') || prop.startsWith('create')) return () => new Disposable(() => undefined);
      return undefined;
    },
  });
}

function message(level: 'error' | 'warning' | 'info') {
  return (text: string) => {
    recorded.messages.push({ level, text });
    return Promise.resolve(undefined);
  };
}

Object.assign(window, {
  createOutputChannel(name: string) {
    const ch = { name, text: '' };
    recorded.outputs.set(name, ch);
    return {
      name,
      append: (s: string) => (ch.text += s),
      appendLine: (s: string) => (ch.text += s + '\n'),
      replace: (s: string) => (ch.text = s),
      clear: () => (ch.text = ''),
      show: () => undefined,
      hide: () => undefined,
      dispose: () => undefined,
    };
  },
  showErrorMessage: message('error'),
  showWarningMessage: message('warning'),
  showInformationMessage: message('info'),
  // The user picks the first item (tests set `pickIndex` to choose).
  showQuickPick: async (items: unknown[]) => {
    const list = await items;
    recorded.quickPicks.push(list);
    return recorded.pickIndex < 0 ? undefined : list[recorded.pickIndex];
  },
  withProgress: (_o: unknown, task: (p: unknown, t: unknown) => Promise<unknown>) =>
    task({ report: () => undefined }, new CancellationTokenSource().token),
  activeTextEditor: undefined,
  visibleTextEditors: [],
  tabGroups: { all: [], onDidChangeTabs: event(), onDidChangeTabGroups: event() },
  onDidChangeActiveTextEditor: event(),
  onDidChangeVisibleTextEditors: event(),
});

export const commands = namespace({
  registerCommand(id: string, fn: (...args: unknown[]) => unknown): Disposable {
    // VS Code refuses a second registration of an id.
    if (recorded.commands.has(id)) throw new Error(`command '${id}' already exists`);
    recorded.commands.set(id, fn);
    return new Disposable(() => recorded.commands.delete(id));
  },
  async executeCommand(id: string, ...args: unknown[]): Promise<unknown> {
    recorded.executed.push({ id, args });
    const fn = recorded.commands.get(id);
    return fn ? fn(...args) : undefined;
  },
  async getCommands(): Promise<string[]> {
    return [...recorded.commands.keys()];
  },
});

export const workspace = namespace({
  textDocuments: [] as unknown[],
  workspaceFolders: undefined as unknown,
  onDidChangeConfiguration: configEmitter.event,
  getConfiguration(section?: string) {
    const full = (k: string) => (section ? `${section}.${k}` : k);
    return {
      get: (k: string, def?: unknown) => (full(k) in recorded.config ? recorded.config[full(k)] : def),
      has: (k: string) => full(k) in recorded.config,
      inspect: (k: string) => ({ key: full(k), globalValue: recorded.config[full(k)] }),
      update: async () => undefined,
    };
  },
  applyEdit: async () => true,
});

export const languages = namespace({
  match: () => 0,
  createDiagnosticCollection(name: string) {
    const m = new Map<string, unknown>();
    return {
      name,
      set: (uri: unknown, d: unknown) => m.set(String(uri), d),
      delete: (uri: unknown) => m.delete(String(uri)),
      clear: () => m.clear(),
      get: (uri: unknown) => m.get(String(uri)),
      has: (uri: unknown) => m.has(String(uri)),
      forEach: () => undefined,
      dispose: () => m.clear(),
    };
  },
});

export const env = { appName: 'Visual Studio Code', language: 'en', openExternal: async () => true, machineId: 'test', sessionId: 'test' };
