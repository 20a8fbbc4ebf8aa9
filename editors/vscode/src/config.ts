/* config.ts — the extension's settings (`mkevolve.*`) and the server
 * configuration object they map to.
 *
 * Pure logic, no `vscode` import: the same mapping is used for
 * initializationOptions, for workspace/didChangeConfiguration, for answers
 * to workspace/configuration, and by the end-to-end test that talks to the
 * real server. Bad values never reach the server: each one falls back to
 * its default and produces a warning the extension shows once. */

export type Backend = 'auto' | 'cuda' | 'cpu';
export type Proposer = 'builtin' | 'llm';
/* The kernels' language, either proposer's (`--backend`): `backend` above is the device. */
export type KernelBackend = 'triton' | 'cuda' | 'auto';
export type Provider = 'openai' | 'anthropic';
/* Where Decompose writes ModelNew: a new <stem>_new.py, or the module's file. */
export type ComposeMode = 'file' | 'inplace';

/* The engine's settings. A field left undefined is unset: it is not sent,
 * and the server applies the engine's own default (the same one
 * `mkevolve evolve` and `mkevolve check` use), so the extension defines
 * none of its own. */
export interface EngineSettings {
  /* proposals: candidates per evolve run, all subkernels together (as
   * `mkevolve evolve --budget`); tokens and seconds: 0 is no limit. */
  budget: { proposals?: number; tokens?: number; seconds?: number };
  beam: { width?: number; depth?: number };
  tolerance: { atol?: number; rtol?: number };
  trials?: number;
  timeout: { capture?: number; verify?: number };
  kernelBackend?: KernelBackend;
}

export interface ExtensionSettings extends EngineSettings {
  serverPath: string;
  pythonPath: string;
  backend: Backend;
  proposer: Proposer;
  llm: { provider: Provider; model: string; baseUrl: string; apiKeyEnv: string };
  composeMode: ComposeMode;
  debounceMs: number;
  codeLens: boolean;
  server: { maxRestarts: number; restartWindowSeconds: number };
}

/* What the server receives (docs: editors/vscode/README.md, "Server
 * configuration"). Empty strings and unset engine settings are left out so
 * the server applies its own defaults. The API key itself is never here. */
export interface ServerSettings extends EngineSettings {
  pythonPath?: string;
  backend: Backend;
  proposer: Proposer;
  llm: { provider: Provider; model?: string; baseUrl?: string; apiKeyEnv: string };
  composeMode: ComposeMode;
  debounceMs: number;
  codeLens: boolean;
}

export const DEFAULTS: ExtensionSettings = {
  serverPath: '',
  pythonPath: '',
  backend: 'auto',
  proposer: 'builtin',
  llm: { provider: 'openai', model: '', baseUrl: '', apiKeyEnv: '' },
  budget: {},
  beam: {},
  tolerance: {},
  timeout: {},
  composeMode: 'file',
  debounceMs: 400,
  codeLens: true,
  server: { maxRestarts: 5, restartWindowSeconds: 180 },
};

/* The provider's conventional key variable (issue 5: OPENAI_API_KEY,
 * ANTHROPIC_API_KEY), used when mkevolve.llm.apiKeyEnv is empty. */
export function defaultApiKeyEnv(provider: Provider): string {
  return provider === 'anthropic' ? 'ANTHROPIC_API_KEY' : 'OPENAI_API_KEY';
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function isEnvName(name: string): boolean {
  return ENV_NAME.test(name) && name.length <= 128;
}

/* The variable that carries the key to the server. */
export function effectiveApiKeyEnv(s: ExtensionSettings): string {
  return s.llm.apiKeyEnv !== '' ? s.llm.apiKeyEnv : defaultApiKeyEnv(s.llm.provider);
}

/* Reads one setting; `undefined` when unset. Mirrors
 * WorkspaceConfiguration.get(section) so tests can pass a plain map. */
export type SettingGetter = (key: string) => unknown;

export interface ReadResult {
  settings: ExtensionSettings;
  warnings: string[];
}

class Reader {
  readonly warnings: string[] = [];
  constructor(private readonly get: SettingGetter) {}

  str(key: string, def: string): string {
    const v = this.get(key);
    if (v === undefined || v === null) return def;
    if (typeof v !== 'string') {
      this.warn(key, `must be a string`);
      return def;
    }
    return v.trim();
  }

  oneOf<T extends string>(key: string, allowed: readonly T[], def: T): T {
    const v = this.get(key);
    if (v === undefined || v === null) return def;
    if (typeof v === 'string' && (allowed as readonly string[]).includes(v)) return v as T;
    this.warn(key, `must be one of ${allowed.map((a) => `"${a}"`).join(', ')}`);
    return def;
  }

  /* An engine setting among `allowed`: undefined when unset or bad. */
  optOneOf<T extends string>(key: string, allowed: readonly T[]): T | undefined {
    const v = this.get(key);
    if (v === undefined || v === null) return undefined;
    if (typeof v === 'string' && (allowed as readonly string[]).includes(v)) return v as T;
    this.warn(key, `must be one of ${allowed.map((a) => `"${a}"`).join(', ')}`);
    return undefined;
  }

  num(key: string, def: number, min: number, max: number, integer: boolean): number {
    return this.optNum(key, min, max, integer) ?? def;
  }

  /* An engine setting: undefined when unset or bad (then the server's default applies). */
  optNum(key: string, min: number, max: number, integer: boolean): number | undefined {
    const v = this.get(key);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
      const kind = integer ? 'an integer' : 'a number';
      this.warn(key, `must be ${kind} between ${min} and ${max}`);
      return undefined;
    }
    return v;
  }

  bool(key: string, def: boolean): boolean {
    const v = this.get(key);
    if (v === undefined || v === null) return def;
    if (typeof v === 'boolean') return v;
    this.warn(key, 'must be true or false');
    return def;
  }

  warn(key: string, what: string): void {
    this.warnings.push(`mkevolve.${key} ${what}; using the default.`);
  }
}

/* The object without its undefined fields: unset settings are absent, not null. */
function defined<T extends Record<string, number | undefined>>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (out as Record<string, number>)[k] = v;
  return out;
}

export function readSettings(get: SettingGetter): ReadResult {
  const r = new Reader(get);
  const provider = r.oneOf<Provider>('llm.provider', ['openai', 'anthropic'], DEFAULTS.llm.provider);
  let apiKeyEnv = r.str('llm.apiKeyEnv', '');
  if (apiKeyEnv !== '' && !isEnvName(apiKeyEnv)) {
    // Most likely the key itself was pasted here: never echo or forward it.
    r.warnings.push(
      'mkevolve.llm.apiKeyEnv must name an environment variable (like OPENAI_API_KEY), not hold the key; ' +
        'it was ignored. Store the key with "MKEvolve: Set LLM API Key" instead.',
    );
    apiKeyEnv = '';
  }
  if (get('llm.apiKey') !== undefined) {
    r.warnings.push(
      'mkevolve.llm.apiKey in settings.json is ignored: keys do not belong in settings. ' +
        'Use "MKEvolve: Set LLM API Key" (VS Code secret storage) or an environment variable.',
    );
  }
  let baseUrl = r.str('llm.baseUrl', '');
  if (baseUrl !== '' && !/^https?:\/\/[^\s]+$/i.test(baseUrl)) {
    r.warn('llm.baseUrl', 'must be an http:// or https:// URL');
    baseUrl = '';
  }
  const settings: ExtensionSettings = {
    serverPath: r.str('serverPath', DEFAULTS.serverPath),
    pythonPath: r.str('pythonPath', DEFAULTS.pythonPath),
    backend: r.oneOf<Backend>('backend', ['auto', 'cuda', 'cpu'], DEFAULTS.backend),
    proposer: r.oneOf<Proposer>('proposer', ['builtin', 'llm'], DEFAULTS.proposer),
    llm: { provider, model: r.str('llm.model', ''), baseUrl, apiKeyEnv },
    // The same bounds as the server's (lsp/engine/lsp_engine_config.c) and the CLI's.
    budget: defined({
      proposals: r.optNum('budget.proposals', 1, 1_000_000, true),
      tokens: r.optNum('budget.tokens', 0, 1_000_000_000_000, true),
      seconds: r.optNum('budget.seconds', 0, 7 * 24 * 3600, false),
    }),
    beam: defined({
      width: r.optNum('beam.width', 1, 64, true),
      depth: r.optNum('beam.depth', 0, 64, true),
    }),
    tolerance: defined({
      atol: r.optNum('tolerance.atol', 0, 1000, false),
      rtol: r.optNum('tolerance.rtol', 0, 1000, false),
    }),
    timeout: defined({
      capture: r.optNum('timeout.capture', 1, 86_400, false),
      verify: r.optNum('timeout.verify', 1, 86_400, false),
    }),
    composeMode: r.oneOf<ComposeMode>('composeMode', ['file', 'inplace'], DEFAULTS.composeMode),
    debounceMs: r.num('debounceMs', DEFAULTS.debounceMs, 0, 60_000, true),
    codeLens: r.bool('codeLens', DEFAULTS.codeLens),
    server: {
      maxRestarts: r.num('server.maxRestarts', DEFAULTS.server.maxRestarts, 0, 100, true),
      restartWindowSeconds: r.num('server.restartWindowSeconds', DEFAULTS.server.restartWindowSeconds, 1, 86_400, false),
    },
  };
  const trials = r.optNum('trials', 1, 1000, true);
  if (trials !== undefined) settings.trials = trials;
  const kernelBackend = r.optOneOf<KernelBackend>('kernelBackend', ['triton', 'cuda', 'auto']);
  if (kernelBackend !== undefined) settings.kernelBackend = kernelBackend;
  return { settings, warnings: r.warnings };
}

export function toServerSettings(s: ExtensionSettings): ServerSettings {
  const out: ServerSettings = {
    backend: s.backend,
    proposer: s.proposer,
    llm: { provider: s.llm.provider, apiKeyEnv: effectiveApiKeyEnv(s) },
    budget: { ...s.budget },
    beam: { ...s.beam },
    tolerance: { ...s.tolerance },
    timeout: { ...s.timeout },
    composeMode: s.composeMode,
    debounceMs: s.debounceMs,
    codeLens: s.codeLens,
  };
  if (s.trials !== undefined) out.trials = s.trials;
  if (s.kernelBackend !== undefined) out.kernelBackend = s.kernelBackend;
  if (s.pythonPath !== '') out.pythonPath = s.pythonPath;
  if (s.llm.model !== '') out.llm.model = s.llm.model;
  if (s.llm.baseUrl !== '') out.llm.baseUrl = s.llm.baseUrl;
  return out;
}

/* The didChangeConfiguration payload: the same object under "mkevolve". */
export function didChangeConfigurationParams(s: ExtensionSettings): { settings: { mkevolve: ServerSettings } } {
  return { settings: { mkevolve: toServerSettings(s) } };
}

/* Answers a workspace/configuration item for the section the server asks
 * about ("mkevolve", "mkevolve.llm", ...), from the mapped object so the
 * server sees one shape whichever way it reads its configuration. */
export function configurationItem(s: ExtensionSettings, section: string | undefined): unknown {
  const root = { mkevolve: toServerSettings(s) } as Record<string, unknown>;
  if (section === undefined || section === '') return root;
  let node: unknown = root;
  for (const part of section.split('.')) {
    if (node === null || typeof node !== 'object' || !(part in (node as object))) return null;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/* Changes the server cannot take over didChangeConfiguration: the binary
 * and the process environment (the key's variable) are fixed at spawn. */
export function restartReasons(before: ExtensionSettings, after: ExtensionSettings): string[] {
  const reasons: string[] = [];
  if (before.serverPath !== after.serverPath) reasons.push('mkevolve.serverPath changed');
  if (effectiveApiKeyEnv(before) !== effectiveApiKeyEnv(after)) reasons.push('the API key variable changed');
  return reasons;
}
