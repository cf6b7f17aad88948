/*
 * OST pools, as Lustre's: named sets of OSTs that a layout may name (`setstripe -p POOL`), so that
 * its files are striped only over the pool's OSTs.
 *
 * Table `pools`: the name, NUL-padded to LOOM_POOL_NAME_MAX + 1 bytes -> u32 count, then count
 * OST indices (u32, ascending). A pool may be empty; an OST may be in several pools; a pool
 * names OSTs the MDT knows. A layout that names a pool which no longer exists is striped over
 * every OST, as Lustre does.
 */
#include "mdt/internal.h"

#include <errno.h>
#include <stdlib.h>

#define POOL_KEY_LEN (LOOM_POOL_NAME_MAX + 1)

/* Letters, digits, '_' and '-', as Lustre accepts in a pool name. */
int mdt_pool_name_check(const char *name)
{
	size_t n = strnlen(name, POOL_KEY_LEN);

	if (n == 0 || n > LOOM_POOL_NAME_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '-'))
			return -EINVAL;
	}
	return 0;
}

static void pool_key(const char *name, uint8_t key[POOL_KEY_LEN])
{
	memset(key, 0, POOL_KEY_LEN);
	memcpy(key, name, strnlen(name, LOOM_POOL_NAME_MAX));
}

int mdt_pool_members(struct mdt_txn *t, const char *name, uint32_t **osts, uint32_t *n)
{
	uint8_t key[POOL_KEY_LEN];
	uint32_t count;
	MDB_val v;
	int rc;

	*osts = NULL;
	*n = 0;
	pool_key(name, key);
	rc = mdt_get(t, MDT_DB_POOLS, key, sizeof(key), &v);
	if (rc)
		return rc;
	if (v.mv_size < 4)
		return -EIO;
	memcpy(&count, v.mv_data, 4);
	if (v.mv_size != 4 + (size_t)count * 4)
		return -EIO;
	*osts = malloc(count ? count * 4 : 1);
	if (!*osts)
		return -ENOMEM;
	memcpy(*osts, (const uint8_t *)v.mv_data + 4, (size_t)count * 4);
	*n = count;
	return 0;
}

bool mdt_pool_exists(struct mdt_txn *t, const char *name)
{
	uint8_t key[POOL_KEY_LEN];
	MDB_val v;

	pool_key(name, key);
	return mdt_get(t, MDT_DB_POOLS, key, sizeof(key), &v) == 0;
}

static int pool_put(struct mdt_txn *t, const char *name, const uint32_t *osts, uint32_t n)
{
	uint8_t key[POOL_KEY_LEN];
	uint8_t *val = malloc(4 + (size_t)n * 4);
	int rc;

	if (!val)
		return -ENOMEM;
	memcpy(val, &n, 4);
	if (n)
		memcpy(val + 4, osts, (size_t)n * 4);
	pool_key(name, key);
	rc = mdt_put(t, MDT_DB_POOLS, key, sizeof(key), val, 4 + (size_t)n * 4);
	free(val);
	return rc;
}

int mdt_pool_new(struct mdt_txn *t, const char *name)
{
	int rc = mdt_pool_name_check(name);

	if (rc)
		return rc;
	if (mdt_pool_exists(t, name))
		return -EEXIST;
	rc = mdt_txn_grow(t, MDT_GROW_RECORD);
	return rc ? rc : pool_put(t, name, NULL, 0);
}

int mdt_pool_destroy(struct mdt_txn *t, const char *name)
{
	uint8_t key[POOL_KEY_LEN];
	uint32_t *osts, n;
	int rc = mdt_pool_members(t, name, &osts, &n);

	if (rc)
		return rc;
	free(osts);
	if (n)
		return -ENOTEMPTY; /* as lctl pool_destroy: remove the OSTs first */
	pool_key(name, key);
	return mdt_del(t, MDT_DB_POOLS, key, sizeof(key));
}

int mdt_pool_add(struct mdt_txn *t, const char *name, uint32_t idx)
{
	uint32_t *osts, *more, n, at = 0;
	int rc;

	if (!mdt_ost_known(t->s, idx))
		return -ENODEV;
	rc = mdt_pool_members(t, name, &osts, &n);
	if (rc)
		return rc;
	while (at < n && osts[at] < idx)
		at++;
	rc = at < n && osts[at] == idx ? -EEXIST : mdt_txn_grow(t, MDT_GROW_BYTE * 4);
	if (rc) {
		free(osts);
		return rc;
	}
	more = realloc(osts, ((size_t)n + 1) * 4);
	if (!more) {
		free(osts);
		return -ENOMEM;
	}
	memmove(more + at + 1, more + at, (size_t)(n - at) * 4);
	more[at] = idx;
	rc = pool_put(t, name, more, n + 1);
	free(more);
	return rc;
}

int mdt_pool_remove(struct mdt_txn *t, const char *name, uint32_t idx)
{
	uint32_t *osts, n, at = 0;
	int rc = mdt_pool_members(t, name, &osts, &n);

	if (rc)
		return rc;
	while (at < n && osts[at] != idx)
		at++;
	if (at == n) {
		free(osts);
		return -ENOENT;
	}
	memmove(osts + at, osts + at + 1, (size_t)(n - at - 1) * 4);
	rc = pool_put(t, name, osts, n - 1);
	free(osts);
	return rc;
}

int mdt_pool_each(struct mdt_txn *t, int (*fn)(const char *name, const uint32_t *osts, uint32_t n, void *arg),
		  void *arg)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_POOLS], &cur));
	if (rc)
		return rc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS && rc == 0;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		char name[POOL_KEY_LEN];
		uint32_t count, *osts;

		if (k.mv_size != POOL_KEY_LEN || v.mv_size < 4) {
			rc = -EIO;
			break;
		}
		memcpy(&count, v.mv_data, 4);
		if (v.mv_size != 4 + (size_t)count * 4) {
			rc = -EIO;
			break;
		}
		memcpy(name, k.mv_data, POOL_KEY_LEN);
		name[LOOM_POOL_NAME_MAX] = '\0';
		osts = malloc(count ? count * 4 : 1);
		if (!osts) {
			rc = -ENOMEM;
			break;
		}
		memcpy(osts, (const uint8_t *)v.mv_data + 4, (size_t)count * 4);
		rc = fn(name, osts, count, arg);
		free(osts);
	}
	mdb_cursor_close(cur);
	if (rc)
		return rc;
	return mrc == MDB_NOTFOUND ? 0 : mdt_errno(mrc);
}
