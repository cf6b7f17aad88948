/*
 * The servers' statistics as `loom top` and `loom dashboard` read them: lctl-style text from
 * loom_get_param ("*.stats", "*.job_stats") into counters per target and per job on a target.
 * One parser for both tools, so that their figures cannot drift apart.
 *
 * Every counter is cumulative since the server started (or since a `clear`): a tool shows what
 * moved as the difference of two readings, stats_delta().
 */
#ifndef LOOM_TOOLS_STATSREAD_H
#define LOOM_TOOLS_STATSREAD_H

#include <stdbool.h>

#include "loom/loom.h"

#define STATS_MAX_TARGETS 256
#define STATS_MAX_JOBS    1024 /* (target, job) pairs per reading; beyond, left out */

struct stats_target {
	char name[48];              /* "OST0001", "MDT0000" */
	unsigned long long ops;     /* requests, an administrator's tools' left out (stats_admin_op) */
	unsigned long long rd, wr;  /* data bytes read and written */
	unsigned long long lat_n;   /* of ops, those timed ([usecs]), and their summed time (µs) */
	unsigned long long lat_us;
};

/* One job's counters on one target, or (stats_job_totals) summed over the targets. */
struct stats_job {
	char id[32];
	int target;                 /* index in stats_reading.t; -1 in totals */
	unsigned long long rd, wr, ops;
};

struct stats_reading {
	struct stats_target t[STATS_MAX_TARGETS];
	int nt;
	struct stats_job j[STATS_MAX_JOBS];
	int nj;
};

/* Requests an administrator's tools make (get_param, pings, heartbeats...), not the file system's
 * work: left out of ops, so that watching does not show as load. */
bool stats_admin_op(const char *name);

/*
 * Adds to r what text holds of "*.stats" and "*.job_stats" blocks (other parameters' blocks are
 * skipped, so text may be all of "*"). text is changed (split into lines). r must start zeroed
 * (memset) before the first call of a reading.
 */
void stats_parse(char *text, struct stats_reading *r);

/* One reading: loom_get_param of "*.stats" and "*.job_stats", parsed into r (zeroed first).
 * 0 or loom_get_param's error ("no job_stats anywhere" is no error). */
int stats_read(loom_fs *fs, struct stats_reading *r);

/* r's jobs summed over the targets into out (room for STATS_MAX_JOBS); returns how many. */
int stats_job_totals(const struct stats_reading *r, struct stats_job *out);

/* The target of r named name, or NULL. */
const struct stats_target *stats_target_find(const struct stats_reading *r, const char *name);

/* What moved between two readings of a counter (one that went back was cleared, or its server
 * restarted: it counts from 0). */
static inline unsigned long long stats_delta(unsigned long long now, unsigned long long before)
{
	return now >= before ? now - before : now;
}

#endif
