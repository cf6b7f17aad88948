/*
 * Truncations whose objects are still to be cut: `truncs`, ino BE64 + epoch BE32 -> u64 cut.
 *
 * The MDS keeps a file's size; its bytes are on the objects. A size change that may leave bytes
 * on the objects past the new end (a shrink, and a growth over what an earlier writer left past
 * the old end) advances the inode's trunc_epoch and records here that every object is to be cut
 * to what it holds of a file of `cut` bytes (min(old size, new size)). The MDS then sends
 * OST_PUNCH with the epoch to each object and deletes the entry. The entry is written in the
 * transaction of the size change, so a crash leaves the work recorded, and the objects learn the
 * epoch from the punch: a write made in an older epoch is refused from then on, and one made in
 * the new epoch waits for the punch (protocol.md, OST_WRITE). One inode's truncations are cut in
 * epoch order: a later cut never passes an earlier one.
 */
#include "mdt/internal.h"

#include <errno.h>

#define TRUNC_KEY 12

static void trunc_key(uint8_t key[TRUNC_KEY], uint64_t ino, uint32_t epoch)
{
	mdt_put_be64(key, ino);
	mdt_put_be32(key + 8, epoch);
}

int mdt_trunc_queue(struct mdt_txn *t, struct mdt_inode *in, uint64_t cut)
{
	uint8_t key[TRUNC_KEY];

	in->trunc_epoch++;
	trunc_key(key, in->ino, in->trunc_epoch);
	return mdt_put(t, MDT_DB_TRUNCS, key, sizeof(key), &cut, sizeof(cut));
}

bool mdt_trunc_pending(struct mdt_txn *t, uint64_t ino, uint32_t epoch)
{
	uint8_t key[TRUNC_KEY];
	MDB_val v;

	trunc_key(key, ino, epoch);
	return mdt_get(t, MDT_DB_TRUNCS, key, sizeof(key), &v) == 0;
}

int mdt_trunc_list(struct mdt_txn *t, struct mdt_trunc *out, size_t max, size_t *n)
{
	MDB_cursor *cur;
	MDB_val k, v;
	uint64_t last = 0;
	int rc, mrc;

	*n = 0;
	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_TRUNCS], &cur));
	if (rc)
		return rc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS && *n < max;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		uint64_t ino;

		if (k.mv_size != TRUNC_KEY || v.mv_size != sizeof(uint64_t)) {
			mrc = MDB_CORRUPTED;
			break;
		}
		ino = mdt_get_be64(k.mv_data);
		/* Keys sort by inode, then epoch: the first of an inode is the one to cut now. */
		if (*n > 0 && ino == last)
			continue;
		last = ino;
		out[*n].ino = ino;
		out[*n].epoch = mdt_get_be32((const uint8_t *)k.mv_data + 8);
		memcpy(&out[*n].cut, v.mv_data, sizeof(out[*n].cut));
		(*n)++;
	}
	mdb_cursor_close(cur);
	return mrc == MDB_SUCCESS || mrc == MDB_NOTFOUND ? 0 : mdt_errno(mrc);
}

int mdt_trunc_done(struct mdt_txn *t, uint64_t ino, uint32_t epoch)
{
	uint8_t key[TRUNC_KEY];
	int rc;

	trunc_key(key, ino, epoch);
	rc = mdt_del(t, MDT_DB_TRUNCS, key, sizeof(key));
	return rc == -ENOENT ? 0 : rc; /* done twice is still done */
}

int mdt_trunc_forget(struct mdt_txn *t, uint64_t ino)
{
	uint8_t key[8];

	mdt_put_be64(key, ino);
	return mdt_del_prefix(t, MDT_DB_TRUNCS, key, sizeof(key));
}
