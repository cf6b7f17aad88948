/*
 * The end of an OST's life: a replacement takes a lost OST's index, a removal retires an index.
 *
 * - Replacing (`loom-oss --format --index N --replace`, MDS_OST_REPLACE): a new, empty OST takes
 *   index N from an OST that is lost for good. Its record keeps the index, the object counter and
 *   what an administrator said (deactivated), and takes the new uuid; table `ost_lost` records
 *   that every object with an id below the counter's value then was the old OST's. Such an object
 *   missing on the new OST is lost (its OSS answers EIO, fsck lists it), never a hole.
 * - Removing (`loom ost remove`, MDS_OST_REMOVE): only an OST no layout names (unless forced). The
 *   record stays, marked MDT_OST_REMOVED, so that the index is never handed out again and the
 *   OST is refused if its OSS comes back; it leaves the in-memory table (df, allocation), its
 *   pools and the destroy queue. A replacement may take the index again.
 */
#include "mdt/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

int mdt_ost_lost_below(struct mdt_txn *t, uint32_t idx, uint64_t *lost_below)
{
	struct mdt_ost_lost_rec lr;
	uint8_t key[4];
	MDB_val v;
	int rc;

	mdt_put_be32(key, idx);
	rc = mdt_get(t, MDT_DB_OST_LOST, key, sizeof(key), &v);
	if (rc == -ENOENT) {
		*lost_below = 0;
		return 0;
	}
	if (rc)
		return rc;
	if (v.mv_size != sizeof(lr))
		return -EIO;
	memcpy(&lr, v.mv_data, sizeof(lr));
	*lost_below = lr.lost_below;
	return 0;
}

struct uuid_scan {
	const char *uuid;
	uint32_t found_idx;
};

static int uuid_scan_one(const struct mdt_ost_rec *rec, void *arg)
{
	struct uuid_scan *sc = arg;

	if (strncmp(rec->uuid, sc->uuid, sizeof(rec->uuid)) == 0) {
		sc->found_idx = rec->idx;
		return 1;
	}
	return 0;
}

int mdt_ost_replace(struct mdt_txn *t, const struct lw_ost_register_req *req, uint64_t now_ns,
		    struct mdt_ost_replaced *out)
{
	struct uuid_scan sc = { .uuid = req->uuid, .found_idx = UINT32_MAX };
	struct mdt_ost_lost_rec lr = { 0 };
	struct mdt_ost_rec rec;
	const struct mdt_ost *e;
	uint8_t key[4];
	uint32_t idx = req->want_idx;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!memchr(req->fsname, '\0', sizeof(req->fsname)) || strcmp(req->fsname, t->s->fsname) != 0)
		return -EINVAL;
	if (!req->host[0] || !memchr(req->host, '\0', sizeof(req->host)) || !req->uuid[0] ||
	    !memchr(req->uuid, '\0', sizeof(req->uuid)) || idx > MDT_MAX_OST_IDX)
		return -EINVAL; /* a replacement names the index it takes */
	rc = mdt_ost_rec_each(t, uuid_scan_one, &sc);
	if (rc < 0)
		return rc;
	if (sc.found_idx != UINT32_MAX && sc.found_idx != idx)
		return -EINVAL; /* this OST has another index already */
	rc = mdt_ost_rec_get(t, idx, &rec);
	if (rc == -ENOENT) {
		/* Nobody held the index: nothing to lose, a plain first registration. */
		return mdt_ost_register(t, req, now_ns, &out->idx);
	}
	if (rc)
		return rc;
	mdt_put_be32(key, idx);
	if (sc.found_idx == idx) {
		/* Taken over already (a resend, or the OSS restarted before it wrote down that the
		 * MDS said yes): the same answer, and a registration. */
		rc = mdt_ost_lost_below(t, idx, &out->lost_below);
		if (rc == 0)
			rc = mdt_ost_register(t, req, now_ns, &out->idx);
		return rc;
	}
	e = mdt_ost_entry(t->s, idx);
	if (e && !(e->state & LW_TGT_INACTIVE)) {
		/* In service: its OSS is alive and heard from. */
		if (e->heard)
			return -EBUSY;
		/* Not heard from yet since this MDS started: it may yet come back within the expiry
		 * period; ask again then. Unless an administrator deactivated it: Lustre's procedure
		 * (deactivate, then format with --replace) says it is not coming back. */
		if (!(e->state & LW_TGT_DEACTIVATED))
			return -EAGAIN;
	}
	snprintf(out->old_uuid, sizeof(out->old_uuid), "%.*s", (int)sizeof(rec.uuid) - 1, rec.uuid);
	out->was_removed = (rec.state & MDT_OST_REMOVED) != 0;
	lr.lost_below = rec.next_objid;
	lr.replaced_at = (uint64_t)clock_real().tv_sec;
	memcpy(lr.old_uuid, rec.uuid, sizeof(lr.old_uuid));
	rc = mdt_put(t, MDT_DB_OST_LOST, key, sizeof(key), &lr, sizeof(lr));
	if (rc == 0)
		rc = mdt_mirror_ost_lost(t, idx, lr.lost_below, &out->mirrored);
	if (rc)
		return rc;
	memset(rec.uuid, 0, sizeof(rec.uuid));
	memcpy(rec.uuid, req->uuid, strlen(req->uuid));
	memset(rec.host, 0, sizeof(rec.host));
	memcpy(rec.host, req->host, strlen(req->host));
	rec.port = req->port;
	rec.state = (req->sf.state & (LW_TGT_READONLY | LW_TGT_NOCREATE)) | (rec.state & LW_TGT_ADMIN_STATE);
	rec.sf = req->sf;
	rc = mdt_ost_rec_put(t, &rec);
	if (rc == 0)
		rc = mdt_ost_note_registered(t, idx, &req->sf, now_ns);
	if (rc == 0) {
		out->idx = idx;
		out->lost_below = lr.lost_below;
		out->replaced = true;
	}
	return rc;
}

/* ---- removal ---- */

int mdt_ost_usage(struct mdt_txn *t, uint32_t idx, uint64_t *files, uint64_t *objects)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	*files = *objects = 0;
	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_LAYOUTS], &cur));
	if (rc)
		return rc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct loom_layout *l;
		struct lw_rd r;
		uint64_t here = 0;

		lw_rd_init(&r, v.mv_data, v.mv_size);
		if (lw_layout_decode(&r, &l) != 0)
			continue; /* fsck's business (a damaged record) */
		for (uint32_t i = 0; i < l->nobjs; i++)
			here += l->objs[i].ost_idx == idx;
		free(l);
		*objects += here;
		*files += here != 0;
	}
	mdb_cursor_close(cur);
	return mrc == MDB_NOTFOUND ? 0 : mdt_errno(mrc);
}

struct pool_names {
	char (*names)[LOOM_POOL_NAME_MAX + 1];
	uint32_t n, cap;
	uint32_t idx;
};

static int pool_with_ost(const char *name, const uint32_t *osts, uint32_t n, void *arg)
{
	struct pool_names *pn = arg;
	bool in = false;

	for (uint32_t i = 0; i < n && !in; i++)
		in = osts[i] == pn->idx;
	if (!in)
		return 0;
	if (pn->n == pn->cap) {
		uint32_t cap = pn->cap ? pn->cap * 2 : 8;
		void *p = realloc(pn->names, cap * sizeof(*pn->names));
		if (!p)
			return -ENOMEM;
		pn->names = p;
		pn->cap = cap;
	}
	snprintf(pn->names[pn->n++], sizeof(pn->names[0]), "%s", name);
	return 0;
}

int mdt_ost_remove(struct mdt_txn *t, uint32_t idx, bool force, bool dryrun, uint64_t *files,
		   uint64_t *objects)
{
	struct pool_names pn = { .idx = idx };
	struct mdt_ost_rec rec;
	uint8_t key[4];
	int rc;

	rc = mdt_ost_rec_get(t, idx, &rec);
	if (rc == 0 && (rec.state & MDT_OST_REMOVED))
		rc = -ENOENT;
	if (rc == 0)
		rc = mdt_ost_usage(t, idx, files, objects);
	if (rc || dryrun)
		return rc;
	if (*files && !force)
		return -EBUSY;
	rec.state |= MDT_OST_REMOVED;
	rc = mdt_ost_rec_put(t, &rec);
	if (rc)
		return rc;
	t->ost_dirty = true; /* the commit rebuilds the table without it */
	/* Its pools forget it (collected first: the walk must not see its table change). */
	rc = mdt_pool_each(t, pool_with_ost, &pn);
	for (uint32_t i = 0; rc == 0 && i < pn.n; i++)
		rc = mdt_pool_remove(t, pn.names[i], idx);
	free(pn.names);
	if (rc)
		return rc;
	/* Objects queued for destruction there would wait for it for ever. */
	mdt_put_be32(key, idx);
	return mdt_del_prefix(t, MDT_DB_DESTROY, key, sizeof(key));
}
