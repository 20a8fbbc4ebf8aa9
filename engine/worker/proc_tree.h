/* proc_tree.h — a worker's process tree, read from /proc (internal to
 * engine/worker).
 *
 * A worker leads its own process group, but code it runs can leave that
 * group (setsid) or double-fork; the worker's guard (mkworker/guard.py) is
 * a child subreaper, so whatever escapes the group is re-parented to it and
 * stays in its tree. The supervisor therefore kills and measures by tree:
 * every process whose chain of parents leads to the worker's pid, plus its
 * process group. Linux only (/proc/<pid>/stat); elsewhere the tree is the
 * worker alone.
 *
 * Ownership: plain values; nothing is allocated past a call. */
#ifndef MK_PROC_TREE_H
#define MK_PROC_TREE_H

#include <stdint.h>

/* Resident memory, in bytes, of `root` and all its descendants (0 when
 * `root` is gone). *nprocs (may be NULL) gets how many processes that is. */
uint64_t mk_proc_tree_rss(int root, int *nprocs);

/* SIGKILLs every descendant of `root`, then the process group `root` leads
 * and `root` itself. Descendants go first so that, while the guard lives,
 * nothing it would adopt is re-parented to init. Repeats while new
 * descendants appear (a fork during the scan), at most a few rounds.
 * Returns how many processes were signalled. */
int mk_proc_tree_kill(int root);

/* Physical memory of the machine in bytes (sysconf), 0 when unknown. */
uint64_t mk_proc_total_memory(void);

#endif
