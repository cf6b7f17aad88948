/* The reply cache (store.h): key uuid[16] + request id BE64 -> struct reply_rec + body. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mdt/internal.h"

struct reply_rec {
	int64_t time_s; /* when it was written, for the sweep */
	int32_t status;
	uint32_t len;
};

static void reply_key(uint8_t key[24], const uint64_t uuid[2], uint64_t req_id)
{
	memcpy(key, uuid, 16);
	mdt_put_be64(key + 16, req_id);
}

int mdt_reply_put(struct mdt_txn *t, const uint64_t uuid[2], uint64_t req_id, int status,
		  const void *body, uint32_t len, int64_t now_s)
{
	struct reply_rec rec = { .time_s = now_s, .status = status, .len = len };
	uint8_t key[24], *val;
	int rc;

	val = malloc(sizeof(rec) + len);
	if (!val)
		return -ENOMEM;
	memcpy(val, &rec, sizeof(rec));
	if (len)
		memcpy(val + sizeof(rec), body, len);
	reply_key(key, uuid, req_id);
	rc = mdt_put(t, MDT_DB_REPLIES, key, sizeof(key), val, sizeof(rec) + len);
	free(val);
	return rc;
}

int mdt_reply_get(struct mdt_txn *t, const uint64_t uuid[2], uint64_t req_id, int *status,
		  void **body, uint32_t *len)
{
	struct reply_rec rec;
	uint8_t key[24];
	MDB_val v;
	int rc;

	reply_key(key, uuid, req_id);
	rc = mdt_get(t, MDT_DB_REPLIES, key, sizeof(key), &v);
	if (rc)
		return rc;
	if (v.mv_size < sizeof(rec))
		return -EIO;
	memcpy(&rec, v.mv_data, sizeof(rec));
	if (v.mv_size != sizeof(rec) + rec.len)
		return -EIO;
	*body = malloc(rec.len ? rec.len : 1);
	if (!*body)
		return -ENOMEM;
	memcpy(*body, (const uint8_t *)v.mv_data + sizeof(rec), rec.len);
	*status = rec.status;
	*len = rec.len;
	return 0;
}

int mdt_reply_sweep(struct mdt_txn *t, int64_t older_than_s, size_t max, size_t *removed)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	*removed = 0;
	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_REPLIES], &cur));
	if (rc)
		return rc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS && *removed < max;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct reply_rec rec;

		if (v.mv_size < sizeof(rec))
			continue;
		memcpy(&rec, v.mv_data, sizeof(rec));
		if (rec.time_s >= older_than_s)
			continue;
		mrc = mdb_cursor_del(cur, 0);
		if (mrc)
			break;
		(*removed)++;
	}
	mdb_cursor_close(cur);
	return mrc == MDB_SUCCESS || mrc == MDB_NOTFOUND ? 0 : mdt_errno(mrc);
}
