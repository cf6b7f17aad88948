/*
 * What a server counts of the requests it answers (issue 22): per opcode, the count, errors,
 * bytes in and out and a latency histogram with fixed log-scale buckets; per target (an OSS's
 * OSTs, the MDS's MDT) the data bytes read and written; and per job and target (the job id a
 * client tags each request with, wire.h LW_F_JOBID) Lustre's job_stats: each operation's
 * samples with min/max/sum of its latency, and the bytes read and written with min/max/sum.
 *
 * srv_reply() counts every answered request (server_reply.c), so that no handler can forget;
 * handlers say only what the frame layer cannot see: which target a request was for and how
 * many bytes of file data it read or wrote (srv_req's stat_* fields).
 *
 * Cost: the per-opcode counters are relaxed atomics (a few adds per reply); the per-target and
 * per-job tables take one mutex. `stats = off` in a server's settings turns all of it off (to
 * measure what it costs: docs/performance.md).
 */
#ifndef LOOM_NET_STATS_H
#define LOOM_NET_STATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/textbuf.h"
#include "proto/codec.h"
#include "proto/wire.h"

/* Latency buckets: upper bounds of 2^k microseconds for k = 0 .. STATS_LAT_BUCKETS - 2 (1 us to
 * about 4.2 s), then one for everything slower (+Inf). */
#define STATS_LAT_BUCKETS 24
#define STATS_MAX_TARGETS 64     /* targets one server counts apart (an OSS's OSTs) */
#define STATS_MAX_JOBS 8192      /* per server; an idle one goes first when full */
#define STATS_JOB_IDLE_S 600     /* Lustre's job_cleanup_interval */
#define STATS_NO_TARGET UINT32_MAX

struct stats_op {
	_Atomic uint64_t count;
	_Atomic uint64_t errors;
	_Atomic uint64_t bytes_in;    /* request body and bulk */
	_Atomic uint64_t bytes_out;   /* reply body and bulk */
	_Atomic uint64_t usec_sum;
	_Atomic uint64_t usec_min;    /* UINT64_MAX before the first */
	_Atomic uint64_t usec_max;
	_Atomic uint64_t bucket[STATS_LAT_BUCKETS]; /* each bucket's own count (not cumulative) */
};

/* samples, min, max, sum, as Lustre's stats lines (unit: usecs or bytes). */
struct stats_sample {
	uint64_t samples, min, max, sum;
};

/* The same, kept with relaxed atomics for counters noted on many threads without a lock (a
 * mount's read_bytes and write_bytes). min is UINT64_MAX before the first sample. */
struct stats_asample {
	_Atomic uint64_t samples, min, max, sum;
};

struct stats_target {
	uint32_t id;                  /* OST index, or 0 for the MDT */
	struct stats_sample read_bytes, write_bytes;
};

struct stats_job {
	char job[LW_JOBID_LEN];
	uint32_t target;
	uint64_t start_s;             /* wall clock of its first request */
	uint64_t last_s;              /* of its last (Lustre's snapshot_time) */
	struct stats_sample op[LW_OP_ROWS];    /* latency in usecs */
	struct stats_sample read_bytes, write_bytes;
	struct stats_job *next;       /* its hash chain */
};

struct srv_stats {
	bool off;
	uint64_t start_s;             /* when counting began (or was last cleared) */
	struct stats_op op[LW_OP_ROWS];
	_Atomic uint64_t resent;      /* requests marked LW_F_RESENT */
	_Atomic uint64_t reply_cache_hits; /* resends and replays answered from a reply cache */
	pthread_mutex_t lock;         /* targets and jobs */
	struct stats_target target[STATS_MAX_TARGETS];
	uint32_t ntargets;
	struct stats_job *jobs[1024]; /* hash of (target, job) */
	uint32_t njobs;
	uint32_t job_idle_s;          /* jobs idle this long are dropped (0: STATS_JOB_IDLE_S) */
};

/* One answered request, as srv_reply sees it. */
struct stats_req {
	uint16_t opcode;
	bool resent;
	int status;
	uint64_t bytes_in, bytes_out;
	uint64_t usec;
	uint32_t target;              /* STATS_NO_TARGET: none said */
	uint64_t read_bytes, write_bytes; /* file data */
	const char *job;              /* "" or NULL: none */
};

/*
 * One operation's counters, shared by every array of struct stats_op (a server's per opcode, a
 * mount's per FUSE operation: src/fuse/mstats.c): one request of usec microseconds, failed or
 * not, with its bytes in and out. Relaxed atomics only: counters noted at the same time may be
 * read a moment apart, never torn.
 */
void stats_op_reset(struct stats_op *o);
void stats_op_note(struct stats_op *o, uint64_t usec, bool failed, uint64_t bytes_in, uint64_t bytes_out);
void stats_asample_reset(struct stats_asample *x);
void stats_asample_add(struct stats_asample *x, uint64_t v);
/* A reading of x (min 0 when there are no samples). */
void stats_asample_read(const struct stats_asample *x, struct stats_sample *out);

void stats_init(struct srv_stats *s);
void stats_fini(struct srv_stats *s);
void stats_note(struct srv_stats *s, const struct stats_req *r);
/* A resent or replayed request answered from the reply cache (its first run's answer) rather
 * than run again: the MDS's handlers say so. */
void stats_note_reply_cache_hit(struct srv_stats *s);
/* Forgets the counters (ops: false keeps the per-opcode ones); or the jobs of target
 * (STATS_NO_TARGET: every target's), only job `job` of them unless NULL, as Lustre's
 * `lctl set_param *.job_stats=clear` (or =JOBID). */
void stats_clear(struct srv_stats *s, bool ops);
void stats_clear_jobs(struct srv_stats *s, uint32_t target, const char *job);

/* Drops the jobs idle past the cleanup interval; under s->lock (for the renderers). */
void stats_expire_jobs_locked(struct srv_stats *s);

/* The bucket of a latency (index into stats_op.bucket) and a bucket's upper bound in seconds
 * (+Inf for the last). */
int stats_lat_bucket(uint64_t usec);
double stats_lat_bound_s(int bucket);

/*
 * Renderings (stats_render.c), appended to tb:
 *  - Lustre's stats file: "snapshot_time", then one line per opcode seen, `NAME COUNT samples
 *    [usecs] MIN MAX SUM`, and read_bytes/write_bytes lines for target (STATS_NO_TARGET: all);
 *  - Lustre's job_stats (YAML) of target, under a `job_stats:` line;
 *  - Prometheus text: every counter, with `labels` (e.g. `server="oss"`, may be "") on each
 *    series and target_label (e.g. "ost") naming the targets as target_name() says.
 */
void stats_render_lustre(struct srv_stats *s, uint32_t target, struct textbuf *tb);
/* What those are made of, for any array of n struct stats_op whose row r is named name(r, arg)
 * (NULL: a row never shown):
 *  - snapshot_time, start_time and elapsed_time (Lustre's stats file's first lines);
 *  - one `NAME COUNT samples [usecs] MIN MAX SUM` line per row counted;
 *  - a `NAME SAMPLES samples [UNIT] MIN MAX SUM` line (nothing when x has no samples);
 *  - Prometheus' counters and latency histogram of every row counted, by label op, under the
 *    names in `names` (each after "PREFIX_"; a NULL name is not rendered). */
typedef const char *(*stats_row_name_fn)(size_t row, const void *arg);
void stats_render_snapshot(struct textbuf *tb, uint64_t start_s);
void stats_render_ops(struct stats_op *ops, size_t n, stats_row_name_fn name, const void *arg,
		      struct textbuf *tb);
void stats_render_sample(struct textbuf *tb, const char *name, const char *unit, const struct stats_sample *x);
struct stats_prom_names {
	const char *requests, *requests_help;   /* counter of stats_op.count */
	const char *errors, *errors_help;       /* ... of errors */
	const char *bytes_in, *bytes_in_help;   /* ... of bytes_in */
	const char *bytes_out, *bytes_out_help; /* ... of bytes_out */
	const char *duration, *duration_help;   /* the histogram of the buckets */
};
void stats_render_ops_prom(struct stats_op *ops, size_t n, stats_row_name_fn name, const void *arg,
			   const char *prefix, const struct stats_prom_names *names, struct textbuf *tb);
/* A Prometheus metric's "# HELP" and "# TYPE" lines. */
void stats_prom_head(struct textbuf *tb, const char *prefix, const char *name, const char *type,
		     const char *help);
void stats_render_jobs(struct srv_stats *s, uint32_t target, struct textbuf *tb);
void stats_render_prom(struct srv_stats *s, const char *prefix, const char *target_label,
		       void (*target_name)(uint32_t id, char *buf, size_t cap), struct textbuf *tb);
/* A Prometheus label value: backslash, double quote and newline escaped. */
void stats_prom_label(struct textbuf *tb, const char *value);

#endif
