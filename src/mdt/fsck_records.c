/*
 * loom fsck, the MDT half, after the entries and before the counts (see fsck.c): the records that
 * hang off an inode, each against the table: symlink targets (and a symlink's size), directory
 * defaults, extended attributes and Data-on-MDT bytes (their checksum). A record of an inode that
 * does not exist, or is of the wrong type, is stray.
 */
#include "mdt/fsck_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/crc.h"

static int symlink_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct fino *fi = k->mv_size == 8 ? fsck_find(f, mdt_get_be64(k->mv_data)) : NULL;
	struct mdt_inode in;
	int rc;

	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	if (!fi || !S_ISLNK(fi->mode))
		return fsck_acts_push(q, &a);
	fi->flags |= FI_TARGET;
	rc = mdt_inode_get(f->t, fi->ino, &in);
	if (rc)
		return rc;
	if (in.size != v->mv_size) {
		a.op = ACT_SIZE;
		a.a = fi->ino;
		a.b = in.size;
		a.c = v->mv_size;
		return fsck_acts_push(q, &a);
	}
	return 0;
}

static int dirdefault_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct fino *fi = k->mv_size == 8 ? fsck_find(f, mdt_get_be64(k->mv_data)) : NULL;
	struct loom_layout *l = NULL;
	struct lw_rd r;
	int rc;

	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	if (!fi || !S_ISDIR(fi->mode))
		return fsck_acts_push(q, &a);
	lw_rd_init(&r, v->mv_data, v->mv_size);
	rc = lw_layout_decode(&r, &l);
	if (rc == -ENOMEM)
		return rc;
	if (rc == 0 && (lw_rd_done(&r) != 0 || l->nobjs != 0))
		rc = -EPROTO;
	free(l);
	if (rc) {
		a.a = 1; /* does not decode */
		return fsck_acts_push(q, &a);
	}
	return 0;
}

/* Data-on-MDT bytes: of a regular file, and matching their checksum. */
static int dom_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct fino *fi = k->mv_size == 8 ? fsck_find(f, mdt_get_be64(k->mv_data)) : NULL;
	uint32_t crc;

	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	if (!fi || !S_ISREG(fi->mode))
		return fsck_acts_push(q, &a);
	if (v->mv_size < sizeof(crc))
		return fsck_acts_push(q, &a); /* not even a checksum: nothing to keep */
	memcpy(&crc, v->mv_data, sizeof(crc));
	if (crc32c(0, (const uint8_t *)v->mv_data + sizeof(crc), v->mv_size - sizeof(crc)) != crc) {
		a.a = 2; /* the bytes are the file's, damaged: reported, kept (they read as EIO) */
		return fsck_acts_push(q, &a);
	}
	return 0;
}

static int xattr_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	uint64_t ino = k->mv_size > 8 ? mdt_get_be64(k->mv_data) : 0;

	(void)v;
	if (ino && fsck_find(f, ino))
		return 0;
	/* One report per inode: its xattrs are one range of keys. */
	if (q->n && q->v[q->n - 1].a == ino && ino)
		return 0;
	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	a.a = ino;
	return fsck_acts_push(q, &a);
}

int fsck_pass_records(struct mdt_fsck *f)
{
	static const struct {
		enum mdt_db db;
		int (*fn)(struct mdt_fsck *, const MDB_val *, const MDB_val *, void *);
		const char *what;
	} dbs[] = {
		{ MDT_DB_SYMLINKS, symlink_rec, "symlink target" },
		{ MDT_DB_DIRDEFAULTS, dirdefault_rec, "default layout" },
		{ MDT_DB_XATTRS, xattr_rec, "extended attributes" },
		{ MDT_DB_DOM, dom_rec, "Data-on-MDT bytes" },
	};
	int rc = 0, frc;

	for (size_t d = 0; rc == 0 && d < ARRAY_SIZE(dbs); d++) {
		struct acts q = { 0 };

		rc = fsck_walk(f, dbs[d].db, dbs[d].fn, &q);
		for (size_t i = 0; rc == 0 && i < q.n; i++) {
			struct act *a = &q.v[i];
			uint64_t ino = a->klen >= 8 ? mdt_get_be64(a->key) : 0;

			if (a->op == ACT_SIZE) {
				snprintf(f->fix, sizeof(f->fix), "size %llu", (unsigned long long)a->c);
				REPAIR(f, frc, fsck_set_inode(f, a->a, IF_SIZE, a->c));
				rc = fsck_report(f, MDT_FSCK_SYMLINK, a->a, frc, f->fix,
						 "size %llu, its target is %llu bytes",
						 (unsigned long long)a->b, (unsigned long long)a->c);
			} else if (dbs[d].db == MDT_DB_XATTRS) {
				/* Every xattr of the inode; a key too short to name one alone. */
				if (a->klen > 8)
					REPAIR(f, frc, mdt_del_prefix(f->t, MDT_DB_XATTRS, a->key, 8));
				else
					REPAIR(f, frc, fsck_del_key(f, MDT_DB_XATTRS, a->key, a->klen));
				rc = fsck_report(f, MDT_FSCK_STRAY, 0, frc, "deleted",
						 "extended attributes of inode %llu, which does not exist",
						 (unsigned long long)a->a);
			} else if (a->a == 2) {
				rc = fsck_report(f, MDT_FSCK_RECORD, ino, NOFIX, "",
						 "its Data-on-MDT bytes do not match their checksum: reads of "
						 "them fail with EIO until the file is rewritten");
			} else if (a->a == 1) {
				REPAIR(f, frc, fsck_del_key(f, dbs[d].db, a->key, a->klen));
				rc = fsck_report(f, MDT_FSCK_RECORD, ino, frc,
						 "deleted (the file system default applies)",
						 "the directory's default layout does not decode");
			} else {
				struct fino *fi = a->klen == 8 ? fsck_find(f, ino) : NULL;
				REPAIR(f, frc, fsck_del_key(f, dbs[d].db, a->key, a->klen));
				rc = fsck_report(f, MDT_FSCK_STRAY, 0, frc, "deleted",
						 "%s of inode %llu, which %s", dbs[d].what,
						 (unsigned long long)ino,
						 fi ? (dbs[d].db == MDT_DB_SYMLINKS ? "is not a symlink" :
						       dbs[d].db == MDT_DB_DOM ? "is not a regular file"
									      : "is not a directory")
						    : "does not exist");
			}
		}
		fsck_acts_free(&q);
	}
	return rc;
}
