/* secrets.ts — the LLM API key: VS Code SecretStorage or the environment,
 * and the server process environment built from it.
 *
 * The key never goes into settings, initializationOptions, didChange-
 * Configuration or a log line: it travels only in the environment of the
 * spawned server, under the variable named by mkevolve.llm.apiKeyEnv (or
 * the provider's conventional one). A key stored with "MKEvolve: Set LLM
 * API Key" overrides one inherited from VS Code's own environment. */
import type * as vscode from 'vscode';
import { Provider, isEnvName } from './config';

export function secretName(provider: Provider): string {
  return `mkevolve.llm.apiKey.${provider}`;
}

/* Validates what a user typed; returns the cleaned key or an error. */
export function checkKey(raw: string): { ok: true; key: string } | { ok: false; message: string } {
  const key = raw.trim();
  if (key === '') return { ok: false, message: 'The key is empty.' };
  if (/[\r\n\0]/.test(key)) return { ok: false, message: 'The key must be a single line.' };
  if (/\s/.test(key)) return { ok: false, message: 'The key must not contain spaces.' };
  if (key.length > 4096) return { ok: false, message: 'The key is longer than 4096 characters.' };
  return { ok: true, key };
}

export class ApiKeyStore {
  constructor(private readonly storage: vscode.SecretStorage) {}

  get(provider: Provider): Thenable<string | undefined> {
    return this.storage.get(secretName(provider));
  }

  async set(provider: Provider, raw: string): Promise<void> {
    const c = checkKey(raw);
    if (!c.ok) throw new Error(c.message);
    await this.storage.store(secretName(provider), c.key);
  }

  delete(provider: Provider): Thenable<void> {
    return this.storage.delete(secretName(provider));
  }

  /* Fires for our keys only. */
  onDidChange(listener: (provider: Provider) => void): vscode.Disposable {
    return this.storage.onDidChange((e) => {
      for (const p of ['openai', 'anthropic'] as Provider[]) if (e.key === secretName(p)) listener(p);
    });
  }
}

export type KeySource = 'secret storage' | 'environment' | 'none';

export interface ServerEnv {
  env: Record<string, string>;
  source: KeySource;
  variable: string;
}

/* The server's environment: the extension host's, plus the stored key
 * under `variable`. Never returns the key in anything but `env`. */
export function buildServerEnv(
  base: Record<string, string | undefined>,
  variable: string,
  storedKey: string | undefined,
): ServerEnv {
  if (!isEnvName(variable)) throw new Error(`invalid environment variable name for the API key`);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) if (v !== undefined) env[k] = v;
  let source: KeySource = 'none';
  if (storedKey !== undefined && storedKey !== '') {
    env[variable] = storedKey;
    source = 'secret storage';
  } else if (env[variable] !== undefined && env[variable] !== '') {
    source = 'environment';
  }
  return { env, source, variable };
}

/* Replaces every occurrence of the given secrets in `text` (for anything
 * we log that could echo a key, such as a server's stderr). */
export function redact(text: string, secrets: (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) {
    if (s !== undefined && s.length >= 4) out = out.split(s).join('«redacted»');
  }
  return out;
}
