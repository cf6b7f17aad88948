/*
 * Commit behind, as Lustre's MDS does it: every change a client asked for gets a transaction
 * number (transno) and is answered once it is applied, in the metadata thread's open write
 * transaction; that transaction is committed (one fdatasync) when it has gathered enough
 * changes, when --commit-ms passed since its first, when a request needs the disk (MDS_SYNC, a
 * change that is not replayed), or before anything else writes the MDT. Every reply says the
 * last transno on disk (last_committed), and clients keep and replay what is above it
 * (replay.c). docs/architecture.md, "Commit behind and replay".
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/dispatch.h"

#define COMMIT_MAX_CHANGES 512 /* one commit's changes at most: what a replay may have to redo */

int mds_commit_start(struct mds *m)
{
	struct mdt_txn *t;
	uint64_t last = 0;
	int rc = mdt_txn_begin(m->store, false, &t);

	if (rc)
		return rc;
	rc = mdt_last_transno_get(t, &last);
	mdt_txn_abort(t);
	if (rc)
		return rc;
	m->commit.transno = last;
	atomic_store(&m->commit.last_committed, last);
	return 0;
}

int mds_commit_txn(struct mds *m, struct mdt_txn **t)
{
	int rc;

	if (m->commit.open) {
		*t = m->commit.open;
		return 0;
	}
	rc = mdt_txn_begin(m->store, true, t);
	if (rc == 0) {
		m->commit.open = *t;
		m->commit.changes = 0;
		m->commit.first_ns = 0;
	}
	return rc;
}

uint64_t mds_commit_next(struct mds *m)
{
	/* While replays may come, the numbers above the disk's are theirs: what runs meanwhile
	 * (connects, syncs, the OSSs') changes no inode and is committed before it is answered. */
	if (m->replay.active)
		return 0;
	return ++m->commit.transno;
}

void mds_commit_unused(struct mds *m, uint64_t transno)
{
	/* The change failed and its child transaction was aborted: nothing carries its number, and
	 * no other change took one meanwhile (one thread), so the next change gets it. */
	if (transno && transno == m->commit.transno)
		m->commit.transno--;
}

int mds_commit_work_begin(struct mds *m, struct mdt_txn **child)
{
	struct mdt_txn *t;
	int rc = mds_commit_txn(m, &t);

	return rc ? rc : mdt_txn_child(t, child);
}

int mds_commit_work_end(struct mds *m, struct mdt_txn *child, int rc)
{
	if (rc) {
		mdt_txn_abort(child);
		return rc;
	}
	rc = mdt_txn_commit(child);
	if (rc == 0)
		mds_commit_applied(m); /* so that it is due in its turn, as a change is */
	return rc;
}

void mds_commit_applied(struct mds *m)
{
	if (!m->commit.changes++)
		m->commit.first_ns = clock_mono_ns();
}

/*
 * Changes that were answered are not on disk and cannot be: this MDS's memory and its disk
 * differ. What the clients were told lives on in their replay queues, and a new run of the MDS,
 * from the disk, gets it back from them (a supervisor restarts it: the systemd unit does).
 */
static _Noreturn void answered_lost(struct mds *m, uint32_t answered, int rc)
{
	log_err("commit of %u answered changes (up to transno %llu) failed: %s; stopping so that a "
		"restart recovers them from the clients' replays", answered,
		(unsigned long long)m->commit.transno, strerror(-rc));
	exit(3);
}

/* Nothing of the open transaction is on disk: the numbers it gave are given again. */
static void forget_open(struct mds *m)
{
	m->commit.open = NULL;
	m->commit.changes = 0;
	m->commit.transno = atomic_load(&m->commit.last_committed);
	atomic_store(&m->commit.pending, false);
}

int mds_commit_flush(struct mds *m, uint32_t answered)
{
	struct mdt_txn *t = m->commit.open;
	uint64_t upto = m->commit.transno;
	int rc;

	if (!t)
		return 0;
	rc = mdt_last_transno_put(t, upto);
	if (rc == 0)
		rc = mdt_txn_commit(t);
	else
		mdt_txn_abort(t);
	if (rc) {
		forget_open(m);
		if (answered)
			answered_lost(m, answered, rc);
		return rc;
	}
	/* A replicated MDT: committed once the standby has it too, while it counts (repl.h). */
	rc = mds_repl_wait(m, mdt_store_repl_seq(m->store));
	if (rc) {
		log_err("the standby cannot be struck from the MDSs that hold every commit (%s): "
			"stopping; the clients replay what was not committed to the MDS that takes over",
			strerror(-rc));
		exit(3);
	}
	/* The destroyer reads the destroy queue as committed: what this commit queued is its now. */
	if (m->commit.changes)
		m->destroyer.more = true;
	m->commit.open = NULL;
	m->commit.changes = 0;
	atomic_store(&m->commit.last_committed, upto);
	atomic_store(&m->commit.pending, false);
	mds_releases_settled(m);
	return 0;
}

void mds_commit_abort(struct mds *m, uint32_t answered)
{
	if (!m->commit.open)
		return;
	mdt_txn_abort(m->commit.open);
	forget_open(m);
	if (answered)
		answered_lost(m, answered, -EIO);
}

int mds_commit_before_write(struct mds *m)
{
	return mds_commit_flush(m, m->commit.changes);
}

bool mds_commit_due(const struct mds *m)
{
	if (!m->commit.open)
		return false;
	if (!m->commit.interval_ms || m->commit.changes >= COMMIT_MAX_CHANGES)
		return true;
	return m->commit.changes &&
	       clock_mono_ns() - m->commit.first_ns >= (uint64_t)m->commit.interval_ms * 1000000ull;
}

int mds_commit_wait_ms(const struct mds *m, int idle_ms)
{
	uint64_t due, now;

	if (!m->commit.open || !m->commit.changes)
		return idle_ms;
	due = m->commit.first_ns + (uint64_t)m->commit.interval_ms * 1000000ull;
	now = clock_mono_ns();
	return now >= due ? 0 : (int)((due - now + 999999) / 1000000);
}

void mds_reply_granted(struct mds *m, struct srv_req *req, int status, const void *body, uint32_t len,
		       uint64_t transno, const struct mdt_vers *vers, uint64_t lease_ino, uint64_t lease_gen,
		       bool lease_excl)
{
	struct {
		struct lw_mds_rep_prefix pre;
		struct lw_obj_version vers[LW_MAX_VERS];
	} p;
	uint32_t nvers = 0;

	if (!lw_op_mds_prefixed(req->hdr.opcode)) {
		srv_reply(req, status, body, status ? 0 : len, NULL, 0, NULL);
		return;
	}
	if (status)
		transno = lease_ino = lease_gen = 0;
	if (transno && vers) {
		nvers = vers->n;
		memcpy(p.vers, vers->got, nvers * sizeof(p.vers[0]));
	}
	p.pre = (struct lw_mds_rep_prefix){
		.transno = transno,
		.last_committed = atomic_load(&m->commit.last_committed),
		.nvers = nvers,
		.flags = (m->replay.active ? LW_RPF_RECOVERING : 0) |
			 (lease_excl && lease_ino && lease_gen ? LW_RPF_LEASE_EXCL : 0),
		.lease_ino = lease_gen ? lease_ino : 0,
		.lease_gen = lease_ino ? lease_gen : 0,
		.lease_trust_ms = m->leases.timeout_s * 500u,
		.epoch = (uint32_t)m->repl.epoch,
	};
	mds_leases_reply_flags(m, req, status, &p.pre);
	srv_reply_pre(req, status, &p, (uint32_t)(sizeof(p.pre) + nvers * sizeof(p.vers[0])), body,
		      status ? 0 : len);
}

void mds_reply(struct mds *m, struct srv_req *req, int status, const void *body, uint32_t len,
	       uint64_t transno, const struct mdt_vers *vers)
{
	mds_reply_granted(m, req, status, body, len, transno, vers, 0, 0, false);
}
