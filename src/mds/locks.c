/*
 * File locks held at the MDS, so that every mount sees the same locks: fcntl(2) byte-range
 * locks and flock(2) whole-file locks, kept apart as Linux keeps them.
 *
 * Everything here runs on the metadata thread. Locks live in memory only: like an NFS server's,
 * they end with the client's connection, and with the MDS itself (nothing replays them yet).
 *
 * A request that must wait is parked: its srv_req stays here, unanswered, until the conflicting
 * lock goes away (then it is granted and answered) or its owner cancels (then -EINTR).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "mds/mds.h"

struct lk {
	struct lk *next;
	uint64_t sid;        /* the session holding it: locks outlive a broken connection */
	uint64_t owner;
	uint64_t start, end; /* inclusive */
	uint32_t type;       /* F_RDLCK or F_WRLCK */
	uint32_t pid;
	bool flock;
};

struct lk_waiter {
	struct lk_waiter *next;
	struct srv_req *req;  /* answered when granted */
	uint64_t sid;
	struct lw_lock_req q;
};

struct lk_inode {
	struct lk *locks;
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

static bool same_owner(const struct lk *l, uint64_t sid, uint64_t owner)
{
	return l->sid == sid && l->owner == owner;
}

/* The first lock of another owner that conflicts with q, or NULL. */
static const struct lk *find_conflict(const struct lk_inode *li, uint64_t sid,
				      const struct lw_lock_req *q)
{
	bool flock = q->flags & LW_LK_FLOCK;

	for (const struct lk *l = li->locks; l; l = l->next) {
		if (l->flock != flock || same_owner(l, sid, q->owner))
			continue;
		if (l->end < q->start || l->start > q->end)
			continue;
		if (l->type == F_WRLCK || q->type == F_WRLCK)
			return l;
	}
	return NULL;
}

static struct lk *lk_new(uint64_t sid, const struct lw_lock_req *q, uint64_t start, uint64_t end,
			 uint32_t type)
{
	struct lk *l = calloc(1, sizeof(*l));

	if (l) {
		l->sid = sid;
		l->owner = q->owner;
		l->start = start;
		l->end = end;
		l->type = type;
		l->pid = q->pid;
		l->flock = q->flags & LW_LK_FLOCK;
	}
	return l;
}

/*
 * Applies a grant or an unlock for q's owner: its own locks over [start, end] are cut away (split
 * when they stick out on both sides), the new one is added (unless F_UNLCK), and neighbours of the
 * same type are merged, as fcntl(2) describes. 0 or -ENOMEM (nothing changed).
 */
static int apply(struct lk_inode *li, uint64_t sid, const struct lw_lock_req *q)
{
	bool flock = q->flags & LW_LK_FLOCK;
	uint64_t start = q->start, end = q->end;
	struct lk *fresh = NULL, *split = NULL, **pp;

	/* Allocate first, so that a failure leaves the table as it was. */
	if (q->type != F_UNLCK && !(fresh = lk_new(sid, q, start, end, q->type)))
		return -ENOMEM;
	for (struct lk *l = li->locks; l; l = l->next) {
		if (l->flock == flock && same_owner(l, sid, q->owner) && l->start < start &&
		    l->end > end && !split) {
			if (!(split = lk_new(sid, q, 0, 0, l->type))) {
				free(fresh);
				return -ENOMEM;
			}
		}
	}

	for (pp = &li->locks; *pp;) {
		struct lk *l = *pp;

		if (l->flock != flock || !same_owner(l, sid, q->owner)) {
			pp = &l->next;
			continue;
		}
		/* Same type and touching: absorb it into the new lock. */
		if (fresh && l->type == fresh->type &&
		    !(l->end != UINT64_MAX && l->end + 1 < start) && !(end != UINT64_MAX && l->start > end + 1)) {
			if (l->start < fresh->start)
				fresh->start = l->start;
			if (l->end > fresh->end)
				fresh->end = l->end;
			*pp = l->next;
			free(l);
			continue;
		}
		if (l->end < start || l->start > end) {
			pp = &l->next;
			continue;
		}
		if (l->start < start && l->end > end) {
			/* Sticks out on both sides: keep the head here, the tail in `split`. */
			split->start = end + 1;
			split->end = l->end;
			split->pid = l->pid;
			split->next = l->next;
			l->end = start - 1;
			l->next = split;
			split = NULL;
			pp = &l->next->next;
		} else if (l->start < start) {
			l->end = start - 1;
			pp = &l->next;
		} else if (l->end > end) {
			l->start = end + 1;
			pp = &l->next;
		} else {
			*pp = l->next;
			free(l);
		}
	}
	free(split); /* not needed after all */
	if (fresh) {
		fresh->next = li->locks;
		li->locks = fresh;
	}
	return 0;
}

static void reply_lock(struct srv_req *req, int rc)
{
	struct lw_lock_rep rep = { .type = F_UNLCK };

	srv_reply(req, rc, &rep, rc ? 0 : sizeof(rep), NULL, 0, NULL);
}

/* Grants whatever waiting requests no longer conflict, in arrival order. */
static void wake_waiters(struct mds *m, uint64_t ino, struct lk_inode *li)
{
	struct lk_waiter **pp = &li->waiters;

	while (*pp) {
		struct lk_waiter *w = *pp;
		int rc;

		if (find_conflict(li, w->sid, &w->q)) {
			pp = &w->next;
			continue;
		}
		rc = apply(li, w->sid, &w->q);
		*pp = w->next;
		reply_lock(w->req, rc);
		free(w);
		m->lock_waiters--;
	}
	inode_maybe_free(m, ino, li);
}

int mds_lock(struct mds *m, struct srv_req *req, uint64_t sid, const struct lw_lock_req *q,
	     void **reply, uint32_t *reply_len)
{
	struct lk_inode *li;
	const struct lk *c;
	struct lw_lock_rep *rep;
	int rc;

	if (q->flags & LW_LK_CANCEL) {
		/* The waiter of this owner on this inode gives up (its process was interrupted). */
		li = inode_get(m, q->ino, false);
		for (struct lk_waiter **pp = li ? &li->waiters : NULL; pp && *pp; pp = &(*pp)->next) {
			struct lk_waiter *w = *pp;
			if (w->sid == sid && w->q.owner == q->owner && w->q.ino == q->ino) {
				*pp = w->next;
				reply_lock(w->req, -EINTR);
				free(w);
				m->lock_waiters--;
				break;
			}
		}
		if (li)
			inode_maybe_free(m, q->ino, li);
		return 0;
	}
	rep = calloc(1, sizeof(*rep));
	if (!rep)
		return -ENOMEM;
	*reply = rep;
	*reply_len = sizeof(*rep);
	rep->type = F_UNLCK;

	li = inode_get(m, q->ino, q->type != F_UNLCK && !(q->flags & LW_LK_TEST));
	if (q->flags & LW_LK_TEST) {
		c = li ? find_conflict(li, sid, q) : NULL;
		if (c) {
			rep->start = c->start;
			rep->end = c->end;
			rep->type = c->type;
			rep->pid = c->pid;
		}
		return 0;
	}
	if (q->type == F_UNLCK) {
		if (!li)
			return 0;
		rc = apply(li, sid, q);
		wake_waiters(m, q->ino, li);
		return rc;
	}
	if (!li)
		return -ENOMEM;
	c = find_conflict(li, sid, q);
	if (!c) {
		rc = apply(li, sid, q);
		/* A write lock turned read (or shrunk) may let waiting readers in. */
		if (rc == 0)
			wake_waiters(m, q->ino, li);
		return rc;
	}
	if (!(q->flags & LW_LK_WAIT)) {
		inode_maybe_free(m, q->ino, li);
		return -EAGAIN;
	}
	/* Park it: the answer comes when the conflict is gone. */
	if (m->lock_waiters >= MDS_MAX_LOCK_WAITERS) {
		inode_maybe_free(m, q->ino, li);
		return -ENOLCK;
	}
	{
		struct lk_waiter *w = calloc(1, sizeof(*w)), **tail = &li->waiters;

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
	}
	free(rep);
	*reply = NULL;
	*reply_len = 0;
	return MDS_PARKED;
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
	bool mine = false;

	for (struct lk *l = li->locks; l && !mine && sc->sid; l = l->next)
		mine = l->sid == sc->sid;
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
	/* Collect first: waking waiters changes the map being walked. */
	u64map_each(&m->locks, scan_inode, sc);
	for (size_t i = 0; i < sc->n; i++) {
		struct lk_inode *li = inode_get(m, sc->inos[i], false);
		struct lk **pp;
		struct lk_waiter **wp;

		if (!li)
			continue;
		for (pp = &li->locks; sc->sid && *pp;) {
			struct lk *l = *pp;
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
		wake_waiters(m, sc->inos[i], li);
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
	while (li->locks) {
		struct lk *l = li->locks;
		li->locks = l->next;
		free(l);
	}
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
}
