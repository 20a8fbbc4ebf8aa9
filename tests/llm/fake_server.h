/* fake_server.h — starts tests/llm/fake_llm.py on 127.0.0.1 (random port)
 * for the C tests of engine/llm, and reads back what it received. Static
 * functions: include from tests/c/test_llm_*.c only. */
#ifndef MK_TEST_FAKE_SERVER_H
#define MK_TEST_FAKE_SERVER_H

#include "mk_buf.h"
#include "mk_llm.h"
#include "mk_test.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* A key that must never show up in anything the client writes. */
#define FAKE_KEY "sk-test-SECRET-9f8e7d6c5b4a39281706"

typedef struct fake_llm {
  pid_t pid;
  int port;
  char base[128];       /* http://127.0.0.1:PORT */
  char script[256];
} fake_llm;

static const char *fake_python(void) {
  const char *p = getenv("MKEVOLVE_PYTHON");
  if (p && p[0]) return p;
  if (access(MK_DEFAULT_PYTHON, X_OK) == 0) return MK_DEFAULT_PYTHON;
  return "/usr/bin/python3";
}

/* Starts the server with a script ({"replies": [...]}). 0 on success. */
static int fake_start(fake_llm *f, const char *script_json) {
  memset(f, 0, sizeof *f);
  /* Loopback must not go through a proxy the environment may name. */
  setenv("no_proxy", "127.0.0.1,localhost", 1);
  setenv("NO_PROXY", "127.0.0.1,localhost", 1);
  snprintf(f->script, sizeof f->script, "/tmp/mk_fake_llm_XXXXXX");
  int fd = mkstemp(f->script);
  if (fd < 0) return -1;
  size_t n = strlen(script_json);
  if (write(fd, script_json, n) != (ssize_t)n) {
    close(fd);
    return -1;
  }
  close(fd);
  char server[1024];
  snprintf(server, sizeof server, "%s/tests/llm/fake_llm.py", mk_test_repo_dir());
  int pipefd[2];
  if (pipe(pipefd)) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_addclose(&fa, pipefd[0]);
  char *argv[] = {(char *)fake_python(), server, f->script, NULL};
  int rc = posix_spawn(&f->pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  if (rc) {
    close(pipefd[0]);
    f->pid = 0;
    return -1;
  }
  char line[32] = {0};
  size_t got = 0;
  struct pollfd pfd = {.fd = pipefd[0], .events = POLLIN};
  while (got < sizeof line - 1 && !strchr(line, '\n') && poll(&pfd, 1, 20000) > 0) {
    ssize_t k = read(pipefd[0], line + got, sizeof line - 1 - got);
    if (k <= 0) break;
    got += (size_t)k;
  }
  close(pipefd[0]);
  f->port = atoi(line);
  if (f->port <= 0) return -1;
  snprintf(f->base, sizeof f->base, "http://127.0.0.1:%d", f->port);
  return 0;
}

static void fake_stop(fake_llm *f) {
  if (f->pid > 0) {
    kill(f->pid, SIGTERM);
    waitpid(f->pid, NULL, 0);
    f->pid = 0;
  }
  if (f->script[0]) unlink(f->script);
  f->script[0] = '\0';
}

static size_t fake_collect(char *p, size_t s, size_t n, void *ud) {
  mk_buf_append(ud, p, s * n);
  return s * n;
}

/* {"requests": [...], "max_concurrent": N} — caller frees. */
static cJSON *fake_log(fake_llm *f) {
  char url[160];
  snprintf(url, sizeof url, "%s/_log", f->base);
  CURL *c = curl_easy_init();
  mk_buf b;
  mk_buf_init(&b, 0);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, fake_collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  CURLcode rc = curl_easy_perform(c);
  curl_easy_cleanup(c);
  cJSON *j = rc == CURLE_OK ? cJSON_Parse(mk_buf_cstr(&b)) : NULL;
  mk_buf_free(&b);
  return j;
}

/* A config pointing at the fake server, key in $MK_TEST_LLM_KEY. */
static void fake_config(mk_llm_config *c, const fake_llm *f, mk_llm_provider p) {
  mk_llm_config_init(c);
  c->provider = p;
  c->model = mk_strdup(p == MK_LLM_ANTHROPIC ? "claude-test" : "gpt-test");
  c->api_key_env = mk_strdup("MK_TEST_LLM_KEY");
  setenv("MK_TEST_LLM_KEY", FAKE_KEY, 1);
  char url[200];
  snprintf(url, sizeof url, "%s%s", f->base, p == MK_LLM_ANTHROPIC ? "" : "/v1");
  c->base_url = mk_strdup(url);
  c->backoff_initial_s = 0.05;
  c->backoff_max_s = 5;
  c->timeout_s = 20;
  c->max_retries = 2;
}

/* Runs the loop until *flag is set or `seconds` pass. */
static void fake_tick(uv_timer_t *t) { (void)t; }

static bool run_until(uv_loop_t *loop, const bool *flag, double seconds) {
  uv_timer_t guard;
  uv_timer_init(loop, &guard);
  uv_timer_start(&guard, fake_tick, 50, 50); /* keeps UV_RUN_ONCE returning */
  uint64_t end = uv_hrtime() + (uint64_t)(seconds * 1e9);
  while (!*flag && uv_hrtime() < end) uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&guard, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  return *flag;
}

/* Closes the client and checks the loop is left clean. */
static void close_and_drain(uv_loop_t *loop, mk_llm *llm) {
  if (llm) mk_llm_close(llm);
  uv_run(loop, UV_RUN_DEFAULT);
  MK_CHECK_INT(uv_loop_close(loop), ==, 0);
}

#endif
