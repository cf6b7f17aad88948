/*
 * loom dashboard: its state as /api/status, the JSON the page (web/src/app.js) draws:
 *
 *   { "fsname", "mds", "interval" (s), "now", "started", "updated" (ms since the epoch; updated:
 *     the last poll that read something, null before), "error" (null, or why the last poll failed),
 *     "window_s" (what the series cover at most), "minute_s" (what the jobs' minute covers),
 *     "clients" (the MDT's connected clients),
 *     "recovery": { "status": "INACTIVE|RECOVERING|COMPLETE", "time_remaining", ... } as the MDS's
 *                 recovery_status says (numbers as numbers), or null,
 *     "targets": [ { "name": "OST0001", "kind": "OST", "index", "uuid", "state": "up|down",
 *                    "reason": null|"inactive"|"not answering", "size", "used", "avail" (bytes,
 *                    the last known; null before any), "files", "files_free",
 *                    "read_Bps", "write_Bps", "ops_s" (the last interval; null when down) } ],
 *     "series": { "t": [ms...], "ops_s", "read_Bps", "write_Bps", "lat_mdt_us", "lat_ost_us": [...] }
 *               (columns of equal length, oldest first, null where nothing is known),
 *     "jobs": [ { "id", "read_Bps", "write_Bps", "ops_s" (the last interval),
 *                 "read_bytes_minute", "write_bytes_minute" (the last minute_s seconds),
 *                 "read_bytes", "write_bytes", "ops" (the job's totals in job_stats, a
 *                 target down counting with its last figures) } ]
 *             (the busiest of the last minute first) }
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "tools/dashboard.h"

/* A rate with `digits` decimals (as written, not json-c's 17 digits), or null. */
static json_object *jnum(double v, int digits)
{
	char buf[64];

	if (isnan(v) || isinf(v))
		return NULL;
	snprintf(buf, sizeof(buf), "%.*f", digits, v);
	return json_object_new_double_s(v, buf);
}

static json_object *juint(unsigned long long v)
{
	return json_object_new_uint64(v);
}

static void add(json_object *o, const char *key, json_object *v)
{
	json_object_object_add(o, key, v);
}

static json_object *recovery_json(const struct dash_state *s)
{
	json_object *r;

	if (!s->have_recovery)
		return NULL;
	r = json_object_new_object();
	for (int i = 0; i < s->nrec; i++) {
		const char *v = s->rec_val[i];
		char *end;
		unsigned long long n = strtoull(v, &end, 10);

		add(r, s->rec_key[i], end != v && !*end ? juint(n) : json_object_new_string(v));
	}
	return r;
}

static json_object *target_json(const struct dash_target *t)
{
	json_object *o = json_object_new_object();
	bool up = t->answered && !t->inactive;

	add(o, "name", json_object_new_string(t->name));
	add(o, "kind", json_object_new_string(t->ost ? "OST" : "MDT"));
	add(o, "index", json_object_new_int64(t->idx));
	add(o, "uuid", t->uuid[0] ? json_object_new_string(t->uuid) : NULL);
	add(o, "state", json_object_new_string(up ? "up" : "down"));
	add(o, "reason", up ? NULL : json_object_new_string(t->inactive ? "inactive" : "not answering"));
	/* As df(1) and `loom df` count them: used = total - free; the bar is used / (used + avail). */
	add(o, "size", t->have_space ? juint(t->kb_total * 1024) : NULL);
	add(o, "used", t->have_space ? juint((t->kb_total - (t->kb_free < t->kb_total ? t->kb_free : t->kb_total)) * 1024) : NULL);
	add(o, "avail", t->have_space ? juint(t->kb_avail * 1024) : NULL);
	add(o, "files", t->have_space ? juint(t->files_total) : NULL);
	add(o, "files_free", t->have_space ? juint(t->files_free) : NULL);
	add(o, "read_Bps", up ? jnum(t->rd_Bps, 0) : NULL);
	add(o, "write_Bps", up ? jnum(t->wr_Bps, 0) : NULL);
	add(o, "ops_s", up ? jnum(t->ops_s, 1) : NULL);
	return o;
}

static json_object *series_json(const struct dash_state *s)
{
	static const char *const keys[] = { "t", "ops_s", "read_Bps", "write_Bps", "lat_mdt_us", "lat_ost_us" };
	json_object *o = json_object_new_object(), *col[6];

	for (int k = 0; k < 6; k++) {
		col[k] = json_object_new_array_ext((int)s->n);
		add(o, keys[k], col[k]);
	}
	for (unsigned i = 0; i < s->n; i++) {
		const struct dash_sample *x = &s->ring[(s->head + i) % s->cap];

		json_object_array_add(col[0], json_object_new_int64(x->t_ms));
		json_object_array_add(col[1], jnum(x->ops_s, 1));
		json_object_array_add(col[2], jnum(x->rd_Bps, 0));
		json_object_array_add(col[3], jnum(x->wr_Bps, 0));
		json_object_array_add(col[4], jnum(x->lat_mdt_us, 1));
		json_object_array_add(col[5], jnum(x->lat_ost_us, 1));
	}
	return o;
}

struct job_rank {
	const struct dash_job *j;
	unsigned long long minute, total;
};

static int job_cmp(const void *a, const void *b)
{
	const struct job_rank *x = a, *y = b;

	if (x->minute != y->minute)
		return x->minute < y->minute ? 1 : -1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return strcmp(x->j->id, y->j->id);
}

/* What a job moved in the DASH_MINUTE seconds up to now_s. */
static void minute_bytes(const struct dash_job *j, long long now_s, unsigned long long *rd, unsigned long long *wr)
{
	*rd = *wr = 0;
	for (int k = 0; k < DASH_MINUTE; k++) {
		if (j->sec[k] >= 0 && j->sec[k] <= now_s && now_s - j->sec[k] < DASH_MINUTE) {
			*rd += j->min_rd[k];
			*wr += j->min_wr[k];
		}
	}
}

static json_object *jobs_json(const struct dash_state *s, int64_t now_ms)
{
	static struct job_rank rank[DASH_MAX_JOBS]; /* the HTTP thread's only: one request at a time */
	json_object *a = json_object_new_array();

	for (int i = 0; i < s->nj; i++) {
		unsigned long long rd, wr;

		minute_bytes(&s->jobs[i], now_ms / 1000, &rd, &wr);
		rank[i] = (struct job_rank){ &s->jobs[i], rd + wr, s->jobs[i].rd + s->jobs[i].wr };
	}
	qsort(rank, (size_t)s->nj, sizeof(rank[0]), job_cmp);
	for (int i = 0; i < s->nj; i++) {
		const struct dash_job *j = rank[i].j;
		json_object *o = json_object_new_object();
		unsigned long long rd, wr;

		minute_bytes(j, now_ms / 1000, &rd, &wr);
		add(o, "id", json_object_new_string(j->id));
		add(o, "read_Bps", jnum(j->rd_Bps, 0));
		add(o, "write_Bps", jnum(j->wr_Bps, 0));
		add(o, "ops_s", jnum(j->ops_s, 1));
		add(o, "read_bytes_minute", juint(rd));
		add(o, "write_bytes_minute", juint(wr));
		add(o, "read_bytes", juint(j->rd));
		add(o, "write_bytes", juint(j->wr));
		add(o, "ops", juint(j->ops));
		json_object_array_add(a, o);
	}
	return a;
}

int dash_status_json(struct dash_state *s, int64_t now_ms, char **out, size_t *len)
{
	json_object *o = json_object_new_object(), *targets;
	const char *text;
	size_t n;
	int64_t since;
	int rc = 0;

	if (!o)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	since = (now_ms - s->started_ms) / 1000;
	add(o, "fsname", json_object_new_string(s->fsname));
	add(o, "mds", json_object_new_string(s->mds));
	add(o, "interval", jnum(s->interval, 3));
	add(o, "now", json_object_new_int64(now_ms));
	add(o, "started", json_object_new_int64(s->started_ms));
	add(o, "updated", s->updated_ms ? json_object_new_int64(s->updated_ms) : NULL);
	add(o, "error", s->error[0] ? json_object_new_string(s->error) : NULL);
	add(o, "window_s", json_object_new_int(DASH_WINDOW_S));
	add(o, "minute_s", json_object_new_int64(since < DASH_MINUTE ? (since > 0 ? since : 0) : DASH_MINUTE));
	add(o, "clients", s->clients >= 0 ? json_object_new_int64(s->clients) : NULL);
	add(o, "recovery", recovery_json(s));
	targets = json_object_new_array();
	for (int i = 0; i < s->nt; i++)
		json_object_array_add(targets, target_json(&s->t[i]));
	add(o, "targets", targets);
	add(o, "series", series_json(s));
	add(o, "jobs", jobs_json(s, now_ms));
	pthread_mutex_unlock(&s->lock);

	text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
	*out = text ? malloc(n + 1) : NULL;
	if (*out) {
		memcpy(*out, text, n + 1);
		*len = n;
	} else {
		rc = -ENOMEM;
	}
	json_object_put(o);
	return rc;
}
