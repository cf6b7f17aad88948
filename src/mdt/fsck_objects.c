/*
 * loom fsck, the MDT half, pass 5's objects (see fsck.c): a file's objects looked at on their
 * OSTs through ops->obj_stat (tags, missing objects, the size their data implies); the object
 * set, every object a layout or the destroy queue names: shared objects, objects both live and
 * queued, next object ids behind; and the lookups of the caller's walk of the OSTs.
 */
#include "mdt/fsck_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/stripe.h"

int fsck_objref_add(struct mdt_fsck *f, uint32_t ost, uint64_t objid, uint64_t ino,
		    uint32_t stripe)
{
	int rc = fsck_grow((void **)&f->obj, &f->capobj, f->nobj + 1, sizeof(*f->obj));

	if (rc == 0)
		f->obj[f->nobj++] = (struct objref){ .ost = ost, .stripe = stripe, .objid = objid,
						     .ino = ino };
	return rc;
}

struct ostnext *fsck_ost_find(const struct mdt_fsck *f, uint32_t idx)
{
	for (size_t i = 0; i < f->nosts; i++)
		if (f->osts[i].idx == idx)
			return &f->osts[i];
	return NULL;
}

/* Repairs an object through the caller. An OST's I/O error leaves that problem unrepaired; it
 * is no reason to stop checking the MDT (fsck_report() stops at -EIO, the MDT's damage). */
static int ost_fix(struct mdt_fsck *f, uint32_t ost, uint64_t objid, uint64_t ino,
		   uint32_t stripe)
{
	int rc;

	if (!f->repair)
		return NOFIX;
	rc = f->ops.obj_fix(f->ops.arg, ost, objid, ino, stripe);
	return rc == -EIO ? -EREMOTEIO : rc;
}


/* Checks a file's objects: tags, missing ones, and the size their data implies. Queues the
 * size repair (the cursor on layouts is open). */
int fsck_check_objects(struct mdt_fsck *f, struct acts *q, uint64_t ino,
		       const struct mdt_inode *in, const struct loom_layout *l)
{
	/* A layout without a stripe size (corrupt: reported where layouts are checked) implies
	 * nothing from its objects' sizes. */
	const struct stripe_geom g = stripe_geom_of(l);
	const bool geom = l->stripe_size && l->nobjs;
	struct mdt_fsck_obj *os;
	uint64_t end = 0, blocks = 0, size;
	struct timespec newest = { in->mtime, in->mtime_ns };
	bool any = false, *checked;
	int rc = 0, frc;

	os = calloc(l->nobjs, sizeof(*os) + sizeof(bool));
	if (!os)
		return -ENOMEM;
	checked = (bool *)(os + l->nobjs);
	for (uint32_t k = 0; k < l->nobjs; k++) {
		const struct loom_ostobj *o = &l->objs[k];

		/* A stale copy says nothing of the file (its size, its data): the resync makes it
		 * again from an in-sync copy, whatever it holds now. */
		if (layout_redundant(l) && (o->flags & LOOM_OBJ_STALE))
			continue;
		rc = f->ops.obj_stat(f->ops.arg, o->ost_idx, o->objid, &os[k]);
		if (rc == -ENODEV) {
			f->st.unchecked++;
			rc = 0;
			continue;
		}
		if (rc)
			goto out;
		checked[k] = true;
		if (!os[k].exists)
			continue;
		f->st.objects++;
		any = true;
		/* A parity object says nothing of the file's size. */
		if (geom && !(l->ec_parity && k >= g.count))
			end = MAX(end, stripe_file_end(&g, k % g.count, os[k].size));
		blocks += os[k].blocks;
		if (os[k].mtime.tv_sec > newest.tv_sec ||
		    (os[k].mtime.tv_sec == newest.tv_sec && os[k].mtime.tv_nsec > newest.tv_nsec))
			newest = os[k].mtime;
		if (os[k].tagged && (os[k].tag_ino != ino || os[k].tag_stripe != k)) {
			frc = ost_fix(f, o->ost_idx, o->objid, ino, k);
			snprintf(f->fix, sizeof(f->fix), "tagged %llu:%u", (unsigned long long)ino, k);
			rc = fsck_report(f, MDT_FSCK_OBJECT_TAG, ino, frc, f->fix,
					 "stripe %u: OST %u object %#llx is tagged as %llu:%u", k,
					 o->ost_idx, (unsigned long long)o->objid,
					 (unsigned long long)os[k].tag_ino, os[k].tag_stripe);
			if (rc)
				goto out;
		}
	}
	size = MAX(in->size, MIN(end, MDT_MAX_FILE_SIZE));

	/* Objects are made by their first write, so an absent one is only a loss where the size
	 * says data was. A file none of whose objects exist, and which never reported a block
	 * (or reported none), is sparse: made by truncate, never written. */
	for (uint32_t k = 0; k < l->nobjs; k++) {
		const struct loom_ostobj *o = &l->objs[k];
		/* Bytes below the Data-on-MDT size live on the MDS: a hole on the objects. */
		uint64_t lost = !geom ? 0 :
				layout_obj_size(l, k, size) - layout_obj_size(l, k, MIN(size, l->dom_size));

		const struct ostnext *on = fsck_ost_find(f, o->ost_idx);

		if (checked[k] && !os[k].exists && on && o->objid < on->lost_below) {
			/* Its OST was replaced: it was there, whatever the size says, and its OSS answers
			 * EIO for it (a write too) until it is made again. */
			frc = ost_fix(f, o->ost_idx, o->objid, ino, k);
			rc = fsck_report(f, MDT_FSCK_LOST_OBJECT, ino, frc, "created empty: the range reads as zeros",
					 "stripe %u: OST %u object %#llx was lost with the OST that OST%04x replaced; "
					 "%llu bytes of the file were there (reads of them give EIO)", k, o->ost_idx,
					 (unsigned long long)o->objid, o->ost_idx, (unsigned long long)lost);
			if (rc)
				goto out;
			continue;
		}
		if (!checked[k] || os[k].exists || lost == 0)
			continue;
		if (!any && (!(in->flags & MDT_IF_BLOCKS) || in->blocks == 0))
			continue;
		if (layout_redundant(l) && layout_can_stale(l, k)) {
			/* An in-sync copy (or an erasure-coded object): an empty object made there would
			 * read as zeros where the others hold the data. It becomes stale, for the MDS to
			 * make again. */
			struct act a = { .op = ACT_MIRROR_STALE, .a = ino, .b = k, .c = lost };

			rc = fsck_acts_push(q, &a);
			if (rc)
				goto out;
			continue;
		}
		frc = ost_fix(f, o->ost_idx, o->objid, ino, k);
		rc = fsck_report(f, MDT_FSCK_MISSING_OBJECT, ino, frc, "created empty",
				 "stripe %u: OST %u object %#llx does not exist; the file lost data: its "
				 "size puts %llu bytes there, which read as zeros (unless they were a hole)",
				 k, o->ost_idx, (unsigned long long)o->objid, (unsigned long long)lost);
		if (rc)
			goto out;
	}
	if (end > in->size) {
		struct act a = { .op = ACT_SIZE, .a = ino, .b = end, .c = blocks, .ts = newest };
		rc = fsck_acts_push(q, &a);
	}
out:
	free(os);
	return rc;
}

static int objref_cmp(const void *x, const void *y)
{
	const struct objref *a = x, *b = y;

	if (a->ost != b->ost)
		return a->ost < b->ost ? -1 : 1;
	if (a->objid != b->objid)
		return a->objid < b->objid ? -1 : 1;
	if (a->stripe != b->stripe)
		return a->stripe < b->stripe ? -1 : 1;
	return a->ino < b->ino ? -1 : a->ino > b->ino;
}

static int set_next_objid(struct mdt_fsck *f, uint32_t idx, uint64_t next)
{
	struct mdt_ost_rec rec;
	uint8_t key[4];
	MDB_val v;
	int rc;

	mdt_put_be32(key, idx);
	rc = mdt_get(f->t, MDT_DB_OSTS, key, sizeof(key), &v);
	if (rc)
		return rc;
	if (v.mv_size != sizeof(rec))
		return -EIO;
	memcpy(&rec, v.mv_data, sizeof(rec));
	rec.next_objid = next;
	rc = mdt_put(f->t, MDT_DB_OSTS, key, sizeof(key), &rec, sizeof(rec));
	if (rc == 0)
		f->t->ost_dirty = true;
	return rc;
}

/* Objects in two layouts, in a layout and the destroy queue; object ids at or above the OST's
 * counter. */
int fsck_check_objrefs(struct mdt_fsck *f)
{
	int rc = 0, frc;

	if (f->nobj)
		qsort(f->obj, f->nobj, sizeof(*f->obj), objref_cmp);
	/* An object queued twice (a stray layout's, then in the queue its repair wrote) once. */
	for (size_t i = 0, o = 0; i < f->nobj; i++) {
		if (o && f->obj[i].stripe == STRIPE_QUEUED && f->obj[o - 1].stripe == STRIPE_QUEUED &&
		    f->obj[o - 1].ost == f->obj[i].ost && f->obj[o - 1].objid == f->obj[i].objid)
			continue;
		f->obj[o++] = f->obj[i];
		if (i + 1 == f->nobj)
			f->nobj = o;
	}
	for (size_t i = 0; rc == 0 && i < f->nobj; i++) {
		struct objref *a = &f->obj[i];
		struct ostnext *o;

		for (size_t j = i + 1; rc == 0 && j < f->nobj && f->obj[j].ost == a->ost &&
				       f->obj[j].objid == a->objid; j++) {
			struct objref *b = &f->obj[j];

			if (a->stripe == STRIPE_QUEUED)
				break;
			if (b->stripe != STRIPE_QUEUED) {
				rc = fsck_report(f, MDT_FSCK_SHARED_OBJECT, a->ino, NOFIX, NULL,
						 "OST %u object %#llx is stripe %u of inode %llu and stripe "
						 "%u of inode %llu: writes to one change the other (copy one "
						 "file, remove both, put the copy back)", a->ost,
						 (unsigned long long)a->objid, a->stripe,
						 (unsigned long long)a->ino, b->stripe,
						 (unsigned long long)b->ino);
			} else {
				REPAIR(f, frc, mdt_destroy_done(f->t, a->ost, a->objid));
				rc = fsck_report(f, MDT_FSCK_QUEUED_OBJECT, a->ino, frc,
						 "removed from the destroy queue",
						 "stripe %u (OST %u object %#llx) is queued for destruction "
						 "(for inode %llu): the MDS would destroy live data",
						 a->stripe, a->ost, (unsigned long long)a->objid,
						 (unsigned long long)b->ino);
			}
		}
		o = fsck_ost_find(f, a->ost);
		if (rc == 0 && o && a->objid >= o->next) {
			uint64_t want = a->objid + 1;
			/* Only the highest id of the OST matters: the last of its run. */
			if (i + 1 < f->nobj && f->obj[i + 1].ost == a->ost)
				continue;
			snprintf(f->fix, sizeof(f->fix), "next object id %llu", (unsigned long long)want);
			REPAIR(f, frc, set_next_objid(f, a->ost, want));
			rc = fsck_report(f, MDT_FSCK_COUNTER, 0, frc, f->fix,
					 "OST %u: next object id %llu is not above object %#llx in use: a "
					 "new file would share it", a->ost, (unsigned long long)o->next,
					 (unsigned long long)a->objid);
			if (frc == 0)
				o->next = want;
		}
	}
	return rc;
}

/* ---- the object set, for the caller's walk of the OSTs ---- */

int mdt_fsck_object(const struct mdt_fsck *f, uint32_t ost, uint64_t objid, uint64_t *ino,
		    uint32_t *stripe)
{
	size_t lo = 0, hi = f->nobj;

	/* The first entry of (ost, objid): a layout's reference sorts before a queued one. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct objref *o = &f->obj[mid];
		if (o->ost < ost || (o->ost == ost && o->objid < objid))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == f->nobj || f->obj[lo].ost != ost || f->obj[lo].objid != objid)
		return MDT_FSCK_OBJ_UNKNOWN;
	if (ino)
		*ino = f->obj[lo].ino;
	if (stripe)
		*stripe = f->obj[lo].stripe;
	return f->obj[lo].stripe == STRIPE_QUEUED ? MDT_FSCK_OBJ_QUEUED : MDT_FSCK_OBJ_LAYOUT;
}

uint64_t mdt_fsck_next_objid(const struct mdt_fsck *f, uint32_t ost)
{
	struct ostnext *o = fsck_ost_find(f, ost);

	return o ? o->next : 0;
}
