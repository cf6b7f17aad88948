/*
 * What the MDS shows of itself (issue 22): its parameters (GET_PARAM, SET_PARAM, as lctl names
 * them), and /metrics and the other pages of its HTTP port.
 *
 * The metadata thread owns the OST table, the sessions' states and recovery; the network thread
 * (GET_PARAM) and the HTTP thread must not wait for it (an admin looks at the statistics of an
 * MDS that is busy or stuck, too). So the metadata thread publishes a copy of what they show at
 * every periodic pass (about a second; mds_status_publish), and they read that copy.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/mds.h"
#include "net/http.h"
#include "net/params.h"
#include "net/stats.h"

void mds_status_init(struct mds *m)
{
	pthread_mutex_init(&m->status.lock, NULL);
}

void mds_status_destroy(struct mds *m)
{
	free(m->status.osts);
	pthread_mutex_destroy(&m->status.lock);
}

static void count_session(uint64_t sid, void *val, void *arg)
{
	const struct mds_session *s = val;
	uint32_t *n = arg;

	(void)sid;
	n[0]++;
	if (s->conn_id)
		n[1]++;
}

/* Metadata thread. */
void mds_status_publish(struct mds *m)
{
	struct mds_status *st = &m->status;
	const struct mdt_ost *table;
	struct lw_statfs mdt = { 0 };
	struct mdt_ost *copy = NULL;
	struct mdt_txn *t;
	uint32_t count, gen, n[2] = { 0, 0 };
	bool recovering = m->replay.active || m->lock_recovery.active;
	uint64_t now = clock_mono_ns();

	if (mdt_txn_begin(m->store, false, &t) == 0) {
		if (mdt_statfs(t, &mdt))
			memset(&mdt, 0, sizeof(mdt));
		mdt_txn_abort(t);
	}
	table = mdt_ost_table(m->store, &count, &gen);
	if (count && (copy = malloc(count * sizeof(*copy))))
		memcpy(copy, table, count * sizeof(*copy));
	pthread_mutex_lock(&m->sess_lock);
	u64map_each(&m->sessions, count_session, n);
	pthread_mutex_unlock(&m->sess_lock);

	pthread_mutex_lock(&st->lock);
	if (copy || !count) {
		free(st->osts);
		st->osts = copy;
		st->nosts = copy ? count : 0;
	}
	st->mdt = mdt;
	st->sessions = n[0];
	st->connected = n[1];
	if (!st->published) {
		st->published = true;
		st->recovery_needed = recovering;
	}
	if (st->recovering && !recovering)
		st->recovery_ended_ns = now;
	st->recovering = recovering;
	st->replay_clients = m->replay.nclients;
	st->replayed = m->replay.replayed;
	st->refused = m->replay.refused;
	pthread_mutex_unlock(&st->lock);
}

/* ---- parameters: mdt.FSNAME-MDT0000.* ---- */

static void get_recovery(void *ctx, uint32_t target, struct textbuf *tb)
{
	struct mds *m = ctx;
	struct mds_status *st = &m->status;
	struct timespec real = clock_real();
	uint64_t now = clock_mono_ns();
	uint64_t start_s = (uint64_t)real.tv_sec - (now - m->started_ns) / 1000000000ull;

	(void)target;
	pthread_mutex_lock(&st->lock);
	/* As Lustre's recovery_status: INACTIVE when the start needed none. */
	if (!st->recovery_needed) {
		tb_printf(tb, "status: INACTIVE\n");
	} else if (st->recovering) {
		uint64_t spent = (now - m->started_ns) / 1000000000ull;

		tb_printf(tb, "status: RECOVERING\nrecovery_start: %llu\ntime_remaining: %llu\n"
			  "clients: %u\nreplayed_requests: %u\nrefused_requests: %u\n",
			  (unsigned long long)start_s,
			  (unsigned long long)(spent < m->recovery_s ? m->recovery_s - spent : 0),
			  st->replay_clients, st->replayed, st->refused);
	} else {
		tb_printf(tb, "status: COMPLETE\nrecovery_start: %llu\nrecovery_duration: %llu\n"
			  "clients: %u\nreplayed_requests: %u\nrefused_requests: %u\n",
			  (unsigned long long)start_s,
			  (unsigned long long)((st->recovery_ended_ns - m->started_ns) / 1000000000ull),
			  st->replay_clients, st->replayed, st->refused);
	}
	pthread_mutex_unlock(&st->lock);
}

static void get_exports(void *ctx, uint32_t target, struct textbuf *tb)
{
	struct mds *m = ctx;

	(void)target;
	pthread_mutex_lock(&m->status.lock);
	tb_printf(tb, "%u\n", m->status.connected);
	pthread_mutex_unlock(&m->status.lock);
}

#define MDT_SPACE_PARAM(fn, expr)                                             \
	static void fn(void *ctx, uint32_t target, struct textbuf *tb)        \
	{                                                                     \
		struct mds *m = ctx;                                          \
		const struct lw_statfs *sf = &m->status.mdt;                  \
                                                                              \
		(void)target;                                                 \
		pthread_mutex_lock(&m->status.lock);                          \
		tb_printf(tb, "%llu\n", (unsigned long long)(expr));          \
		pthread_mutex_unlock(&m->status.lock);                        \
	}
MDT_SPACE_PARAM(get_kbytestotal, sf->blocks * sf->bsize / 1024)
MDT_SPACE_PARAM(get_kbytesfree, sf->bfree * sf->bsize / 1024)
MDT_SPACE_PARAM(get_kbytesavail, sf->bavail * sf->bsize / 1024)
MDT_SPACE_PARAM(get_filestotal, sf->files)
MDT_SPACE_PARAM(get_filesfree, sf->ffree)

/* The OSTs as this MDS sees them, as Lustre's lov.*.target_obd: "IDX: UUID ACTIVE". */
static void get_targets(void *ctx, uint32_t target, struct textbuf *tb)
{
	struct mds *m = ctx;

	(void)target;
	pthread_mutex_lock(&m->status.lock);
	for (uint32_t i = 0; i < m->status.nosts; i++) {
		const struct mdt_ost *o = &m->status.osts[i];

		tb_printf(tb, "%u: %s %s\n", o->idx, o->uuid, (o->state & LW_TGT_INACTIVE) ? "INACTIVE" : "ACTIVE");
	}
	pthread_mutex_unlock(&m->status.lock);
}

/* Settings that change at run time (lctl set_param): their command-line option's range. */
#define MDS_U32_SETTING(fn, field, max, what)                                              \
	static void get_##fn(void *ctx, uint32_t target, struct textbuf *tb)                 \
	{                                                                                  \
		struct mds *m = ctx;                                                       \
                                                                                           \
		(void)target;                                                              \
		tb_printf(tb, "%u\n", (unsigned)m->field);                                  \
	}                                                                                  \
	static int check_##fn(void *ctx, uint32_t target, const char *value)               \
	{                                                                                  \
		uint32_t v;                                                                \
                                                                                           \
		(void)ctx;                                                                 \
		(void)target;                                                              \
		return u32_parse(value, 0, (max), &v);                                     \
	}                                                                                  \
	static void set_##fn(void *ctx, uint32_t target, const char *value)                \
	{                                                                                  \
		struct mds *m = ctx;                                                       \
		uint32_t v;                                                                \
                                                                                           \
		(void)target;                                                              \
		if (u32_parse(value, 0, (max), &v) == 0) {                                 \
			m->field = v;                                                      \
			log_info("%s set to %u %s", #fn, v, what);                         \
		}                                                                          \
	}
MDS_U32_SETTING(commit_ms, commit.interval_ms, MDS_COMMIT_MS_MAX, "ms")
MDS_U32_SETTING(resync_rate, resync.rate_mib, MDS_RESYNC_RATE_MAX, "MiB/s")

static const struct param_def mdt_defs[] = {
	{ "commit_ms", get_commit_ms, check_commit_ms, set_commit_ms, false },
	{ "resync_rate", get_resync_rate, check_resync_rate, set_resync_rate, false },
	{ "recovery_status", get_recovery, NULL, NULL, false },
	{ "num_exports", get_exports, NULL, NULL, false },
	{ "kbytestotal", get_kbytestotal, NULL, NULL, false },
	{ "kbytesfree", get_kbytesfree, NULL, NULL, false },
	{ "kbytesavail", get_kbytesavail, NULL, NULL, false },
	{ "filestotal", get_filestotal, NULL, NULL, false },
	{ "filesfree", get_filesfree, NULL, NULL, false },
	{ "target_obd", get_targets, NULL, NULL, false },
};

/* The MDS's parameters: the statistics' and the MDT's, under one prefix. */
static void param_targets(struct mds *m, struct param_target t[2])
{
	for (int i = 0; i < 2; i++) {
		snprintf(t[i].prefix, sizeof(t[i].prefix), "mdt.%s-MDT0000", mdt_store_fsname(m->store));
		t[i].target = 0;
	}
	t[0].defs = stats_param_defs;
	t[0].ndefs = sizeof(stats_param_defs) / sizeof(stats_param_defs[0]);
	t[0].ctx = srv_stats(m->srv);
	t[1].defs = mdt_defs;
	t[1].ndefs = sizeof(mdt_defs) / sizeof(mdt_defs[0]);
	t[1].ctx = m;
}

/* Any thread. */
void mds_params_answer(struct mds *m, struct srv_req *req)
{
	struct param_target t[2];

	param_targets(m, t);
	params_answer(req, t, 2);
}

/* ---- /metrics ---- */

static void mdt_name(uint32_t id, char *buf, size_t cap)
{
	snprintf(buf, cap, "MDT%04x", id);
}

static void gauge(struct textbuf *tb, const char *name, const char *help)
{
	tb_printf(tb, "# HELP loom_%s %s\n# TYPE loom_%s gauge\n", name, help, name);
}

void mds_metrics(struct mds *m, struct textbuf *tb)
{
	struct mds_status *st = &m->status;
	uint64_t now = clock_mono_ns();

	stats_render_prom(srv_stats(m->srv), "loom", "mdt", mdt_name, tb);
	pthread_mutex_lock(&st->lock);
	gauge(tb, "mdt_clients", "Client sessions, and those connected now.");
	tb_printf(tb, "loom_mdt_clients{mdt=\"MDT0000\",state=\"all\"} %u\n", st->sessions);
	tb_printf(tb, "loom_mdt_clients{mdt=\"MDT0000\",state=\"connected\"} %u\n", st->connected);
	gauge(tb, "mdt_recovering", "1 while the MDS waits for clients to replay after its start.");
	tb_printf(tb, "loom_mdt_recovering{mdt=\"MDT0000\"} %d\n", st->recovering ? 1 : 0);
	gauge(tb, "mdt_recovery_seconds", "How long recovery has lasted (or lasted), since the start.");
	tb_printf(tb, "loom_mdt_recovery_seconds{mdt=\"MDT0000\"} %.3f\n",
		  !st->recovery_needed ? 0.0
		  : (double)((st->recovering ? now : st->recovery_ended_ns) - m->started_ns) / 1e9);
	gauge(tb, "mdt_size_bytes", "The MDT's size.");
	tb_printf(tb, "loom_mdt_size_bytes{mdt=\"MDT0000\"} %llu\n",
		  (unsigned long long)(st->mdt.blocks * st->mdt.bsize));
	gauge(tb, "mdt_free_bytes", "The MDT's free space.");
	tb_printf(tb, "loom_mdt_free_bytes{mdt=\"MDT0000\"} %llu\n",
		  (unsigned long long)(st->mdt.bfree * st->mdt.bsize));
	gauge(tb, "mdt_files", "Inodes in use on the MDT.");
	tb_printf(tb, "loom_mdt_files{mdt=\"MDT0000\"} %llu\n",
		  (unsigned long long)(st->mdt.files - st->mdt.ffree));
	gauge(tb, "mdt_files_free", "Inodes the MDT has room for.");
	tb_printf(tb, "loom_mdt_files_free{mdt=\"MDT0000\"} %llu\n", (unsigned long long)st->mdt.ffree);
	/* The OSTs as the MDS sees them (their heartbeats): up, and their space. */
	gauge(tb, "mds_ost_up", "As the MDS sees it: 1 while the OST's server answers the MDS (0: inactive).");
	for (uint32_t i = 0; i < st->nosts; i++)
		tb_printf(tb, "loom_mds_ost_up{ost=\"OST%04x\"} %d\n", st->osts[i].idx,
			  (st->osts[i].state & LW_TGT_INACTIVE) ? 0 : 1);
	gauge(tb, "mds_ost_size_bytes", "As the MDS sees it: the OST's size, as its last heartbeat said.");
	for (uint32_t i = 0; i < st->nosts; i++)
		tb_printf(tb, "loom_mds_ost_size_bytes{ost=\"OST%04x\"} %llu\n", st->osts[i].idx,
			  (unsigned long long)(st->osts[i].sf.blocks * st->osts[i].sf.bsize));
	gauge(tb, "mds_ost_free_bytes", "As the MDS sees it: the OST's free space, as its last heartbeat said.");
	for (uint32_t i = 0; i < st->nosts; i++)
		tb_printf(tb, "loom_mds_ost_free_bytes{ost=\"OST%04x\"} %llu\n", st->osts[i].idx,
			  (unsigned long long)(st->osts[i].sf.bfree * st->osts[i].sf.bsize));
	gauge(tb, "mds_ost_files_free", "As the MDS sees it: objects the OST has room for, as its last heartbeat said.");
	for (uint32_t i = 0; i < st->nosts; i++)
		tb_printf(tb, "loom_mds_ost_files_free{ost=\"OST%04x\"} %llu\n", st->osts[i].idx,
			  (unsigned long long)st->osts[i].sf.ffree);
	pthread_mutex_unlock(&st->lock);
}

/* ---- the HTTP port ---- */

static int http_page(const char *path, void *conn, struct http_answer *ans, void *arg)
{
	struct mds *m = arg;
	struct textbuf tb = TEXTBUF_INIT;
	int rc;

	if (!strcmp(path, "/metrics")) {
		mds_metrics(m, &tb);
		ans->content_type = "text/plain; version=0.0.4; charset=utf-8";
	} else if (!strcmp(path, "/params")) {
		/* lctl get_param's text, for scripts without the key: /params?name=mdt.*.job_stats */
		const char *name = http_query(conn, "name");
		struct param_target t[2];
		uint32_t matched;

		param_targets(m, t);
		params_get(t, 2, name && name[0] ? name : "*", &tb, &matched);
		ans->content_type = "text/plain; charset=utf-8";
		if (!matched && !tb.err) {
			tb_printf(&tb, "no parameter matches %s\n", name && name[0] ? name : "*");
			ans->status = 404;
		}
	} else {
		tb_printf(&tb, "not found: this MDS serves /metrics and /params?name=PATTERN\n");
		ans->content_type = "text/plain; charset=utf-8";
		ans->status = 404;
	}
	rc = tb_take(&tb, &ans->body, &ans->len);
	if (rc == 0 && !ans->status)
		ans->status = 200;
	return rc;
}

int mds_http_start(struct mds *m, const char *addr)
{
	return http_serve_stats("mds", addr, http_page, m, &m->http);
}
