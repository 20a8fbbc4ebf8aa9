/* restart.ts — when to restart a server that died.
 *
 * At most `maxRestarts` restarts within a sliding window of
 * `windowSeconds`; the n-th restart in a burst waits an exponential
 * backoff (0.5 s, 1 s, 2 s ... capped) so a server that dies at start does
 * not spin. A server that stays up longer than the window has its history
 * forgotten. Manual restarts reset the policy. Pure logic: the clock is
 * passed in. */

export interface RestartDecision {
  restart: boolean;
  delayMs: number;
  /* Crashes inside the current window, this one included. */
  crashes: number;
  message: string;
}

export class RestartPolicy {
  private crashes: number[] = [];

  constructor(
    private maxRestarts: number,
    private windowMs: number,
    private readonly baseDelayMs = 500,
    private readonly maxDelayMs = 8000,
  ) {}

  configure(maxRestarts: number, windowMs: number): void {
    this.maxRestarts = maxRestarts;
    this.windowMs = windowMs;
  }

  /* Records a crash at `now` (ms) and decides. */
  onCrash(now: number): RestartDecision {
    this.crashes = this.crashes.filter((t) => now - t < this.windowMs);
    this.crashes.push(now);
    const n = this.crashes.length;
    const windowS = Math.round(this.windowMs / 1000);
    if (n > this.maxRestarts) {
      return {
        restart: false,
        delayMs: 0,
        crashes: n,
        message:
          `The MKEvolve server stopped unexpectedly ${n} times in the last ${windowS} s and will not be restarted ` +
          `(mkevolve.server.maxRestarts = ${this.maxRestarts}). See the "MKEvolve" output for its last messages.`,
      };
    }
    const delayMs = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (n - 1));
    return {
      restart: true,
      delayMs,
      crashes: n,
      message: `The MKEvolve server stopped unexpectedly; restarting in ${(delayMs / 1000).toFixed(1)} s (restart ${n} of at most ${this.maxRestarts} in ${windowS} s).`,
    };
  }

  reset(): void {
    this.crashes = [];
  }
}
