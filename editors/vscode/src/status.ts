/* status.ts — what the status bar item says.
 *
 * StatusModel is a small state machine fed by two sources: the client's
 * lifecycle (starting, running, restarting, stopped, failed) and the
 * server's window/workDoneProgress reports ($/progress begin / report /
 * end, one job per token). It renders to a plain view object, so it can
 * be tested without VS Code; StatusBar (below) applies the view to a
 * vscode.StatusBarItem. */
import * as vscode from 'vscode';

export type ServerState = 'stopped' | 'starting' | 'running' | 'restarting' | 'failed';

export interface Job {
  token: string;
  rawToken: string | number; // as the server sent it, for window/workDoneProgress/cancel
  title: string;
  message: string;
  percentage: number | undefined;
  cancellable: boolean;
  startedAt: number;
}

export interface StatusView {
  text: string;
  tooltip: string;
  level: 'normal' | 'warning' | 'error';
  busy: boolean;
}

/* The LSP WorkDoneProgress value shapes (kept local: no protocol import). */
export type ProgressValue =
  | { kind: 'begin'; title: string; message?: string; percentage?: number; cancellable?: boolean }
  | { kind: 'report'; message?: string; percentage?: number; cancellable?: boolean }
  | { kind: 'end'; message?: string };

const MAX_TEXT = 48;

function clampPct(p: unknown): number | undefined {
  if (typeof p !== 'number' || !Number.isFinite(p)) return undefined;
  return Math.max(0, Math.min(100, Math.round(p)));
}

function ellipsize(s: string, n: number): string {
  return s.length <= n ? s : s.slice(0, n - 1) + '…';
}

export class StatusModel {
  server: ServerState = 'stopped';
  detail = '';
  lastFinished: { title: string; message: string } | undefined;
  private readonly jobs = new Map<string, Job>();

  setServer(state: ServerState, detail = ''): void {
    this.server = state;
    this.detail = detail;
    // A server that is not running has no jobs: their ends will never come.
    if (state !== 'running') this.jobs.clear();
  }

  /* Applies one $/progress value; returns false for values that do not fit
   * the protocol (report/end without begin), which are ignored. */
  progress(token: string | number, value: ProgressValue, now: number): boolean {
    const key = String(token);
    const job = this.jobs.get(key);
    switch (value.kind) {
      case 'begin':
        this.jobs.set(key, {
          token: key,
          rawToken: token,
          title: value.title || 'Working',
          message: value.message ?? '',
          percentage: clampPct(value.percentage),
          cancellable: value.cancellable === true,
          startedAt: now,
        });
        return true;
      case 'report':
        if (!job) return false;
        if (value.message !== undefined) job.message = value.message;
        const pct = clampPct(value.percentage);
        // Percentages only grow (the spec asks servers for that; a late
        // smaller value must not make the bar jump back).
        if (pct !== undefined) job.percentage = Math.max(job.percentage ?? 0, pct);
        if (value.cancellable !== undefined) job.cancellable = value.cancellable;
        return true;
      case 'end':
        if (!job) return false;
        this.jobs.delete(key);
        this.lastFinished = { title: job.title, message: value.message ?? '' };
        return true;
    }
  }

  /* Jobs oldest first. */
  activeJobs(): Job[] {
    return [...this.jobs.values()].sort((a, b) => a.startedAt - b.startedAt);
  }

  view(): StatusView {
    const jobs = this.activeJobs();
    switch (this.server) {
      case 'stopped':
        return { text: '$(circle-slash) MKEvolve', tooltip: 'MKEvolve server stopped. Click to show the output.', level: 'normal', busy: false };
      case 'starting':
        return { text: '$(loading~spin) MKEvolve', tooltip: 'Starting the MKEvolve server…', level: 'normal', busy: true };
      case 'restarting':
        return {
          text: '$(loading~spin) MKEvolve: restarting',
          tooltip: this.detail || 'The MKEvolve server stopped and is being restarted.',
          level: 'warning',
          busy: true,
        };
      case 'failed':
        return {
          text: '$(error) MKEvolve',
          tooltip: (this.detail || 'The MKEvolve server is not running.') + '\nClick to show the output.',
          level: 'error',
          busy: false,
        };
      case 'running':
        break;
    }
    if (jobs.length === 0) {
      const last = this.lastFinished ? `\nLast job: ${this.lastFinished.title}${this.lastFinished.message ? ' — ' + this.lastFinished.message : ''}` : '';
      return { text: '$(zap) MKEvolve', tooltip: 'MKEvolve server running; no job in progress.' + last, level: 'normal', busy: false };
    }
    const first = jobs[0];
    const pct = first.percentage !== undefined ? ` ${first.percentage}%` : '';
    const what = first.message ? `${first.title}: ${first.message}` : first.title;
    const more = jobs.length > 1 ? ` (+${jobs.length - 1})` : '';
    const lines = jobs.map((j) => {
      const p = j.percentage !== undefined ? ` ${j.percentage}%` : '';
      return `• ${j.title}${p}${j.message ? ' — ' + j.message : ''}${j.cancellable ? ' (cancellable)' : ''}`;
    });
    return {
      text: `$(sync~spin) ${ellipsize(what, MAX_TEXT)}${pct}${more}`,
      tooltip: `MKEvolve jobs:\n${lines.join('\n')}\nClick to see or cancel jobs.`,
      level: 'normal',
      busy: true,
    };
  }
}

/* Renders a StatusModel into a status bar item. */
export class StatusBar implements vscode.Disposable {
  readonly model = new StatusModel();
  private readonly item: vscode.StatusBarItem;

  constructor(command: string) {
    this.item = vscode.window.createStatusBarItem('mkevolve.status', vscode.StatusBarAlignment.Left, 10);
    this.item.name = 'MKEvolve';
    this.item.command = command;
    this.render();
    this.item.show();
  }

  setServer(state: ServerState, detail = ''): void {
    this.model.setServer(state, detail);
    this.render();
  }

  progress(token: string | number, value: ProgressValue): void {
    if (this.model.progress(token, value, Date.now())) this.render();
  }

  render(): void {
    const v = this.model.view();
    this.item.text = v.text;
    this.item.tooltip = v.tooltip;
    this.item.backgroundColor =
      v.level === 'error'
        ? new vscode.ThemeColor('statusBarItem.errorBackground')
        : v.level === 'warning'
          ? new vscode.ThemeColor('statusBarItem.warningBackground')
          : undefined;
  }

  dispose(): void {
    this.item.dispose();
  }
}
