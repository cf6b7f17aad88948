/*
 * Data-on-MDT: the first bytes of a file whose layout has a dom_size live here, in the `dom`
 * table (ino BE64 -> crc32c u32 + the bytes), so that opening a small file returns its data with
 * the reply and its bytes never touch an OST.
 *
 * The stored value holds bytes [0, len) of the file, len <= dom_size; the file's bytes between
 * len and min(size, dom_size) are zeros (a hole), as a sparse file's are. LMDB keeps no checksum
 * of its own, so each value carries the crc32c of its bytes, checked on every read: a value that
 * does not match reads as -EIO, never as data.
 *
 * Writes come with a client's size report (MDS_CLOSE, MDS_SIZE_UPDATE) and commit in the same
 * transaction; truncation cuts the value in the transaction that sets the size; release deletes
 * it with the inode.
 */
#include "mdt/internal.h"

#include <errno.h>
#include <stdlib.h>

#include "common/crc.h"

#define DOM_HDR sizeof(uint32_t) /* the crc32c in front of the bytes */

int mdt_dom_peek(struct mdt_txn *t, uint64_t ino, const void **data, uint32_t *len)
{
	uint8_t key[8];
	uint32_t crc;
	MDB_val v;
	int rc;

	*data = NULL;
	*len = 0;
	mdt_put_be64(key, ino);
	rc = mdt_get(t, MDT_DB_DOM, key, sizeof(key), &v);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (v.mv_size < DOM_HDR || v.mv_size - DOM_HDR > LOOM_DOM_MAX)
		return -EIO;
	memcpy(&crc, v.mv_data, sizeof(crc));
	if (crc32c(0, (const uint8_t *)v.mv_data + DOM_HDR, v.mv_size - DOM_HDR) != crc)
		return -EIO;
	*data = (const uint8_t *)v.mv_data + DOM_HDR;
	*len = (uint32_t)(v.mv_size - DOM_HDR);
	return 0;
}

/* Stores bytes [0, len) of ino's Data-on-MDT part (len 0 deletes it). */
static int dom_store(struct mdt_txn *t, uint64_t ino, const uint8_t *bytes, uint32_t len)
{
	uint8_t key[8];
	uint8_t *val;
	uint32_t crc;
	int rc;

	mdt_put_be64(key, ino);
	if (len == 0) {
		rc = mdt_del(t, MDT_DB_DOM, key, sizeof(key));
		return rc == -ENOENT ? 0 : rc;
	}
	val = malloc(DOM_HDR + len);
	if (!val)
		return -ENOMEM;
	crc = crc32c(0, bytes, len);
	memcpy(val, &crc, sizeof(crc));
	memcpy(val + DOM_HDR, bytes, len);
	rc = mdt_put(t, MDT_DB_DOM, key, sizeof(key), val, DOM_HDR + len);
	free(val);
	return rc;
}

/* The file's Data-on-MDT size; -EINVAL for a file without one (or not a regular file). */
static int dom_size_of(struct mdt_txn *t, uint64_t ino, uint32_t *dom_size)
{
	struct loom_layout *l;
	int rc = mdt_layout_load(t, MDT_DB_LAYOUTS, ino, &l);

	if (rc == -ENODATA)
		return -EINVAL;
	if (rc)
		return rc;
	*dom_size = l->dom_size;
	free(l);
	return *dom_size ? 0 : -EINVAL;
}

int mdt_dom_read(struct mdt_txn *t, uint64_t ino, const void **data, uint32_t *len)
{
	struct mdt_inode in;
	uint32_t dom_size;
	int rc = mdt_inode_get(t, ino, &in);

	if (rc)
		return rc;
	if (!S_ISREG(in.mode))
		return -EINVAL;
	rc = dom_size_of(t, ino, &dom_size);
	return rc ? rc : mdt_dom_peek(t, ino, data, len);
}

int mdt_dom_write_parts(struct mdt_txn *t, uint64_t ino, const struct mdt_dom_extent *ext, uint32_t n)
{
	const void *old;
	uint32_t dom_size, old_len, new_len;
	struct mdt_inode in;
	uint8_t *buf;
	int rc;

	rc = mdt_inode_get(t, ino, &in);
	if (rc)
		return rc;
	if (!S_ISREG(in.mode))
		return -EINVAL;
	rc = dom_size_of(t, ino, &dom_size);
	if (rc)
		return rc;
	new_len = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (ext[i].off > dom_size || ext[i].len > dom_size - ext[i].off)
			return -EINVAL;
		if (ext[i].len && ext[i].off + ext[i].len > new_len)
			new_len = (uint32_t)(ext[i].off + ext[i].len);
	}
	if (new_len == 0)
		return 0;
	rc = mdt_dom_peek(t, ino, &old, &old_len);
	if (rc == -EIO)
		old_len = 0; /* damaged: what is written now is all that can be trusted */
	else if (rc)
		return rc;
	if (old_len > new_len)
		new_len = old_len;
	/* Bytes beyond the stored ones are growth; rewriting stored ones is not (LMDB copies their
	 * pages, and frees the old ones for the next commit: the reserve covers that). */
	if (new_len > old_len) {
		rc = mdt_txn_grow(t, (uint64_t)(new_len - old_len) + (old_len ? 0 : MDT_GROW_RECORD));
		if (rc)
			return rc;
	}
	buf = calloc(1, new_len);
	if (!buf)
		return -ENOMEM;
	if (old_len)
		memcpy(buf, old, old_len);
	/* Only the bytes each part names: what lies between parts stays as it was. */
	for (uint32_t i = 0; i < n; i++)
		if (ext[i].len)
			memcpy(buf + ext[i].off, ext[i].data, ext[i].len);
	rc = dom_store(t, ino, buf, new_len);
	free(buf);
	return rc;
}

int mdt_dom_write(struct mdt_txn *t, uint64_t ino, uint64_t off, const void *data, uint32_t len)
{
	struct mdt_dom_extent e = { .off = off, .len = len, .data = data };

	return mdt_dom_write_parts(t, ino, &e, 1);
}

int mdt_dom_cut(struct mdt_txn *t, uint64_t ino, uint64_t size)
{
	const void *old;
	uint32_t old_len;
	int rc = mdt_dom_peek(t, ino, &old, &old_len);

	if (rc == -EIO)
		return dom_store(t, ino, NULL, 0);
	if (rc || size >= old_len)
		return rc;
	if (size == 0)
		return dom_store(t, ino, NULL, 0);
	{
		/* The value is copied out first: it lives in LMDB's map, which the put rewrites. */
		uint8_t *keep = malloc(size);
		if (!keep)
			return -ENOMEM;
		memcpy(keep, old, size);
		rc = dom_store(t, ino, keep, (uint32_t)size);
		free(keep);
	}
	return rc;
}
