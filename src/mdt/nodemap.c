/*
 * The nodemap, as Lustre's: client nodes that hold keys of their own (wire_auth.h, "Node keys"),
 * each with the generation of its key and what it may claim.
 *
 * Table `nodemap`: the name, NUL-padded to LW_NODE_NAME bytes -> struct lw_node_ent (its wire
 * image, name included). The MDS reads it whole at start and after each change (mds/nodemap.c).
 * A removed node stays as a record marked NODE_GONE, so that its name added again continues its
 * generations: a key revoked long ago never becomes good again.
 */
#include "mdt/internal.h"

#include <errno.h>
#include <stdlib.h>

#include "common/auth.h"

#define NODE_GONE 0x80000000u /* in the record's flags only: removed (never on the wire) */

static int node_key(const char *name, uint8_t key[LW_NODE_NAME])
{
	if (!memchr(name, '\0', LW_NODE_NAME) || loom_node_name_check(name))
		return -EINVAL;
	memset(key, 0, LW_NODE_NAME);
	memcpy(key, name, strlen(name));
	return 0;
}

static int ent_of(const MDB_val *v, struct lw_node_ent *out)
{
	if (v->mv_size != sizeof(*out))
		return -EIO;
	memcpy(out, v->mv_data, sizeof(*out));
	if (!memchr(out->name, '\0', sizeof(out->name)))
		return -EIO;
	return 0;
}

/* The record of name, removed or not. */
static int record_get(struct mdt_txn *t, const char *name, struct lw_node_ent *out)
{
	uint8_t key[LW_NODE_NAME];
	MDB_val v;
	int rc = node_key(name, key);

	if (rc == 0)
		rc = mdt_get(t, MDT_DB_NODEMAP, key, sizeof(key), &v);
	return rc ? rc : ent_of(&v, out);
}

int mdt_nodemap_get(struct mdt_txn *t, const char *name, struct lw_node_ent *out)
{
	int rc = record_get(t, name, out);

	return rc == 0 && (out->flags & NODE_GONE) ? -ENOENT : rc;
}

int mdt_nodemap_last_generation(struct mdt_txn *t, const char *name, uint32_t *generation)
{
	struct lw_node_ent e;
	int rc = record_get(t, name, &e);

	if (rc == 0)
		*generation = e.generation;
	return rc;
}

int mdt_nodemap_put(struct mdt_txn *t, const struct lw_node_ent *ent)
{
	uint8_t key[LW_NODE_NAME];
	struct lw_node_ent e = *ent;
	int rc = node_key(ent->name, key);

	if (rc)
		return rc;
	memcpy(e.name, key, sizeof(e.name)); /* one spelling: NULs after the name */
	return mdt_put(t, MDT_DB_NODEMAP, key, sizeof(key), &e, sizeof(e));
}

int mdt_nodemap_del(struct mdt_txn *t, const char *name)
{
	struct lw_node_ent e;
	int rc = mdt_nodemap_get(t, name, &e);

	if (rc)
		return rc;
	e.flags |= NODE_GONE;
	return mdt_nodemap_put(t, &e);
}

int mdt_nodemap_all(struct mdt_txn *t, struct lw_node_ent **out, uint32_t *n)
{
	struct lw_node_ent *all = NULL;
	uint32_t count = 0, cap = 0;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_NODEMAP], &cur));
	if (rc)
		return rc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS && rc == 0;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (count == cap) {
			struct lw_node_ent *more = realloc(all, (cap ? cap * 2 : 16) * sizeof(*all));

			if (!more) {
				rc = -ENOMEM;
				break;
			}
			all = more;
			cap = cap ? cap * 2 : 16;
		}
		rc = k.mv_size == LW_NODE_NAME ? ent_of(&v, &all[count]) : -EIO;
		if (rc == 0 && !(all[count].flags & NODE_GONE))
			count++;
	}
	mdb_cursor_close(cur);
	if (rc == 0 && mrc != MDB_NOTFOUND && mrc != MDB_SUCCESS)
		rc = mdt_errno(mrc);
	if (rc) {
		free(all);
		return rc;
	}
	*out = all;
	*n = count;
	return 0;
}
