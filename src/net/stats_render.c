/*
 * The counters of net/stats.h as people and programs read them: Lustre's stats and job_stats
 * files (what `lctl get_param` prints, which admins' scripts parse) and the Prometheus text
 * format (https://prometheus.io/docs/instrumenting/exposition_formats/).
 */
#include "net/stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NJOB_BUCKETS (sizeof(((struct srv_stats *)0)->jobs) / sizeof(struct stats_job *))

static uint64_t ld(_Atomic uint64_t *a)
{
	return atomic_load_explicit(a, memory_order_relaxed);
}

void stats_render_snapshot(struct textbuf *tb, uint64_t start_s)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	tb_printf(tb, "%-25s %lld.%09ld secs.nsecs\n", "snapshot_time", (long long)ts.tv_sec, ts.tv_nsec);
	tb_printf(tb, "%-25s %llu.%09u secs.nsecs\n", "start_time", (unsigned long long)start_s, 0u);
	tb_printf(tb, "%-25s %lld.%09ld secs.nsecs\n", "elapsed_time",
		  (long long)ts.tv_sec - (long long)start_s, ts.tv_nsec);
}

void stats_render_sample(struct textbuf *tb, const char *name, const char *unit, const struct stats_sample *x)
{
	if (x->samples)
		tb_printf(tb, "%-25s %llu samples [%s] %llu %llu %llu\n", name,
			  (unsigned long long)x->samples, unit, (unsigned long long)x->min,
			  (unsigned long long)x->max, (unsigned long long)x->sum);
}

void stats_render_ops(struct stats_op *ops, size_t n, stats_row_name_fn name, const void *arg,
		      struct textbuf *tb)
{
	for (size_t r = 0; r < n; r++) {
		struct stats_op *o = &ops[r];
		uint64_t count = ld(&o->count);
		const char *row = count ? name(r, arg) : NULL;

		if (!row)
			continue;
		tb_printf(tb, "%-25s %llu samples [usecs] %llu %llu %llu\n", row,
			  (unsigned long long)count, (unsigned long long)ld(&o->usec_min),
			  (unsigned long long)ld(&o->usec_max), (unsigned long long)ld(&o->usec_sum));
	}
}

/* A server's rows are ops.def's (arg: lw_op_table's). */
static const char *server_row_name(size_t row, const void *arg)
{
	const struct lw_op_info *rows = arg;

	return lw_op_stat_name(rows[row].opcode);
}

/* How many of a server's rows there are to show. */
static size_t server_rows(const struct lw_op_info **rows)
{
	size_t nrows;

	*rows = lw_op_table(&nrows);
	return nrows < LW_OP_ROWS ? nrows : LW_OP_ROWS;
}

void stats_render_lustre(struct srv_stats *s, uint32_t target, struct textbuf *tb)
{
	const struct lw_op_info *rows;
	size_t nrows = server_rows(&rows);
	struct stats_sample rd = { 0 }, wr = { 0 };

	stats_render_snapshot(tb, s->start_s);
	stats_render_ops(s->op, nrows, server_row_name, rows, tb);
	/* Counts without a time, as Lustre's `N samples [reqs]` lines (shown once there are some). */
	if (ld(&s->resent))
		tb_printf(tb, "%-25s %llu samples [reqs]\n", "resent", (unsigned long long)ld(&s->resent));
	if (ld(&s->reply_cache_hits))
		tb_printf(tb, "%-25s %llu samples [reqs]\n", "reply_cache_hits",
			  (unsigned long long)ld(&s->reply_cache_hits));
	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->ntargets; i++) {
		const struct stats_target *t = &s->target[i];

		if (target != STATS_NO_TARGET && t->id != target)
			continue;
		/* One target's, or all of them summed (min and max over all). */
		for (int k = 0; k < 2; k++) {
			const struct stats_sample *x = k ? &t->write_bytes : &t->read_bytes;
			struct stats_sample *y = k ? &wr : &rd;

			if (!x->samples)
				continue;
			if (!y->samples || x->min < y->min)
				y->min = x->min;
			if (x->max > y->max)
				y->max = x->max;
			y->samples += x->samples;
			y->sum += x->sum;
		}
	}
	pthread_mutex_unlock(&s->lock);
	stats_render_sample(tb, "read_bytes", "bytes", &rd);
	stats_render_sample(tb, "write_bytes", "bytes", &wr);
}

static void yaml_sample(struct textbuf *tb, const char *name, const char *unit, const struct stats_sample *x)
{
	char key[32];

	snprintf(key, sizeof(key), "%s:", name);
	tb_printf(tb, "  %-16s { samples: %11llu, unit: %5s, min: %8llu, max: %8llu, sum: %16llu }\n", key,
		  (unsigned long long)x->samples, unit, (unsigned long long)x->min,
		  (unsigned long long)x->max, (unsigned long long)x->sum);
}

static int job_cmp(const void *a, const void *b)
{
	const struct stats_job *x = *(const struct stats_job *const *)a, *y = *(const struct stats_job *const *)b;

	return strcmp(x->job, y->job);
}

void stats_render_jobs(struct srv_stats *s, uint32_t target, struct textbuf *tb)
{
	size_t nrows, n = 0;
	const struct lw_op_info *rows = lw_op_table(&nrows);
	struct stats_job **list;

	tb_printf(tb, "job_stats:\n");
	pthread_mutex_lock(&s->lock);
	stats_expire_jobs_locked(s);
	list = calloc(s->njobs ? s->njobs : 1, sizeof(*list));
	if (!list) {
		pthread_mutex_unlock(&s->lock);
		tb->err = tb->err ? tb->err : -ENOMEM;
		return;
	}
	for (size_t b = 0; b < NJOB_BUCKETS; b++)
		for (struct stats_job *j = s->jobs[b]; j; j = j->next)
			if (target == STATS_NO_TARGET || j->target == target)
				list[n++] = j;
	/* In a stable order (by job id), so that two readings line up. */
	qsort(list, n, sizeof(*list), job_cmp);
	for (size_t i = 0; i < n; i++) {
		const struct stats_job *j = list[i];

		tb_printf(tb, "- %-16s %s\n", "job_id:", j->job);
		tb_printf(tb, "  %-16s %llu\n", "snapshot_time:", (unsigned long long)j->last_s);
		tb_printf(tb, "  %-16s %llu\n", "start_time:", (unsigned long long)j->start_s);
		tb_printf(tb, "  %-16s %llu\n", "elapsed_time:", (unsigned long long)(j->last_s - j->start_s));
		yaml_sample(tb, "read_bytes", "bytes", &j->read_bytes);
		yaml_sample(tb, "write_bytes", "bytes", &j->write_bytes);
		for (size_t r = 0; r < nrows && r < LW_OP_ROWS; r++)
			if (j->op[r].samples)
				yaml_sample(tb, lw_op_stat_name(rows[r].opcode), "usecs", &j->op[r]);
	}
	pthread_mutex_unlock(&s->lock);
	free(list);
}

void stats_prom_label(struct textbuf *tb, const char *value)
{
	tb_append(tb, "\"", 1);
	for (const char *p = value; *p; p++) {
		if (*p == '\\' || *p == '"')
			tb_printf(tb, "\\%c", *p);
		else if (*p == '\n')
			tb_append(tb, "\\n", 2);
		else
			tb_append(tb, p, 1);
	}
	tb_append(tb, "\"", 1);
}

void stats_prom_head(struct textbuf *tb, const char *prefix, const char *name, const char *type,
		     const char *help)
{
	tb_printf(tb, "# HELP %s_%s %s\n# TYPE %s_%s %s\n", prefix, name, help, prefix, name, type);
}

/* A float as Prometheus reads it. */
static void prom_float(struct textbuf *tb, double v)
{
	if (__builtin_isinf(v))
		tb_printf(tb, "+Inf");
	else
		tb_printf(tb, "%.9g", v);
}

void stats_render_ops_prom(struct stats_op *ops, size_t n, stats_row_name_fn name, const void *arg,
			   const char *prefix, const struct stats_prom_names *names, struct textbuf *tb)
{
	const struct {
		const char *name, *help;
		size_t off;
	} counters[] = {
		{ names->requests, names->requests_help, offsetof(struct stats_op, count) },
		{ names->errors, names->errors_help, offsetof(struct stats_op, errors) },
		{ names->bytes_in, names->bytes_in_help, offsetof(struct stats_op, bytes_in) },
		{ names->bytes_out, names->bytes_out_help, offsetof(struct stats_op, bytes_out) },
	};
	const char *dur = names->duration;

	for (size_t c = 0; c < sizeof(counters) / sizeof(counters[0]); c++) {
		if (!counters[c].name)
			continue;
		stats_prom_head(tb, prefix, counters[c].name, "counter", counters[c].help);
		for (size_t r = 0; r < n; r++) {
			struct stats_op *o = &ops[r];
			const char *op = ld(&o->count) ? name(r, arg) : NULL;

			if (!op)
				continue;
			tb_printf(tb, "%s_%s{op=\"%s\"} %llu\n", prefix, counters[c].name, op,
				  (unsigned long long)ld((_Atomic uint64_t *)((char *)o + counters[c].off)));
		}
	}
	if (!dur)
		return;
	stats_prom_head(tb, prefix, dur, "histogram", names->duration_help);
	for (size_t r = 0; r < n; r++) {
		struct stats_op *o = &ops[r];
		const char *op = ld(&o->count) ? name(r, arg) : NULL;
		uint64_t cum = 0;

		if (!op)
			continue;
		for (int b = 0; b < STATS_LAT_BUCKETS; b++) {
			cum += ld(&o->bucket[b]);
			/* (The last bucket is +Inf: every request, even one counted after count was read.) */
			tb_printf(tb, "%s_%s_bucket{op=\"%s\",le=\"", prefix, dur, op);
			prom_float(tb, stats_lat_bound_s(b));
			tb_printf(tb, "\"} %llu\n", (unsigned long long)cum);
		}
		tb_printf(tb, "%s_%s_sum{op=\"%s\"} ", prefix, dur, op);
		prom_float(tb, (double)ld(&o->usec_sum) / 1e6);
		tb_printf(tb, "\n%s_%s_count{op=\"%s\"} %llu\n", prefix, dur, op, (unsigned long long)cum);
	}
}

static void prom_ops(struct srv_stats *s, const char *prefix, struct textbuf *tb)
{
	static const struct stats_prom_names names = {
		"rpc_requests_total", "Requests answered, by operation.",
		"rpc_errors_total", "Requests answered with an error, by operation.",
		"rpc_received_bytes_total", "Request bytes (body and bulk), by operation.",
		"rpc_sent_bytes_total", "Reply bytes (body and bulk), by operation.",
		"rpc_duration_seconds", "Time from a request's last byte in to its reply queued, by operation.",
	};
	const struct lw_op_info *rows;
	size_t nrows = server_rows(&rows);

	stats_render_ops_prom(s->op, nrows, server_row_name, rows, prefix, &names, tb);
	stats_prom_head(tb, prefix, "rpc_resent_total", "counter",
			"Requests a client sent again after a reconnection.");
	tb_printf(tb, "%s_rpc_resent_total %llu\n", prefix, (unsigned long long)ld(&s->resent));
	stats_prom_head(tb, prefix, "rpc_reply_cache_hits_total", "counter",
			"Resent or replayed requests answered from the reply cache instead of run again.");
	tb_printf(tb, "%s_rpc_reply_cache_hits_total %llu\n", prefix,
		  (unsigned long long)ld(&s->reply_cache_hits));
}

void stats_render_prom(struct srv_stats *s, const char *prefix, const char *target_label,
		       void (*target_name)(uint32_t id, char *buf, size_t cap), struct textbuf *tb)
{
	static const struct {
		const char *what, *help;
		bool write, bytes;
	} per[] = {
		{ "read_bytes_total", "File data bytes read", false, true },
		{ "write_bytes_total", "File data bytes written", true, true },
		{ "reads_total", "Requests that read file data", false, false },
		{ "writes_total", "Requests that wrote file data", true, false },
	};
	size_t nrows;
	const struct lw_op_info *rows = lw_op_table(&nrows);
	char name[64];

	prom_ops(s, prefix, tb);
	pthread_mutex_lock(&s->lock);
	stats_expire_jobs_locked(s);
	for (size_t k = 0; k < sizeof(per) / sizeof(per[0]); k++) {
		tb_printf(tb, "# HELP %s_%s_%s %s, by %s.\n# TYPE %s_%s_%s counter\n", prefix, target_label,
			  per[k].what, per[k].help, target_label, prefix, target_label, per[k].what);
		for (uint32_t i = 0; i < s->ntargets; i++) {
			const struct stats_sample *x = per[k].write ? &s->target[i].write_bytes : &s->target[i].read_bytes;

			target_name(s->target[i].id, name, sizeof(name));
			tb_printf(tb, "%s_%s_%s{%s=\"%s\"} %llu\n", prefix, target_label, per[k].what, target_label,
				  name, (unsigned long long)(per[k].bytes ? x->sum : x->samples));
		}
	}
	for (size_t k = 0; k < 2; k++) {
		tb_printf(tb, "# HELP %s_job_%s %s, by job and %s.\n# TYPE %s_job_%s counter\n", prefix,
			  per[k].what, per[k].help, target_label, prefix, per[k].what);
		for (size_t b = 0; b < NJOB_BUCKETS; b++)
			for (struct stats_job *j = s->jobs[b]; j; j = j->next) {
				const struct stats_sample *x = per[k].write ? &j->write_bytes : &j->read_bytes;

				target_name(j->target, name, sizeof(name));
				tb_printf(tb, "%s_job_%s{job=", prefix, per[k].what);
				stats_prom_label(tb, j->job);
				tb_printf(tb, ",%s=\"%s\"} %llu\n", target_label, name, (unsigned long long)x->sum);
			}
	}
	tb_printf(tb, "# HELP %s_job_requests_total Requests answered, by job, %s and operation.\n"
		  "# TYPE %s_job_requests_total counter\n", prefix, target_label, prefix);
	for (size_t b = 0; b < NJOB_BUCKETS; b++)
		for (struct stats_job *j = s->jobs[b]; j; j = j->next) {
			target_name(j->target, name, sizeof(name));
			for (size_t r = 0; r < nrows && r < LW_OP_ROWS; r++) {
				if (!j->op[r].samples)
					continue;
				tb_printf(tb, "%s_job_requests_total{job=", prefix);
				stats_prom_label(tb, j->job);
				tb_printf(tb, ",%s=\"%s\",op=\"%s\"} %llu\n", target_label, name,
					  lw_op_stat_name(rows[r].opcode), (unsigned long long)j->op[r].samples);
			}
		}
	pthread_mutex_unlock(&s->lock);
}
