/* signals.c — what Ctrl-C, `kill` and a closed terminal do to a running
 * mkevolve (docs/runtime.md, "Containment").
 *
 * Workers are detached (their own session) so that a terminal's Ctrl-C does
 * not kill them in the middle of a reply; that makes stopping them our job.
 * The handler is async-signal-safe: it sends SIGTERM to each live worker's
 * guard (mkworker/guard.py), which SIGKILLs the worker and everything it
 * started, writes one line and _exits. Nothing is flushed or freed: an
 * interrupted run has no result to save, the cache is SQLite in WAL mode
 * (an interrupted transaction is rolled back), and outputs are written by
 * rename. If this process dies without the handler (SIGKILL), the guards'
 * parent-death signal does the same. */
#include "signals.h"

#include "mk_worker.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static void put(const char *s) {
  ssize_t rc = write(STDERR_FILENO, s, strlen(s));
  (void)rc;
}

static void on_signal(int sig) {
  int pids[256];
  int n = mk_worker_live_pids(pids, 256);
  for (int i = 0; i < n; i++) kill(pids[i], SIGTERM);
  put("\nmkevolve: ");
  put(sig == SIGINT ? "interrupted" : sig == SIGTERM ? "terminated" : "hung up");
  put(n > 0 ? "; jobs cancelled and workers stopped\n" : "\n");
  _exit(128 + sig);
}

void mk_app_signals_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    sigaddset(&sa.sa_mask, sigs[i]);
  }
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
}
