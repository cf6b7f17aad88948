/*
 * The OST table and stripe allocation.
 *
 * What an OST is (index, uuid, address, its NOCREATE/READONLY flags, whether an administrator
 * deactivated it, the next object id) is kept in the `osts` database. How it is doing (free space, when it was last heard, whether it is
 * inactive) is kept only in memory: it changes every few seconds and means nothing after a
 * restart. The in-memory table mirrors the database as of the last top-level commit: a
 * registration writes its record in the caller's transaction and leaves a note in it
 * (struct mdt_ost_update); only the commit that makes the record durable rebuilds the table
 * (mdt_ost_prepare, mdt_ost_install), so an aborted registration leaves no trace in memory either.
 *
 * After an MDS restart every known OST starts active with the free space it last registered with,
 * and has one expiry period and a grace (from the open, START_GRACE_NS) to be heard from again.
 */
#include "mdt/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/util.h"

/* The flags an OSS reports for its OST and the MDT keeps; LW_TGT_INACTIVE is the MDS's own. */
#define OST_REPORTED_STATE (LW_TGT_READONLY | LW_TGT_NOCREATE)

/* Loom's balance threshold: free space is "balanced" while the emptiest OST has at most 17% more
 * free space than the fullest (Lustre's qos_threshold_rr default). */
#define QOS_THRESHOLD_PCT 17

static struct mdt_ost *table_find(struct mdt_ost *tab, uint32_t n, uint32_t idx)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (tab[mid].idx == idx)
			return &tab[mid];
		if (tab[mid].idx < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

bool mdt_ost_known(const struct mdt_store *s, uint32_t idx)
{
	return table_find(s->osts, s->nosts, idx) != NULL;
}

struct mdt_ost *mdt_ost_entry(struct mdt_store *s, uint32_t idx)
{
	return table_find(s->osts, s->nosts, idx);
}

int mdt_ost_rec_get(struct mdt_txn *t, uint32_t idx, struct mdt_ost_rec *rec)
{
	uint8_t key[4];
	MDB_val v;
	int rc;

	mdt_put_be32(key, idx);
	rc = mdt_get(t, MDT_DB_OSTS, key, sizeof(key), &v);
	if (rc)
		return rc;
	if (v.mv_size != sizeof(*rec))
		return -EIO;
	memcpy(rec, v.mv_data, sizeof(*rec));
	return 0;
}

int mdt_ost_rec_put(struct mdt_txn *t, const struct mdt_ost_rec *rec)
{
	uint8_t key[4];

	mdt_put_be32(key, rec->idx);
	return mdt_put(t, MDT_DB_OSTS, key, sizeof(key), rec, sizeof(*rec));
}

/* Calls fn for every record in index order; stops at fn's first non-zero return (1 = found). */
int mdt_ost_rec_each(struct mdt_txn *t, int (*fn)(const struct mdt_ost_rec *rec, void *arg),
		    void *arg)
{
	struct mdt_ost_rec rec;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_OSTS], &cur));
	if (rc)
		return rc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (v.mv_size != sizeof(rec)) {
			rc = -EIO;
			break;
		}
		memcpy(&rec, v.mv_data, sizeof(rec));
		rc = fn(&rec, arg);
		if (rc)
			break;
	}
	mdb_cursor_close(cur);
	if (rc)
		return rc;
	return mrc == MDB_NOTFOUND ? 0 : mdt_errno(mrc);
}

struct idx_list {
	uint32_t *idx;
	uint32_t n, cap;
};

static int note_idx(const struct mdt_ost_rec *rec, void *arg)
{
	struct idx_list *l = arg;

	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 64;
		uint32_t *p = realloc(l->idx, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		l->idx = p;
		l->cap = cap;
	}
	l->idx[l->n++] = rec->idx;
	return 0;
}

int mdt_objids_skip(struct mdt_txn *t, uint64_t n,
		    void (*old_objid)(void *arg, uint32_t ost, uint64_t next_objid), void *arg)
{
	struct idx_list l = { 0 };
	struct mdt_ost_rec rec;
	int rc;

	/* The indexes first: records are not written under the walk's cursor. */
	rc = mdt_ost_rec_each(t, note_idx, &l);
	for (uint32_t i = 0; rc == 0 && i < l.n; i++) {
		rc = mdt_ost_rec_get(t, l.idx[i], &rec);
		if (rc == 0) {
			old_objid(arg, rec.idx, rec.next_objid);
			rec.next_objid += n;
			rc = mdt_ost_rec_put(t, &rec);
		}
	}
	free(l.idx);
	return rc;
}

/* ---- the in-memory table ---- */

struct table_build {
	struct mdt_ost *tab;
	uint32_t n, cap;
	const struct mdt_store *old; /* runtime fields carried over from the current table */
	uint64_t now_ns;
};

static int build_one(const struct mdt_ost_rec *rec, void *arg)
{
	struct table_build *b = arg;
	struct mdt_ost *e, *prev;

	if (rec->state & MDT_OST_REMOVED)
		return 0; /* retired: in no table, allocation or df */
	if (b->n == b->cap) {
		uint32_t cap = b->cap ? b->cap * 2 : 16;
		struct mdt_ost *tab = realloc(b->tab, cap * sizeof(*tab));
		if (!tab)
			return -ENOMEM;
		b->tab = tab;
		b->cap = cap;
	}
	e = &b->tab[b->n++];
	memset(e, 0, sizeof(*e));
	e->idx = rec->idx;
	e->port = rec->port;
	memcpy(e->host, rec->host, sizeof(e->host));
	e->host[sizeof(e->host) - 1] = '\0';
	memcpy(e->uuid, rec->uuid, sizeof(e->uuid));
	e->uuid[sizeof(e->uuid) - 1] = '\0';
	e->state = rec->state & (OST_REPORTED_STATE | LW_TGT_ADMIN_STATE);
	e->sf = rec->sf;
	e->last_heard_ns = b->now_ns;
	prev = b->old ? table_find(b->old->osts, b->old->nosts, rec->idx) : NULL;
	if (prev && strcmp(prev->uuid, e->uuid) == 0) {
		/* (A new uuid at the index is a replacement: nothing of the old OST's carries over.) */
		e->sf = prev->sf;
		e->last_heard_ns = prev->last_heard_ns;
		e->heard = prev->heard;
		/* How it is doing from memory; what an administrator said from the record. */
		e->state = (prev->state & ~LW_TGT_ADMIN_STATE) | (rec->state & LW_TGT_ADMIN_STATE);
	}
	return 0;
}

/* At a start, OSTs count as heard from this much in the future: their OSSs may still be finding
 * this MDS (after a failover they notice the old one's silence only after their heartbeat's
 * timeout, 20 s, then dial the next address), and an OST marked inactive meanwhile would leave
 * creates without any (ENOSPC). */
#define START_GRACE_NS (20ull * 1000000000ull)

int mdt_ost_load(struct mdt_store *s, struct mdt_txn *t)
{
	struct table_build b = { .now_ns = clock_mono_ns() + START_GRACE_NS };
	int rc;

	rc = mdt_ost_rec_each(t, build_one, &b);
	if (rc) {
		free(b.tab);
		return rc;
	}
	s->osts = b.tab;
	s->nosts = b.n;
	/* Not persistent: a generation that differs from anything the previous incarnation handed
	 * out, unless it changed the table more than once a second on average. */
	s->ost_gen = (uint32_t)clock_real().tv_sec;
	return 0;
}

void mdt_ost_free(struct mdt_store *s)
{
	free(s->osts);
	s->osts = NULL;
	s->nosts = 0;
}

int mdt_ost_prepare(struct mdt_txn *t, struct mdt_ost **table, uint32_t *count)
{
	struct table_build b = { .old = t->s, .now_ns = clock_mono_ns() };
	int rc;

	rc = mdt_ost_rec_each(t, build_one, &b);
	if (rc) {
		free(b.tab);
		return rc;
	}
	/* A registration: heard now, with the free space it brought, active again. */
	for (size_t i = 0; i < t->n_ost_updates; i++) {
		const struct mdt_ost_update *u = &t->ost_updates[i];
		struct mdt_ost *e = table_find(b.tab, b.n, u->idx);
		if (!e)
			continue;
		e->sf = u->sf;
		e->last_heard_ns = u->heard_ns;
		e->heard = true;
		e->state = (u->sf.state & OST_REPORTED_STATE) | (e->state & LW_TGT_ADMIN_STATE);
	}
	*table = b.tab;
	*count = b.n;
	return 0;
}

static bool ost_differs(const struct mdt_ost *a, const struct mdt_ost *b)
{
	return a->idx != b->idx || a->state != b->state || a->port != b->port ||
	       strcmp(a->host, b->host) != 0 || strcmp(a->uuid, b->uuid) != 0;
}

void mdt_ost_install(struct mdt_store *s, struct mdt_ost *table, uint32_t count)
{
	bool changed = count != s->nosts;

	/* The failover addresses live in memory only: an OST keeps its own (not another that took
	 * its index). */
	for (uint32_t i = 0; i < count; i++) {
		const struct mdt_ost *old = table_find(s->osts, s->nosts, table[i].idx);

		if (old && strcmp(old->uuid, table[i].uuid) == 0) {
			memcpy(table[i].fo_host, old->fo_host, sizeof(table[i].fo_host));
			table[i].fo_port = old->fo_port;
		}
	}
	for (uint32_t i = 0; !changed && i < count; i++)
		changed = ost_differs(&table[i], &s->osts[i]);
	free(s->osts);
	s->osts = table;
	s->nosts = count;
	if (changed)
		s->ost_gen++;
}

const struct mdt_ost *mdt_ost_table(const struct mdt_store *s, uint32_t *count, uint32_t *gen)
{
	*count = s->nosts;
	*gen = s->ost_gen;
	return s->osts;
}

/* ---- registration, heartbeats, expiry ---- */

struct reg_scan {
	const char *uuid;
	uint32_t found_idx;  /* the uuid's index, or UINT32_MAX */
	uint32_t first_free; /* the lowest index no record holds */
};

static int reg_scan_one(const struct mdt_ost_rec *rec, void *arg)
{
	struct reg_scan *sc = arg;

	if (strncmp(rec->uuid, sc->uuid, sizeof(rec->uuid)) == 0)
		sc->found_idx = rec->idx;
	if (rec->idx == sc->first_free)
		sc->first_free++; /* records come in index order */
	return 0;
}

static bool str_ok(const char *s, size_t cap)
{
	return s[0] != '\0' && memchr(s, '\0', cap) != NULL;
}

int mdt_ost_register(struct mdt_txn *t, const struct lw_ost_register_req *req, uint64_t now_ns,
		     uint32_t *idx_out)
{
	struct reg_scan sc = { .uuid = req->uuid, .found_idx = UINT32_MAX };
	struct mdt_ost_rec rec;
	uint32_t idx;
	int rc;

	if (!memchr(req->fsname, '\0', sizeof(req->fsname)) ||
	    strcmp(req->fsname, t->s->fsname) != 0)
		return -EINVAL;
	if (!str_ok(req->host, sizeof(req->host)) || !str_ok(req->uuid, sizeof(req->uuid)))
		return -EINVAL;
	if (req->want_idx != UINT32_MAX && req->want_idx > MDT_MAX_OST_IDX)
		return -EINVAL;
	rc = mdt_txn_reserve_updates(t, 1);
	if (rc)
		return rc;
	rc = mdt_ost_rec_each(t, reg_scan_one, &sc);
	if (rc)
		return rc;

	if (sc.found_idx != UINT32_MAX) {
		/* A known OST keeps its index; one that asks for another is misconfigured. */
		if (req->want_idx != UINT32_MAX && req->want_idx != sc.found_idx)
			return -EINVAL;
		idx = sc.found_idx;
		rc = mdt_ost_rec_get(t, idx, &rec);
		if (rc)
			return rc == -ENOENT ? -EIO : rc;
		if (rec.state & MDT_OST_REMOVED)
			return -ENODEV; /* retired (loom ost remove): it is no OST of this file system */
	} else {
		if (req->want_idx == UINT32_MAX) {
			idx = sc.first_free;
			if (idx > MDT_MAX_OST_IDX)
				return -ENOSPC;
		} else {
			idx = req->want_idx;
			rc = mdt_ost_rec_get(t, idx, &rec);
			if (rc == 0)
				return -EEXIST; /* held by another uuid */
			if (rc != -ENOENT)
				return rc;
		}
		memset(&rec, 0, sizeof(rec));
		rec.version = MDT_FORMAT_VERSION;
		rec.idx = idx;
		rec.next_objid = 1;
		memcpy(rec.uuid, req->uuid, strlen(req->uuid)); /* NUL-padded, as host below */
	}
	memset(rec.host, 0, sizeof(rec.host));
	memcpy(rec.host, req->host, strlen(req->host));
	rec.port = req->port;
	rec.state = (req->sf.state & OST_REPORTED_STATE) | (rec.state & LW_TGT_ADMIN_STATE);
	rec.sf = req->sf;
	rc = mdt_ost_rec_put(t, &rec);
	if (rc)
		return rc;
	t->ost_dirty = true;
	t->ost_updates[t->n_ost_updates++] = (struct mdt_ost_update){
		.idx = idx, .sf = req->sf, .heard_ns = now_ns
	};
	*idx_out = idx;
	return 0;
}

int mdt_ost_note_registered(struct mdt_txn *t, uint32_t idx, const struct lw_statfs *sf, uint64_t now_ns)
{
	int rc = mdt_txn_reserve_updates(t, 1);

	if (rc)
		return rc;
	t->ost_dirty = true;
	t->ost_updates[t->n_ost_updates++] = (struct mdt_ost_update){ .idx = idx, .sf = *sf, .heard_ns = now_ns };
	return 0;
}

int mdt_ost_admin(struct mdt_txn *t, uint32_t idx, uint32_t set, uint32_t clear)
{
	struct mdt_ost_rec rec;
	int rc;

	if ((set | clear) & ~LW_TGT_ADMIN_STATE)
		return -EINVAL;
	rc = mdt_ost_rec_get(t, idx, &rec);
	if (rc == 0 && (rec.state & MDT_OST_REMOVED))
		rc = -ENOENT; /* retired: no OST has that index now */
	if (rc)
		return rc;
	rec.state = (rec.state | set) & ~clear;
	rc = mdt_ost_rec_put(t, &rec);
	if (rc == 0)
		t->ost_dirty = true; /* the commit rebuilds the table from the records */
	return rc;
}

int mdt_ost_heartbeat(struct mdt_store *s, uint32_t idx, const struct lw_statfs *sf,
		      uint64_t now_ns)
{
	struct mdt_ost *e = table_find(s->osts, s->nosts, idx);
	uint32_t state;

	if (!e)
		return -ENOENT;
	e->sf = *sf;
	e->last_heard_ns = now_ns;
	e->heard = true;
	/* Heard from: active, with the flags it reports now. */
	state = (sf->state & OST_REPORTED_STATE) | (e->state & LW_TGT_ADMIN_STATE);
	if (state != e->state) {
		e->state = state;
		s->ost_gen++;
	}
	return 0;
}

int mdt_ost_set_failover(struct mdt_store *s, uint32_t idx, const char *host, uint16_t port,
			 bool *changed)
{
	struct mdt_ost *e = table_find(s->osts, s->nosts, idx);

	*changed = false;
	if (!e)
		return -ENOENT;
	if (!host[0])
		port = 0;
	if (strncmp(e->fo_host, host, sizeof(e->fo_host)) != 0 || e->fo_port != port) {
		*changed = true;
		snprintf(e->fo_host, sizeof(e->fo_host), "%s", host);
		e->fo_port = port;
		s->ost_gen++;
	}
	return 0;
}

bool mdt_ost_expire(struct mdt_store *s, uint64_t deadline_ns)
{
	bool changed = false;

	for (uint32_t i = 0; i < s->nosts; i++) {
		struct mdt_ost *e = &s->osts[i];
		bool silent = e->last_heard_ns < deadline_ns;

		if (silent != !!(e->state & LW_TGT_INACTIVE)) {
			e->state ^= LW_TGT_INACTIVE;
			changed = true;
			log_info("mdt: OST%04x %s", e->idx, silent ? "inactive: not heard from" : "active");
		}
	}
	if (changed)
		s->ost_gen++;
	return changed;
}

int mdt_ost_lost(struct mdt_store *s, uint32_t idx)
{
	struct mdt_ost *e = table_find(s->osts, s->nosts, idx);

	if (!e)
		return -ENOENT;
	e->last_heard_ns = 0;
	if (!(e->state & LW_TGT_INACTIVE)) {
		e->state |= LW_TGT_INACTIVE;
		s->ost_gen++;
		log_info("mdt: OST%04x inactive: its OSS disconnected", idx);
	}
	return 0;
}

/* ---- allocation ---- */

static bool ost_usable(const struct mdt_ost *e)
{
	return !(e->state & (LW_TGT_INACTIVE | LW_TGT_NOCREATE | LW_TGT_READONLY | LW_TGT_DEACTIVATED));
}

static uint64_t ost_free_kib(const struct mdt_ost *e)
{
	uint64_t bsize = e->sf.bsize;

	return bsize >= 1024 ? e->sf.bavail * (bsize / 1024) : e->sf.bavail * bsize / 1024;
}

/* xorshift64*: the weighted allocator needs spread, not secrecy. */
static uint64_t rng_next(struct mdt_store *s)
{
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 0x2545F4914F6CDD1Dull;
}

static bool space_balanced(const struct mdt_ost *tab, const uint32_t *usable, uint32_t n)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t f = ost_free_kib(&tab[usable[i]]);
		lo = MIN(lo, f);
		hi = MAX(hi, f);
	}
	return hi - lo <= hi / 100 * QOS_THRESHOLD_PCT;
}

/* Picks `want` of the n usable OSTs at random, each with a chance proportional to its free space
 * (without replacement: a file's stripes are on distinct OSTs). usable[] is reordered so that the
 * picks are its first `want` entries. */
static void pick_weighted(struct mdt_store *s, uint32_t *usable, uint32_t n, uint32_t want)
{
	for (uint32_t k = 0; k < want; k++) {
		uint64_t total = 0, r, acc = 0;
		uint32_t pick = n - 1, tmp;

		for (uint32_t i = k; i < n; i++)
			total += ost_free_kib(&s->osts[usable[i]]);
		if (total == 0) {
			pick = k + (uint32_t)(rng_next(s) % (n - k));
		} else {
			r = rng_next(s) % total;
			for (uint32_t i = k; i < n; i++) {
				acc += ost_free_kib(&s->osts[usable[i]]);
				if (r < acc) {
					pick = i;
					break;
				}
			}
		}
		tmp = usable[k];
		usable[k] = usable[pick];
		usable[pick] = tmp;
	}
}

/* Whether OST idx is one of members[0..n) (ascending); every OST without members. */
static bool in_members(uint32_t idx, const uint32_t *members, uint32_t n)
{
	uint32_t lo = 0, hi = n;

	if (!members)
		return true;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (members[mid] == idx)
			return true;
		if (members[mid] < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* The table positions of the OSTs to use, in stripe order, into chosen[]; only members (a pool's
 * OSTs, ascending) when members is not NULL. */
static int choose_osts(struct mdt_store *s, int32_t count, int32_t offset, const uint32_t *members,
		       uint32_t nmembers, uint32_t *chosen, uint32_t *n_out)
{
	uint32_t *usable, n_usable = 0, want, n = 0;
	bool only_heard;
	int rc = 0;

	usable = malloc(s->nosts * sizeof(*usable));
	if (!usable)
		return -ENOMEM;
	/* After an MDS start an OST counts as active for one expiry period before it is heard from
	 * (its OSS re-registers within a second or two). An OST whose OSS died meanwhile must not
	 * get stripes then (their writes would wait for it for the clients' recovery window): once
	 * any OST was heard from, only those heard from are used. */
	for (uint32_t i = 0; i < s->nosts; i++)
		if (ost_usable(&s->osts[i]) && s->osts[i].heard && in_members(s->osts[i].idx, members, nmembers))
			usable[n_usable++] = i;
	only_heard = n_usable > 0;
	for (uint32_t i = 0; !only_heard && i < s->nosts; i++)
		if (ost_usable(&s->osts[i]) && in_members(s->osts[i].idx, members, nmembers))
			usable[n_usable++] = i;
	if (n_usable == 0) {
		rc = -ENOSPC;
		goto out;
	}
	/* More stripes than usable OSTs: as many as there are (Lustre caps silently). */
	want = count == -1 || (uint32_t)count > n_usable ? n_usable : (uint32_t)count;
	want = MIN(want, (uint32_t)LOOM_MAX_STRIPES);

	if (offset >= 0) {
		/* From the OST asked for, up the index order with wrap-around. */
		uint32_t start = (uint32_t)(table_find(s->osts, s->nosts, (uint32_t)offset) - s->osts);
		for (uint32_t i = 0; i < s->nosts && n < want; i++) {
			uint32_t p = (start + i) % s->nosts;
			if (ost_usable(&s->osts[p]) && (!only_heard || s->osts[p].heard) &&
			    in_members(s->osts[p].idx, members, nmembers))
				chosen[n++] = p;
		}
	} else if (space_balanced(s->osts, usable, n_usable)) {
		/* Round robin: each file starts one OST further, so that stripe 0 (and with it
		 * the load of small files) spreads over every OST. */
		uint32_t start = s->rr_next % n_usable;
		for (n = 0; n < want; n++)
			chosen[n] = usable[(start + n) % n_usable];
		s->rr_next = start + 1;
	} else {
		pick_weighted(s, usable, n_usable, want);
		memcpy(chosen, usable, want * sizeof(*chosen));
		n = want;
	}
	*n_out = n;
out:
	free(usable);
	return rc;
}

/* A replay's stripes: the objects its first run handed out (and the client may have written),
 * with each OST's counter moved past them so that none is handed out again. */
static int replay_stripes(struct mdt_txn *t, struct loom_ostobj *objs, uint32_t *n_out)
{
	struct mdt_vers *v = t->vers;
	struct mdt_ost_rec rec;
	int rc = 0;

	for (uint32_t i = 0; rc == 0 && i < v->want_nobjs; i++) {
		objs[i] = v->want_objs[i];
		rc = mdt_ost_rec_get(t, objs[i].ost_idx, &rec);
		if (rc == -ENOENT)
			rc = -EIO;
		if (rc == 0 && objs[i].objid >= rec.next_objid) {
			rec.next_objid = objs[i].objid + 1;
			rc = mdt_ost_rec_put(t, &rec);
		}
	}
	if (rc == 0)
		*n_out = v->want_nobjs;
	v->want_objs = NULL; /* one layout per replay */
	return rc;
}

/* Orders chosen[] (n = mirrors * per) so that the copies of one stripe, chosen[k],
 * chosen[per + k], ..., sit on different OSSs, and on different hosts where there are enough:
 * grouped by host and OSS, mirror m takes the m-th run of `per`. */
static void spread_copies(const struct mdt_store *s, uint32_t *chosen, bool *stale, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		uint32_t v = chosen[i], j = i;
		bool vs = stale[i];
		const struct mdt_ost *e = &s->osts[v];

		for (; j > 0; j--) {
			const struct mdt_ost *p = &s->osts[chosen[j - 1]];
			int c = strcmp(p->host, e->host);

			if (c < 0 || (c == 0 && p->port <= e->port))
				break;
			chosen[j] = chosen[j - 1];
			stale[j] = stale[j - 1];
		}
		chosen[j] = v;
		stale[j] = vs;
	}
}

/* Copies that cannot all go to usable OSTs (an OSS away): the rest go, stale, to OSTs known but
 * not heard from now, so that a resync fills them when they are back. Adds to chosen[*n] up to
 * want; false if there are not enough of those either. */
static bool pad_with_absent(const struct mdt_store *s, const uint32_t *members, uint32_t nmembers,
			    uint32_t *chosen, uint32_t *n, uint32_t want, bool *stale)
{
	for (uint32_t i = 0; i < s->nosts && *n < want; i++) {
		bool taken = false;

		for (uint32_t j = 0; j < *n && !taken; j++)
			taken = chosen[j] == i;
		if (taken || (s->osts[i].state & (LW_TGT_NOCREATE | LW_TGT_READONLY | LW_TGT_DEACTIVATED)) ||
		    !in_members(s->osts[i].idx, members, nmembers))
			continue;
		stale[*n] = true;
		chosen[(*n)++] = i;
	}
	return *n == want;
}

/* Reorders chosen[0..n) (in the allocator's order) so that its first `take` entries are spread
 * over the hosts: taken in rounds, each round the next OST (in the allocator's order) of every
 * host not yet served in it. An erasure-coded file then loses as few objects as it can with one
 * host. */
static int spread_over_hosts(const struct mdt_store *s, uint32_t *chosen, uint32_t n, uint32_t take)
{
	uint32_t *out = malloc(n * sizeof(*out)), done = 0;
	bool *taken = calloc(n, sizeof(bool)), *served = calloc(n, sizeof(bool));

	if (!out || !taken || !served) {
		free(out);
		free(taken);
		free(served);
		return -ENOMEM;
	}
	while (done < take) {
		memset(served, 0, n * sizeof(bool));
		for (uint32_t i = 0; i < n && done < take; i++) {
			bool seen = false;

			if (taken[i])
				continue;
			/* served[j]: the host of chosen[j] has an OST of this round already. */
			for (uint32_t j = 0; j < n && !seen; j++)
				seen = served[j] && !strcmp(s->osts[chosen[j]].host, s->osts[chosen[i]].host);
			if (seen)
				continue;
			served[i] = taken[i] = true;
			out[done++] = chosen[i];
		}
	}
	for (uint32_t i = 0; i < n; i++)
		if (!taken[i])
			out[done++] = chosen[i];
	memcpy(chosen, out, n * sizeof(*out));
	free(out);
	free(taken);
	free(served);
	return 0;
}

/* OSTs an allocation may use at all: in the pool (if any), not excluded by an administrator. */
static uint32_t osts_allowed(const struct mdt_store *s, const uint32_t *members, uint32_t nmembers)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->nosts; i++)
		n += !(s->osts[i].state & (LW_TGT_NOCREATE | LW_TGT_READONLY | LW_TGT_DEACTIVATED)) &&
		     in_members(s->osts[i].idx, members, nmembers);
	return n;
}

/* An erasure-coded file's count data and parity parity objects' OSTs into chosen[], *n of them. */
static int choose_ec(struct mdt_store *s, int32_t count, int32_t offset, uint32_t parity,
		     const uint32_t *members, uint32_t nmembers, uint32_t *chosen, bool *stale,
		     uint32_t *n)
{
	uint32_t allowed = osts_allowed(s, members, nmembers), usable = 0, width;
	int rc;

	if (count > 0 && (uint64_t)count + parity > allowed)
		return -EINVAL;
	if (count == -1 && allowed <= parity)
		return -EINVAL;
	rc = choose_osts(s, -1, offset, members, nmembers, chosen, &usable);
	if (rc)
		return rc;
	width = count > 0 ? (uint32_t)count + parity : MAX(usable, parity + 1);
	width = MIN(width, (uint32_t)LOOM_EC_MAX_WIDTH);
	*n = MIN(usable, width);
	rc = spread_over_hosts(s, chosen, usable, *n);
	if (rc)
		return rc;
	if (width - *n > parity || !pad_with_absent(s, members, nmembers, chosen, n, width, stale))
		return -ENOSPC;
	return 0;
}

int mdt_alloc_stripes(struct mdt_txn *t, int32_t count, int32_t offset, const char *pool,
		      uint32_t mirrors, uint32_t parity, struct loom_ostobj *objs, uint32_t *n_out)
{
	struct mdt_store *s = t->s;
	struct mdt_ost_rec rec;
	uint32_t *chosen = NULL, *members = NULL, nmembers = 0, n = 0;
	bool *stale = NULL;
	int rc;

	if (t->vers && t->vers->want_objs)
		return replay_stripes(t, objs, n_out);
	if (count == 0 || count < -1 || offset < -1 || mirrors == 0 || mirrors > LOOM_MAX_MIRRORS ||
	    parity > LOOM_EC_MAX_PARITY || (parity && mirrors > 1))
		return -EINVAL;
	if (offset >= 0 && !mdt_ost_known(s, (uint32_t)offset))
		return -EINVAL;
	if (s->nosts == 0)
		return -ENOSPC;
	/* Each copy of a stripe on an OST of its own: more copies than OSTs cannot be. */
	if (mirrors > s->nosts)
		return -EINVAL;
	/* A pool that is gone (destroyed since the layout named it) leaves every OST, as Lustre. */
	if (pool && pool[0]) {
		rc = mdt_pool_members(t, pool, &members, &nmembers);
		if (rc && rc != -ENOENT)
			return rc;
		if (rc == 0 && mirrors > 1 && mirrors > nmembers) {
			free(members);
			return -EINVAL;
		}
	}
	chosen = malloc(s->nosts * sizeof(*chosen));
	stale = calloc(s->nosts, sizeof(*stale));
	if (!chosen || !stale) {
		rc = -ENOMEM;
		goto out;
	}
	if (parity) {
		rc = choose_ec(s, count, offset, parity, members, nmembers, chosen, stale, &n);
	} else if (mirrors == 1) {
		rc = choose_osts(s, count, offset, members, nmembers, chosen, &n);
	} else {
		/* Every copy of every stripe on its own OST: count stripes a copy, fewer if the
		 * OSTs usable do not hold mirrors * count (as a plain count is capped), -1 as many as
		 * they hold. */
		uint32_t usable = 0, per;

		rc = choose_osts(s, -1, offset, members, nmembers, chosen, &usable);
		if (rc)
			goto out; /* -ENOSPC: no copy could be written anywhere */
		per = usable / mirrors ? usable / mirrors : 1;
		if (count > 0 && (uint32_t)count < per)
			per = (uint32_t)count;
		per = MIN(per, (uint32_t)LOOM_MAX_STRIPES / mirrors);
		n = MIN(usable, per * mirrors);
		if (!pad_with_absent(s, members, nmembers, chosen, &n, per * mirrors, stale)) {
			rc = -ENOSPC;
			goto out;
		}
		rc = 0;
		spread_copies(s, chosen, stale, n);
	}
	for (uint32_t i = 0; rc == 0 && i < n; i++) {
		/* The counter is persisted in the caller's transaction, with the layout that uses
		 * the id: an aborted request hands its ids out again, but none that any client saw. */
		rc = mdt_ost_rec_get(t, s->osts[chosen[i]].idx, &rec);
		if (rc == -ENOENT)
			rc = -EIO;
		if (rc)
			break;
		objs[i].ost_idx = rec.idx;
		objs[i].flags = stale[i] ? LOOM_OBJ_STALE : 0;
		objs[i].objid = rec.next_objid++;
		rc = mdt_ost_rec_put(t, &rec);
	}
	if (rc == 0)
		*n_out = n;
out:
	free(members);
	free(chosen);
	free(stale);
	return rc;
}

int mdt_alloc_copy(struct mdt_txn *t, const struct loom_layout *l, struct loom_ostobj *objs)
{
	struct mdt_store *s = t->s;
	uint32_t per = l->nobjs / (l->mirror_count > 1 ? l->mirror_count : 1), n = 0, ncand = 0;
	uint32_t *cand = malloc(2 * s->nosts * sizeof(*cand)), *members = NULL, nmembers = 0;
	struct mdt_ost_rec rec;
	int rc = 0;

	if (!cand)
		return -ENOMEM;
	if (l->pool[0]) {
		rc = mdt_pool_members(t, l->pool, &members, &nmembers);
		if (rc == -ENOENT)
			rc = 0;
	}
	/* Candidates: the usable OSTs in the allocator's order, then the others known and not
	 * excluded by an administrator (away now: the copy is stale anyway, the resync fills it
	 * when they are back). */
	if (rc == 0 && choose_osts(s, -1, -1, members, nmembers, cand, &ncand) != 0)
		ncand = 0;
	for (uint32_t i = 0; rc == 0 && i < s->nosts; i++)
		if (!(s->osts[i].state & (LW_TGT_NOCREATE | LW_TGT_READONLY | LW_TGT_DEACTIVATED)) &&
		    in_members(s->osts[i].idx, members, nmembers))
			cand[ncand++] = i;
	for (uint32_t c = 0; rc == 0 && c < ncand && n < per; c++) {
		uint32_t idx = s->osts[cand[c]].idx;
		bool used = false;

		for (uint32_t o = 0; o < l->nobjs && !used; o++)
			used = l->objs[o].ost_idx == idx;
		for (uint32_t o = 0; o < n && !used; o++)
			used = objs[o].ost_idx == idx;
		if (used)
			continue;
		rc = mdt_ost_rec_get(t, idx, &rec);
		if (rc == -ENOENT)
			rc = -EIO;
		if (rc)
			break;
		objs[n].ost_idx = rec.idx;
		objs[n].flags = LOOM_OBJ_STALE;
		objs[n].objid = rec.next_objid++;
		rc = mdt_ost_rec_put(t, &rec);
		n++;
	}
	free(cand);
	free(members);
	if (rc == 0 && n < per)
		rc = -EINVAL; /* not enough OSTs the file is not on already */
	return rc;
}
