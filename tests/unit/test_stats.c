/* The servers' counters (net/stats.c), their renderings (stats_render.c) and the parameters they
 * are shown as (net/params.c, stats_params.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net/params.h"
#include "net/stats.h"

int check_failures;
const char *check_current = "";

static struct stats_req req(uint16_t op, uint64_t usec, uint32_t target, const char *job)
{
	struct stats_req r = { .opcode = op, .usec = usec, .target = target, .job = job,
			       .bytes_in = 100, .bytes_out = 10 };
	return r;
}

static char *render(void (*fn)(struct srv_stats *, uint32_t, struct textbuf *), struct srv_stats *s,
		    uint32_t target)
{
	struct textbuf tb = TEXTBUF_INIT;
	char *out;
	size_t len;

	fn(s, target, &tb);
	REQUIRE_RC(tb_take(&tb, &out, &len), 0);
	return out;
}

static void test_buckets(void)
{
	CHECK_EQ(stats_lat_bucket(0), 0);
	CHECK_EQ(stats_lat_bucket(1), 0);
	CHECK_EQ(stats_lat_bucket(2), 1);
	CHECK_EQ(stats_lat_bucket(3), 2);
	CHECK_EQ(stats_lat_bucket(1024), 10);
	CHECK_EQ(stats_lat_bucket(1025), 11);
	CHECK_EQ(stats_lat_bucket(UINT64_MAX), STATS_LAT_BUCKETS - 1);
	CHECK(stats_lat_bound_s(0) == 1e-6);
	CHECK(__builtin_isinf(stats_lat_bound_s(STATS_LAT_BUCKETS - 1)));
}

static void test_counts_and_jobs(void)
{
	struct srv_stats s;
	struct stats_req r;
	char *text;

	stats_init(&s);
	r = req(LW_OP_OST_WRITE, 300, 1, "train.0");
	r.write_bytes = 4096;
	stats_note(&s, &r);
	r.write_bytes = 1 << 20;
	r.usec = 5;
	stats_note(&s, &r);
	r = req(LW_OP_OST_READ, 40, 2, "eval.1000");
	r.read_bytes = 8192;
	r.status = 0;
	stats_note(&s, &r);
	r = req(LW_OP_OST_READ, 40, 2, "eval.1000");
	r.status = -5; /* an error: counted, no bytes */
	stats_note(&s, &r);
	r = req(LW_OP_GET_PARAM, 9, 2, "monitor.0"); /* an administrator's: no job's */
	stats_note(&s, &r);

	int w = lw_op_row(LW_OP_OST_WRITE), rd = lw_op_row(LW_OP_OST_READ);

	CHECK_EQ(atomic_load(&s.op[w].count), 2);
	CHECK_EQ(atomic_load(&s.op[w].usec_min), 5);
	CHECK_EQ(atomic_load(&s.op[w].usec_max), 300);
	CHECK_EQ(atomic_load(&s.op[w].usec_sum), 305);
	CHECK_EQ(atomic_load(&s.op[rd].errors), 1);
	CHECK_EQ(atomic_load(&s.op[rd].bytes_in), 200);
	CHECK_EQ(s.njobs, 2);

	text = render(stats_render_lustre, &s, 1);
	CHECK(strstr(text, "\nwrite                     2 samples [usecs] 5 300 305\n") != NULL);
	CHECK(strstr(text, "\nwrite_bytes               2 samples [bytes] 4096 1048576 1052672\n") != NULL);
	CHECK(strstr(text, "read_bytes") == NULL); /* target 1 read nothing */
	free(text);
	text = render(stats_render_jobs, &s, 2);
	CHECK(strncmp(text, "job_stats:\n- job_id:          eval.1000\n", 40) == 0);
	CHECK(strstr(text, "read_bytes:      { samples:           1, unit: bytes, min:     8192, max:     8192, sum:             8192 }") != NULL);
	CHECK(strstr(text, "  read:            { samples:           2, unit: usecs") != NULL);
	CHECK(strstr(text, "train.0") == NULL && strstr(text, "monitor") == NULL && strstr(text, "get_param") == NULL);
	free(text);

	/* Forgetting: one job of one target, then all. */
	stats_clear_jobs(&s, 2, "train.0"); /* train.0 is target 1's: stays */
	CHECK_EQ(s.njobs, 2);
	stats_clear_jobs(&s, 1, "train.0");
	CHECK_EQ(s.njobs, 1);
	stats_clear(&s, true);
	CHECK_EQ(s.njobs, 0);
	CHECK_EQ(atomic_load(&s.op[w].count), 0);
	CHECK_EQ(atomic_load(&s.op[w].usec_min), UINT64_MAX);
	stats_fini(&s);
}

/* An idle job is forgotten; a full table makes room by its longest idle. */
static void test_expiry(void)
{
	struct srv_stats s;
	struct stats_req r = req(LW_OP_OST_READ, 1, 0, "a");
	char id[16];

	stats_init(&s);
	s.job_idle_s = 100;
	stats_note(&s, &r);
	for (size_t b = 0; b < sizeof(s.jobs) / sizeof(s.jobs[0]); b++)
		for (struct stats_job *j = s.jobs[b]; j; j = j->next)
			j->last_s -= 101;
	pthread_mutex_lock(&s.lock);
	stats_expire_jobs_locked(&s);
	pthread_mutex_unlock(&s.lock);
	CHECK_EQ(s.njobs, 0);
	for (int i = 0; i < STATS_MAX_JOBS + 10; i++) {
		snprintf(id, sizeof(id), "j%d", i);
		r.job = id;
		stats_note(&s, &r);
	}
	CHECK_EQ(s.njobs, STATS_MAX_JOBS);
	stats_fini(&s);
}

static void name(uint32_t id, char *buf, size_t cap)
{
	snprintf(buf, cap, "OST%04x", id);
}

static void test_prometheus(void)
{
	struct srv_stats s;
	struct stats_req r = req(LW_OP_OST_WRITE, 3, 1, "we\"ird\\job");
	struct textbuf tb = TEXTBUF_INIT;
	char *text;
	size_t len;

	stats_init(&s);
	r.write_bytes = 777;
	stats_note(&s, &r);
	stats_render_prom(&s, "loom", "ost", name, &tb);
	REQUIRE_RC(tb_take(&tb, &text, &len), 0);
	CHECK(strstr(text, "# TYPE loom_rpc_requests_total counter\nloom_rpc_requests_total{op=\"write\"} 1\n") != NULL);
	CHECK(strstr(text, "loom_rpc_duration_seconds_bucket{op=\"write\",le=\"2e-06\"} 0\n") != NULL);
	CHECK(strstr(text, "loom_rpc_duration_seconds_bucket{op=\"write\",le=\"4e-06\"} 1\n") != NULL);
	CHECK(strstr(text, "loom_rpc_duration_seconds_bucket{op=\"write\",le=\"+Inf\"} 1\n") != NULL);
	CHECK(strstr(text, "loom_rpc_duration_seconds_count{op=\"write\"} 1\n") != NULL);
	CHECK(strstr(text, "loom_ost_write_bytes_total{ost=\"OST0001\"} 777\n") != NULL);
	CHECK(strstr(text, "loom_job_write_bytes_total{job=\"we\\\"ird\\\\job\",ost=\"OST0001\"} 777\n") != NULL);
	free(text);
	stats_fini(&s);
}

/* ---- parameters ---- */

static int value = 7;

static void get_value(void *ctx, uint32_t target, struct textbuf *tb)
{
	(void)ctx;
	tb_printf(tb, "%d\n", value + (int)target);
}

static void get_lines(void *ctx, uint32_t target, struct textbuf *tb)
{
	(void)ctx;
	(void)target;
	tb_printf(tb, "a: 1\nb: 2\n");
}

static int check_small(void *ctx, uint32_t target, const char *v)
{
	(void)ctx;
	(void)target;
	return atoi(v) > 0 && atoi(v) < 100 ? 0 : -EINVAL;
}

static void set_value(void *ctx, uint32_t target, const char *v)
{
	(void)ctx;
	(void)target;
	value = atoi(v);
}

static const struct param_def defs[] = {
	{ "size", get_value, check_small, set_value, false },
	{ "lines", get_lines, NULL, NULL, false },
	{ "one", get_value, NULL, NULL, true },
};

static void test_params(void)
{
	struct param_target t[2] = {
		{ "ost.fs-OST0000", 0, defs, 3, NULL },
		{ "ost.fs-OST0001", 1, defs, 3, NULL },
	};
	struct textbuf tb = TEXTBUF_INIT;
	uint32_t matched;
	char *text;
	size_t len;

	params_get(t, 2, "ost.*.size", &tb, &matched);
	REQUIRE_RC(tb_take(&tb, &text, &len), 0);
	CHECK(!strcmp(text, "ost.fs-OST0000.size=7\nost.fs-OST0001.size=8\n") && matched == 2);
	free(text);
	params_get(t, 2, "*OST0001.[lo]*", &tb, &matched);
	REQUIRE_RC(tb_take(&tb, &text, &len), 0);
	CHECK(!strcmp(text, "ost.fs-OST0001.lines=\na: 1\nb: 2\nost.fs-OST0001.one=\n8\n") && matched == 2);
	free(text);
	params_get(t, 2, "mdt.*", &tb, &matched);
	CHECK_EQ(matched, 0);
	tb_free(&tb);

	CHECK_RC(params_set(t, 2, "*.size", "500", &matched), -EINVAL);
	CHECK_EQ(value, 7);
	CHECK_RC(params_set(t, 2, "ost.fs-OST0000.*", "5", &matched), -EACCES); /* lines, one: read-only */
	CHECK_EQ(value, 7);
	CHECK_RC(params_set(t, 2, "nothing", "5", &matched), -ENOENT);
	CHECK_RC(params_set(t, 2, "*.size", "42", &matched), 0);
	CHECK_EQ(matched, 2);
	CHECK_EQ(value, 42);
}

int main(void)
{
	RUN(test_buckets);
	RUN(test_counts_and_jobs);
	RUN(test_expiry);
	RUN(test_prometheus);
	RUN(test_params);
	return check_report();
}
