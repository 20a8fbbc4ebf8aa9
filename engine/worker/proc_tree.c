/* proc_tree.c — descendants of a worker from /proc/<pid>/stat: their
 * resident memory (the memory limit) and killing them (time-outs, cancels,
 * shutdown). /proc/<pid>/task/<tid>/children would be cheaper but needs
 * CONFIG_PROC_CHILDREN, which many kernels (and containers) lack, so the
 * whole of /proc is read: a few hundred small reads per call. */
#include "proc_tree.h"

#include <ctype.h>
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct proc_entry {
  int pid, ppid;
  uint64_t rss_pages;
  bool in_tree;
} proc_entry;

typedef struct proc_table {
  proc_entry *v;
  size_t n, cap;
} proc_table;

/* Reads ppid and rss of one process; false when it vanished meanwhile. */
static bool read_stat(int pid, proc_entry *e) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* The command name may hold spaces and parentheses: fields start after
   * the last ')'. Then: state ppid pgrp ... with rss the 22nd after it. */
  const char *p = strrchr(buf, ')');
  if (!p) return false;
  p++;
  unsigned long long field[24] = {0};
  int k = 0;
  char *end;
  while (k < 24 && *p) {
    while (*p == ' ') p++;
    if (k == 0) { /* state: a letter */
      while (*p && *p != ' ') p++;
      k++;
      continue;
    }
    field[k++] = strtoull(p, &end, 10);
    if (end == p) return false;
    p = end;
  }
  if (k < 22) return false;
  e->pid = pid;
  e->ppid = (int)field[1];
  e->rss_pages = field[21];
  e->in_tree = false;
  return true;
}

static void table_scan(proc_table *t) {
  t->n = 0;
  DIR *d = opendir("/proc");
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!isdigit((unsigned char)de->d_name[0])) continue;
    if (t->n == t->cap) {
      size_t cap = t->cap ? t->cap * 2 : 256;
      proc_entry *v = realloc(t->v, cap * sizeof *v);
      if (!v) break; /* a partial table still finds what it read */
      t->v = v;
      t->cap = cap;
    }
    if (read_stat(atoi(de->d_name), &t->v[t->n])) t->n++;
  }
  closedir(d);
}

/* Marks root and its descendants; returns how many. Parents may be listed
 * after their children, so passes repeat until nothing changes. */
static int table_mark(proc_table *t, int root) {
  int marked = 0;
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i].pid == root) t->v[i].in_tree = true, marked++;
  if (marked == 0) return 0;
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < t->n; i++) {
      if (t->v[i].in_tree) continue;
      for (size_t j = 0; j < t->n; j++) {
        if (t->v[j].in_tree && t->v[j].pid == t->v[i].ppid) {
          t->v[i].in_tree = true;
          marked++;
          changed = true;
          break;
        }
      }
    }
  }
  return marked;
}

uint64_t mk_proc_tree_rss(int root, int *nprocs) {
  proc_table t = {0};
  table_scan(&t);
  int n = root > 0 ? table_mark(&t, root) : 0;
  uint64_t pages = 0;
  for (size_t i = 0; i < t.n; i++)
    if (t.v[i].in_tree) pages += t.v[i].rss_pages;
  free(t.v);
  if (nprocs) *nprocs = n;
  long page = sysconf(_SC_PAGESIZE);
  return pages * (uint64_t)(page > 0 ? page : 4096);
}

int mk_proc_tree_kill(int root) {
  if (root <= 0) return 0;
  proc_table t = {0};
  int signalled = 0;
  for (int round = 0; round < 4; round++) {
    table_scan(&t);
    if (table_mark(&t, root) <= 1) break;
    int now = 0;
    for (size_t i = 0; i < t.n; i++)
      if (t.v[i].in_tree && t.v[i].pid != root && kill(t.v[i].pid, SIGKILL) == 0) now++;
    signalled += now;
    if (now == 0) break; /* only zombies left: their parent reaps them */
  }
  free(t.v);
  if (kill(-root, SIGKILL) == 0) signalled++;
  else if (kill(root, SIGKILL) == 0) signalled++;
  return signalled;
}

uint64_t mk_proc_total_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}
