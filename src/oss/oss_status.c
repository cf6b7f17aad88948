/*
 * What an OSS shows of itself (issue 22): the parameters of each of its OSTs (GET_PARAM,
 * SET_PARAM, as lctl names them: ost.FSNAME-OSTxxxx.*), and /metrics and /params on its HTTP
 * port. Answered on the worker that takes the request, or the HTTP thread: nothing here waits
 * for anything but a statfs(2) of an OST's directory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "net/http.h"
#include "net/params.h"
#include "net/stats.h"
#include "oss/oss_impl.h"
#include "oss/ost.h"

static struct ost *ost_of(struct oss *oss, uint32_t idx)
{
	for (int i = 0; i < oss->nosts; i++)
		if (ost_index(oss->osts[i]) == idx)
			return oss->osts[i];
	return NULL;
}

#define OST_SPACE_PARAM(fn, expr)                                                    \
	static void fn(void *ctx, uint32_t target, struct textbuf *tb)               \
	{                                                                            \
		struct ost *ost = ost_of(ctx, target);                               \
		struct lw_statfs sf;                                                 \
                                                                                     \
		if (ost && ost_statfs(ost, &sf) == 0)                                \
			tb_printf(tb, "%llu\n", (unsigned long long)(expr));         \
		else                                                                 \
			tb_printf(tb, "unknown\n");                                  \
	}
OST_SPACE_PARAM(get_kbytestotal, sf.blocks * sf.bsize / 1024)
OST_SPACE_PARAM(get_kbytesfree, sf.bfree * sf.bsize / 1024)
OST_SPACE_PARAM(get_kbytesavail, sf.bavail * sf.bsize / 1024)
OST_SPACE_PARAM(get_filestotal, sf.files)
OST_SPACE_PARAM(get_filesfree, sf.ffree)

static void get_uuid(void *ctx, uint32_t target, struct textbuf *tb)
{
	struct ost *ost = ost_of(ctx, target);

	tb_printf(tb, "%s\n", ost ? ost_uuid(ost) : "unknown");
}

/* scrub_rate: MiB/s a scrub of this OST may read (--scrub-rate; 0: no limit), at run time. */
static void get_scrub_rate(void *ctx, uint32_t target, struct textbuf *tb)
{
	struct ost *ost = ost_of(ctx, target);

	tb_printf(tb, "%llu\n", ost ? (unsigned long long)(ost_scrub_rate(ost) >> 20) : 0ull);
}

static int check_scrub_rate(void *ctx, uint32_t target, const char *value)
{
	uint32_t v;

	(void)ctx;
	(void)target;
	return u32_parse(value, 0, SCRUB_RATE_MAX_MIB, &v);
}

static void set_scrub_rate(void *ctx, uint32_t target, const char *value)
{
	struct ost *ost = ost_of(ctx, target);
	uint32_t v;

	if (ost && u32_parse(value, 0, SCRUB_RATE_MAX_MIB, &v) == 0) {
		ost_scrub_set_rate(ost, (uint64_t)v << 20);
		log_info("OST%04x: scrub_rate set to %u MiB/s%s", target, v, v ? "" : " (no limit)");
	}
}

static const struct param_def ost_defs[] = {
	{ "uuid", get_uuid, NULL, NULL, false },
	{ "scrub_rate", get_scrub_rate, check_scrub_rate, set_scrub_rate, false },
	{ "kbytestotal", get_kbytestotal, NULL, NULL, false },
	{ "kbytesfree", get_kbytesfree, NULL, NULL, false },
	{ "kbytesavail", get_kbytesavail, NULL, NULL, false },
	{ "filestotal", get_filestotal, NULL, NULL, false },
	{ "filesfree", get_filesfree, NULL, NULL, false },
};

/* Two entries per OST (the statistics', the OST's own) into t (2 * MAX_OSTS): how many. */
static size_t param_targets(struct oss *oss, struct param_target *t)
{
	size_t n = 0;

	for (int i = 0; i < oss->nosts; i++) {
		struct ost *ost = oss->osts[i];

		for (int k = 0; k < 2; k++, n++) {
			snprintf(t[n].prefix, sizeof(t[n].prefix), "ost.%s-OST%04x", ost_fsname(ost), ost_index(ost));
			t[n].target = ost_index(ost);
			t[n].defs = k ? ost_defs : stats_param_defs;
			t[n].ndefs = k ? sizeof(ost_defs) / sizeof(ost_defs[0])
				       : sizeof(stats_param_defs) / sizeof(stats_param_defs[0]);
			t[n].ctx = k ? (void *)oss : (void *)srv_stats(oss->srv);
		}
	}
	return n;
}

void oss_params_answer(struct oss *oss, struct srv_req *req)
{
	struct param_target *t = calloc(2 * MAX_OSTS, sizeof(*t));

	if (!t) {
		srv_reply(req, -ENOMEM, NULL, 0, NULL, 0, NULL);
		return;
	}
	params_answer(req, t, param_targets(oss, t));
	free(t);
}

static void ost_name(uint32_t id, char *buf, size_t cap)
{
	snprintf(buf, cap, "OST%04x", id);
}

void oss_metrics(struct oss *oss, struct textbuf *tb)
{
	static const struct {
		const char *name, *help;
	} gauges[] = {
		{ "ost_size_bytes", "The OST's size." },
		{ "ost_free_bytes", "The OST's free space." },
		{ "ost_avail_bytes", "The OST's space that new data may take." },
		{ "ost_files", "Objects the OST holds." },
		{ "ost_files_free", "Objects the OST has room for." },
	};

	stats_render_prom(srv_stats(oss->srv), "loom", "ost", ost_name, tb);
	for (size_t g = 0; g < sizeof(gauges) / sizeof(gauges[0]); g++) {
		tb_printf(tb, "# HELP loom_%s %s\n# TYPE loom_%s gauge\n", gauges[g].name, gauges[g].help,
			  gauges[g].name);
		for (int i = 0; i < oss->nosts; i++) {
			struct lw_statfs sf;
			uint64_t v[5];

			if (ost_statfs(oss->osts[i], &sf))
				continue;
			v[0] = sf.blocks * sf.bsize;
			v[1] = sf.bfree * sf.bsize;
			v[2] = sf.bavail * sf.bsize;
			v[3] = sf.files - sf.ffree;
			v[4] = sf.ffree;
			tb_printf(tb, "loom_%s{ost=\"OST%04x\"} %llu\n", gauges[g].name, ost_index(oss->osts[i]),
				  (unsigned long long)v[g]);
		}
	}
}

static int http_page(const char *path, void *conn, struct http_answer *ans, void *arg)
{
	struct oss *oss = arg;
	struct textbuf tb = TEXTBUF_INIT;
	int rc;

	ans->content_type = "text/plain; charset=utf-8";
	ans->status = 200;
	if (!strcmp(path, "/metrics")) {
		oss_metrics(oss, &tb);
		ans->content_type = "text/plain; version=0.0.4; charset=utf-8";
	} else if (!strcmp(path, "/params")) {
		const char *name = http_query(conn, "name");
		struct param_target *t = calloc(2 * MAX_OSTS, sizeof(*t));
		uint32_t matched = 0;

		if (!name || !name[0])
			name = "*";
		if (t)
			params_get(t, param_targets(oss, t), name, &tb, &matched);
		free(t);
		if (!t)
			tb.err = -ENOMEM;
		if (!matched && !tb.err) {
			tb_printf(&tb, "no parameter matches %s\n", name);
			ans->status = 404;
		}
	} else {
		tb_printf(&tb, "not found: this OSS serves /metrics and /params?name=PATTERN\n");
		ans->status = 404;
	}
	rc = tb_take(&tb, &ans->body, &ans->len);
	return rc;
}

int oss_http_start(struct oss *oss, const char *addr)
{
	return http_serve_stats("oss", addr, http_page, oss, &oss->http);
}
