/*
 * The end of an inode's life.
 *
 * unlink (or rename over) that takes the last name of a file does not delete it: the file may be
 * open, and POSIX keeps an open file readable and writable. The inode goes into `orphans`; the
 * server, which knows the open handles, calls mdt_inode_release once the last one closes (or, for
 * every orphan, at start-up, when no handle survived the restart). Release moves the layout's
 * objects to the `destroy` queue, which the server drains by sending OST_DESTROY to each OST and
 * calling mdt_destroy_done; a crash at any point leaves the queue to be drained again, and
 * OST_DESTROY of a missing object is not an error.
 *
 * Directories have no data and no handles worth keeping: rmdir deletes them at once.
 */
#include "mdt/internal.h"

#include <errno.h>
#include <stdlib.h>

int mdt_orphan_add(struct mdt_txn *t, uint64_t ino)
{
	uint8_t key[8];

	mdt_put_be64(key, ino);
	return mdt_put(t, MDT_DB_ORPHANS, key, sizeof(key), "", 0);
}

/* Deletes a key that may be absent. */
static int del_if_any(struct mdt_txn *t, enum mdt_db db, uint64_t ino)
{
	uint8_t key[8];
	int rc;

	mdt_put_be64(key, ino);
	rc = mdt_del(t, db, key, sizeof(key));
	return rc == -ENOENT ? 0 : rc;
}

/* What every kind of inode leaves behind: xattrs, then the record itself. */
static int inode_delete(struct mdt_txn *t, uint64_t ino)
{
	uint8_t key[8];
	int rc;

	mdt_put_be64(key, ino);
	rc = mdt_del_prefix(t, MDT_DB_XATTRS, key, sizeof(key));
	if (rc == 0)
		rc = mdt_del(t, MDT_DB_INODES, key, sizeof(key));
	return rc;
}

int mdt_dir_destroy(struct mdt_txn *t, uint64_t ino)
{
	int rc = del_if_any(t, MDT_DB_DIRDEFAULTS, ino);

	if (rc == 0)
		rc = inode_delete(t, ino);
	return rc;
}

int mdt_inode_release(struct mdt_txn *t, uint64_t ino)
{
	struct loom_layout *l = NULL;
	struct mdt_inode in;
	int rc;

	rc = mdt_inode_get(t, ino, &in);
	if (rc == -ENOENT)
		return 0; /* released already */
	if (rc)
		return rc;
	if (in.nlink > 0)
		return 0; /* linked again, or never unlinked: still in the namespace */
	if (S_ISDIR(in.mode))
		return mdt_dir_destroy(t, ino);

	rc = mdt_layout_load(t, MDT_DB_LAYOUTS, ino, &l);
	if (rc == 0) {
		rc = mdt_destroy_queue(t, ino, l);
		if (rc == 0)
			rc = del_if_any(t, MDT_DB_LAYOUTS, ino);
		free(l);
	} else if (rc == -ENODATA) {
		rc = 0;
	}
	if (rc == 0)
		rc = del_if_any(t, MDT_DB_SYMLINKS, ino);
	if (rc == 0)
		rc = del_if_any(t, MDT_DB_DOM, ino);
	if (rc == 0)
		rc = mdt_trunc_forget(t, ino); /* its objects go whole */
	if (rc == 0)
		rc = inode_delete(t, ino);
	if (rc == 0)
		rc = del_if_any(t, MDT_DB_ORPHANS, ino);
	return rc;
}

int mdt_ino_keys(struct mdt_txn *t, enum mdt_db db, uint64_t after, uint64_t *inos, size_t max, size_t *n)
{
	uint8_t from[8];
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	*n = 0;
	if (after == UINT64_MAX)
		return 0;
	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[db], &cur));
	if (rc)
		return rc;
	mdt_put_be64(from, after + 1);
	k.mv_data = from;
	k.mv_size = sizeof(from);
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == MDB_SUCCESS && *n < max;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8) {
			mrc = MDB_CORRUPTED;
			break;
		}
		inos[(*n)++] = mdt_get_be64(k.mv_data);
	}
	mdb_cursor_close(cur);
	return mrc == MDB_SUCCESS || mrc == MDB_NOTFOUND ? 0 : mdt_errno(mrc);
}

int mdt_orphan_list(struct mdt_txn *t, uint64_t after, uint64_t *inos, size_t max, size_t *n)
{
	return mdt_ino_keys(t, MDT_DB_ORPHANS, after, inos, max, n);
}

int mdt_destroy_list(struct mdt_txn *t, struct loom_ostobj *out, size_t max, size_t *n)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	*n = 0;
	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_DESTROY], &cur));
	if (rc)
		return rc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS && *n < max;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 12) {
			mrc = MDB_CORRUPTED;
			break;
		}
		out[*n].ost_idx = mdt_get_be32(k.mv_data);
		out[*n].flags = 0;
		out[*n].objid = mdt_get_be64((const uint8_t *)k.mv_data + 4);
		(*n)++;
	}
	mdb_cursor_close(cur);
	return mrc == MDB_SUCCESS || mrc == MDB_NOTFOUND ? 0 : mdt_errno(mrc);
}

int mdt_destroy_list_ost(struct mdt_txn *t, uint32_t ost_idx, struct loom_ostobj *out, size_t max,
			 size_t *n)
{
	uint8_t start[4];
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	*n = 0;
	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_DESTROY], &cur));
	if (rc)
		return rc;
	/* Keys are OST index then object id, big-endian: this OST's entries are one range. */
	mdt_put_be32(start, ost_idx);
	k.mv_data = start;
	k.mv_size = sizeof(start);
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == MDB_SUCCESS && *n < max;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 12) {
			mrc = MDB_CORRUPTED;
			break;
		}
		if (mdt_get_be32(k.mv_data) != ost_idx)
			break;
		out[*n].ost_idx = ost_idx;
		out[*n].flags = 0;
		out[*n].objid = mdt_get_be64((const uint8_t *)k.mv_data + 4);
		(*n)++;
	}
	mdb_cursor_close(cur);
	return mrc == MDB_SUCCESS || mrc == MDB_NOTFOUND ? 0 : mdt_errno(mrc);
}

int mdt_destroy_done(struct mdt_txn *t, uint32_t ost_idx, uint64_t objid)
{
	uint8_t key[12];
	int rc;

	mdt_put_be32(key, ost_idx);
	mdt_put_be64(key + 4, objid);
	rc = mdt_del(t, MDT_DB_DESTROY, key, sizeof(key));
	return rc == -ENOENT ? 0 : rc; /* done twice (a resend) is still done */
}
