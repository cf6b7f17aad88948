/*
 * loom fsck, the MDT half, pass 5 (mdt_fsck_layouts; see fsck.c): the OST table, every layout
 * (malformed, naming an unknown OST, stray: of an inode that is no regular file), the sizes their
 * objects imply, the destroy queue, then a new layout for a regular file that has none. The
 * objects themselves are fsck_objects.c's.
 */
#include "common/stripe.h"
#include "mdt/fsck_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static int ost_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct mdt_ost_rec rec;
	size_t *cap = arg;
	uint64_t lost = 0;
	int rc;

	if (k->mv_size != 4 || v->mv_size != sizeof(rec))
		return -EIO; /* the MDS would not open such an MDT either */
	memcpy(&rec, v->mv_data, sizeof(rec));
	rc = fsck_grow((void **)&f->osts, cap, f->nosts + 1, sizeof(*f->osts));
	if (rc == 0)
		rc = mdt_ost_lost_below(f->t, mdt_get_be32(k->mv_data), &lost);
	if (rc == 0)
		f->osts[f->nosts++] = (struct ostnext){ .idx = mdt_get_be32(k->mv_data),
							.next = rec.next_objid, .lost_below = lost };
	return rc;
}

static int layout_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct loom_layout *l = NULL;
	struct mdt_inode in;
	struct fino *fi;
	struct lw_rd r;
	uint64_t ino;
	int rc;

	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	if (k->mv_size != 8)
		return fsck_acts_push(q, &a);
	ino = mdt_get_be64(k->mv_data);
	a.a = ino;
	lw_rd_init(&r, v->mv_data, v->mv_size);
	rc = lw_layout_decode(&r, &l);
	if (rc == -ENOMEM)
		return rc;
	if (rc == 0 && lw_rd_done(&r) != 0)
		rc = -EPROTO;
	if (rc) {
		free(l);
		a.b = 1; /* does not decode */
		return fsck_acts_push(q, &a);
	}
	fi = fsck_find(f, ino);
	if (!fi || !S_ISREG(fi->mode)) {
		/* Its objects are about to be queued for destruction: not orphans. */
		for (uint32_t i = 0; rc == 0 && i < l->nobjs; i++)
			rc = fsck_objref_add(f, l->objs[i].ost_idx, l->objs[i].objid, ino, STRIPE_QUEUED);
		a.op = ACT_STRAY_LAYOUT;
		a.b = fi ? fi->mode : 0;
		if (rc == 0)
			rc = fsck_acts_push(q, &a);
		free(l);
		return rc;
	}
	fi->flags |= FI_LAYOUT;
	for (uint32_t i = 0; rc == 0 && i < l->nobjs; i++) {
		rc = fsck_objref_add(f, l->objs[i].ost_idx, l->objs[i].objid, ino, i);
		if (rc == 0 && !fsck_ost_find(f, l->objs[i].ost_idx))
			rc = fsck_report(f, MDT_FSCK_LAYOUT, ino, NOFIX, NULL,
					 "stripe %u is on OST %u, which the MDT does not know", i,
					 l->objs[i].ost_idx);
	}
	if (rc)
		goto out;
	if (l->nobjs == 0 || l->stripe_size == 0 ||
	    (uint64_t)(uint32_t)l->stripe_count * layout_copies(l) + l->ec_parity != l->nobjs ||
	    (l->flags & LOOM_LAYOUT_DEFAULT)) {
		rc = fsck_report(f, MDT_FSCK_LAYOUT, ino, NOFIX, NULL,
				 "malformed file layout (stripe size %u, count %d, %u objects, flags %#x): "
				 "its objects are not checked", l->stripe_size, l->stripe_count, l->nobjs,
				 l->flags);
		goto out;
	}
	/* An unlinked file is released at the next MDS start: its data no longer matters. */
	if ((fi->flags & FI_ORPHAN) && fi->links == 0)
		goto out;
	rc = mdt_inode_get(f->t, ino, &in);
	if (rc == 0)
		rc = fsck_check_objects(f, q, ino, &in, l);
out:
	free(l);
	return rc;
}

/* Raises a file's size to what its objects hold, with their blocks and newest mtime. */
static int raise_size(struct mdt_fsck *f, const struct act *a)
{
	struct mdt_inode in;
	int rc;

	rc = mdt_inode_get(f->t, a->a, &in);
	if (rc)
		return rc;
	if (a->b > MDT_MAX_FILE_SIZE)
		return -EFBIG;
	in.size = a->b;
	in.blocks = a->c;
	in.flags |= MDT_IF_BLOCKS;
	if (a->ts.tv_sec > in.mtime || (a->ts.tv_sec == in.mtime && a->ts.tv_nsec > in.mtime_ns)) {
		in.mtime = in.ctime = a->ts.tv_sec;
		in.mtime_ns = in.ctime_ns = (uint32_t)a->ts.tv_nsec;
	}
	return mdt_inode_put(f->t, &in);
}

static int stray_layout(struct mdt_fsck *f, uint64_t ino)
{
	struct loom_layout *l;
	int rc;

	rc = mdt_layout_load(f->t, MDT_DB_LAYOUTS, ino, &l);
	if (rc)
		return rc;
	rc = mdt_destroy_queue(f->t, ino, l);
	free(l);
	if (rc == 0)
		rc = fsck_del_ino_key(f, MDT_DB_LAYOUTS, ino);
	return rc;
}

static int fix_layouts(struct mdt_fsck *f, struct acts *q)
{
	int rc = 0, frc;

	for (size_t i = 0; rc == 0 && i < q->n; i++) {
		struct act *a = &q->v[i];
		struct mdt_inode in;

		switch (a->op) {
		case ACT_SIZE:
			rc = mdt_inode_get(f->t, a->a, &in);
			if (rc)
				break;
			snprintf(f->fix, sizeof(f->fix), "size %llu, %llu blocks",
				 (unsigned long long)a->b, (unsigned long long)a->c);
			REPAIR(f, frc, raise_size(f, a));
			rc = fsck_report(f, MDT_FSCK_SIZE, a->a, frc, f->fix,
					 "size %llu, but its objects hold data up to %llu (a writer died "
					 "before it reported its size, or a client before it cut the "
					 "objects of a truncate)", (unsigned long long)in.size,
					 (unsigned long long)a->b);
			break;
		case ACT_MIRROR_STALE: {
			struct loom_layout *l = NULL;
			uint32_t per;

			if (mdt_layout_load(f->t, MDT_DB_LAYOUTS, a->a, &l) != 0)
				break;
			per = layout_per_copy(l);
			REPAIR(f, frc, mdt_mirror_mark(f->t, a->a, (uint32_t)a->b));
			if (l->ec_parity) {
				rc = fsck_report(f, MDT_FSCK_MISSING_OBJECT, a->a, frc,
						 frc == -EBUSY ? NULL : "marked stale: the MDS makes it again from the others",
						 "%s object %u: OST %u object %#llx does not exist%s; %llu bytes of it "
						 "were there", (uint32_t)a->b < per ? "data" : "parity", (uint32_t)a->b,
						 l->objs[a->b].ost_idx, (unsigned long long)l->objs[a->b].objid,
						 frc == -EBUSY ? ", and more objects than the parity covers are stale "
						 "(the data is lost)" : "", (unsigned long long)a->c);
				free(l);
				break;
			}
			rc = fsck_report(f, MDT_FSCK_MISSING_OBJECT, a->a, frc,
					 frc == -EBUSY ? NULL : "marked stale: the MDS copies it again from another mirror",
					 "mirror %u stripe %u: OST %u object %#llx does not exist%s; %llu bytes of the "
					 "file were there", (uint32_t)a->b / per, (uint32_t)a->b % per,
					 l->objs[a->b].ost_idx, (unsigned long long)l->objs[a->b].objid,
					 frc == -EBUSY ? ", and no other mirror of the stripe is in sync (the data "
					 "is lost)" : "", (unsigned long long)a->c);
			free(l);
			break;
		}
		case ACT_STRAY_LAYOUT:
			REPAIR(f, frc, stray_layout(f, a->a));
			rc = fsck_report(f, MDT_FSCK_STRAY, 0, frc,
					 "deleted, its objects queued for destruction",
					 "layout of inode %llu, which %s", (unsigned long long)a->a,
					 a->b ? "is not a regular file" : "does not exist");
			break;
		default:
			REPAIR(f, frc, fsck_del_key(f, MDT_DB_LAYOUTS, a->key, a->klen));
			rc = fsck_report(f, MDT_FSCK_RECORD, a->b ? a->a : 0, frc,
					 "deleted (the file gets a new, empty layout)",
					 "layout record that does not decode (its objects become orphans)");
			break;
		}
	}
	return rc;
}

/* A new layout for a regular file that has none: its data (if any) is lost. */
static int new_layout(struct mdt_fsck *f, struct fino *fi)
{
	struct mdt_inode in, dir;
	int rc;

	rc = mdt_inode_get(f->t, fi->ino, &in);
	if (rc == 0)
		rc = mdt_inode_get(f->t, fi->links ? fi->parent : LOOM_ROOT_INO, &dir);
	if (rc == 0)
		rc = mdt_layout_new_file(f->t, &dir, NULL, &in, NULL);
	if (rc)
		return rc;
	/* No object holds anything: what the size covers reads as zeros. */
	in.blocks = 0;
	in.flags |= MDT_IF_BLOCKS;
	return mdt_inode_put(f->t, &in);
}

static int destroy_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	uint64_t ino = 0;

	if (k->mv_size != 12) {
		a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
		memcpy(a.key, k->mv_data, a.klen);
		return fsck_acts_push(q, &a);
	}
	if (v->mv_size == sizeof(ino))
		memcpy(&ino, v->mv_data, sizeof(ino));
	return fsck_objref_add(f, mdt_get_be32(k->mv_data),
			       mdt_get_be64((const uint8_t *)k->mv_data + 4), ino, STRIPE_QUEUED);
}

int mdt_fsck_layouts(struct mdt_fsck *f)
{
	struct acts q = { 0 };
	size_t cap = 0;
	int rc, frc;

	if (!f->have_root)
		return -EINVAL; /* mdt_fsck_namespace first */
	rc = fsck_walk(f, MDT_DB_OSTS, ost_rec, &cap);
	if (rc == 0)
		rc = fsck_walk(f, MDT_DB_LAYOUTS, layout_rec, &q);
	if (rc == 0)
		rc = fix_layouts(f, &q);
	fsck_acts_free(&q);
	if (rc == 0)
		rc = fsck_walk(f, MDT_DB_DESTROY, destroy_rec, &q);
	for (size_t i = 0; rc == 0 && i < q.n; i++) {
		REPAIR(f, frc, fsck_del_key(f, MDT_DB_DESTROY, q.v[i].key, q.v[i].klen));
		rc = fsck_report(f, MDT_FSCK_RECORD, 0, frc, "deleted",
				 "destroy queue record with a key of %u bytes", q.v[i].klen);
	}
	fsck_acts_free(&q);
	if (rc == 0)
		rc = fsck_check_objrefs(f);
	/* After the object counters are right: a new layout takes ids from them. Its objects stay
	 * out of the object set, so that a stale orphan with one of their ids is moved away. */
	for (size_t i = 0; rc == 0 && i < f->nino; i++) {
		struct fino *fi = &f->ino[i];

		if (!S_ISREG(fi->mode) || (fi->flags & FI_LAYOUT) ||
		    ((fi->flags & FI_ORPHAN) && fi->links == 0))
			continue;
		REPAIR(f, frc, new_layout(f, fi));
		rc = fsck_report(f, MDT_FSCK_LAYOUT, fi->ino, frc,
				 "given a new layout (any data it had reads as zeros)",
				 "regular file without a layout");
	}
	return rc;
}
