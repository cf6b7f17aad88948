/*
 * Leases taken back without being given back (leases.c): a connection or session that ends, a
 * holder that does not answer a recall within --lease-timeout (evicted: it loses every lease,
 * and gets none for a minute), and fences and penalties that ran out.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/leases_impl.h"

/* Numbers gathered in a walk over the directories (the map cannot change during the walk). */
struct ids {
	uint64_t *v;
	uint32_t n, cap;
};

/* Without memory the walk misses some: what they would have ended waits for the next tick. */
static void ids_push(struct ids *ids, uint64_t id)
{
	if (ids->n == ids->cap) {
		uint32_t cap = ids->cap ? ids->cap * 2 : 16;
		uint64_t *p = realloc(ids->v, cap * sizeof(*p));

		if (!p)
			return;
		ids->v = p;
		ids->cap = cap;
	}
	ids->v[ids->n++] = id;
}

struct drop_scan {
	uint64_t sid, conn_id;
	struct ids inos;
};

static void drop_scan_one(uint64_t ino, void *val, void *arg)
{
	struct drop_scan *s = arg;
	struct lease_dir *d = val;

	for (struct lease_holder *h = d->holders; h; h = h->next) {
		if ((s->sid && h->sid != s->sid) || (s->conn_id && h->conn_id != s->conn_id))
			continue;
		ids_push(&s->inos, ino);
		return;
	}
}

/* Drops every lease of holders that match (by session or by connection): fenced while they may
 * still trust them, unless given back (given). */
static void drop_matching(struct mds *m, uint64_t sid, uint64_t conn_id, bool given)
{
	struct drop_scan s = { .sid = sid, .conn_id = conn_id };

	if (m->leases.dirs.count == 0)
		return;
	u64map_each(&m->leases.dirs, drop_scan_one, &s);
	for (uint32_t i = 0; i < s.inos.n; i++) {
		struct lease_dir *d = lease_dir_get(m, s.inos.v[i], false, false);

		if (!d)
			continue;
		for (struct lease_holder **hp = &d->holders; *hp;) {
			struct lease_holder *h = *hp;

			if ((sid && h->sid != sid) || (conn_id && h->conn_id != conn_id)) {
				hp = &h->next;
				continue;
			}
			*hp = h->next;
			if (!given)
				lease_fence(m, d, h);
			lease_holder_free(m, d, h);
		}
		lease_after_removal(m, d);
	}
	free(s.inos.v);
}

void mds_leases_drop_conn(struct mds *m, uint64_t conn_id)
{
	if (conn_id)
		drop_matching(m, 0, conn_id, false);
}

void mds_leases_give_back_all(struct mds *m, uint64_t sid)
{
	if (sid)
		drop_matching(m, sid, 0, true);
}

void mds_leases_drop_session(struct mds *m, uint64_t sid)
{
	if (!sid)
		return;
	drop_matching(m, sid, 0, false);
	u64map_del(&m->leases.penalty, sid);
	pthread_mutex_lock(&m->leases.lost_lock);
	if (u64map_del(&m->leases.lost, sid))
		atomic_fetch_sub(&m->leases.nlost, 1);
	pthread_mutex_unlock(&m->leases.lost_lock);
}

/* Sessions whose recalled leases are overdue. */
struct late_scan {
	uint64_t deadline;
	bool all_inodes;  /* a directory's rename waits on every inode lease */
	struct ids sids;
};

static void late_scan_one(uint64_t ino, void *val, void *arg)
{
	struct late_scan *s = arg;
	struct lease_dir *d = val;

	(void)ino;
	if (!d->held && !(d->inode && s->all_inodes))
		return;
	for (struct lease_holder *h = d->holders; h; h = h->next) {
		if (!h->recalled_ns || h->recalled_ns > s->deadline)
			continue;
		/* Evicted at the next tick: a give-back already queued behind a long batch (the
		 * metadata thread runs what is queued between two ticks) is run first. */
		if (h->overdue)
			ids_push(&s->sids, h->sid);
		h->overdue = true;
	}
}

struct fence_scan {
	uint64_t now;
	struct ids inos;
};

static void fence_scan_one(uint64_t ino, void *val, void *arg)
{
	struct fence_scan *s = arg;
	struct lease_dir *d = val;

	if (d->fence_until_ns && d->fence_until_ns <= s->now)
		ids_push(&s->inos, ino);
}

/* Fences that passed: the changes waiting on them go on. */
static void fences_expire(struct mds *m, uint64_t now_ns)
{
	struct fence_scan s = { .now = now_ns };
	struct lease_dir *all = &m->leases.all_inodes;

	if (!m->leases.nfenced)
		return;
	if (all->fence_until_ns && all->fence_until_ns <= now_ns) {
		all->fence_until_ns = 0;
		m->leases.nfenced--;
		if (!m->leases.ninode_holders)
			lease_release_held(m, all);
	}
	u64map_each(&m->leases.dirs, fence_scan_one, &s);
	for (uint32_t i = 0; i < s.inos.n; i++) {
		struct lease_dir *d = lease_dir_get(m, s.inos.v[i], false, false);

		if (!d)
			continue;
		d->fence_until_ns = 0;
		m->leases.nfenced--;
		lease_excl_end(m, d);
		lease_after_removal(m, d);
	}
	free(s.inos.v);
}

static void penalty_scan_one(uint64_t sid, void *val, void *arg)
{
	struct fence_scan *s = arg;

	if ((uint64_t)(uintptr_t)val <= s->now)
		ids_push(&s->inos, sid);
}

/* Penalties that ran out are forgotten. */
static void penalties_expire(struct mds *m, uint64_t now_ns)
{
	struct fence_scan s = { .now = now_ns };

	if (!m->leases.penalty.count)
		return;
	u64map_each(&m->leases.penalty, penalty_scan_one, &s);
	for (uint32_t i = 0; i < s.inos.n; i++)
		u64map_del(&m->leases.penalty, s.inos.v[i]);
	free(s.inos.v);
}

void mds_leases_expire(struct mds *m, uint64_t now_ns)
{
	uint64_t limit = (uint64_t)m->leases.timeout_s * 1000000000ull;
	struct late_scan s = { 0 };

	fences_expire(m, now_ns);
	penalties_expire(m, now_ns);
	if (m->leases.dirs.count == 0 || now_ns < limit)
		return;
	s.deadline = now_ns - limit;
	s.all_inodes = m->leases.all_inodes.held != NULL;
	u64map_each(&m->leases.dirs, late_scan_one, &s);
	for (uint32_t i = 0; i < s.sids.n; i++) {
		uint64_t sid = s.sids.v[i], floor;

		if (lease_session_count(m, sid, -1) == 0)
			continue; /* dropped already (listed twice) */
		floor = atomic_load(&m->leases.gen);
		log_warn("session %llu did not give back a recalled lease within %u s: every lease it "
			 "holds is taken back", (unsigned long long)sid, m->leases.timeout_s);
		m->leases.evictions++;
		drop_matching(m, sid, 0, false);
		u64map_put(&m->leases.penalty, sid, (void *)(uintptr_t)(now_ns + LEASE_PENALTY_NS));
		pthread_mutex_lock(&m->leases.lost_lock);
		if (!u64map_get(&m->leases.lost, sid) &&
		    u64map_put(&m->leases.lost, sid, (void *)(uintptr_t)floor) == 0)
			atomic_fetch_add(&m->leases.nlost, 1);
		pthread_mutex_unlock(&m->leases.lost_lock);
	}
	free(s.sids.v);
}
