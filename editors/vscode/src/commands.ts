/* commands.ts — command ids and the pure parts of the palette commands.
 *
 * The server commands have the same id in VS Code and in
 * workspace/executeCommand, so a code lens or code action from the server
 * and the palette entry run the same thing. From a lens or an action they
 * carry the server's own arguments, which are forwarded unchanged; from the
 * palette they carry none and the extension builds one argument object from
 * the active editor (see README, "Commands"). */

export const SERVER_COMMANDS = {
  decompose: 'mkevolve.decompose',
  evolve: 'mkevolve.evolve',
  evolveAll: 'mkevolve.evolveAll',
  swap: 'mkevolve.swap',
  restore: 'mkevolve.restore',
  openReport: 'mkevolve.openReport',
  editVariant: 'mkevolve.editVariant',
} as const;

export const SERVER_COMMAND_IDS: readonly string[] = Object.values(SERVER_COMMANDS);

/* Commands that exist only in the extension. */
export const CLIENT_COMMANDS = {
  setApiKey: 'mkevolve.setApiKey',
  clearApiKey: 'mkevolve.clearApiKey',
  restartServer: 'mkevolve.restartServer',
  showOutput: 'mkevolve.showOutput',
  showJobs: 'mkevolve.showJobs',
} as const;

export interface LspPosition {
  line: number;
  character: number;
}

/* The argument the palette sends: the document and the cursor (UTF-16
 * position, as VS Code and LSP count). `position` is left out for
 * commands about the whole module. */
export interface CommandArgument {
  uri?: string;
  position?: LspPosition;
}

const WHOLE_MODULE = new Set<string>([SERVER_COMMANDS.decompose, SERVER_COMMANDS.evolveAll, SERVER_COMMANDS.openReport]);

export function paletteArgument(command: string, uri: string | undefined, cursor: LspPosition | undefined): CommandArgument {
  const arg: CommandArgument = {};
  if (uri !== undefined) arg.uri = uri;
  if (uri !== undefined && cursor !== undefined && !WHOLE_MODULE.has(command)) {
    arg.position = { line: cursor.line, character: cursor.character };
  }
  return arg;
}

/* Commands that need a Python document to act on (all but openReport,
 * which without one opens the workspace's latest report). */
export function needsDocument(command: string): boolean {
  return command !== SERVER_COMMANDS.openReport;
}

/* A report location in an executeCommand result: a URI string, or an
 * object with `uri`. Anything else means the server showed the document
 * itself (window/showDocument) or had nothing to show. */
export function reportUri(result: unknown): string | undefined {
  if (typeof result === 'string' && /^[a-z][a-z0-9+.-]*:/i.test(result)) return result;
  if (result !== null && typeof result === 'object') {
    const u = (result as { uri?: unknown }).uri;
    if (typeof u === 'string' && /^[a-z][a-z0-9+.-]*:/i.test(u)) return u;
  }
  return undefined;
}

/* vscode.executeCodeActionProvider returns CodeActions (with an optional
 * `command: Command`) and bare Commands (`command: string`, `arguments`).
 * Both are reduced to what the palette needs. */
export interface ActionLike {
  title: string;
  command?: { command: string; arguments?: unknown[] } | string;
  arguments?: unknown[];
  edit?: unknown;
}

export interface PickedAction<T> {
  title: string;
  /* The id to send: the action's own (equal to the palette's when matched
   * by id; possibly another when matched by title). */
  command: string;
  arguments: unknown[];
  action: T;
}

/* The titles issue 6 gives the server's code actions; used when the server
 * names its commands differently. */
export const ACTION_TITLES: Record<string, RegExp> = {
  [SERVER_COMMANDS.decompose]: /^decompose\b/i,
  [SERVER_COMMANDS.evolve]: /^evolve subkernel\b/i,
  [SERVER_COMMANDS.evolveAll]: /^evolve all\b/i,
  [SERVER_COMMANDS.swap]: /^swap subkernel\b/i,
  [SERVER_COMMANDS.restore]: /^restore pytorch reference\b/i,
  [SERVER_COMMANDS.openReport]: /^open report\b/i,
  [SERVER_COMMANDS.editVariant]: /^edit subkernel\b/i,
};

function commandOf(a: ActionLike): { command: string; arguments: unknown[] } | undefined {
  if (typeof a.command === 'string') return { command: a.command, arguments: a.arguments ?? [] };
  if (a.command && typeof a.command.command === 'string') return { command: a.command.command, arguments: a.command.arguments ?? [] };
  return undefined;
}

/* The actions that run `command`, in the server's order: those with that
 * command id, or else those whose title is the one issue 6 gives it. */
export function actionsFor<T extends ActionLike>(command: string, actions: readonly T[]): PickedAction<T>[] {
  const pick = (match: (a: T, c: { command: string }) => boolean): PickedAction<T>[] => {
    const out: PickedAction<T>[] = [];
    for (const a of actions) {
      const c = commandOf(a);
      if (c && match(a, c)) out.push({ title: a.title, command: c.command, arguments: c.arguments, action: a });
    }
    return out;
  };
  const byId = pick((_a, c) => c.command === command);
  if (byId.length > 0) return byId;
  const title = ACTION_TITLES[command];
  return title ? pick((a) => title.test(a.title)) : [];
}
