/*
 * loom dashboard: what its files share. dashboard.c polls the servers and serves HTTP;
 * dashboard_state.c turns each reading into the state below (targets, a ring of samples, jobs,
 * recovery); dashboard_json.c writes that state as /api/status. The web page itself (web/) is
 * compiled in: dashboard_assets.c, generated at build time by scripts/web_embed.py.
 */
#ifndef LOOM_TOOLS_DASHBOARD_H
#define LOOM_TOOLS_DASHBOARD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/statsread.h"

/* One static file of the page: its URL path ("/app.js"), content type and bytes. */
struct dash_asset {
	const char *path;
	const char *type;
	const unsigned char *data;
	size_t len;
};

/* dashboard_assets.c (generated): dash_nassets files, then a NULL entry. With none, the front
 * end was not built and dash_assets_missing says why. */
extern const struct dash_asset dash_assets[];
extern const size_t dash_nassets;
extern const char dash_assets_missing[];

#define DASH_WINDOW_S   600  /* the samples kept: the last 10 minutes */
#define DASH_MAX_JOBS   256  /* jobs followed (by the bytes they moved, the busiest) */
#define DASH_MINUTE     60   /* seconds of each job's "last minute" */
#define DASH_RECOVERY_KEYS 8

/* One poll's figures over every target that answered this time and the last: rates over the
 * interval. NAN where nothing is known (no reading, or no request to time). */
struct dash_sample {
	int64_t t_ms;         /* wall clock, ms since the epoch */
	double ops_s;         /* requests/s, an administrator's tools' left out (stats_admin_op) */
	double rd_Bps, wr_Bps;
	double lat_mdt_us, lat_ost_us; /* mean time of a request: delta(sum) / delta(count) */
};

struct dash_target {
	char name[16];        /* "MDT0000", "OST0001" */
	bool ost;
	uint32_t idx;
	char uuid[40];
	bool listed;          /* in the MDS's OST table now (the MDT: always) */
	bool inactive;        /* the MDS marked it inactive (its OSS stopped answering) */
	bool answered;        /* its server answered the last poll */
	bool have_space;      /* the kbytes figures below were read once at least (kept when down) */
	unsigned long long kb_total, kb_free, kb_avail, files_total, files_free;
	double rd_Bps, wr_Bps, ops_s; /* the last interval; NAN when not known */
};

struct dash_job {
	char id[32];
	unsigned long long rd, wr, ops; /* job_stats summed over the targets (known, above) */
	double rd_Bps, wr_Bps, ops_s;   /* the last interval */
	/* Bytes moved per wall-clock second over the last minute: slot s % 60 holds second s. */
	long long sec[DASH_MINUTE];
	unsigned long long min_rd[DASH_MINUTE], min_wr[DASH_MINUTE];
};

struct dash_state {
	pthread_mutex_t lock;     /* the poller writes, the HTTP thread reads: everything below */
	char fsname[16];
	char mds[512];
	double interval;          /* seconds between polls */
	int64_t started_ms, updated_ms; /* updated: the last poll that read something (0: none) */
	char error[256];          /* the last poll's failure, or "" */

	struct dash_sample *ring; /* the last DASH_WINDOW_S seconds, oldest at head */
	unsigned cap, head, n;

	struct dash_target t[STATS_MAX_TARGETS];
	int nt;
	struct dash_job *jobs;    /* DASH_MAX_JOBS */
	int nj;

	bool have_recovery;
	char rec_key[DASH_RECOVERY_KEYS][32], rec_val[DASH_RECOVERY_KEYS][64];
	int nrec;
	long long clients;        /* the MDT's num_exports; -1 when not known */

	/* The poller's own: the previous reading, to take differences from (have_prev); and the
	 * last known counters of every target the MDS lists (known: this reading's, and the last
	 * of those that did not answer), which the jobs' totals are summed from. */
	struct stats_reading *prev, *cur, *known, *merge;
	bool have_prev;
	double prev_mono;
};

/* dashboard_state.c */
int dash_state_init(struct dash_state *s, double interval, const char *fsname, const char *mds);
void dash_state_free(struct dash_state *s);
/* One poll's answer: text is loom_get_param's of "*" (changed: split into lines), or NULL with
 * err its failure. now_ms and mono: when it was read (wall clock, and CLOCK_MONOTONIC seconds).
 * Takes s->lock. */
void dash_state_update(struct dash_state *s, char *text, int err, int64_t now_ms, double mono);

/* dashboard_json.c: s as /api/status's JSON, malloc'd into *out (*len bytes). Takes s->lock. */
int dash_status_json(struct dash_state *s, int64_t now_ms, char **out, size_t *len);

#endif
