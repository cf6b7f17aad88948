/*
 * loom-oss's side facing the MDS: one thread registers the OSTs (with their failover partner's
 * address, when the OSS has one), sends heartbeats with their free space, brings the nodemap, and
 * reconnects whenever the MDS goes away: to the same address first (an MDS that restarted), then
 * to the next of the list (the other server of an MDS failover pair).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "net/rpc.h"
#include "oss/oss_impl.h"
#include "oss/oss_nodemap.h"
#include "proto/codec.h"

#define MDS_SILENCE_MS 15000 /* a heartbeat this long unanswered: the MDS went silent */

static bool oss_sleep(struct oss *oss, int seconds)
{
	struct timespec ts;
	bool stopping;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += seconds;
	/* A hurry cuts the sleep short, but not below a fifth of a second: claims of unknown keys
	 * cannot make the OSS hammer the MDS. */
	usleep(200000);
	pthread_mutex_lock(&oss->stop_lock);
	while (!oss->stopping && !oss->hurry &&
	       pthread_cond_timedwait(&oss->stop_cond, &oss->stop_lock, &ts) == 0)
		;
	oss->hurry = false;
	stopping = oss->stopping;
	pthread_mutex_unlock(&oss->stop_lock);
	return stopping;
}

void oss_hurry(void *arg)
{
	struct oss *oss = arg;

	pthread_mutex_lock(&oss->stop_lock);
	oss->hurry = true;
	pthread_cond_broadcast(&oss->stop_cond);
	pthread_mutex_unlock(&oss->stop_lock);
}

static const char *mds_now(const struct oss *oss, char *buf, size_t cap)
{
	return mds_addr_str(&oss->mds.addr[oss->mds_cur], buf, cap);
}

static int oss_register(struct oss *oss, struct rpc_conn *mds, struct ost *ost)
{
	char at[96];
	struct lw_ost_register_req req = { 0 };
	struct lw_ost_register_rep rep;
	struct lw_ost_replace_rep rrep;
	bool replacing = ost_replacing(ost);
	struct rpc_call call;
	int rc;

	req.want_idx = ost_index(ost);
	req.port = srv_port(oss->srv);
	if (oss->advertise[0])
		snprintf(req.host, sizeof(req.host), "%s", oss->advertise);
	else if (rpc_conn_local_host(mds, req.host, sizeof(req.host)) < 0)
		snprintf(req.host, sizeof(req.host), "127.0.0.1");
	snprintf(req.uuid, sizeof(req.uuid), "%s", ost_uuid(ost));
	snprintf(req.fsname, sizeof(req.fsname), "%s", ost_fsname(ost));
	rc = ost_statfs(ost, &req.sf);
	if (rc)
		return rc;
	/* Formatted with --replace: the first registration asks to take the lost OST's index. */
	rpc_call_init(&call, replacing ? LW_OP_MDS_OST_REPLACE : LW_OP_MDS_OST_REGISTER, &req, sizeof(req));
	rc = rpc_call_sync(mds, &call);
	if (rc == 0 && call.rbody_len != (replacing ? sizeof(rrep) : sizeof(rep)))
		rc = -EPROTO;
	if (rc == 0 && replacing) {
		memcpy(&rrep, call.rbody, sizeof(rrep));
		rc = ost_replaced(ost, rrep.idx, rrep.lost_below);
		if (rc == 0)
			log_warn("OST%04x (%s, %s) registered with the MDS at %s as the replacement of the "
				 "lost OST%04x, serving on %s:%u; objects below id %llu were lost with it (EIO)",
				 rrep.idx, ost_dir(ost), ost_uuid(ost), mds_now(oss, at, sizeof(at)), rrep.idx,
				 req.host, req.port, (unsigned long long)rrep.lost_below);
	} else if (rc == 0) {
		memcpy(&rep, call.rbody, sizeof(rep));
		rc = ost_set_index(ost, rep.idx);
		if (rc == 0)
			log_info("OST%04x (%s, %s) registered with the MDS at %s, serving on %s:%u",
				 rep.idx, ost_dir(ost), ost_uuid(ost), mds_now(oss, at, sizeof(at)),
				 req.host, req.port);
	}
	rpc_call_release(&call);
	return rc;
}

/* Tells the MDS where else the OST may be served (nothing: clears what an earlier start said).
 * An MDS that does not know MDS_OST_FAILOVER gets along without: clients then find the partner
 * once it registers. */
static int oss_tell_failover(struct oss *oss, struct rpc_conn *mds, struct ost *ost, bool *unknown)
{
	struct lw_ost_addr a = { .idx = ost_index(ost), .port = oss->failover.port };
	struct rpc_call call;
	int rc;

	if (*unknown)
		return 0;
	snprintf(a.host, sizeof(a.host), "%s", oss->failover.host);
	rpc_call_init(&call, LW_OP_MDS_OST_FAILOVER, &a, sizeof(a));
	rc = rpc_call_sync(mds, &call);
	rpc_call_release(&call);
	if (rc == -EOPNOTSUPP) {
		if (oss->failover.host[0])
			log_warn("the MDS does not take failover addresses (an older loom-mds): clients "
				 "find %s:%u once it registers", oss->failover.host, oss->failover.port);
		*unknown = true;
		return 0;
	}
	return rc;
}

/* Why the MDS refused an OST, for good: the OSS exits (0 when the refusal is not for good). */
static const char *oss_refusal(int rc, bool replacing, uint32_t idx, char *buf, size_t cap)
{
	switch (rc) {
	case -EEXIST:
		snprintf(buf, cap, "index %u belongs to another OST (if OST%04x is lost for good, format "
			 "this one with --index %u --replace)", idx, idx, idx);
		return buf;
	case -ENODEV:
		return "this OST was removed from the file system (loom ost remove); format the disk again "
		       "to use it";
	case -EBUSY:
		snprintf(buf, cap, "OST%04x, which this one was to replace, is in service: stop its OSS first "
			 "(--replace is for an OST lost for good)", idx);
		return buf;
	case -EINVAL:
		return replacing ? "it is another file system's, has another index already, or its record is invalid"
				 : "it belongs to another file system, or its record is invalid";
	case -EOPNOTSUPP:
		return replacing ? "the MDS cannot take replacements (an older loom-mds)" : NULL;
	default:
		return NULL;
	}
}

static int oss_heartbeat(struct oss *oss, struct rpc_conn *mds)
{
	uint8_t body[sizeof(struct lw_ost_heartbeat_req) + MAX_OSTS * sizeof(struct lw_ost_heartbeat_ent)];
	struct lw_wr w;
	struct lw_ost_heartbeat_req hb = { .count = (uint32_t)oss->nosts };
	struct rpc_call call;
	int rc;

	lw_wr_init(&w, body, sizeof(body));
	lw_wr_put(&w, &hb, sizeof(hb));
	for (int i = 0; i < oss->nosts; i++) {
		struct lw_ost_heartbeat_ent e = { .idx = ost_index(oss->osts[i]) };
		ost_statfs(oss->osts[i], &e.sf);
		lw_wr_put(&w, &e, sizeof(e));
	}
	rpc_call_init(&call, LW_OP_MDS_OST_HEARTBEAT, body, (uint32_t)w.len);
	rc = rpc_call_sync(mds, &call);
	if (rc == 0 && oss->keylen) {
		int nrc = oss_nodemap_heard(&oss->nodemap, mds, call.rbody, call.rbody_len);

		if (nrc)
			log_warn("cannot learn the nodemap from the MDS: %s; node keys are judged by the "
				 "copy held (none: refused for now)", strerror(-nrc));
	}
	rpc_call_release(&call);
	return rc;
}

void *oss_mds_thread(void *arg)
{
	struct oss *oss = arg;
	struct rpc_conn *mds = NULL;
	unsigned failed = 0; /* dials in a row that failed */
	bool no_failover = false;
	bool replace_waits = false; /* the MDS asked a replacement to wait (said once) */
	char at[96];

	while (!oss->stopping) {
		bool silent = false;
		int rc = 0;

		if (!mds) {
			/* A heartbeat unanswered for the adaptive timeout (20 s at least: an MDS slow
			 * to commit must not see its OSTs flap) means an MDS gone silent, a host that
			 * died with its link: the next address is tried then, before the OSTs expire at
			 * the partner (30 s after its start). */
			struct rpc_conn_opts o = { .name = "MDS", .key = oss->keylen ? oss->key : NULL,
						   .keylen = oss->keylen, .encrypt = oss->encrypt };
			const struct mds_addr *a = &oss->mds.addr[oss->mds_cur];

			rc = rpc_conn_open(a->host, a->port, &o, &mds);
			if (rc) {
				/* Each address of the list once in a while, not once per round. */
				if (failed < oss->mds.count)
					log_warn("cannot reach the MDS at %s: %s; %s", mds_now(oss, at, sizeof(at)),
						 strerror(-rc), oss->mds.count > 1 ? "trying the next address" : "retrying");
				failed++;
				mds = NULL;
				oss->mds_cur = (oss->mds_cur + 1) % oss->mds.count;
				/* A round of the list without an answer: a pause before the next. */
				if (oss->mds_cur == 0 && oss_sleep(oss, 1))
					break;
				continue;
			}
			failed = 0;
			no_failover = false; /* this MDS may know MDS_OST_FAILOVER (another, or upgraded) */
			for (int i = 0; i < oss->nosts && rc == 0; i++) {
				bool replacing = ost_replacing(oss->osts[i]);
				char buf[256];
				const char *why;

				rc = oss_register(oss, mds, oss->osts[i]);
				if (rc == -EAGAIN && replacing) {
					if (!replace_waits)
						log_info("the MDS at %s does not give up OST%04x yet (it started "
							 "lately, and the OST may come back until its expiry period "
							 "ends; `loom ost deactivate %u` says it will not): asking "
							 "again", mds_now(oss, at, sizeof(at)),
							 ost_index(oss->osts[i]), ost_index(oss->osts[i]));
					replace_waits = true;
					break;
				}
				why = oss_refusal(rc, replacing, ost_index(oss->osts[i]), buf, sizeof(buf));
				if (why) {
					log_err("the MDS refused %s%s: %s (%s)", ost_dir(oss->osts[i]),
						replacing ? " as a replacement" : "", strerror(-rc), why);
					exit(1);
				}
				if (rc == 0)
					rc = oss_tell_failover(oss, mds, oss->osts[i], &no_failover);
			}
			/* At once, not a heartbeat later: nodes' keys wait for the nodemap it brings. */
			if (rc == 0)
				rc = oss_heartbeat(oss, mds);
		} else {
			uint64_t sent = clock_mono_ns();

			rc = oss_heartbeat(oss, mds);
			/* No answer within the timeout (a failed call says -EIO either way). */
			silent = rc && clock_mono_ns() - sent >= (uint64_t)MDS_SILENCE_MS * 1000000u;
		}
		if (rc == -EAGAIN && replace_waits) {
			/* A replacement the MDS cannot take yet: the same MDS, a second later. */
			rpc_conn_close(mds);
			mds = NULL;
			if (oss_sleep(oss, 1))
				break;
			continue;
		}
		if (rc) {
			/* The same address first: an MDS that restarts comes back there; one that
			 * went silent (its host died) is left for the next of a failover list. */
			log_warn("lost the MDS at %s (%s); reconnecting", mds_now(oss, at, sizeof(at)),
				 strerror(-rc));
			if (silent && oss->mds.count > 1)
				oss->mds_cur = (oss->mds_cur + 1) % oss->mds.count;
			rpc_conn_close(mds);
			mds = NULL;
			if (oss_sleep(oss, 1))
				break;
			continue;
		}
		if (oss_sleep(oss, HEARTBEAT_SECONDS))
			break;
	}
	rpc_conn_close(mds);
	return NULL;
}
