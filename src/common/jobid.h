/*
 * Job ids, as Lustre's jobstats tag requests: every request a client sends carries the job id of
 * the process it is for, so that servers can keep per-job statistics.
 *
 * Where the id comes from is jobid_var:
 *   disable        no job id (the empty string)
 *   procname_uid   the jobid_name pattern (the default; the pattern defaults to "%e.%u")
 *   nodelocal      the jobid_name pattern
 *   NAME           the process's value of environment variable NAME (SLURM_JOB_ID, ...) when it
 *                  has a non-empty one, else the jobid_name pattern; but a pattern that uses %j
 *                  is always used, as Lustre does ("%j.%e": the variable and the command)
 * jobid_name's codes: %e comm, %u uid, %g gid, %h host name up to the first dot, %H full host
 * name, %p pid, %j the value of the jobid_var variable ("" if none), %% a percent sign; any
 * other %x stays as written.
 *
 * A job id is at most 31 bytes; longer ones are cut. Bytes other than printable ASCII, and
 * spaces, become '_': job ids are written unquoted in YAML and as Prometheus label values.
 */
#ifndef LOOM_COMMON_JOBID_H
#define LOOM_COMMON_JOBID_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LOOM_JOBID_LEN 32 /* with the NUL, as Lustre's LUSTRE_JOBID_SIZE */
#define JOBID_VAR_DEFAULT "procname_uid"
#define JOBID_NAME_DEFAULT "%e.%u"

/* How long the mount trusts what it read of a process: a process that execs keeps its pid. */
#define JOBID_CACHE_TTL_NS (10ull * 1000 * 1000 * 1000)
/* Processes the mount remembers; past this the oldest entry goes. */
#define JOBID_CACHE_MAX 1024

struct jobid_conf {
	char var[64];  /* jobid_var */
	char name[64]; /* jobid_name */
};

/* Defaults: procname_uid, "%e.%u". */
void jobid_conf_init(struct jobid_conf *c);
/*
 * Checks and sets one setting: "jobid_var" (disable, procname_uid, nodelocal, or a variable
 * name [A-Za-z_][A-Za-z0-9_]* of at most 63 bytes) or "jobid_name" (a pattern of 1 to 63
 * printable ASCII bytes; to have no job id, set jobid_var=disable). Returns 0, or -EINVAL for an
 * unknown key or a refused value, c unchanged.
 */
int jobid_conf_set(struct jobid_conf *c, const char *key, const char *value);

/* What a job id is made of, for one process. */
struct jobid_proc {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	const char *comm; /* without the newline; NULL reads as "unknown" */
	const char *env;  /* NUL-separated "NAME=value" strings, env_len bytes; may be NULL */
	size_t env_len;
};

/* The job id of p under c into out (NUL-terminated; "" when disabled). */
void jobid_make(const struct jobid_conf *c, const struct jobid_proc *p, char out[LOOM_JOBID_LEN]);
/* This process's own job id (libloom): getenv, getpid, getuid, getgid, /proc/self/comm. */
void jobid_self(const struct jobid_conf *c, char out[LOOM_JOBID_LEN]);

/*
 * Other processes' job ids, remembered per pid (the mount asks for every request). An entry is
 * good for JOBID_CACHE_TTL_NS and only for the process it was read from: it is tied to the
 * process's start time (field 22 of /proc/PID/stat), so a reused pid is read afresh. All calls
 * are thread-safe.
 */
struct jobid_cache;

/* c NULL: the defaults. 0 or -ENOMEM. */
int jobid_cache_new(const struct jobid_conf *c, struct jobid_cache **out);
void jobid_cache_free(struct jobid_cache *jc);
/* Replaces the settings and forgets what was cached. */
void jobid_cache_set_conf(struct jobid_cache *jc, const struct jobid_conf *c);
/*
 * The job id of process pid into out; uid and gid are the caller's (the FUSE request's), not
 * read from /proc. Reads /proc/PID/stat on every call (to tell a reused pid), and comm and
 * environ when not cached. An environ that cannot be read counts as one without the variable.
 * A process that is gone: its entry while fresh, else the pattern with what is known (comm
 * "unknown").
 */
void jobid_cache_get(struct jobid_cache *jc, pid_t pid, uid_t uid, gid_t gid, char out[LOOM_JOBID_LEN]);
/* As jobid_cache_get at monotonic time now_ns (clock_mono_ns's): for tests. */
void jobid_cache_get_at(struct jobid_cache *jc, pid_t pid, uid_t uid, gid_t gid, uint64_t now_ns,
			char out[LOOM_JOBID_LEN]);
/* For tests: read ROOT/PID/{stat,comm,environ} instead of /proc/PID/...; call before any get.
 * 0, or -ENAMETOOLONG. */
int jobid_cache_set_proc_root(struct jobid_cache *jc, const char *root);

#endif
