/*
 * loom fsck, the MDT half, passes 1 and 2 (see fsck.c): every inode record into the table, the
 * next_ino counter above them all, and the orphan list against the table.
 */
#include "mdt/fsck_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static bool type_ok(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFIFO: case S_IFSOCK: case S_IFCHR:
	case S_IFBLK:
		return true;
	default:
		return false;
	}
}

/* ---- pass 1: inodes, next_ino ---- */

static int inode_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct mdt_inode in;
	struct fino *fi;
	uint64_t ino;
	int rc;

	bool ok = k->mv_size == 8 && v->mv_size == sizeof(in);

	if (ok) {
		memcpy(&in, v->mv_data, sizeof(in));
		ok = type_ok(in.mode);
	}
	if (!ok) {
		a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
		memcpy(a.key, k->mv_data, a.klen);
		a.a = v->mv_size;
		return fsck_acts_push(q, &a);
	}
	ino = mdt_get_be64(k->mv_data);
	if (in.ino != ino) {
		a.op = ACT_INO_FIELD;
		a.a = ino;
		a.b = in.ino;
		rc = fsck_acts_push(q, &a);
		if (rc)
			return rc;
	}
	rc = fsck_grow((void **)&f->ino, &f->capino, f->nino + 1, sizeof(*f->ino));
	if (rc)
		return rc;
	fi = &f->ino[f->nino++];
	memset(fi, 0, sizeof(*fi));
	fi->ino = ino;
	fi->mode = in.mode;
	fi->nlink = in.nlink;
	if (S_ISDIR(in.mode))
		fi->parent = in.parent;
	f->maxino = MAX(f->maxino, ino);
	f->st.inodes++;
	f->st.dirs += S_ISDIR(in.mode);
	f->st.files += S_ISREG(in.mode);
	return 0;
}

int fsck_pass_inodes(struct mdt_fsck *f)
{
	struct acts q = { 0 };
	uint64_t next = 0;
	MDB_val v;
	int rc, frc;

	rc = fsck_walk(f, MDT_DB_INODES, inode_rec, &q);
	for (size_t i = 0; rc == 0 && i < q.n; i++) {
		struct act *a = &q.v[i];
		if (a->op == ACT_DEL) {
			REPAIR(f, frc, fsck_del_key(f, MDT_DB_INODES, a->key, a->klen));
			rc = fsck_report(f, MDT_FSCK_RECORD, a->klen == 8 ? mdt_get_be64(a->key) : 0, frc,
					 "deleted (names pointing at it are removed as dangling)",
					 "inode record of %llu bytes (key %u bytes) or of no known type",
					 (unsigned long long)a->a, a->klen);
		} else {
			REPAIR(f, frc, fsck_set_inode(f, a->a, IF_INO, a->a));
			rc = fsck_report(f, MDT_FSCK_RECORD, a->a, frc, "set", "inode record says ino %llu",
					 (unsigned long long)a->b);
		}
	}
	fsck_acts_free(&q);
	if (rc)
		return rc;

	f->have_root = fsck_find_dir(f, LOOM_ROOT_INO) != NULL;
	if (!f->have_root) {
		fsck_report(f, MDT_FSCK_RECORD, LOOM_ROOT_INO, NOFIX, NULL,
			    "the root directory is missing or not a directory: fsck cannot go on");
		return -EIO;
	}

	/* Inode numbers are never reused: the counter must be above every inode. */
	rc = mdt_get(f->t, MDT_DB_META, "next_ino", 8, &v);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc == 0 && v.mv_size == sizeof(next))
		memcpy(&next, v.mv_data, sizeof(next));
	if (next <= f->maxino) {
		uint64_t want = f->maxino + 1;
		snprintf(f->fix, sizeof(f->fix), "next_ino %llu", (unsigned long long)want);
		REPAIR(f, frc, mdt_put(f->t, MDT_DB_META, "next_ino", 8, &want, sizeof(want)));
		rc = fsck_report(f, MDT_FSCK_COUNTER, 0, frc, f->fix,
				 "next inode number %llu is not above inode %llu in use: a new file would "
				 "overwrite it", (unsigned long long)next, (unsigned long long)f->maxino);
	}
	return rc;
}

/* ---- pass 2: the orphan list ---- */

static int orphan_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct fino *fi = k->mv_size == 8 ? fsck_find(f, mdt_get_be64(k->mv_data)) : NULL;

	(void)v;
	if (fi) {
		fi->flags |= FI_ORPHAN;
		return 0;
	}
	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	return fsck_acts_push(q, &a);
}

int fsck_pass_orphans(struct mdt_fsck *f)
{
	struct acts q = { 0 };
	int rc, frc;

	rc = fsck_walk(f, MDT_DB_ORPHANS, orphan_rec, &q);
	for (size_t i = 0; rc == 0 && i < q.n; i++) {
		REPAIR(f, frc, fsck_del_key(f, MDT_DB_ORPHANS, q.v[i].key, q.v[i].klen));
		rc = fsck_report(f, MDT_FSCK_STRAY, 0, frc, "deleted",
				 "the orphan list names inode %llu, which does not exist",
				 q.v[i].klen == 8 ? (unsigned long long)mdt_get_be64(q.v[i].key) : 0ull);
	}
	fsck_acts_free(&q);
	return rc;
}
