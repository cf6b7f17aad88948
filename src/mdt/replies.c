/*
 * The reply cache (store.h). Two tables:
 *   replies:    uuid[16] + request id BE64          -> struct reply_rec + body
 *   reply_ages: written-at BE64 + uuid[16] + id BE64 -> (nothing)
 * The second orders entries by age, so the sweep removes the oldest ones without walking the
 * young ones (a busy MDS writes one entry per change).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mdt/internal.h"

struct reply_rec {
	int64_t time_s;  /* when it was written, for the sweep */
	int32_t status;
	uint32_t len;
	uint16_t opcode; /* of the request: a resend with another opcode is not this request */
	uint16_t pad[3];
};

#define REPLY_KEY_LEN 24
#define AGE_KEY_LEN (8 + REPLY_KEY_LEN)

static void reply_key(uint8_t key[REPLY_KEY_LEN], const uint64_t uuid[2], uint64_t req_id)
{
	memcpy(key, uuid, 16);
	mdt_put_be64(key + 16, req_id);
}

static void age_key(uint8_t key[AGE_KEY_LEN], int64_t time_s, const uint8_t rkey[REPLY_KEY_LEN])
{
	mdt_put_be64(key, time_s < 0 ? 0 : (uint64_t)time_s);
	memcpy(key + 8, rkey, REPLY_KEY_LEN);
}

int mdt_reply_put(struct mdt_txn *t, const uint64_t uuid[2], uint64_t req_id, uint16_t opcode,
		  int status, const void *body, uint32_t len, int64_t now_s)
{
	struct reply_rec rec = { .time_s = now_s, .status = status, .len = len, .opcode = opcode };
	uint8_t key[REPLY_KEY_LEN], akey[AGE_KEY_LEN], *val;
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
	if (rc == 0) {
		age_key(akey, now_s, key);
		rc = mdt_put(t, MDT_DB_REPLY_AGES, akey, sizeof(akey), "", 0);
	}
	return rc;
}

int mdt_reply_get(struct mdt_txn *t, const uint64_t uuid[2], uint64_t req_id, uint16_t opcode,
		  int *status, void **body, uint32_t *len)
{
	struct reply_rec rec;
	uint8_t key[REPLY_KEY_LEN];
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
	if (rec.opcode != opcode)
		return -ENOENT;
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
	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_REPLY_AGES], &cur));
	if (rc)
		return rc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS && *removed < max;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		const uint8_t *akey = k.mv_data;
		int64_t time_s;
		MDB_val rv;

		if (k.mv_size != AGE_KEY_LEN) {
			rc = mdt_redo_note(t, LW_REPL_DEL, MDT_DB_REPLY_AGES, k.mv_data, k.mv_size, NULL, 0);
			if (rc)
				break;
			mrc = mdb_cursor_del(cur, 0);
			if (mrc)
				break;
			continue;
		}
		time_s = (int64_t)mdt_get_be64(akey);
		if (time_s >= older_than_s)
			break;
		/* Noted before the delete below writes (k points into the map until then). */
		rc = mdt_redo_note(t, LW_REPL_DEL, MDT_DB_REPLY_AGES, k.mv_data, k.mv_size, NULL, 0);
		if (rc)
			break;
		/* The entry may have been written again since (a request run twice in one batch):
		 * only the record of this age goes. */
		if (mdt_get(t, MDT_DB_REPLIES, akey + 8, REPLY_KEY_LEN, &rv) == 0) {
			struct reply_rec rec;

			if (rv.mv_size < sizeof(rec) ||
			    (memcpy(&rec, rv.mv_data, sizeof(rec)), rec.time_s == time_s)) {
				rc = mdt_del(t, MDT_DB_REPLIES, akey + 8, REPLY_KEY_LEN);
				if (rc && rc != -ENOENT)
					break;
				rc = 0;
			}
		}
		mrc = mdb_cursor_del(cur, 0);
		if (mrc)
			break;
		(*removed)++;
	}
	mdb_cursor_close(cur);
	if (rc)
		return rc;
	return mrc == MDB_SUCCESS || mrc == MDB_NOTFOUND ? 0 : mdt_errno(mrc);
}
