/*
 * The metadata thread's periodic work, between batches: OSTs gone silent, inodes left unlinked
 * but open by the previous run, lock recovery that outlasted its window, sessions that ended, old
 * reply-cache entries, and the hand-over of work to the destroyer and the truncator.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/dispatch.h"

/* Inodes unlinked while open when the MDS last stopped: once the recovery window has passed,
 * those that no client opened again are released. */
static void release_orphans(struct mds *m)
{
	uint64_t inos[256], after = 0;
	size_t n = 0, total = 0;
	int rc;

	/* In order of inode number, each once: those still open stay in the table. */
	do {
		struct mdt_txn *t;
		bool released = false;

		rc = mds_commit_before_write(m);
		if (rc == 0)
			rc = mdt_txn_begin(m->store, true, &t);
		if (rc)
			break;
		rc = mdt_orphan_list(t, after, inos, ARRAY_SIZE(inos), &n);
		for (size_t i = 0; rc == 0 && i < n; i++) {
			after = inos[i];
			if (!mds_ino_release_if_closed(m, inos[i]))
				continue;
			rc = mdt_inode_release(t, inos[i]);
			released = true;
			total++;
		}
		if (rc) {
			mdt_txn_abort(t);
			break;
		}
		rc = mdt_txn_commit(t);
		if (released)
			m->destroyer.more = true;
	} while (rc == 0 && n == ARRAY_SIZE(inos));
	if (rc)
		log_err("releasing orphan inodes: %s; will try again", strerror(-rc));
	else
		m->orphans_released = true;
	if (total)
		log_info("released %zu inodes left unlinked but open by the previous run", total);
}

struct away_scan {
	uint64_t deadline;
	bool any;
};

static void away_scan(uint64_t sid, void *val, void *arg)
{
	struct away_scan *a = arg;
	struct mds_session *s = val;

	(void)sid;
	if (!s->conn_id && s->away_since_ns <= a->deadline)
		a->any = true;
}

/* Work of its own transaction: sessions that ended, and old reply-cache entries. */
static void housekeeping(struct mds *m, uint64_t now)
{
	uint64_t window = (uint64_t)m->recovery_s * 1000000000ull;
	struct away_scan a = { .deadline = now > window ? now - window : 0 };
	static uint64_t last_sweep, last_run;
	static bool ranges_checked;
	struct mdt_txn *t;
	bool released = false;
	size_t swept = 0;
	int rc;

	if (now - last_run < 1000000000ull)
		return;
	last_run = now;
	if (now > window)
		mds_sessions_each(m, away_scan, &a);
	if (!a.any && now - last_sweep < 10ull * 1000000000ull)
		return;
	if (mds_commit_work_begin(m, &t) != 0)
		return;
	rc = a.any ? mds_sessions_expire(m, t, now, &released) : 0;
	if (rc == 0 && !ranges_checked && now - m->started_ns >= 2 * window) {
		rc = mds_sessions_forget_ranges(m, t);
		ranges_checked = rc == 0;
	}
	if (rc == 0 && now - last_sweep >= 10ull * 1000000000ull) {
		/* A resend comes within the recovery window; ten of them is plenty, and one is enough
		 * while the MDT is short of room (the entries of a big rm -rf are room it needs). */
		int64_t keep = (mds_space_short(m) ? 1 : 10) * (int64_t)m->recovery_s + 60;

		rc = mdt_reply_sweep(t, clock_real().tv_sec - keep, 20000, &swept);
		last_sweep = now;
	}
	rc = mds_commit_work_end(m, t, rc);
	if (rc)
		log_err("housekeeping: %s", strerror(-rc));
	if (released)
		m->destroyer.more = true;
}

/* The recovery window since the start passed while clients that may hold locks had not replayed
 * them: recovery ends without them. */
static void lock_recovery_expire(struct mds *m, uint64_t now)
{
	struct mdt_txn *t;
	int rc = mds_commit_before_write(m);

	if (rc == 0)
		rc = mdt_txn_begin(m->store, true, &t);
	if (rc == 0) {
		rc = mds_locks_recovery_expire(m, t, now);
		if (rc == 0)
			rc = mdt_txn_commit(t);
		else
			mdt_txn_abort(t);
	}
	if (rc)
		log_err("forgetting the clients that did not replay their locks: %s (a later start waits "
			"for them again)", strerror(-rc));
}

void mds_periodic(struct mds *m)
{
	uint64_t now = clock_mono_ns();
	uint64_t dead = (uint64_t)MDS_OST_DEAD_SECONDS * 1000000000ull;
	struct mdt_txn *t;

	mdt_reserve_hold(m->store); /* the disk may fill without the MDT writing */
	if (now > dead && mdt_ost_expire(m->store, now - dead))
		log_info("OST table changed: an OST went silent or came back");
	/* Not while replays are awaited: a replayed unlink's client may still open its file. */
	if (!m->orphans_released && !m->replay.active &&
	    now - m->started_ns >= (uint64_t)m->recovery_s * 1000000000ull)
		release_orphans(m);
	if (m->lock_recovery.active && now - m->started_ns >= (uint64_t)m->recovery_s * 1000000000ull)
		lock_recovery_expire(m, now);
	mds_replay_expire(m, now);
	mds_replay_drain(m);
	mds_leases_expire(m, now);
	housekeeping(m, now);
	mds_status_publish(m);
	mds_locks_wake(m); /* after sessions that ended, or recovery that did */
	if (!m->commit.open)
		mds_releases_settled(m); /* else at the commit of the releases (commit.c) */
	mds_trunc_expire(m, now);
	if (mdt_txn_begin(m->store, false, &t) == 0) {
		mds_destroyer_kick(m, t);
		mds_truncator_kick(m, t);
		mds_resync_kick(m, t);
		mdt_txn_abort(t);
	}
}
