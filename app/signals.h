/* signals.h — SIGINT, SIGTERM and SIGHUP for the CLI and the language
 * server: the workers are stopped (each guard ends its whole tree) and the
 * process exits with 128 + the signal and one line on stderr. Not a public
 * engine header: it lives in app/, above the CLI and the server it serves. */
#ifndef MK_APP_SIGNALS_H
#define MK_APP_SIGNALS_H

/* Installs the handlers (process-wide; call once, before work starts). */
void mk_app_signals_install(void);

#endif
