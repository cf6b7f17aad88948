/*
 * File locks held at the MDS, so that every mount sees the same locks: fcntl(2) byte-range
 * locks and flock(2) whole-file locks, kept apart as Linux keeps them. The ranges of one file
 * merge and split as src/common/lockrange.c says, the code libloom's own record uses too.
 *
 * Everything here runs on the metadata thread. Locks live in memory only; they belong to a
 * session, so they outlive a broken connection for the recovery window, and after an MDS restart
 * their clients replay them (LW_LK_REPLAY):
 *
 *   start ── `clients` lists someone ──> recovering ── every listed client said ──> normal
 *     │         (the MDT table of clients     │        LW_LK_REPLAY_DONE, or the
 *     │          that may hold locks)         │        recovery window passed
 *     └── nobody listed ─────────────────────────────────────────────────────────> normal
 *
 * While recovering, only replays are granted (at once, never waiting); every other request that
 * would take a lock or ask about one (F_GETLK) is parked like a waiter and decided when recovery
 * ends, so nothing new can slip under a lock that a client has yet to replay. Unlocks and cancels
 * go through.
 *
 * A request that must wait is parked: its srv_req stays here, unanswered, until the conflicting
 * lock goes away (then it is granted and answered) or its owner cancels (then -EINTR).
 *
 * Ordering: waiters are looked at again only after the batch that could have let them in was
 * answered (mds_locks_wake, from batch.c and housekeeping). So an MDS_LOCK's reply leaves in the
 * order the MDS decided: a client that applies the replies to its record of held locks in the
 * order they arrive keeps the same ranges as here, even for two requests of one owner at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "common/lockrange.h"
#include "common/log.h"
#include "common/util.h"
#include "mds/mds.h"

struct lk_waiter {
	struct lk_waiter *next;
	struct srv_req *req;  /* answered when decided */
	uint64_t sid;
	struct lw_lock_req q; /* LW_LK_WAIT; while recovering also a test or a request without it */
};

struct lk_inode {
	struct lock_range *locks;
	struct lk_waiter *waiters; /* in arrival order */
};

static struct lk_inode *inode_get(struct mds *m, uint64_t ino, bool create)
{
	struct lk_inode *li = u64map_get(&m->locks, ino);

	if (!li && create) {
		li = calloc(1, sizeof(*li));
		if (li && u64map_put(&m->locks, ino, li) < 0) {
			free(li);
			li = NULL;
		}
	}
	return li;
}

static void inode_maybe_free(struct mds *m, uint64_t ino, struct lk_inode *li)
{
	if (!li->locks && !li->waiters)
		free(u64map_del(&m->locks, ino));
}

static struct lock_op op_of(uint64_t sid, const struct lw_lock_req *q)
{
	return (struct lock_op){ .sid = sid, .owner = q->owner, .start = q->start, .end = q->end,
				 .type = q->type, .pid = q->pid, .flock = (q->flags & LW_LK_FLOCK) != 0 };
}

static const struct lock_range *find_conflict(const struct lk_inode *li, uint64_t sid,
					      const struct lw_lock_req *q)
{
	struct lock_op op = op_of(sid, q);

	return lock_ranges_conflict(li->locks, &op);
}

static int apply(struct lk_inode *li, uint64_t sid, const struct lw_lock_req *q)
{
	struct lock_op op = op_of(sid, q);

	return lock_ranges_apply(&li->locks, &op);
}

/* LW_LK_TEST's answer: the conflicting lock, or type F_UNLCK. */
static void describe_conflict(const struct lk_inode *li, uint64_t sid, const struct lw_lock_req *q,
			      struct lw_lock_rep *rep)
{
	const struct lock_range *c = li ? find_conflict(li, sid, q) : NULL;

	memset(rep, 0, sizeof(*rep));
	rep->type = F_UNLCK;
	if (c) {
		rep->start = c->start;
		rep->end = c->end;
		rep->type = c->type;
		rep->pid = c->pid;
	}
}

static void reply_lock(struct mds *m, struct srv_req *req, int rc, const struct lw_lock_rep *rep)
{
	struct lw_lock_rep none = { .type = F_UNLCK };

	mds_reply(m, req, rc, rep ? rep : &none, sizeof(none), 0, NULL);
}

static bool recovering(const struct mds *m)
{
	return m->lock_recovery.active;
}

/* ino's waiters are to be looked at again once the batch was answered. Without memory for the
 * note, at once (as before the notes: a grant may then overtake a reply of the batch). */
static void wake_later(struct mds *m, uint64_t ino, struct lk_inode *li);

/*
 * Decides whatever waiting requests can be decided now, in arrival order: a test is answered, a
 * request that no longer conflicts is granted, and one that still conflicts waits on, or (one
 * parked while recovering, without LW_LK_WAIT) is answered -EAGAIN. Nothing while recovering.
 */
static void wake_waiters(struct mds *m, uint64_t ino, struct lk_inode *li)
{
	struct lk_waiter **pp = &li->waiters;

	while (*pp && !recovering(m)) {
		struct lk_waiter *w = *pp;
		struct lw_lock_rep rep;
		int rc = 0;

		if (w->q.flags & LW_LK_TEST) {
			describe_conflict(li, w->sid, &w->q, &rep);
		} else if (find_conflict(li, w->sid, &w->q)) {
			if (w->q.flags & LW_LK_WAIT) {
				pp = &w->next;
				continue;
			}
			rc = -EAGAIN;
		} else {
			rc = apply(li, w->sid, &w->q);
			memset(&rep, 0, sizeof(rep));
			rep.type = F_UNLCK;
		}
		*pp = w->next;
		reply_lock(m, w->req, rc, &rep);
		free(w);
		m->lock_waiters--;
	}
	inode_maybe_free(m, ino, li);
}

static void wake_later(struct mds *m, uint64_t ino, struct lk_inode *li)
{
	if (!li->waiters) {
		inode_maybe_free(m, ino, li);
		return;
	}
	if (u64map_put(&m->lock_wakes, ino, (void *)1) < 0)
		wake_waiters(m, ino, li);
}

static void collect_ino(uint64_t ino, void *val, void *arg)
{
	struct { uint64_t *inos; size_t n, cap; } *c = arg;

	(void)val;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		uint64_t *p = realloc(c->inos, cap * sizeof(*p));
		if (!p)
			return; /* looked at again after the next change on that inode */
		c->inos = p;
		c->cap = cap;
	}
	c->inos[c->n++] = ino;
}

void mds_locks_wake(struct mds *m)
{
	struct { uint64_t *inos; size_t n, cap; } c = { 0 };

	if (!m->lock_wakes.count || recovering(m))
		return;
	/* Collect first: granting changes the maps. */
	u64map_each(&m->lock_wakes, collect_ino, &c);
	for (size_t i = 0; i < c.n; i++) {
		struct lk_inode *li = inode_get(m, c.inos[i], false);

		u64map_del(&m->lock_wakes, c.inos[i]);
		if (li)
			wake_waiters(m, c.inos[i], li);
	}
	free(c.inos);
}

/* Parks req on li: it is answered when decided (wake_waiters), cancelled or dropped. */
static int park(struct mds *m, struct srv_req *req, uint64_t sid, const struct lw_lock_req *q,
		struct lk_inode *li)
{
	struct lk_waiter *w, **tail = &li->waiters;

	if (m->lock_waiters >= MDS_MAX_LOCK_WAITERS)
		return -ENOLCK;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->req = req;
	w->sid = sid;
	w->q = *q;
	while (*tail)
		tail = &(*tail)->next;
	*tail = w;
	m->lock_waiters++;
	/* A wait may be long: the client's other requests must keep flowing meanwhile. */
	srv_req_park(req);
	return MDS_PARKED;
}

static int cancel(struct mds *m, uint64_t sid, const struct lw_lock_req *q)
{
	/* The waiter of this owner on this inode gives up (its process was interrupted). */
	struct lk_inode *li = inode_get(m, q->ino, false);

	for (struct lk_waiter **pp = li ? &li->waiters : NULL; pp && *pp; pp = &(*pp)->next) {
		struct lk_waiter *w = *pp;
		if (w->sid == sid && w->q.owner == q->owner && w->q.ino == q->ino) {
			*pp = w->next;
			reply_lock(m, w->req, -EINTR, NULL);
			free(w);
			m->lock_waiters--;
			break;
		}
	}
	if (li)
		inode_maybe_free(m, q->ino, li);
	return 0;
}

int mds_lock(struct mds *m, struct srv_req *req, uint64_t sid, const struct lw_lock_req *q,
	     void **reply, uint32_t *reply_len)
{
	struct lk_inode *li;
	struct lw_lock_rep *rep;
	bool takes = q->type != F_UNLCK && !(q->flags & LW_LK_TEST);
	/* While recovering, a test or a request for a lock is decided when recovery ends. */
	bool gated = recovering(m) && (takes || (q->flags & LW_LK_TEST));
	int rc;

	if (q->flags & LW_LK_CANCEL)
		return cancel(m, sid, q);
	rep = calloc(1, sizeof(*rep));
	if (!rep)
		return -ENOMEM;
	*reply = rep;
	*reply_len = sizeof(*rep);
	rep->type = F_UNLCK;

	li = inode_get(m, q->ino, takes || gated);
	if (gated) {
		rc = li ? park(m, req, sid, q, li) : -ENOMEM;
		goto parked;
	}
	if (q->flags & LW_LK_TEST) {
		describe_conflict(li, sid, q, rep);
		return 0;
	}
	if (q->type == F_UNLCK) {
		if (!li)
			return 0;
		rc = apply(li, sid, q);
		wake_later(m, q->ino, li);
		return rc;
	}
	if (!li)
		return -ENOMEM;
	if (!find_conflict(li, sid, q)) {
		rc = apply(li, sid, q);
		/* A write lock turned read (or shrunk) may let waiting readers in. */
		wake_later(m, q->ino, li);
		return rc;
	}
	if (!(q->flags & LW_LK_WAIT)) {
		inode_maybe_free(m, q->ino, li);
		return -EAGAIN;
	}
	/* The answer comes when the conflict is gone. */
	rc = park(m, req, sid, q, li);
parked:
	if (rc != MDS_PARKED && li)
		inode_maybe_free(m, q->ino, li);
	if (rc == MDS_PARKED || rc < 0) {
		free(rep);
		*reply = NULL;
		*reply_len = 0;
	}
	return rc;
}

/* ---- recovery after a start ---- */

static int awaited_index(const struct mds *m, const uint64_t uuid[2])
{
	const struct mds_lock_recovery *r = &m->lock_recovery;

	if (!uuid || (!uuid[0] && !uuid[1]))
		return -1;
	for (uint32_t i = 0; i < r->n; i++)
		if (r->uuids[i][0] == uuid[0] && r->uuids[i][1] == uuid[1])
			return (int)i;
	return -1;
}

bool mds_locks_awaiting(const struct mds *m, const uint64_t uuid[2])
{
	return recovering(m) && awaited_index(m, uuid) >= 0;
}

void mds_locks_recovery_begin(struct mds *m, uint64_t (*uuids)[2], uint32_t n)
{
	struct mds_lock_recovery *r = &m->lock_recovery;

	free(r->uuids);
	r->uuids = uuids;
	r->n = n;
	r->clients = n;
	r->replayed = 0;
	r->active = n > 0;
	if (n)
		log_info("waiting up to %u s for %u client(s) that may hold locks to replay them; "
			 "until then new lock requests wait", m->recovery_s, n);
}

/* Every waiter parked while recovering is decided now. */
static void recovery_end(struct mds *m)
{
	struct { uint64_t *inos; size_t n, cap; } c = { 0 };

	m->lock_recovery.active = false;
	u64map_each(&m->locks, collect_ino, &c);
	for (size_t i = 0; i < c.n; i++) {
		struct lk_inode *li = inode_get(m, c.inos[i], false);
		if (li)
			wake_later(m, c.inos[i], li);
	}
	free(c.inos);
}

int mds_lock_replay(struct mds *m, uint64_t sid, const uint64_t uuid[2], bool replayed_before,
		    const struct lw_lock_req *q, void **reply, uint32_t *reply_len)
{
	struct lock_op op = op_of(sid, q);
	struct lk_inode *li;
	const struct lock_range *c;
	struct lw_lock_rep *rep = calloc(1, sizeof(*rep));
	int rc = 0;

	if (!rep)
		return -ENOMEM;
	rep->type = F_UNLCK;
	if (!mds_locks_awaiting(m, uuid)) {
		/* Not one this MDS waits for: its locks were not kept for it (its session ended, or
		 * it came back after the recovery window), unless it already replayed this very lock
		 * in this run (and lost its connection before it heard back). */
		li = inode_get(m, q->ino, false);
		if (!replayed_before || !li || !lock_ranges_holds(li->locks, &op))
			rc = -ENOLCK;
		goto out;
	}
	li = inode_get(m, q->ino, true);
	if (!li) {
		rc = -ENOMEM;
		goto out;
	}
	c = find_conflict(li, sid, q);
	if (c) {
		/* Two clients replaying conflicting locks: the state they kept is wrong. */
		log_warn("a lock replayed on inode %llu (%llu-%llu) conflicts with one replayed before "
			 "(%llu-%llu, pid %u): refused", (unsigned long long)q->ino,
			 (unsigned long long)q->start, (unsigned long long)q->end,
			 (unsigned long long)c->start, (unsigned long long)c->end, c->pid);
		rc = -EAGAIN;
	} else {
		rc = apply(li, sid, q);
	}
	if (rc == 0)
		m->lock_recovery.replayed++;
	inode_maybe_free(m, q->ino, li);
out:
	if (rc) {
		free(rep);
		return rc;
	}
	*reply = rep;
	*reply_len = sizeof(*rep);
	return 0;
}

void mds_lock_replay_done(struct mds *m, const uint64_t uuid[2])
{
	struct mds_lock_recovery *r = &m->lock_recovery;
	int i = recovering(m) ? awaited_index(m, uuid) : -1;

	if (i < 0)
		return;
	memmove(r->uuids[i], r->uuids[i + 1], (r->n - (uint32_t)i - 1) * sizeof(r->uuids[0]));
	if (--r->n == 0) {
		log_info("lock recovery complete: %u client(s) replayed %u lock(s)", r->clients, r->replayed);
		recovery_end(m);
	}
}

int mds_locks_recovery_expire(struct mds *m, struct mdt_txn *t, uint64_t now_ns)
{
	struct mds_lock_recovery *r = &m->lock_recovery;
	int rc = 0;

	if (!recovering(m) || now_ns - m->started_ns < (uint64_t)m->recovery_s * 1000000000ull)
		return 0;
	/* Those that did not come back are no longer waited for by a later start either (should
	 * this fail, a later start waits for them once more: nothing worse). */
	for (uint32_t i = 0; i < r->n && rc == 0; i++)
		rc = mdt_client_del(t, r->uuids[i]);
	log_warn("lock recovery ended after %u s: %u of %u client(s) did not replay their locks, "
		 "which are lost; %u lock(s) were replayed", m->recovery_s, r->n, r->clients, r->replayed);
	r->n = 0;
	recovery_end(m);
	return rc;
}

/* ---- sessions and connections ---- */

static bool holds_any(const struct lk_inode *li, uint64_t sid)
{
	for (const struct lock_range *l = li->locks; l; l = l->next)
		if (l->sid == sid)
			return true;
	return false;
}

struct held_scan {
	uint64_t sid;
	bool found;
};

static void held_scan_one(uint64_t ino, void *val, void *arg)
{
	struct held_scan *h = arg;

	(void)ino;
	if (!h->found && holds_any(val, h->sid))
		h->found = true;
}

bool mds_locks_held_by(struct mds *m, uint64_t sid)
{
	struct held_scan h = { .sid = sid };

	u64map_each(&m->locks, held_scan_one, &h);
	return h.found;
}

/* Which inodes have locks or waiters matching (by session, or by connection for waiters). */
struct lk_scan {
	uint64_t sid;      /* 0: match waiters by conn_id instead */
	uint64_t conn_id;
	uint64_t *inos;
	size_t n, cap;
};

static bool waiter_matches(const struct lk_scan *sc, const struct lk_waiter *w)
{
	return sc->sid ? w->sid == sc->sid : w->req->conn_id == sc->conn_id;
}

static void scan_inode(uint64_t ino, void *val, void *arg)
{
	struct lk_scan *sc = arg;
	struct lk_inode *li = val;
	bool mine = sc->sid && holds_any(li, sc->sid);

	for (struct lk_waiter *w = li->waiters; w && !mine; w = w->next)
		mine = waiter_matches(sc, w);
	if (!mine)
		return;
	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? sc->cap * 2 : 16;
		uint64_t *p = realloc(sc->inos, cap * sizeof(*p));
		if (!p)
			return;
		sc->inos = p;
		sc->cap = cap;
	}
	sc->inos[sc->n++] = ino;
}

static void drop_matching(struct mds *m, struct lk_scan *sc)
{
	/* Collect first: dropping changes the map being walked. */
	u64map_each(&m->locks, scan_inode, sc);
	for (size_t i = 0; i < sc->n; i++) {
		struct lk_inode *li = inode_get(m, sc->inos[i], false);
		struct lock_range **pp;
		struct lk_waiter **wp;

		if (!li)
			continue;
		for (pp = &li->locks; sc->sid && *pp;) {
			struct lock_range *l = *pp;
			if (l->sid == sc->sid) {
				*pp = l->next;
				free(l);
			} else {
				pp = &l->next;
			}
		}
		for (wp = &li->waiters; *wp;) {
			struct lk_waiter *w = *wp;
			if (waiter_matches(sc, w)) {
				*wp = w->next;
				srv_req_drop(w->req); /* its client resends it, or is gone */
				free(w);
				m->lock_waiters--;
			} else {
				wp = &w->next;
			}
		}
		wake_later(m, sc->inos[i], li);
	}
	free(sc->inos);
}

void mds_locks_drop_waiters(struct mds *m, uint64_t conn_id)
{
	struct lk_scan sc = { .conn_id = conn_id };

	drop_matching(m, &sc);
}

void mds_locks_drop_session(struct mds *m, uint64_t sid)
{
	struct lk_scan sc = { .sid = sid };

	drop_matching(m, &sc);
}

static void free_inode(uint64_t ino, void *val, void *arg)
{
	struct lk_inode *li = val;

	(void)ino;
	(void)arg;
	lock_ranges_free(&li->locks);
	while (li->waiters) {
		struct lk_waiter *w = li->waiters;
		li->waiters = w->next;
		srv_req_drop(w->req);
		free(w);
	}
	free(li);
}

void mds_locks_destroy(struct mds *m)
{
	u64map_each(&m->locks, free_inode, NULL);
	u64map_destroy(&m->locks);
	u64map_destroy(&m->lock_wakes);
	free(m->lock_recovery.uuids);
	memset(&m->lock_recovery, 0, sizeof(m->lock_recovery));
}
