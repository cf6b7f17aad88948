/*
 * Mirrored files' copies (docs/architecture.md, "Mirrors"): which objects hold current bytes.
 *
 * A mirrored layout keeps mirror_count copies, striped alike; an object with LOOM_OBJ_STALE
 * missed a write (or was found bad) and is read by nobody until a resync copies it from an
 * in-sync copy of its stripe. Every stripe always keeps one in-sync copy: a mark that would
 * take the last is refused, so readers always have somewhere to go.
 *
 * An erasure-coded file (docs/architecture.md, "Erasure coding") is looked after the same way:
 * a stale object of it is rebuilt from stripe_count in-sync others, and a mark that would leave
 * fewer than that is refused (layout_can_stale).
 */
#include "mdt/internal.h"

#include <errno.h>
#include <stdlib.h>

#include "common/stripe.h"

/* The index of object (ost_idx, objid) in l, or -1. */
static int64_t obj_index(const struct loom_layout *l, uint32_t ost_idx, uint64_t objid)
{
	for (uint32_t i = 0; i < l->nobjs; i++)
		if (l->objs[i].ost_idx == ost_idx && l->objs[i].objid == objid)
			return i;
	return -1;
}

int mdt_mirror_stale(struct mdt_txn *t, uint64_t ino, const struct loom_ostobj *objs, uint32_t count,
		     struct loom_layout **out)
{
	struct loom_layout *l = NULL;
	bool changed = false;
	int rc;

	*out = NULL;
	rc = mdt_layout_load(t, MDT_DB_LAYOUTS, ino, &l);
	if (rc)
		return rc == -ENODATA ? -EINVAL : rc;
	if (!layout_redundant(l) || l->nobjs == 0) {
		free(l);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < count; i++) {
		int64_t at = obj_index(l, objs[i].ost_idx, objs[i].objid);

		if (at < 0) {
			free(l);
			return -EINVAL;
		}
		if (l->objs[at].flags & LOOM_OBJ_STALE)
			continue; /* marked already: a resend, or another client's report */
		if (!layout_can_stale(l, (uint32_t)at)) {
			free(l);
			return -EINVAL; /* the last copy of its stripe; one object more than parity */
		}
		l->objs[at].flags |= LOOM_OBJ_STALE;
		changed = true;
	}
	/* A new generation: a client that marked objects knows a layout read after their resync
	 * (which bumps it again) from one read before. */
	if (changed) {
		l->layout_gen++;
		rc = mdt_layout_save(t, MDT_DB_LAYOUTS, ino, l);
		if (rc == 0)
			rc = mdt_mirror_note(t, ino, l);
	}
	if (rc) {
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

/* ---- the table of mirrored files to look after ---- */

static bool any_stale(const struct loom_layout *l)
{
	for (uint32_t i = 0; i < l->nobjs; i++)
		if (l->objs[i].flags & LOOM_OBJ_STALE)
			return true;
	return false;
}

int mdt_mirror_note(struct mdt_txn *t, uint64_t ino, const struct loom_layout *l)
{
	uint8_t key[8], one = 1;
	int rc;

	mdt_put_be64(key, ino);
	if (l && layout_redundant(l) && (any_stale(l) || (l->flags & LOOM_LAYOUT_WRITE_PENDING)))
		return mdt_put(t, MDT_DB_MIRRORS, key, sizeof(key), &one, sizeof(one));
	rc = mdt_del(t, MDT_DB_MIRRORS, key, sizeof(key));
	return rc == -ENOENT ? 0 : rc;
}

int mdt_mirror_list(struct mdt_txn *t, uint64_t after, uint64_t *inos, size_t max, size_t *n)
{
	return mdt_ino_keys(t, MDT_DB_MIRRORS, after, inos, max, n);
}

/* Loads ino's layout when it is a mirrored or erasure-coded file's; *l NULL (and 0) when it is
 * not, or gone. */
static int load_mirrored(struct mdt_txn *t, uint64_t ino, struct loom_layout **l)
{
	int rc = mdt_layout_load(t, MDT_DB_LAYOUTS, ino, l);

	if (rc == -ENODATA || rc == -ENOENT) {
		*l = NULL;
		return 0;
	}
	if (rc == 0 && (!layout_redundant(*l) || (*l)->nobjs == 0)) {
		free(*l);
		*l = NULL;
	}
	return rc;
}

/* Sets or clears a mirrored file's write-pending mark. */
static int write_pending(struct mdt_txn *t, uint64_t ino, bool on)
{
	struct loom_layout *l;
	int rc = load_mirrored(t, ino, &l);

	if (rc || !l)
		return rc;
	if (!(l->flags & LOOM_LAYOUT_WRITE_PENDING) != !on) {
		l->flags ^= LOOM_LAYOUT_WRITE_PENDING;
		rc = mdt_layout_save(t, MDT_DB_LAYOUTS, ino, l);
		if (rc == 0)
			rc = mdt_mirror_note(t, ino, l);
	}
	free(l);
	return rc;
}

int mdt_mirror_write_begin(struct mdt_txn *t, uint64_t ino)
{
	return write_pending(t, ino, true);
}

int mdt_mirror_write_end(struct mdt_txn *t, uint64_t ino)
{
	return write_pending(t, ino, false);
}

int mdt_mirror_abandoned(struct mdt_txn *t, uint64_t ino, uint32_t *marked)
{
	struct loom_layout *l;
	uint32_t per, n = 0;
	int rc = load_mirrored(t, ino, &l);

	*marked = 0;
	if (rc || !l)
		return rc;
	if (!(l->flags & LOOM_LAYOUT_WRITE_PENDING)) {
		free(l);
		return 0;
	}
	/* A writer went without closing: its last writes may be in some copies and not others.
	 * Each stripe's first in-sync copy is the truth from now on; the others are resynced. An
	 * erasure-coded file's data objects are its truth, and its parity is made again from them;
	 * with a data object stale too, the parity is all that can give its bytes back, and stays. */
	per = layout_per_copy(l);
	for (uint32_t k = 0; l->ec_parity && k < per; k++)
		if (l->objs[k].flags & LOOM_OBJ_STALE)
			per = l->nobjs; /* the parity holds that object's bytes: it stays */
	for (uint32_t k = per; l->ec_parity && k < l->nobjs; k++)
		if (!(l->objs[k].flags & LOOM_OBJ_STALE)) {
			l->objs[k].flags |= LOOM_OBJ_STALE;
			n++;
		}
	for (uint32_t k = 0; !l->ec_parity && k < per; k++) {
		bool first = true;

		for (uint32_t m = 0; m < layout_copies(l); m++) {
			struct loom_ostobj *o = &l->objs[m * per + k];

			if (o->flags & LOOM_OBJ_STALE)
				continue;
			if (first) {
				first = false;
				continue;
			}
			o->flags |= LOOM_OBJ_STALE;
			n++;
		}
	}
	l->flags &= ~LOOM_LAYOUT_WRITE_PENDING;
	l->layout_gen++;
	rc = mdt_layout_save(t, MDT_DB_LAYOUTS, ino, l);
	if (rc == 0)
		rc = mdt_mirror_note(t, ino, l);
	/* The parity is made from the data objects up to the file's size, zeros past it: what a
	 * writer left past the size (never reported, so never the file's) is cut first. */
	if (rc == 0 && l->ec_parity && per != l->nobjs && n) {
		struct mdt_inode in;

		rc = mdt_inode_get(t, ino, &in);
		if (rc == 0 && in.size > 0)
			rc = mdt_trunc_queue(t, &in, in.size);
		if (rc == 0 && in.size > 0)
			rc = mdt_inode_put(t, &in);
		if (rc == -ENOENT)
			rc = 0;
	}
	free(l);
	*marked = n;
	return rc;
}

int mdt_ec_cut(struct mdt_txn *t, uint64_t ino, struct loom_layout *l, uint64_t cut)
{
	uint32_t per = layout_per_copy(l), n = 0;
	int rc;

	if (!l->ec_parity || l->nobjs == 0 || cut % ((uint64_t)l->stripe_size * per) == 0)
		return 0;
	for (uint32_t k = 0; k < per; k++)
		if (l->objs[k].flags & LOOM_OBJ_STALE)
			return -EBUSY;
	for (uint32_t k = per; k < l->nobjs; k++)
		if (!(l->objs[k].flags & LOOM_OBJ_STALE)) {
			l->objs[k].flags |= LOOM_OBJ_STALE;
			n++;
		}
	if (n == 0)
		return 0;
	l->layout_gen++;
	rc = mdt_layout_save(t, MDT_DB_LAYOUTS, ino, l);
	return rc ? rc : mdt_mirror_note(t, ino, l);
}

int mdt_mirror_resynced(struct mdt_txn *t, uint64_t ino, uint32_t gen, const uint32_t *objs, uint32_t n,
			struct loom_layout **out)
{
	struct loom_layout *l;
	int rc = load_mirrored(t, ino, &l);

	*out = NULL;
	if (rc)
		return rc;
	if (!l)
		return -ENOENT;
	/* Changed since the copy began (a new mark, a relayout): the copy may be out of date. */
	if (l->layout_gen != gen || (l->flags & LOOM_LAYOUT_WRITE_PENDING)) {
		free(l);
		return -EAGAIN;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (objs[i] >= l->nobjs) {
			free(l);
			return -EINVAL;
		}
		l->objs[objs[i]].flags &= ~LOOM_OBJ_STALE;
	}
	l->layout_gen++;
	rc = mdt_layout_save(t, MDT_DB_LAYOUTS, ino, l);
	if (rc == 0)
		rc = mdt_mirror_note(t, ino, l);
	if (rc) {
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

/* Whether l is a redundant file's with an in-sync object on OST idx below lost_below. */
static bool holds_lost(const struct loom_layout *l, uint32_t idx, uint64_t lost_below)
{
	if (!layout_redundant(l))
		return false;
	for (uint32_t i = 0; i < l->nobjs; i++)
		if (l->objs[i].ost_idx == idx && l->objs[i].objid < lost_below &&
		    !(l->objs[i].flags & LOOM_OBJ_STALE))
			return true;
	return false;
}

int mdt_mirror_ost_lost(struct mdt_txn *t, uint32_t idx, uint64_t lost_below, uint32_t *files)
{
	uint64_t *inos = NULL;
	size_t n = 0, cap = 0;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	*files = 0;
	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_LAYOUTS], &cur));
	if (rc)
		return rc;
	/* The files first, their layouts changed after: no write under the cursor. */
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct loom_layout *l = NULL;
		struct lw_rd r;

		if (k.mv_size != 8)
			continue;
		lw_rd_init(&r, v.mv_data, v.mv_size);
		if (lw_layout_decode(&r, &l) != 0)
			continue; /* fsck's to report */
		if (holds_lost(l, idx, lost_below)) {
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				uint64_t *p = realloc(inos, ncap * sizeof(*p));

				if (!p) {
					free(l);
					mrc = MDB_PANIC;
					rc = -ENOMEM;
					break;
				}
				inos = p;
				cap = ncap;
			}
			inos[n++] = mdt_get_be64(k.mv_data);
		}
		free(l);
	}
	mdb_cursor_close(cur);
	if (rc == 0 && mrc != MDB_SUCCESS && mrc != MDB_NOTFOUND)
		rc = mdt_errno(mrc);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct loom_layout *l;
		bool changed = false;

		rc = load_mirrored(t, inos[i], &l);
		if (rc || !l)
			continue;
		for (uint32_t o = 0; o < l->nobjs; o++) {
			struct loom_ostobj *ob = &l->objs[o];

			/* A stripe whose only in-sync copy was there is lost with it: its reads give EIO
			 * (loom fsck says so); nothing to copy it from. */
			if (ob->ost_idx == idx && ob->objid < lost_below && !(ob->flags & LOOM_OBJ_STALE) &&
			    layout_can_stale(l, o)) {
				ob->flags |= LOOM_OBJ_STALE;
				changed = true;
			}
		}
		if (changed) {
			l->layout_gen++;
			rc = mdt_layout_save(t, MDT_DB_LAYOUTS, inos[i], l);
			if (rc == 0)
				rc = mdt_mirror_note(t, inos[i], l);
			(*files)++;
		}
		free(l);
	}
	free(inos);
	return rc;
}

int mdt_mirror_mark(struct mdt_txn *t, uint64_t ino, uint32_t obj)
{
	struct loom_layout *l;
	int rc = load_mirrored(t, ino, &l);

	if (rc || !l)
		return rc ? rc : -EINVAL;
	if (obj >= l->nobjs) {
		rc = -EINVAL;
	} else if (!(l->objs[obj].flags & LOOM_OBJ_STALE)) {
		if (!layout_can_stale(l, obj)) {
			rc = -EBUSY;
		} else {
			l->objs[obj].flags |= LOOM_OBJ_STALE;
			l->layout_gen++;
			rc = mdt_layout_save(t, MDT_DB_LAYOUTS, ino, l);
			if (rc == 0)
				rc = mdt_mirror_note(t, ino, l);
		}
	}
	free(l);
	return rc;
}

int mdt_mirror_extend(struct mdt_txn *t, uint64_t ino, struct loom_layout **out)
{
	struct loom_layout *l, *n;
	uint32_t per, copies;
	int rc;

	*out = NULL;
	rc = load_mirrored(t, ino, &l);
	if (rc || !l)
		return rc ? rc : -EINVAL;
	per = layout_per_copy(l);
	copies = layout_copies(l);
	if (l->ec_parity || copies >= LOOM_MAX_MIRRORS || (uint64_t)per * (copies + 1) > LOOM_MAX_STRIPES) {
		free(l);
		return -EINVAL;
	}
	n = realloc(l, sizeof(*l) + (size_t)per * (copies + 1) * sizeof(l->objs[0]));
	if (!n) {
		free(l);
		return -ENOMEM;
	}
	l = n;
	rc = mdt_alloc_copy(t, l, l->objs + l->nobjs);
	if (rc == 0) {
		l->nobjs += per;
		l->mirror_count++;
		l->layout_gen++;
		rc = mdt_layout_save(t, MDT_DB_LAYOUTS, ino, l);
	}
	if (rc == 0)
		rc = mdt_mirror_note(t, ino, l);
	if (rc) {
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

int mdt_mirror_split(struct mdt_txn *t, uint64_t ino, uint32_t ost, uint64_t objid, struct loom_layout **out)
{
	struct loom_layout *l, gone;
	uint32_t per, copies, m;
	int64_t at;
	int rc;

	*out = NULL;
	rc = load_mirrored(t, ino, &l);
	if (rc || !l)
		return rc ? rc : -EINVAL;
	per = layout_per_copy(l);
	copies = layout_copies(l);
	at = obj_index(l, ost, objid);
	if (at < 0 || l->ec_parity) {
		free(l);
		return -EINVAL;
	}
	m = (uint32_t)at / per;
	/* Each stripe keeps an in-sync copy among the others. */
	for (uint32_t k = 0; k < per; k++)
		if (!(l->objs[m * per + k].flags & LOOM_OBJ_STALE) && !layout_can_stale(l, m * per + k)) {
			free(l);
			return -EINVAL;
		}
	/* Its objects go to the destroyer (a layout of just them). */
	{
		struct loom_layout *d = malloc(sizeof(*d) + per * sizeof(d->objs[0]));

		if (!d) {
			free(l);
			return -ENOMEM;
		}
		gone = *l;
		*d = gone;
		d->nobjs = per;
		memcpy(d->objs, l->objs + (size_t)m * per, per * sizeof(d->objs[0]));
		rc = mdt_destroy_queue(t, ino, d);
		free(d);
	}
	if (rc == 0) {
		memmove(l->objs + (size_t)m * per, l->objs + (size_t)(m + 1) * per,
			(size_t)(copies - m - 1) * per * sizeof(l->objs[0]));
		l->nobjs -= per;
		l->mirror_count = (uint16_t)(copies - 1);
		if (l->mirror_count == 1)
			for (uint32_t o = 0; o < l->nobjs; o++)
				l->objs[o].flags = 0; /* one copy: plain, in sync by the check above */
		if (l->mirror_count == 1)
			l->flags &= ~LOOM_LAYOUT_WRITE_PENDING;
		l->layout_gen++;
		rc = mdt_layout_save(t, MDT_DB_LAYOUTS, ino, l);
	}
	if (rc == 0)
		rc = mdt_mirror_note(t, ino, l);
	if (rc) {
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}
