/*
 * The mount's own counters (mstats.h): the per-thread current operation, and the texts they are
 * shown as -- Lustre's llite parameters (stats, statahead_stats, read_ahead_stats) and Loom's
 * cache_stats and write_behind_stats, and Prometheus' loom_client_* metrics.
 */
#include "fuse/mstats.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom/loom_ll.h"
#include "net/http.h"
#include "net/params.h"

static const struct {
	const char *handler; /* lm_HANDLER */
	const char *name;
	unsigned answers;    /* LM_ANS_* */
	enum lm_op_bytes bytes;
} op_info[LM_OP_ROWS] = {
#define LM_OP_INFO_(handler, name, answers, bytes) { #handler, name, answers, bytes },
	LM_OPS(LM_OP_INFO_)
#undef LM_OP_INFO_
};

static uint64_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void lm_mstats_clear(struct lm_mstats *ms)
{
	for (int r = 0; r < LM_OP_ROWS; r++)
		stats_op_reset(&ms->op[r]);
	stats_asample_reset(&ms->read_bytes);
	stats_asample_reset(&ms->write_bytes);
	for (int c = 0; c < LM_CACHE_STATS; c++)
		atomic_store_explicit(&ms->cache[c], 0, memory_order_relaxed);
	loom_client_stats_clear();
	atomic_store_explicit(&ms->start_s, now_s(), memory_order_relaxed);
}

void lm_mstats_init(struct lm_mstats *ms, const char *fsname, uint64_t id)
{
	memset(ms, 0, sizeof(*ms));
	snprintf(ms->instance, sizeof(ms->instance), "%s-%016llx", fsname, (unsigned long long)id);
	lm_mstats_clear(ms);
}

int lm_op_row_resolve(_Atomic int *cached, const char *func)
{
	const char *handler = strncmp(func, "lm_", 3) == 0 ? func + 3 : func;

	for (int r = 0; r < LM_OP_ROWS; r++)
		if (!strcmp(op_info[r].handler, handler)) {
			/* Two threads may both look it up the first time: they store the same row. */
			atomic_store_explicit(cached, r, memory_order_relaxed);
			return r;
		}
	return -1;
}

const char *lm_op_name(int row)
{
	return row >= 0 && row < LM_OP_ROWS ? op_info[row].name : NULL;
}

bool lm_op_err_counts(int row, int err)
{
	unsigned answers = row >= 0 && row < LM_OP_ROWS ? op_info[row].answers : 0;

	err = err < 0 ? -err : err;
	if (err == 0 || err == ENOSYS)
		return false;
	if ((answers & LM_ANS_ENOENT) && err == ENOENT)
		return false;
	if ((answers & LM_ANS_XATTR) && (err == ENODATA || err == ERANGE))
		return false;
	if ((answers & LM_ANS_ENOTTY) && err == ENOTTY)
		return false;
	if ((answers & LM_ANS_ENXIO) && err == ENXIO)
		return false;
	return true;
}

/* The request this thread is answering: one at a time (a handler never calls another's). */
static _Thread_local struct {
	struct lm_mstats *ms; /* NULL: none, or noted already */
	int row;
	bool failed;
	uint64_t start_ns;
	uint64_t bytes;
} op_now;

void lm_op_begin(struct lm_mstats *ms, int row)
{
	op_now.ms = row >= 0 && row < LM_OP_ROWS && ms && !ms->off ? ms : NULL;
	op_now.row = row;
	op_now.failed = false;
	op_now.bytes = 0;
	op_now.start_ns = op_now.ms ? mono_ns() : 0;
}

void lm_op_error(int err)
{
	if (op_now.ms && lm_op_err_counts(op_now.row, err))
		op_now.failed = true;
}

void lm_op_bytes(uint64_t n)
{
	if (op_now.ms)
		op_now.bytes += n;
}

void lm_op_end(void)
{
	struct lm_mstats *ms = op_now.ms;
	enum lm_op_bytes kind;
	uint64_t usec, n = op_now.bytes;

	if (!ms)
		return;
	op_now.ms = NULL;
	usec = (mono_ns() - op_now.start_ns) / 1000;
	kind = op_info[op_now.row].bytes;
	stats_op_note(&ms->op[op_now.row], usec, op_now.failed, kind == LM_BYTES_WRITE ? n : 0,
		      kind == LM_BYTES_READ ? n : 0);
	/* As Lustre's read_bytes and write_bytes: one sample per request that moved data. */
	if (n && kind == LM_BYTES_READ)
		stats_asample_add(&ms->read_bytes, n);
	else if (n && kind == LM_BYTES_WRITE)
		stats_asample_add(&ms->write_bytes, n);
}

/*
 * The cache counters, each shown as a line of one parameter and as one Prometheus counter:
 * Lustre's statahead_stats lines ("hit_total: N"), else read_ahead_stats' ("hits N samples
 * [UNIT]"). A counter is the mount's (mount >= 0: an lm_cache_stat) or libloom's (at client_off
 * in struct loom_client_stats).
 */
#define CLIENT(field) -1, offsetof(struct loom_client_stats, field)
#define MOUNT(stat)   stat, 0
static const struct cache_line {
	const char *param, *line, *unit, *prom, *help;
	int mount;
	size_t client_off;
} cache_lines[] = {
	{ "statahead_stats", "statahead total", NULL, "statahead_listings_total",
	  "Directories fetched whole for statahead.", MOUNT(LM_SA_LISTING) },
	{ "statahead_stats", "hit_total", NULL, "statahead_hits_total",
	  "Lookups answered from a statahead listing.", MOUNT(LM_SA_HIT) },
	{ "statahead_stats", "miss_total", NULL, "statahead_misses_total",
	  "Lookups in a directory followed by statahead that its listing did not answer.", MOUNT(LM_SA_MISS) },
	{ "read_ahead_stats", "hits", "items", "prefetch_hits_total",
	  "Prefetched items that were ready when taken.", CLIENT(prefetch_hits) },
	{ "read_ahead_stats", "waits", "items", "prefetch_waits_total",
	  "Prefetched items taken while still being read.", CLIENT(prefetch_waits) },
	{ "read_ahead_stats", "misses", "items", "prefetch_misses_total",
	  "Items the reader read itself, ahead of the prefetcher.", CLIENT(prefetch_misses) },
	{ "cache_stats", "page_cache_kept", "opens", "page_cache_kept_total",
	  "Opens that kept the pages the kernel cached of the file.", MOUNT(LM_PAGES_KEPT) },
	{ "cache_stats", "page_cache_dropped", "opens", "page_cache_dropped_total",
	  "Opens that did not keep them (the file changed, or nothing was known of them).", MOUNT(LM_PAGES_DROPPED) },
	{ "cache_stats", "dom_hits", "reads", "dom_hits_total",
	  "Reads of Data-on-MDT bytes answered from this client's copy.", CLIENT(dom_hits) },
	{ "cache_stats", "dom_misses", "reads", "dom_misses_total",
	  "Reads of Data-on-MDT bytes that fetched them from the MDS.", CLIENT(dom_misses) },
	{ "write_behind_stats", "writes_behind", "writes", "writes_behind_total",
	  "Writes answered before the OSTs had them.", CLIENT(writes_behind) },
	{ "write_behind_stats", "writes_sync", "writes", "writes_sync_total",
	  "Writes answered once written.", CLIENT(writes_sync) },
	{ "write_behind_stats", "creates_behind", "creates", "creates_behind_total",
	  "Creates answered by the mount and sent behind.", CLIENT(creates_behind) },
	{ "write_behind_stats", "unlinks_behind", "unlinks", "unlinks_behind_total",
	  "Unlinks answered by the mount and sent behind.", CLIENT(unlinks_behind) },
};
#undef CLIENT
#undef MOUNT

static uint64_t cache_value(struct lm_mstats *ms, const struct loom_client_stats *cs,
			    const struct cache_line *l)
{
	if (l->mount >= 0)
		return atomic_load_explicit(&ms->cache[l->mount], memory_order_relaxed);
	return *(const uint64_t *)((const char *)cs + l->client_off);
}

static void render_cache(struct lm_mstats *ms, const char *param, struct textbuf *tb)
{
	struct loom_client_stats cs;

	loom_client_stats(&cs, sizeof(cs));
	for (size_t i = 0; i < sizeof(cache_lines) / sizeof(cache_lines[0]); i++) {
		const struct cache_line *l = &cache_lines[i];

		if (strcmp(l->param, param))
			continue;
		if (l->unit)
			tb_printf(tb, "%-25s %llu samples [%s]\n", l->line,
				  (unsigned long long)cache_value(ms, &cs, l), l->unit);
		else
			tb_printf(tb, "%s: %llu\n", l->line, (unsigned long long)cache_value(ms, &cs, l));
	}
}

static const char *row_name(size_t row, const void *arg)
{
	(void)arg;
	return op_info[row].name;
}

static void get_stats(void *ctx, uint32_t target, struct textbuf *tb)
{
	struct lm_mstats *ms = ctx;
	struct stats_sample x;

	(void)target;
	stats_render_snapshot(tb, atomic_load_explicit(&ms->start_s, memory_order_relaxed));
	stats_render_ops(ms->op, LM_OP_ROWS, row_name, NULL, tb);
	stats_asample_read(&ms->read_bytes, &x);
	stats_render_sample(tb, "read_bytes", "bytes", &x);
	stats_asample_read(&ms->write_bytes, &x);
	stats_render_sample(tb, "write_bytes", "bytes", &x);
}

static void get_statahead(void *ctx, uint32_t target, struct textbuf *tb)
{
	(void)target;
	render_cache(ctx, "statahead_stats", tb);
}

static void get_read_ahead(void *ctx, uint32_t target, struct textbuf *tb)
{
	(void)target;
	render_cache(ctx, "read_ahead_stats", tb);
}

static void get_cache(void *ctx, uint32_t target, struct textbuf *tb)
{
	(void)target;
	render_cache(ctx, "cache_stats", tb);
}

static void get_write_behind(void *ctx, uint32_t target, struct textbuf *tb)
{
	(void)target;
	render_cache(ctx, "write_behind_stats", tb);
}

static void set_clear(void *ctx, uint32_t target, const char *value)
{
	(void)target;
	(void)value;
	lm_mstats_clear(ctx);
}

static const struct param_def mstats_params[] = {
	{ "stats", get_stats, param_check_clear, set_clear, true },
	{ "statahead_stats", get_statahead, NULL, NULL, true },
	{ "read_ahead_stats", get_read_ahead, NULL, NULL, true },
	{ "cache_stats", get_cache, NULL, NULL, true },
	{ "write_behind_stats", get_write_behind, NULL, NULL, true },
};

static void mstats_target(struct lm_mstats *ms, struct param_target *t)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->prefix, sizeof(t->prefix), "llite.%s", ms->instance);
	t->defs = mstats_params;
	t->ndefs = sizeof(mstats_params) / sizeof(mstats_params[0]);
	t->ctx = ms;
}

void lm_mstats_get_param(struct lm_mstats *ms, const char *pattern, struct textbuf *tb, uint32_t *matched)
{
	struct param_target t;

	mstats_target(ms, &t);
	params_get(&t, 1, pattern, tb, matched);
}

int lm_mstats_set_param(struct lm_mstats *ms, const char *pattern, const char *value, uint32_t *matched)
{
	struct param_target t;

	mstats_target(ms, &t);
	return params_set(&t, 1, pattern, value, matched);
}

void lm_mstats_render_prom(struct lm_mstats *ms, struct textbuf *tb)
{
	static const struct stats_prom_names names = {
		"requests_total", "FUSE requests answered, by operation.",
		"errors_total", "FUSE requests answered with an error, by operation (not the answers: "
				"ENOENT of a lookup, ENODATA and ERANGE of getxattr and listxattr, ENOTTY of "
				"ioctl, ENXIO of seek, ENOSYS).",
		NULL, NULL, NULL, NULL,
		"request_duration_seconds", "Time from a FUSE request's start to its reply, by operation.",
	};
	static const struct {
		const char *name, *help;
		size_t off;
	} data[] = {
		{ "read_bytes_total", "File data bytes read through the mount.", offsetof(struct lm_mstats, read_bytes) },
		{ "write_bytes_total", "File data bytes written through the mount.", offsetof(struct lm_mstats, write_bytes) },
	};
	struct loom_client_stats cs;

	stats_render_ops_prom(ms->op, LM_OP_ROWS, row_name, NULL, "loom_client", &names, tb);
	for (size_t i = 0; i < sizeof(data) / sizeof(data[0]); i++) {
		struct stats_sample x;

		stats_asample_read((const struct stats_asample *)((const char *)ms + data[i].off), &x);
		stats_prom_head(tb, "loom_client", data[i].name, "counter", data[i].help);
		tb_printf(tb, "loom_client_%s %llu\n", data[i].name, (unsigned long long)x.sum);
	}
	loom_client_stats(&cs, sizeof(cs));
	for (size_t i = 0; i < sizeof(cache_lines) / sizeof(cache_lines[0]); i++) {
		const struct cache_line *l = &cache_lines[i];

		stats_prom_head(tb, "loom_client", l->prom, "counter", l->help);
		tb_printf(tb, "loom_client_%s %llu\n", l->prom, (unsigned long long)cache_value(ms, &cs, l));
	}
}

int lm_mstats_http(const char *path, void *conn, struct http_answer *ans, void *arg)
{
	struct textbuf tb = TEXTBUF_INIT;

	(void)conn;
	ans->status = 200;
	if (!strcmp(path, "/metrics")) {
		lm_mstats_render_prom(arg, &tb);
		ans->content_type = "text/plain; version=0.0.4; charset=utf-8";
	} else {
		tb_printf(&tb, "not found: this mount serves /metrics\n");
		ans->content_type = "text/plain; charset=utf-8";
		ans->status = 404;
	}
	return tb_take(&tb, &ans->body, &ans->len);
}
