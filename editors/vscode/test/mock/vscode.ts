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
