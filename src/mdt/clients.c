/*
 * Clients that may hold locks or kept changes (store.h): table `clients`, key the client's uuid
 * (16 bytes), an empty value. Small: one entry per client that changed something since it
 * connected. Beside them, under the uuid and one byte 'I' (17 bytes, which the list skips), the
 * inode numbers handed a client ahead (struct client_inos): they stay while the client is away,
 * whether or not a start waits for it, until its session ends.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mdt/internal.h"

#define CLIENT_KEY_LEN 16
#define INOS_KEY_LEN   (CLIENT_KEY_LEN + 1)

static void inos_key(const uint64_t uuid[2], uint8_t key[INOS_KEY_LEN])
{
	memcpy(key, uuid, CLIENT_KEY_LEN);
	key[CLIENT_KEY_LEN] = 'I';
}

struct client_inos {
	uint64_t first;         /* the range handed out: first .. first + count - 1 */
	uint32_t count;
	uint32_t pad;
	uint8_t used[MDT_CLIENT_INOS_MAX / 8]; /* bit k: first + k was taken */
};

int mdt_client_put(struct mdt_txn *t, const uint64_t uuid[2])
{
	return mdt_put(t, MDT_DB_CLIENTS, uuid, CLIENT_KEY_LEN, "", 0);
}

/* How many of ci's numbers were not taken. */
static uint32_t inos_left(const struct client_inos *ci)
{
	uint32_t taken = 0;

	for (uint32_t k = 0; k < ci->count && k < MDT_CLIENT_INOS_MAX; k++)
		taken += (ci->used[k / 8] >> (k % 8)) & 1u;
	return ci->count - taken;
}

/* The client's range (*ci), 0, or -ENOENT. */
static int inos_get(struct mdt_txn *t, const uint8_t key[INOS_KEY_LEN], struct client_inos *ci)
{
	MDB_val v;
	int rc = mdt_get(t, MDT_DB_CLIENTS, key, INOS_KEY_LEN, &v);

	if (rc)
		return rc;
	/* LMDB's values are not aligned (the key before is 17 bytes): copied before read. */
	if (v.mv_size != sizeof(*ci))
		return -EIO;
	memcpy(ci, v.mv_data, sizeof(*ci));
	return ci->count > MDT_CLIENT_INOS_MAX ? -EIO : 0;
}

/* The client's range is forgotten: the room kept for what it left goes back (none for a record
 * that does not read as a range: the count at start skipped it too). */
static int inos_forget(struct mdt_txn *t, const uint8_t key[INOS_KEY_LEN])
{
	struct client_inos old;
	int rc = inos_get(t, key, &old);

	if (rc == -ENOENT)
		return 0;
	if (rc && rc != -EIO)
		return rc;
	if (rc == 0)
		mdt_txn_unpromise(t, inos_left(&old));
	return mdt_del(t, MDT_DB_CLIENTS, key, INOS_KEY_LEN);
}

int mdt_client_inos_grant(struct mdt_txn *t, const uint64_t uuid[2], uint32_t count, uint64_t *first)
{
	struct client_inos ci = { .count = count };
	uint8_t key[INOS_KEY_LEN];
	int rc;

	if (count == 0 || count > MDT_CLIENT_INOS_MAX)
		return -EINVAL;
	inos_key(uuid, key);
	rc = inos_forget(t, key);
	if (rc == 0)
		rc = mdt_txn_promise(t, count);
	if (rc == 0)
		rc = mdt_ino_alloc_range(t, count, &ci.first);
	if (rc == 0)
		rc = mdt_put(t, MDT_DB_CLIENTS, key, sizeof(key), &ci, sizeof(ci));
	if (rc == 0)
		*first = ci.first;
	return rc;
}

int mdt_client_ino_take(struct mdt_txn *t, const uint64_t uuid[2], uint64_t ino)
{
	struct client_inos ci;
	uint8_t key[INOS_KEY_LEN];
	uint64_t k;
	int rc;

	inos_key(uuid, key);
	rc = inos_get(t, key, &ci);
	if (rc == -ENOENT || rc == -EIO)
		return -EINVAL; /* never handed any, gone (evicted, said goodbye), or unreadable */
	if (rc)
		return rc;
	k = ino - ci.first;
	if (ino < ci.first || k >= ci.count || (ci.used[k / 8] & (1u << (k % 8))))
		return -EINVAL;
	ci.used[k / 8] |= (uint8_t)(1u << (k % 8));
	rc = mdt_put(t, MDT_DB_CLIENTS, key, sizeof(key), &ci, sizeof(ci));
	if (rc == 0)
		mdt_txn_took_promised(t);
	return rc;
}

int mdt_client_inos_del(struct mdt_txn *t, const uint64_t uuid[2])
{
	uint8_t key[INOS_KEY_LEN];

	inos_key(uuid, key);
	return inos_forget(t, key);
}

int mdt_client_inos_load(struct mdt_store *s, struct mdt_txn *t)
{
	uint64_t left = 0;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	rc = mdt_errno(mdb_cursor_open(t->mdb, s->dbi[MDT_DB_CLIENTS], &cur));
	if (rc)
		return rc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct client_inos ci;

		if (k.mv_size != INOS_KEY_LEN || v.mv_size != sizeof(ci))
			continue;
		memcpy(&ci, v.mv_data, sizeof(ci));
		if (ci.count <= MDT_CLIENT_INOS_MAX)
			left += inos_left(&ci);
	}
	mdb_cursor_close(cur);
	if (mrc != MDB_NOTFOUND)
		return mdt_errno(mrc);
	atomic_store(&s->promised, (int64_t)left);
	return 0;
}

int mdt_client_del(struct mdt_txn *t, const uint64_t uuid[2])
{
	int rc = mdt_del(t, MDT_DB_CLIENTS, uuid, CLIENT_KEY_LEN);

	return rc == -ENOENT ? 0 : rc;
}

/* The uuids of the table's keys of len bytes (16: listed clients; 17: ranges, tagged 'I'). */
static int uuids_of(struct mdt_txn *t, size_t len, uint64_t (**uuids)[2], uint32_t *n)
{
	uint64_t (*out)[2] = NULL;
	uint32_t count = 0, cap = 0;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	*uuids = NULL;
	*n = 0;
	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_CLIENTS], &cur));
	if (rc)
		return rc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != len || (len == INOS_KEY_LEN && ((const uint8_t *)k.mv_data)[CLIENT_KEY_LEN] != 'I'))
			continue;
		if (count == cap) {
			uint32_t ncap = cap ? cap * 2 : 16;
			uint64_t (*p)[2] = realloc(out, ncap * sizeof(*p));

			if (!p) {
				rc = -ENOMEM;
				break;
			}
			out = p;
			cap = ncap;
		}
		memcpy(out[count++], k.mv_data, CLIENT_KEY_LEN);
	}
	mdb_cursor_close(cur);
	if (rc == 0 && mrc != MDB_NOTFOUND && mrc != MDB_SUCCESS)
		rc = mdt_errno(mrc);
	if (rc) {
		free(out);
		return rc;
	}
	*uuids = out;
	*n = count;
	return 0;
}

int mdt_clients_list(struct mdt_txn *t, uint64_t (**uuids)[2], uint32_t *n)
{
	return uuids_of(t, CLIENT_KEY_LEN, uuids, n);
}

int mdt_client_inos_owners(struct mdt_txn *t, uint64_t (**uuids)[2], uint32_t *n)
{
	return uuids_of(t, INOS_KEY_LEN, uuids, n);
}
