/*
 * Clients that may hold locks (store.h): table `clients`, key the client's uuid (16 bytes), an
 * empty value. Small: one entry per client that has locked since it connected.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mdt/internal.h"

#define CLIENT_KEY_LEN 16

int mdt_client_put(struct mdt_txn *t, const uint64_t uuid[2])
{
	return mdt_put(t, MDT_DB_CLIENTS, uuid, CLIENT_KEY_LEN, "", 0);
}

int mdt_client_del(struct mdt_txn *t, const uint64_t uuid[2])
{
	int rc = mdt_del(t, MDT_DB_CLIENTS, uuid, CLIENT_KEY_LEN);

	return rc == -ENOENT ? 0 : rc;
}

int mdt_clients_list(struct mdt_txn *t, uint64_t (**uuids)[2], uint32_t *n)
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
		if (k.mv_size != CLIENT_KEY_LEN)
			continue; /* not a uuid: nobody to wait for */
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
