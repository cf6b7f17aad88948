/*
 * The statistics every server shows as parameters of each of its targets (Lustre's names):
 *   stats                 the requests answered, per operation, and the data bytes of the target
 *                         (set "clear" to start again)
 *   job_stats             per job: Lustre's job_stats YAML (set "clear", or a job id to forget
 *                         that job)
 *   job_cleanup_interval  seconds a job may be idle before it is forgotten (Lustre's default 600)
 * and GET_PARAM / SET_PARAM answered from a server's list of targets.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "net/params.h"
#include "net/server.h"
#include "net/stats.h"

static void get_stats(void *ctx, uint32_t target, struct textbuf *tb)
{
	stats_render_lustre(ctx, target, tb);
}

int param_check_clear(void *ctx, uint32_t target, const char *value)
{
	(void)ctx;
	(void)target;
	return strcmp(value, "clear") == 0 ? 0 : -EINVAL;
}

static void set_stats(void *ctx, uint32_t target, const char *value)
{
	(void)target;
	(void)value;
	stats_clear(ctx, true);
}

static void get_jobs(void *ctx, uint32_t target, struct textbuf *tb)
{
	stats_render_jobs(ctx, target, tb);
}

static int check_jobs(void *ctx, uint32_t target, const char *value)
{
	(void)ctx;
	(void)target;
	return value[0] && strlen(value) < LW_JOBID_LEN ? 0 : -EINVAL;
}

static void set_jobs(void *ctx, uint32_t target, const char *value)
{
	stats_clear_jobs(ctx, target, strcmp(value, "clear") == 0 ? NULL : value);
}

static void get_interval(void *ctx, uint32_t target, struct textbuf *tb)
{
	struct srv_stats *s = ctx;

	(void)target;
	tb_printf(tb, "%u\n", s->job_idle_s ? s->job_idle_s : STATS_JOB_IDLE_S);
}

static int check_interval(void *ctx, uint32_t target, const char *value)
{
	uint32_t v;

	(void)ctx;
	(void)target;
	return u32_parse(value, 1, 86400 * 30, &v);
}

static void set_interval(void *ctx, uint32_t target, const char *value)
{
	struct srv_stats *s = ctx;
	uint32_t v;

	(void)target;
	if (u32_parse(value, 1, 86400 * 30, &v) == 0) {
		pthread_mutex_lock(&s->lock);
		s->job_idle_s = v;
		pthread_mutex_unlock(&s->lock);
	}
}

const struct param_def stats_param_defs[3] = {
	{ "stats", get_stats, param_check_clear, set_stats, true },
	{ "job_stats", get_jobs, check_jobs, set_jobs, true },
	{ "job_cleanup_interval", get_interval, check_interval, set_interval, false },
};

void params_answer(struct srv_req *req, const struct param_target *t, size_t nt)
{
	struct lw_param_req p;
	struct lw_param_rep rep = { 0 };
	struct textbuf tb = TEXTBUF_INIT;
	char *text;
	size_t len;
	int rc;

	rc = lw_param_req_decode(req->body, req->hdr.body_len, &p);
	if (rc == 0 && req->hdr.opcode == LW_OP_SET_PARAM) {
		rc = params_set(t, nt, p.name, p.value, &rep.matched);
		if (rc == 0)
			srv_reply(req, 0, &rep, sizeof(rep), NULL, 0, NULL);
		else
			srv_reply(req, rc, NULL, 0, NULL, 0, NULL);
		return;
	}
	if (rc == 0) {
		params_get(t, nt, p.name, &tb, &rep.matched);
		rc = tb_take(&tb, &text, &len);
	}
	if (rc == 0 && (!rep.matched || len > UINT32_MAX)) {
		free(text);
		rc = rep.matched ? -EFBIG : -ENOENT;
	}
	if (rc) {
		srv_reply(req, rc, NULL, 0, NULL, 0, NULL);
		return;
	}
	/* The text itself is the bulk (its first cap bytes): the reply frees it. */
	rep.total = (uint32_t)len;
	rep.len = (uint32_t)(len < p.cap ? len : p.cap);
	if (!rep.len) {
		free(text);
		text = NULL;
	}
	srv_reply(req, 0, &rep, sizeof(rep), text, rep.len, free);
}
