/*
 * Directory leases with recalls (Lustre's LDLM lookup locks, NFSv4's directory delegations).
 *
 * A client that asks (MDS_READDIR with LW_RD_LEASE) is granted a lease on the directory's
 * entries: the names it has and those it has not. Until the client gives it back (MDS_LEASE),
 * no other session changes those entries: a change that would (ops.def's LW_OPF_ENTRIES: a
 * create, mkdir, unlink, rmdir, rename, link or symlink in the directory) first recalls the
 * leases other sessions hold on it (MDS_RECALL, sent unasked with LW_F_NOTIFY) and waits here,
 * still counted against its connection, until every recalled lease is given back. The holder's
 * own changes recall nothing: it knows them. While a change waits, nobody is granted a lease on
 * that directory.
 *
 * A holder that does not give a recalled lease back within --lease-timeout loses every lease it
 * holds (its next reply says LW_RPF_LEASES_LOST), and the waiting changes go on, as Lustre evicts
 * a client that does not answer a blocking callback. A connection that closes loses its leases
 * (a reconnection's MDS_CONNECT reply says LEASES_LOST), so do a session that ends and every
 * session at an MDS restart (leases live in memory only).
 *
 * Grants are numbered from one counter that starts at the wall-clock nanoseconds of the start, so
 * that a number never comes back after a restart: a recall names the newest grant it takes back,
 * and LEASES_LOST the newest number handed out before (the client drops every lease up to it).
 *
 * Everything here runs on the metadata thread (grants: READDIR with LW_RD_LEASE is sent there),
 * but the lost marks, which every reply reads (mds_leases_reply_flags), under a lock.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/dispatch.h"
#include "mds/leases_impl.h"

/* Bounds on what clients can make the MDS keep. */
#define LEASE_DIRS_PER_SESSION 4096u
#define LEASE_INODES_PER_SESSION 65536u
#define LEASE_HOLDERS_MAX      (1u << 20)
#define LEASE_HELD_PARKED      65536u
struct lease_count {
	uint32_t dirs, inodes;
};

struct lease_dir *lease_dir_get(struct mds *m, uint64_t ino, bool make, bool inode)
{
	struct lease_dir *d = u64map_get(&m->leases.dirs, ino);

	if (d || !make)
		return d;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->ino = ino;
	d->inode = inode;
	d->held_tail = &d->held;
	if (u64map_put(&m->leases.dirs, ino, d)) {
		free(d);
		return NULL;
	}
	if (inode)
		m->leases.ninodes++;
	return d;
}

/* How long a client may go on trusting a lease after the last reply it got (what every reply
 * says, lease_trust_ms), with a margin for clocks that run a little apart. */
static uint64_t trust_ns(const struct mds *m)
{
	return (uint64_t)m->leases.timeout_s * 500000000ull + 100000000ull;
}

/* d is freed once nobody holds it, nothing waits on it and no fence stands. */
static void dir_maybe_free(struct mds *m, struct lease_dir *d)
{
	if (d->holders || d->held || d->fence_until_ns || d == &m->leases.all_inodes)
		return;
	if (d->inode)
		m->leases.ninodes--;
	u64map_del(&m->leases.dirs, d->ino);
	free(d);
}

/* How many leases sid holds: on directories, or (inode) on files; both with -1. */
uint32_t lease_session_count(struct mds *m, uint64_t sid, int inode)
{
	struct lease_count *c = u64map_get(&m->leases.per_session, sid);

	if (!c)
		return 0;
	return inode < 0 ? c->dirs + c->inodes : inode ? c->inodes : c->dirs;
}

static void session_count(struct mds *m, uint64_t sid, bool inode, int delta)
{
	struct lease_count *c = u64map_get(&m->leases.per_session, sid);

	if (!c && delta > 0) {
		c = calloc(1, sizeof(*c));
		if (!c || u64map_put(&m->leases.per_session, sid, c)) {
			free(c);
			return;
		}
	}
	if (!c)
		return;
	if (inode)
		c->inodes += (uint32_t)delta;
	else
		c->dirs += (uint32_t)delta;
	if (c->dirs == 0 && c->inodes == 0) {
		u64map_del(&m->leases.per_session, sid);
		free(c);
	}
}

/* A fence on d (a moment before which others' changes wait); for an inode lease also on the
 * renames of directories, which break them all. */
static void fence_set(struct mds *m, struct lease_dir *d, uint64_t until)
{
	if (until <= d->fence_until_ns)
		return;
	if (!d->fence_until_ns)
		m->leases.nfenced++;
	d->fence_until_ns = until;
	if (d->inode && d != &m->leases.all_inodes)
		fence_set(m, &m->leases.all_inodes, until);
}

/* h is dropped without giving its lease back: d's entries stay fenced for as long as h's client
 * may still trust it, counted from the last reply this MDS sent it (sent after anything the
 * client could have measured its trust from). */
void lease_fence(struct mds *m, struct lease_dir *d, const struct lease_holder *h)
{
	uint64_t last = srv_conn_last_sent_ns(h->conn), until = last + trust_ns(m);

	uint64_t now = clock_mono_ns();

	if (!last || until <= now || until <= d->fence_until_ns)
		return;
	fence_set(m, d, until);
	log_info("session %llu left its lease on %s %llu without giving it back: others' changes "
		 "there wait %llu ms, while it may still trust it", (unsigned long long)h->sid,
		 d->inode ? "file" : "directory", (unsigned long long)d->ino,
		 (unsigned long long)((until - now) / 1000000));
}

/* The changes waiting on d go back in line (each checks again when it runs). */
void lease_release_held(struct mds *m, struct lease_dir *d)
{
	while (d->held) {
		struct reqq_item *it = d->held;

		d->held = it->next;
		it->next = NULL;
		m->leases.nheld--;
		reqq_push(&m->queue, it);
	}
	d->held_tail = &d->held;
}

/* d's exclusive holder is sid now (0: none). */
static bool excl_set(struct mds *m, struct lease_dir *d, uint64_t sid)
{
	struct mds_leases *ls = &m->leases;
	bool ok = true;

	if (d->excl_sid == sid)
		return true;
	pthread_mutex_lock(&ls->excl_lock);
	if (!sid) {
		u64map_del(&ls->excl, d->ino);
		atomic_fetch_sub(&ls->nexcl, 1);
	} else if ((ok = u64map_put(&ls->excl, d->ino, (void *)(uintptr_t)sid) >= 0) && !d->excl_sid) {
		atomic_fetch_add(&ls->nexcl, 1);
	}
	pthread_mutex_unlock(&ls->excl_lock);
	if (ok)
		d->excl_sid = sid;
	return ok;
}

bool mds_leases_excl_other(struct mds *m, const struct srv_req *req, uint64_t dir)
{
	struct mds_leases *ls = &m->leases;
	uint64_t holder = 0, sid;

	if (!atomic_load(&ls->nexcl))
		return false;
	if (!dir)
		return true; /* a walk: which directories it reads is known only as it goes */
	pthread_mutex_lock(&ls->excl_lock);
	holder = (uint64_t)(uintptr_t)u64map_get(&ls->excl, dir);
	pthread_mutex_unlock(&ls->excl_lock);
	if (!holder)
		return false;
	sid = mds_session_sid_known(m, req->conn_id);
	return holder != sid;
}

void lease_excl_end(struct mds *m, struct lease_dir *d)
{
	for (struct lease_holder *h = d->holders; h; h = h->next)
		if (h->sid == d->excl_sid)
			return;
	if (d->excl_sid)
		excl_set(m, d, 0);
}

void lease_holder_free(struct mds *m, struct lease_dir *d, struct lease_holder *h)
{
	/* An exclusive holder dropped without giving its lease back (fenced first) may still be
	 * making files there behind, trusting it: others' reads wait for the fence too (its end
	 * clears it: lease_excl_end). */
	if (d->excl_sid == h->sid && d->fence_until_ns <= clock_mono_ns())
		excl_set(m, d, 0);
	srv_conn_release(h->conn);
	session_count(m, h->sid, d->inode, -1);
	m->leases.nholders--;
	if (d->inode && --m->leases.ninode_holders == 0 && !m->leases.all_inodes.fence_until_ns)
		lease_release_held(m, &m->leases.all_inodes); /* a directory's rename goes on */
	free(h);
}

/* Whether a recall sent on d is still unanswered. */
static bool recall_pending(const struct lease_dir *d)
{
	for (const struct lease_holder *h = d->holders; h; h = h->next)
		if (h->recalled_ns)
			return true;
	return false;
}

/* A holder went: if that was the last recalled one, the waiting changes go on. */
void lease_after_removal(struct mds *m, struct lease_dir *d)
{
	if (!recall_pending(d))
		lease_release_held(m, d);
	dir_maybe_free(m, d);
}

uint64_t mds_lease_grant(struct mds *m, const struct srv_req *req, uint64_t ino, bool inode, bool *excl)
{
	struct mds_leases *ls = &m->leases;
	uint64_t sid = mds_sid_of(m, req);
	struct lease_holder *h;
	struct lease_dir *d;
	/* Under an exclusive lease the client answers creates and unlinks itself, judging the
	 * caller's rights as this MDS would: it cannot when root is squashed here. */
	bool want_excl = excl && *excl && !m->root_squash;

	if (excl)
		*excl = false;
	if (!sid || ls->nholders >= LEASE_HOLDERS_MAX)
		return 0;
	/* A directory's rename waits for every inode lease to come back: none is given meanwhile. */
	if (inode && (ls->all_inodes.held || ls->all_inodes.fence_until_ns))
		return 0;
	pthread_mutex_lock(&ls->lost_lock);
	bool lost = u64map_get(&ls->lost, sid) != NULL;
	pthread_mutex_unlock(&ls->lost_lock);
	if (lost)
		return 0; /* it is told first that it lost what it had */
	uint64_t until = (uint64_t)(uintptr_t)u64map_get(&ls->penalty, sid);
	if (until && clock_mono_ns() < until)
		return 0;
	d = lease_dir_get(m, ino, true, inode);
	if (!d)
		return 0;
	if (d->inode != inode || d->held || recall_pending(d) || (d->excl_sid && d->excl_sid != sid)) {
		dir_maybe_free(m, d);
		return 0; /* a change waits for a recall: no new lease until it ran */
	}
	for (h = d->holders; h && h->sid != sid; h = h->next)
		;
	if (!h) {
		if (lease_session_count(m, sid, inode) >=
		    (inode ? LEASE_INODES_PER_SESSION : LEASE_DIRS_PER_SESSION)) {
			dir_maybe_free(m, d);
			return 0;
		}
		h = calloc(1, sizeof(*h));
		if (!h) {
			dir_maybe_free(m, d);
			return 0;
		}
		h->sid = sid;
		h->conn_id = req->conn_id;
		h->conn = srv_conn_hold((struct srv_req *)req);
		h->next = d->holders;
		d->holders = h;
		session_count(m, sid, inode, 1);
		ls->nholders++;
		if (inode)
			ls->ninode_holders++;
	}
	/* Exclusive while it is the only holder, and nobody dropped may still trust a list. */
	if (want_excl && !inode && d->holders == h && !h->next && !d->fence_until_ns)
		*excl = excl_set(m, d, sid);
	else if (d->excl_sid && d->holders != h)
		excl_set(m, d, 0);
	h->gen = atomic_fetch_add(&ls->gen, 1) + 1;
	return h->gen;
}

/* Sends h the recall of its lease on d (once); flags LW_RC_ENDED when it ends here. */
static void recall(struct mds *m, struct lease_dir *d, struct lease_holder *h, uint32_t flags,
		   uint64_t now)
{
	struct {
		struct lw_recall f;
		struct lw_lease l;
	} body = { { .count = 1, .flags = flags }, { .ino = d->ino, .gen = h->gen } };

	if (h->recalled_ns)
		return;
	h->recalled_ns = now ? now : 1;
	m->leases.recalls++;
	log_debug("recalling the lease of session %llu on %s %llu (grant %llu)",
		  (unsigned long long)h->sid, d->inode ? "file" : "directory",
		  (unsigned long long)d->ino, (unsigned long long)h->gen);
	/* A closed connection cannot be told: it loses its leases when its disconnect is run,
	 * and the timeout covers one that stays open but silent. */
	srv_notify(h->conn, LW_OP_MDS_RECALL, &body, sizeof(body));
}

/* The holder's own unlink, which said it has nothing open under a lease (LW_NM_UNLEASED): its
 * lease ends here, and it is told so (LW_RC_ENDED; the recall goes out before the change's reply,
 * on the same connection, so the client drops what it kept before it learns of the change). */
static void end_own(struct mds *m, struct lease_dir *d, struct lease_holder **hp, uint64_t now)
{
	struct lease_holder *h = *hp;

	recall(m, d, h, LW_RC_ENDED, now);
	*hp = h->next;
	lease_holder_free(m, d, h);
}

/* What a change of the file by session sid needs of d's holders (ops.def: LW_OPF_ENTRIES for a
 * directory; lease_targets.c for a file). */
enum own_change {
	OWN_SKIP,     /* a directory's own holder: it knows its own changes of entries */
	OWN_RECALL,   /* a change that cannot free the file: the holder's lease is recalled (its
	               * cached opens become real, behind), but the change does not wait */
	OWN_WAIT,     /* an unlink or a rename over it: its cached opens must be real first */
	OWN_END,      /* an unlink with LW_NM_UNLEASED: nothing to make real */
};

/* Whether a change by session sid must wait on d: a holder of another session to recall, one of
 * its own as `own` says, or a fence (a dropped holder may still trust it). */
static bool must_wait(struct mds *m, struct lease_dir *d, uint64_t sid, enum own_change own,
		      uint64_t now)
{
	bool wait = d->fence_until_ns > now;

	for (struct lease_holder **hp = &d->holders; *hp;) {
		struct lease_holder *h = *hp;

		if (h->sid == sid && own == OWN_END) {
			end_own(m, d, hp, now);
			continue;
		}
		if (h->sid != sid || own != OWN_SKIP)
			recall(m, d, h, 0, now);
		if (h->sid != sid || own == OWN_WAIT)
			wait = true;
		hp = &h->next;
	}
	if (!d->holders && !wait) {
		lease_after_removal(m, d);
		return false;
	}
	return wait;
}

struct recall_all {
	struct mds *m;
	uint64_t now;
};

static void recall_inode_leases(uint64_t ino, void *val, void *arg)
{
	struct recall_all *ra = arg;
	struct lease_dir *d = val;

	(void)ino;
	if (d->inode)
		for (struct lease_holder *h = d->holders; h; h = h->next)
			recall(ra->m, d, h, 0, ra->now);
}

struct excl_scan {
	struct mds *m;
	uint64_t sid;
	uint64_t found;
};

/* A walk's directory: is it another session's, exclusively? (the first such stops the walk) */
static bool excl_on_path(void *arg, uint64_t dir)
{
	struct excl_scan *s = arg;
	const struct lease_dir *d = lease_dir_get(s->m, dir, false, false);

	if (!d || !d->excl_sid || d->excl_sid == s->sid)
		return false;
	s->found = dir;
	return true;
}

/*
 * A read of a directory's entries by another session than its exclusive holder's waits for that
 * lease: the holder tells its callers of files it made there before the MDS has them (creates
 * sent behind), and gives the lease back only once the MDS has them all. A lookup and a listing
 * read one directory; a walk, those on its path (it waits for each in turn).
 */
static uint64_t excl_read_blocked(struct mds *m, struct mdt_txn *t, const struct srv_req *req,
				  const struct lw_mds_req *q)
{
	struct excl_scan s = { .m = m, .sid = mds_session_sid_known(m, req->conn_id) };
	struct mdt_walk_watch watch = { excl_on_path, &s };
	struct lease_dir *d;
	struct lw_attr attr;
	uint32_t consumed;

	switch (q->op) {
	case LW_OP_MDS_LOOKUP: s.found = q->u.name.f.parent; break;
	case LW_OP_MDS_READDIR: s.found = q->u.readdir.ino; break;
	case LW_OP_MDS_WALK:
		(void)mdt_walk(t, &q->cred, q->u.walk.path, q->u.walk.f.pathlen,
			       q->u.walk.f.flags & LW_WALK_PARENT, &watch, &attr, &consumed);
		break;
	default: return 0;
	}
	d = s.found ? lease_dir_get(m, s.found, false, false) : NULL;
	if (!d || !d->excl_sid || d->excl_sid == s.sid)
		return 0;
	return must_wait(m, d, s.sid, OWN_SKIP, clock_mono_ns()) ? d->ino : 0;
}

uint64_t mds_leases_block(struct mds *m, struct mdt_txn *t, const struct srv_req *req,
			  const struct lw_mds_req *q)
{
	struct mds_leases *ls = &m->leases;
	struct lease_targets tg;
	uint64_t sid, now, on;

	if (ls->dirs.count == 0 && !ls->all_inodes.fence_until_ns)
		return 0;
	/* Reads answered on the network thread (netpath.c) leave leases alone: those that an
	 * exclusive lease holds up are sent here by their handlers (mds_leases_excl_other). */
	if (!mds_on_metadata_thread())
		return 0;
	if (atomic_load(&ls->nexcl) && (on = excl_read_blocked(m, t, req, q)) != 0)
		return on;
	mds_lease_targets(t, q, ls->ninodes > 0 || ls->all_inodes.fence_until_ns || atomic_load(&ls->nexcl),
			  &tg);
	if (tg.ndirs == 0 && tg.ninos == 0 && !tg.all_inodes)
		return 0;
	/* Not mds_sid_of: a request released after its connection's disconnect ran would make a
	 * session nobody ends. Without one, every holder is another's. */
	sid = mds_session_sid_known(m, req->conn_id);
	now = clock_mono_ns();
	for (uint32_t i = 0; i < tg.ndirs; i++) {
		struct lease_dir *d = lease_dir_get(m, tg.dirs[i], false, false);

		if (d && !d->inode && must_wait(m, d, sid, OWN_SKIP, now))
			return d->ino;
	}
	for (uint32_t i = 0; i < tg.ninos; i++) {
		struct lease_dir *d = lease_dir_get(m, tg.inos[i], false, false);
		enum own_change own = !((tg.may_free >> i) & 1) ? OWN_RECALL :
				      tg.unleased ? OWN_END : OWN_WAIT;

		/* An exclusive lease covers its directory's owner and mode too: its holder makes
		 * files there by them (a chmod, chown or xattr of the directory recalls it). */
		if (d && (d->inode || d->excl_sid) && must_wait(m, d, sid, d->inode ? own : OWN_RECALL, now))
			return d->ino;
	}
	if (tg.all_inodes && (ls->ninode_holders || ls->all_inodes.fence_until_ns > now)) {
		struct recall_all ra = { m, now };

		u64map_each(&ls->dirs, recall_inode_leases, &ra);
		return LEASE_ALL_INODES;
	}
	return 0;
}

void mds_leases_park(struct mds *m, struct srv_req *req, uint64_t on)
{
	struct mds_leases *ls = &m->leases;
	struct lease_dir *d = on == LEASE_ALL_INODES ? &ls->all_inodes : lease_dir_get(m, on, false, false);
	uint64_t sid = mds_session_sid_known(m, req->conn_id), now = clock_mono_ns();
	bool wait;

	/* Given back meanwhile (an MDS_LEASE later in the same batch)? */
	if (d == &ls->all_inodes) {
		wait = ls->ninode_holders || d->fence_until_ns > now;
		/* A lease granted later in the batch that blocked it is recalled too: from here no
		 * grant is made until the rename ran. */
		if (ls->ninode_holders) {
			struct recall_all ra = { m, now };

			u64map_each(&ls->dirs, recall_inode_leases, &ra);
		}
	}
	else
		wait = d && must_wait(m, d, sid, d->inode ? OWN_WAIT : OWN_SKIP, now);
	req->qitem.next = NULL;
	if (!wait) {
		reqq_push(&m->queue, &req->qitem);
		return;
	}
	/* Parked (no longer counted against its connection, whose reading would stop at its
	 * limit: the same client's MDS_LEASE for another directory must still be read), up to
	 * LEASE_HELD_PARKED over all clients; beyond, counted, so one client cannot pile them up. */
	if (ls->nheld < LEASE_HELD_PARKED)
		srv_req_park(req);
	ls->nheld++;
	*d->held_tail = &req->qitem;
	d->held_tail = &req->qitem.next;
}

int mds_op_lease(struct mds_op *o)
{
	struct mds *m = o->m;
	uint64_t sid = mds_sid_of(m, o->req);
	const uint8_t *p = o->q->u.lease.leases;

	if (o->q->u.lease.f.flags & LW_LEASE_ALL) {
		/* ... and none is granted to it again (a request of it parked meanwhile, released
		 * later): its client is going away, and would not give it back. */
		mds_leases_give_back_all(m, sid);
		if (sid)
			u64map_put(&m->leases.penalty, sid, (void *)(uintptr_t)UINT64_MAX);
		return 0;
	}
	for (uint32_t i = 0; i < o->q->u.lease.f.count; i++, p += sizeof(struct lw_lease)) {
		struct lw_lease l;
		struct lease_dir *d;

		memcpy(&l, p, sizeof(l));
		d = lease_dir_get(m, l.ino, false, false);
		if (!d)
			continue; /* given back already, or never held: a resend, or a late answer */
		for (struct lease_holder **hp = &d->holders; *hp; hp = &(*hp)->next) {
			struct lease_holder *h = *hp;

			/* A newer grant than the one given back stays. */
			if (h->sid != sid || h->gen > l.gen)
				continue;
			*hp = h->next;
			lease_holder_free(m, d, h);
			break;
		}
		lease_after_removal(m, d);
	}
	return 0;
}

void mds_leases_reply_flags(struct mds *m, const struct srv_req *req, int status,
			    struct lw_mds_rep_prefix *pre)
{
	struct mds_leases *ls = &m->leases;

	if (req->hdr.opcode == LW_OP_MDS_CONNECT && status == 0) {
		/* A session new or found again on a new connection: whatever it held is gone. */
		pre->flags |= LW_RPF_LEASES_LOST;
		pre->lease_ino = 0;
		pre->lease_gen = atomic_load(&ls->gen);
		return;
	}
	if (atomic_load(&ls->nlost) == 0 || pre->lease_ino)
		return;
	uint64_t sid = mds_session_sid_known(m, req->conn_id);

	pthread_mutex_lock(&ls->lost_lock);
	void *floor = u64map_del(&ls->lost, sid);
	if (floor) {
		atomic_fetch_sub(&ls->nlost, 1);
		pre->flags |= LW_RPF_LEASES_LOST;
		pre->lease_gen = (uint64_t)(uintptr_t)floor;
	}
	pthread_mutex_unlock(&ls->lost_lock);
}

void mds_leases_init(struct mds *m)
{
	struct mds_leases *ls = &m->leases;

	u64map_init(&ls->dirs);
	ls->all_inodes.inode = true;
	ls->all_inodes.held_tail = &ls->all_inodes.held;
	u64map_init(&ls->per_session);
	u64map_init(&ls->lost);
	u64map_init(&ls->penalty);
	pthread_mutex_init(&ls->lost_lock, NULL);
	pthread_mutex_init(&ls->excl_lock, NULL);
	u64map_init(&ls->excl);
	atomic_init(&ls->nexcl, 0);
	struct timespec now = clock_real();

	atomic_init(&ls->gen, (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec);
	atomic_init(&ls->nlost, 0);
	if (!ls->timeout_s)
		ls->timeout_s = MDS_LEASE_TIMEOUT_DEFAULT;
}

static void free_dir(uint64_t ino, void *val, void *arg)
{
	struct lease_dir *d = val;

	(void)ino;
	(void)arg;
	while (d->holders) {
		struct lease_holder *h = d->holders;

		d->holders = h->next;
		srv_conn_release(h->conn);
		free(h);
	}
	while (d->held) {
		struct reqq_item *it = d->held;

		d->held = it->next;
		srv_req_drop(srv_req_of(it));
	}
	free(d);
}

static void free_count(uint64_t sid, void *val, void *arg)
{
	(void)sid;
	(void)arg;
	free(val);
}

void mds_leases_stop(struct mds *m)
{
	struct mds_leases *ls = &m->leases;

	u64map_each(&ls->dirs, free_dir, NULL);
	u64map_destroy(&ls->dirs);
	while (ls->all_inodes.held) {
		struct reqq_item *it = ls->all_inodes.held;

		ls->all_inodes.held = it->next;
		srv_req_drop(srv_req_of(it));
	}
	u64map_each(&ls->per_session, free_count, NULL);
	u64map_destroy(&ls->per_session);
	u64map_destroy(&ls->lost);
	u64map_destroy(&ls->penalty);
	pthread_mutex_destroy(&ls->lost_lock);
	u64map_destroy(&ls->excl);
	pthread_mutex_destroy(&ls->excl_lock);
}
