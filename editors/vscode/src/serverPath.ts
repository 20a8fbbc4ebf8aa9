/* serverPath.ts — finds the mkevolve executable.
 *
 * mkevolve.serverPath wins when set: `~` and `${workspaceFolder}` are
 * expanded, and a relative path is taken from the first workspace folder
 * (how users write "build/mkevolve"). Otherwise `mkevolve` is looked up on
 * PATH. Pure logic with an injectable file check so it can be tested. */
import * as path from 'path';

export interface ResolveEnv {
  pathVar: string | undefined; // process.env.PATH
  home: string | undefined;
  workspaceFolder: string | undefined;
  platform: NodeJS.Platform;
  pathExt?: string; // process.env.PATHEXT on Windows
  isExecutable: (file: string) => boolean;
}

export type Resolved = { ok: true; path: string } | { ok: false; message: string };

export const DEFAULT_BINARY = 'mkevolve';

/* Path rules of the target platform (not of the machine running tests). */
function paths(env: ResolveEnv): path.PlatformPath {
  return env.platform === 'win32' ? path.win32 : path.posix;
}

export function expandPath(raw: string, env: ResolveEnv): string {
  const P = paths(env);
  let p = raw.trim();
  if (env.workspaceFolder !== undefined) p = p.split('${workspaceFolder}').join(env.workspaceFolder);
  if ((p === '~' || p.startsWith('~/')) && env.home) p = P.join(env.home, p.slice(1));
  return p;
}

function candidates(name: string, env: ResolveEnv): string[] {
  if (env.platform !== 'win32') return [name];
  const exts = (env.pathExt ?? '.EXE;.CMD;.BAT').split(';').filter((e) => e !== '');
  return [name, ...exts.map((e) => name + e.toLowerCase())];
}

export function resolveServerPath(setting: string, env: ResolveEnv): Resolved {
  const P = paths(env);
  if (setting.trim() !== '') {
    let p = expandPath(setting, env);
    if (p.includes('${workspaceFolder}')) {
      return { ok: false, message: `mkevolve.serverPath uses \${workspaceFolder} but no folder is open.` };
    }
    if (!P.isAbsolute(p)) {
      if (env.workspaceFolder === undefined) {
        return { ok: false, message: `mkevolve.serverPath "${setting}" is relative and no folder is open.` };
      }
      p = P.resolve(env.workspaceFolder, p);
    }
    for (const c of candidates(p, env)) if (env.isExecutable(c)) return { ok: true, path: c };
    return { ok: false, message: `mkevolve.serverPath "${setting}" (${p}) is not an executable file.` };
  }
  const sep = env.platform === 'win32' ? ';' : ':';
  for (const dir of (env.pathVar ?? '').split(sep)) {
    if (dir === '') continue;
    for (const c of candidates(P.join(dir, DEFAULT_BINARY), env)) if (env.isExecutable(c)) return { ok: true, path: c };
  }
  return {
    ok: false,
    message: `"${DEFAULT_BINARY}" was not found on PATH. Install it or set mkevolve.serverPath to the executable (for example build/mkevolve).`,
  };
}
