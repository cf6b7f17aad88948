/*
 * The mount's own counters (issue 22), as Lustre's llite keeps them per mount: per FUSE
 * operation the count, errors, bytes and latency (min, max, sum and the servers' log-scale
 * histogram: net/stats.h's struct stats_op, shared with them), read_bytes and write_bytes as
 * Lustre's samples/min/max/sum, and what the caches decided (statahead, the page cache at open;
 * libloom's loom_client_stats for the rest).
 *
 * Counting a request: its handler starts with LM_INTERRUPTIBLE(req) or LM_COUNTED(req)
 * (lmount.h), which begins the thread's current operation (lm_op_begin); lm_reply_err marks it
 * failed (lm_op_error) and read and write note their bytes (lm_op_bytes); it is noted
 * (lm_op_end) right before its reply goes to the kernel (LM_REPLY), so that the caller, once
 * answered, finds it counted, or else when the handler returns. Relaxed atomics and a
 * thread-local: no lock per request.
 *
 * Shown as parameters llite.FSNAME-XXXXXXXXXXXXXXXX.{stats,statahead_stats,read_ahead_stats,
 * cache_stats,write_behind_stats} (the LOOM_IOC_MSTATS ioctl: `loom stats --mount`, `loom
 * get_param 'llite.*.stats'`) and as Prometheus text (-o http=: /metrics).
 */
#ifndef LOOM_FUSE_MSTATS_H
#define LOOM_FUSE_MSTATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/textbuf.h"
#include "net/stats.h"

/*
 * Errors that answer the question a request asked rather than say it failed; not counted as
 * errors: a lookup of a name that does not exist (ENOENT), an extended attribute the file does
 * not have or a buffer the caller sized too small to learn the size (ENODATA, ERANGE), an ioctl
 * this file system does not have (ENOTTY), SEEK_DATA/SEEK_HOLE past the end (ENXIO), and ENOSYS
 * for any operation (the kernel's way of learning what is implemented).
 */
#define LM_ANS_ENOENT (1u << 0)
#define LM_ANS_XATTR  (1u << 1) /* ENODATA, ERANGE */
#define LM_ANS_ENOTTY (1u << 2)
#define LM_ANS_ENXIO  (1u << 3)

/* Which of the op's bytes are file data: read_bytes, write_bytes (and the op's bytes out, in). */
enum lm_op_bytes { LM_BYTES_NONE, LM_BYTES_READ, LM_BYTES_WRITE };

/*
 * Every FUSE operation loom-mount answers: X(handler, row name, answers, bytes). The handler is
 * lm_HANDLER (its __func__ names the row: lm_op_row); the row is named as in Lustre's llite
 * stats where Lustre has the same operation (release is close, lseek is seek), as FUSE names
 * it otherwise.
 */
#define LM_OPS(X)                                                   \
	X(lookup,       "lookup",       LM_ANS_ENOENT, LM_BYTES_NONE)  \
	X(forget,       "forget",       0,             LM_BYTES_NONE)  \
	X(forget_multi, "forget_multi", 0,             LM_BYTES_NONE)  \
	X(getattr,      "getattr",      0,             LM_BYTES_NONE)  \
	X(setattr,      "setattr",      0,             LM_BYTES_NONE)  \
	X(readlink,     "readlink",     0,             LM_BYTES_NONE)  \
	X(mknod,        "mknod",        0,             LM_BYTES_NONE)  \
	X(mkdir,        "mkdir",        0,             LM_BYTES_NONE)  \
	X(unlink,       "unlink",       0,             LM_BYTES_NONE)  \
	X(rmdir,        "rmdir",        0,             LM_BYTES_NONE)  \
	X(symlink,      "symlink",      0,             LM_BYTES_NONE)  \
	X(rename,       "rename",       0,             LM_BYTES_NONE)  \
	X(link,         "link",         0,             LM_BYTES_NONE)  \
	X(open,         "open",         0,             LM_BYTES_NONE)  \
	X(read,         "read",         0,             LM_BYTES_READ)  \
	X(write,        "write",        0,             LM_BYTES_WRITE) \
	X(statfs,       "statfs",       0,             LM_BYTES_NONE)  \
	X(release,      "close",        0,             LM_BYTES_NONE)  \
	X(fsync,        "fsync",        0,             LM_BYTES_NONE)  \
	X(setxattr,     "setxattr",     0,             LM_BYTES_NONE)  \
	X(getxattr,     "getxattr",     LM_ANS_XATTR,  LM_BYTES_NONE)  \
	X(listxattr,    "listxattr",    LM_ANS_XATTR,  LM_BYTES_NONE)  \
	X(removexattr,  "removexattr",  0,             LM_BYTES_NONE)  \
	X(flush,        "flush",        0,             LM_BYTES_NONE)  \
	X(opendir,      "opendir",      0,             LM_BYTES_NONE)  \
	X(readdir,      "readdir",      0,             LM_BYTES_NONE)  \
	X(readdirplus,  "readdirplus",  0,             LM_BYTES_NONE)  \
	X(releasedir,   "releasedir",   0,             LM_BYTES_NONE)  \
	X(fsyncdir,     "fsyncdir",     0,             LM_BYTES_NONE)  \
	X(access,       "access",       0,             LM_BYTES_NONE)  \
	X(create,       "create",       0,             LM_BYTES_NONE)  \
	X(getlk,        "getlk",        0,             LM_BYTES_NONE)  \
	X(setlk,        "setlk",        0,             LM_BYTES_NONE)  \
	X(flock,        "flock",        0,             LM_BYTES_NONE)  \
	X(ioctl,        "ioctl",        LM_ANS_ENOTTY, LM_BYTES_NONE)  \
	X(fallocate,    "fallocate",    0,             LM_BYTES_NONE)  \
	X(lseek,        "seek",         LM_ANS_ENXIO,  LM_BYTES_NONE)

enum lm_op_row {
#define LM_OP_ENUM_(handler, name, answers, bytes) LM_OP_##handler,
	LM_OPS(LM_OP_ENUM_)
#undef LM_OP_ENUM_
	LM_OP_ROWS
};

/* What the mount's caches decided (libloom's own decisions are loom_client_stats'). */
enum lm_cache_stat {
	LM_SA_HIT,        /* a lookup answered from a statahead listing */
	LM_SA_MISS,       /* a lookup in a directory followed by statahead that its listing did not
	                   * answer (the name not in it, or the listing stale) */
	LM_SA_LISTING,    /* a directory fetched whole for statahead */
	LM_PAGES_KEPT,    /* an open of a file that kept the kernel's cached pages */
	LM_PAGES_DROPPED, /* ... that did not (changed since, or nothing known of them) */
	LM_CACHE_STATS
};

struct lm_mstats {
	char instance[40];              /* "FSNAME-XXXXXXXXXXXXXXXX", the llite.* name */
	bool off;                       /* -o nostats: no request counted */
	_Atomic uint64_t start_s;       /* when counting began (or was last cleared) */
	struct stats_op op[LM_OP_ROWS];
	struct stats_asample read_bytes, write_bytes;
	_Atomic uint64_t cache[LM_CACHE_STATS];
};

/* Zeroes ms and names it llite.FSNAME-%016x of id (loom-mount's process id: unique among the
 * node's mounts, as Lustre's superblock address is). */
void lm_mstats_init(struct lm_mstats *ms, const char *fsname, uint64_t id);
/* Every counter from zero again, libloom's (loom_client_stats_clear) too. */
void lm_mstats_clear(struct lm_mstats *ms);

static inline void lm_cache_note(struct lm_mstats *ms, enum lm_cache_stat c)
{
	atomic_fetch_add_explicit(&ms->cache[c], 1, memory_order_relaxed);
}

/* The row of handler func ("lm_lookup"), looked up once and kept in *cached (-1 before); -1 for
 * a name LM_OPS does not have (counted nowhere). */
int lm_op_row_resolve(_Atomic int *cached, const char *func);
static inline int lm_op_row(_Atomic int *cached, const char *func)
{
	int row = atomic_load_explicit(cached, memory_order_relaxed);

	return row >= 0 ? row : lm_op_row_resolve(cached, func);
}
/* The row's name ("close"), or NULL for a row out of range. */
const char *lm_op_name(int row);
/* Whether errno err (either sign) answered by row counts as an error (see LM_ANS_*). */
bool lm_op_err_counts(int row, int err);

/* The calling thread's current operation: begun (row -1 or ms NULL: not counted), marked, noted
 * once (lm_op_end: later calls do nothing until the next begin). */
void lm_op_begin(struct lm_mstats *ms, int row);
void lm_op_error(int err);
void lm_op_bytes(uint64_t n);
void lm_op_end(void);

/*
 * The parameters, as lctl shows them (net/params.h): the text of those whose full name
 * llite.INSTANCE.NAME matches pattern, *matched how many; and a value set on them (stats=clear,
 * or 0, starts every counter again: lm_mstats_clear; the others cannot be set): 0, -ENOENT,
 * -EACCES, -EINVAL as params_set.
 */
void lm_mstats_get_param(struct lm_mstats *ms, const char *pattern, struct textbuf *tb, uint32_t *matched);
int lm_mstats_set_param(struct lm_mstats *ms, const char *pattern, const char *value, uint32_t *matched);
/* Prometheus text: loom_client_* (docs/operations.md, "Prometheus: /metrics"). */
void lm_mstats_render_prom(struct lm_mstats *ms, struct textbuf *tb);
/* The HTTP port's handler (net/http.h's http_handler_fn; arg the struct lm_mstats): /metrics. */
struct http_answer;
int lm_mstats_http(const char *path, void *conn, struct http_answer *ans, void *arg);

#endif
