/* The mount's own counters (src/fuse/mstats.c): its rows and their names, the errors that are
 * answers, counting requests, and what `loom stats --mount` and /metrics show of them; and
 * libloom's cache counters (src/client/cstats.c) as they show there. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "client/cstats.h"
#include "common/mount_ioctl.h"
#include "fuse/mstats.h"
#include "loom/loom_ll.h"
#include "net/http.h"

int check_failures;
const char *check_current = "";

static struct lm_mstats ms;

/* One request of row, answered rc (0 or an errno), having moved bytes (0: none noted). */
static void request(int row, int rc, uint64_t bytes)
{
	lm_op_begin(&ms, row);
	if (bytes)
		lm_op_bytes(bytes);
	if (rc)
		lm_op_error(rc);
	lm_op_end();
}

static char *param_text(const char *pattern, uint32_t *matched)
{
	struct textbuf tb = TEXTBUF_INIT;
	char *out;
	size_t len;

	lm_mstats_get_param(&ms, pattern, &tb, matched);
	REQUIRE_RC(tb_take(&tb, &out, &len), 0);
	return out;
}

static char *prom_text(void)
{
	struct textbuf tb = TEXTBUF_INIT;
	char *out;
	size_t len;

	lm_mstats_render_prom(&ms, &tb);
	REQUIRE_RC(tb_take(&tb, &out, &len), 0);
	return out;
}

/* Whether text has line (whole) among its lines. */
static int has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, line, n) && (p[n] == '\n' || p[n] == '\0'))
			return 1;
	return 0;
}

#define CHECK_LINE(text, line)                                                           \
	do {                                                                              \
		if (!has_line(text, line))                                                \
			CHECK_FAIL_("no line \"%s\" in:\n%s", line, text);                \
	} while (0)
#define CHECK_NO_LINE_STARTING(text, start)                                              \
	do {                                                                              \
		if (strstr(text, "\n" start) || !strncmp(text, start, strlen(start)))     \
			CHECK_FAIL_("a line starts with \"%s\" in:\n%s", start, text);    \
	} while (0)

static void test_rows(void)
{
	_Atomic int cached = -1;

	/* Named as Lustre's llite stats where it has the operation, as FUSE otherwise. */
	CHECK_EQ(lm_op_row_resolve(&cached, "lm_release"), LM_OP_release);
	CHECK(!strcmp(lm_op_name(LM_OP_release), "close"));
	CHECK(!strcmp(lm_op_name(LM_OP_lseek), "seek"));
	CHECK(!strcmp(lm_op_name(LM_OP_lookup), "lookup"));
	CHECK(!strcmp(lm_op_name(LM_OP_readdirplus), "readdirplus"));
	CHECK(!strcmp(lm_op_name(LM_OP_forget_multi), "forget_multi"));
	CHECK(lm_op_name(LM_OP_ROWS) == NULL);
	CHECK(lm_op_name(-1) == NULL);
	/* Looked up once per call site: the cached row wins over the name from then on. */
	cached = -1;
	CHECK_EQ(lm_op_row(&cached, "lm_read"), LM_OP_read);
	CHECK_EQ(cached, LM_OP_read);
	CHECK_EQ(lm_op_row(&cached, "lm_write"), LM_OP_read);
	/* A handler LM_OPS does not know is counted nowhere (and looked up again). */
	cached = -1;
	CHECK_EQ(lm_op_row(&cached, "lm_bmap"), -1);
	CHECK_EQ(cached, -1);
	CHECK_EQ(lm_op_row(&cached, "read"), LM_OP_read); /* the prefix is optional */
	/* Every handler and every name once. */
	for (int r = 0; r < LM_OP_ROWS; r++)
		for (int k = r + 1; k < LM_OP_ROWS; k++)
			CHECK(strcmp(lm_op_name(r), lm_op_name(k)) != 0);
	CHECK_EQ(LM_OP_ROWS, 37);
}

static void test_errors_that_answer(void)
{
	CHECK(!lm_op_err_counts(LM_OP_lookup, -ENOENT));
	CHECK(!lm_op_err_counts(LM_OP_lookup, ENOENT));
	CHECK(lm_op_err_counts(LM_OP_lookup, -EACCES));
	CHECK(lm_op_err_counts(LM_OP_unlink, -ENOENT));
	CHECK(lm_op_err_counts(LM_OP_open, -ENOENT));
	CHECK(!lm_op_err_counts(LM_OP_getxattr, -ENODATA));
	CHECK(!lm_op_err_counts(LM_OP_getxattr, -ERANGE));
	CHECK(!lm_op_err_counts(LM_OP_listxattr, -ERANGE));
	CHECK(lm_op_err_counts(LM_OP_getxattr, -EACCES));
	CHECK(lm_op_err_counts(LM_OP_setxattr, -ERANGE));
	CHECK(lm_op_err_counts(LM_OP_removexattr, -ENODATA));
	CHECK(!lm_op_err_counts(LM_OP_ioctl, -ENOTTY));
	CHECK(lm_op_err_counts(LM_OP_ioctl, -EINVAL));
	CHECK(!lm_op_err_counts(LM_OP_lseek, -ENXIO));
	CHECK(lm_op_err_counts(LM_OP_read, -ENXIO));
	CHECK(!lm_op_err_counts(LM_OP_rmdir, -ENOSYS));
	CHECK(lm_op_err_counts(LM_OP_rmdir, -ENOTEMPTY));
	CHECK(!lm_op_err_counts(LM_OP_rmdir, 0));
}

static void test_counting(void)
{
	struct stats_sample x;

	lm_mstats_init(&ms, "loom", 0xabc);
	CHECK(!strcmp(ms.instance, "loom-0000000000000abc"));
	request(LM_OP_unlink, 0, 0);
	request(LM_OP_unlink, -EACCES, 0);
	request(LM_OP_lookup, -ENOENT, 0);
	request(LM_OP_read, 0, 4096);
	request(LM_OP_read, 0, 100);
	request(LM_OP_read, 0, 0); /* at the end of the file: a request, no bytes */
	request(LM_OP_write, 0, 65536);
	request(LM_OP_write, -ENOSPC, 0);
	CHECK_EQ(ms.op[LM_OP_unlink].count, 2);
	CHECK_EQ(ms.op[LM_OP_unlink].errors, 1);
	CHECK_EQ(ms.op[LM_OP_lookup].count, 1);
	CHECK_EQ(ms.op[LM_OP_lookup].errors, 0);
	CHECK_EQ(ms.op[LM_OP_read].count, 3);
	CHECK_EQ(ms.op[LM_OP_read].bytes_out, 4196);
	CHECK_EQ(ms.op[LM_OP_read].bytes_in, 0);
	CHECK_EQ(ms.op[LM_OP_write].bytes_in, 65536);
	CHECK_EQ(ms.op[LM_OP_write].errors, 1);
	stats_asample_read(&ms.read_bytes, &x);
	CHECK_EQ(x.samples, 2);
	CHECK_EQ(x.min, 100);
	CHECK_EQ(x.max, 4096);
	CHECK_EQ(x.sum, 4196);
	stats_asample_read(&ms.write_bytes, &x);
	CHECK_EQ(x.samples, 1);
	CHECK_EQ(x.sum, 65536);

	/* Noted once: LM_REPLY ends it, and the handler's return does nothing more. */
	lm_op_begin(&ms, LM_OP_mkdir);
	lm_op_end();
	lm_op_error(-EIO); /* after the reply: not this request's */
	lm_op_end();
	CHECK_EQ(ms.op[LM_OP_mkdir].count, 1);
	CHECK_EQ(ms.op[LM_OP_mkdir].errors, 0);
	/* A request of no row (a handler LM_OPS lacks) counts nowhere. */
	request(-1, -EIO, 10);
	request(LM_OP_ROWS, -EIO, 10);
	{
		uint64_t all = 0;

		for (int r = 0; r < LM_OP_ROWS; r++)
			all += ms.op[r].count;
		CHECK_EQ(all, 9);
	}
	/* Each request in exactly one latency bucket. */
	for (int r = 0; r < LM_OP_ROWS; r++) {
		uint64_t in_buckets = 0;

		for (int b = 0; b < STATS_LAT_BUCKETS; b++)
			in_buckets += ms.op[r].bucket[b];
		CHECK_EQ(in_buckets, ms.op[r].count);
		if (ms.op[r].count)
			CHECK(ms.op[r].usec_min <= ms.op[r].usec_max);
	}
}

static void *many_writes(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20000; i++)
		request(LM_OP_write, i % 10 == 0 ? -EIO : 0, 1 + (uint64_t)(i % 7));
	return NULL;
}

/* Four threads at once lose nothing (relaxed atomics, a thread-local current request). */
static void test_threads(void)
{
	pthread_t t[4];
	struct stats_sample x;
	uint64_t sum = 0;

	lm_mstats_init(&ms, "loom", 1);
	for (int i = 0; i < 4; i++)
		REQUIRE(pthread_create(&t[i], NULL, many_writes, NULL) == 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 20000; i++)
		sum += 1 + (uint64_t)(i % 7);
	CHECK_EQ(ms.op[LM_OP_write].count, 80000);
	CHECK_EQ(ms.op[LM_OP_write].errors, 8000);
	stats_asample_read(&ms.write_bytes, &x);
	CHECK_EQ(x.samples, 80000);
	CHECK_EQ(x.sum, 4 * sum);
	CHECK_EQ(x.min, 1);
	CHECK_EQ(x.max, 7);
}

static void test_params(void)
{
	uint32_t matched;
	char *text;

	lm_mstats_init(&ms, "lfs01", 0x1f);
	request(LM_OP_unlink, 0, 0);
	request(LM_OP_unlink, 0, 0);
	request(LM_OP_rmdir, -ENOTEMPTY, 0);
	request(LM_OP_release, 0, 0);
	request(LM_OP_read, 0, 8192);
	request(LM_OP_write, 0, 512);
	request(LM_OP_write, 0, 1024);
	for (int i = 0; i < 3; i++)
		lm_cache_note(&ms, LM_SA_HIT);
	lm_cache_note(&ms, LM_SA_MISS);
	lm_cache_note(&ms, LM_SA_LISTING);
	lm_cache_note(&ms, LM_PAGES_KEPT);
	cstat_add(CSTAT_WRITE_BEHIND);
	cstat_add(CSTAT_WRITE_BEHIND);
	cstat_add(CSTAT_PREFETCH_WAIT);

	text = param_text("llite.*.stats", &matched);
	CHECK_EQ(matched, 1);
	CHECK(!strncmp(text, "llite.lfs01-000000000000001f.stats=\nsnapshot_time ", 50));
	CHECK(strstr(text, "\nstart_time ") && strstr(text, "\nelapsed_time "));
	/* `NAME COUNT samples [usecs] MIN MAX SUM`: the count is known, the times are not. */
	CHECK(strstr(text, "\nunlink                    2 samples [usecs] ") != NULL);
	CHECK(strstr(text, "\nrmdir                     1 samples [usecs] ") != NULL);
	CHECK(strstr(text, "\nclose                     1 samples [usecs] ") != NULL);
	CHECK_LINE(text, "read_bytes                1 samples [bytes] 8192 8192 8192");
	CHECK_LINE(text, "write_bytes               2 samples [bytes] 512 1024 1536");
	CHECK_NO_LINE_STARTING(text, "lookup");  /* rows never counted are not shown */
	CHECK_NO_LINE_STARTING(text, "release"); /* Lustre's name only */
	CHECK_NO_LINE_STARTING(text, "hit_total");
	free(text);

	text = param_text("llite.lfs01-*.statahead_stats", &matched);
	CHECK_EQ(matched, 1);
	CHECK(!strcmp(text, "llite.lfs01-000000000000001f.statahead_stats=\n"
			    "statahead total: 1\nhit_total: 3\nmiss_total: 1\n"));
	free(text);
	text = param_text("*.read_ahead_stats", &matched);
	CHECK(!strcmp(text, "llite.lfs01-000000000000001f.read_ahead_stats=\n"
			    "hits                      0 samples [items]\n"
			    "waits                     1 samples [items]\n"
			    "misses                    0 samples [items]\n"));
	free(text);
	text = param_text("llite.*.cache_stats", &matched);
	CHECK_LINE(text, "page_cache_kept           1 samples [opens]");
	CHECK_LINE(text, "page_cache_dropped        0 samples [opens]");
	CHECK_LINE(text, "dom_hits                  0 samples [reads]");
	free(text);
	text = param_text("llite.*.write_behind_stats", &matched);
	CHECK_LINE(text, "writes_behind             2 samples [writes]");
	CHECK_LINE(text, "writes_sync               0 samples [writes]");
	free(text);
	text = param_text("llite.*", &matched);
	CHECK_EQ(matched, 5);
	free(text);
	text = param_text("mdt.*.stats", &matched);
	CHECK_EQ(matched, 0);
	CHECK(!strcmp(text, ""));
	free(text);

	/* Only stats may be set, and only to clear: then everything starts again. */
	CHECK_RC(lm_mstats_set_param(&ms, "llite.*.stats", "0", &matched), -EINVAL);
	CHECK_RC(lm_mstats_set_param(&ms, "llite.*.statahead_stats", "clear", &matched), -EACCES);
	CHECK_RC(lm_mstats_set_param(&ms, "llite.*", "clear", &matched), -EACCES);
	CHECK_RC(lm_mstats_set_param(&ms, "ost.*.stats", "clear", &matched), -ENOENT);
	CHECK_EQ(ms.op[LM_OP_unlink].count, 2); /* nothing was set by the refusals */
	CHECK_RC(lm_mstats_set_param(&ms, "llite.*.stats", "clear", &matched), 0);
	CHECK_EQ(matched, 1);
	text = param_text("llite.*", &matched);
	CHECK_NO_LINE_STARTING(text, "unlink ");
	CHECK_NO_LINE_STARTING(text, "read_bytes");
	CHECK_LINE(text, "hit_total: 0");
	CHECK_LINE(text, "writes_behind             0 samples [writes]");
	CHECK_LINE(text, "waits                     0 samples [items]");
	free(text);
}

static void test_prometheus(void)
{
	char *text;

	lm_mstats_init(&ms, "lfs01", 2);
	request(LM_OP_unlink, 0, 0);
	request(LM_OP_rmdir, -ENOTEMPTY, 0);
	request(LM_OP_lookup, -ENOENT, 0);
	request(LM_OP_read, 0, 3000);
	request(LM_OP_read, 0, 1000);
	lm_cache_note(&ms, LM_SA_HIT);
	cstat_add(CSTAT_DOM_MISS);
	text = prom_text();
	CHECK(strstr(text, "# TYPE loom_client_requests_total counter\n") != NULL);
	CHECK_LINE(text, "loom_client_requests_total{op=\"unlink\"} 1");
	CHECK_LINE(text, "loom_client_requests_total{op=\"read\"} 2");
	CHECK_LINE(text, "loom_client_errors_total{op=\"rmdir\"} 1");
	CHECK_LINE(text, "loom_client_errors_total{op=\"lookup\"} 0");
	CHECK_LINE(text, "loom_client_errors_total{op=\"unlink\"} 0");
	CHECK(strstr(text, "# TYPE loom_client_request_duration_seconds histogram\n") != NULL);
	CHECK_LINE(text, "loom_client_request_duration_seconds_bucket{op=\"read\",le=\"+Inf\"} 2");
	CHECK_LINE(text, "loom_client_request_duration_seconds_count{op=\"read\"} 2");
	CHECK_LINE(text, "loom_client_read_bytes_total 4000");
	CHECK_LINE(text, "loom_client_write_bytes_total 0");
	CHECK_LINE(text, "loom_client_statahead_hits_total 1");
	CHECK_LINE(text, "loom_client_statahead_misses_total 0");
	CHECK_LINE(text, "loom_client_dom_misses_total 1");
	CHECK_LINE(text, "loom_client_writes_behind_total 0");
	CHECK(strstr(text, "received_bytes") == NULL); /* the servers' per-op bytes are not the mount's */
	CHECK(strstr(text, "{op=\"write\"}") == NULL);  /* rows never counted are not shown */
	free(text);
}

static void test_http(void)
{
	struct http_answer ans = { 0 };

	lm_mstats_init(&ms, "lfs01", 3);
	request(LM_OP_getattr, 0, 0);
	CHECK_RC(lm_mstats_http("/metrics", NULL, &ans, &ms), 0);
	CHECK_EQ(ans.status, 200);
	CHECK(!strcmp(ans.content_type, "text/plain; version=0.0.4; charset=utf-8"));
	CHECK(ans.body && strstr(ans.body, "loom_client_requests_total{op=\"getattr\"} 1\n") != NULL);
	free(ans.body);
	memset(&ans, 0, sizeof(ans));
	CHECK_RC(lm_mstats_http("/params", NULL, &ans, &ms), 0);
	CHECK_EQ(ans.status, 404);
	free(ans.body);
}

/* The whole text, every row counted with the largest figures, fits the ioctl's buffer: the
 * mount never answers EOVERFLOW for its own parameters. */
static void test_fits_the_ioctl(void)
{
	uint32_t matched;
	char *text;

	lm_mstats_init(&ms, "abcdefgh", UINT64_MAX);
	for (int r = 0; r < LM_OP_ROWS; r++) {
		request(r, 0, 0);
		ms.op[r].count = UINT64_MAX / 2;
		ms.op[r].usec_min = UINT64_MAX / 2;
		ms.op[r].usec_max = UINT64_MAX / 2;
		ms.op[r].usec_sum = UINT64_MAX / 2;
	}
	request(LM_OP_read, 0, UINT64_MAX / 4);
	request(LM_OP_write, 0, UINT64_MAX / 4);
	for (int c = 0; c < LM_CACHE_STATS; c++)
		ms.cache[c] = UINT64_MAX;
	text = param_text("llite.*", &matched);
	CHECK_EQ(matched, 5);
	CHECK(strlen(text) < LOOM_IOC_MSTATS_TEXT);
	CHECK(strlen(text) > 3000);
	free(text);
	loom_client_stats_clear();
}

int main(void)
{
	RUN(test_rows);
	RUN(test_errors_that_answer);
	RUN(test_counting);
	RUN(test_threads);
	RUN(test_params);
	RUN(test_prometheus);
	RUN(test_http);
	RUN(test_fits_the_ioctl);
	return check_report();
}
