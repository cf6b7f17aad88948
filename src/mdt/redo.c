/*
 * Replication's half in the MDT: with capture on, every key a write transaction puts or deletes
 * is noted in order (its redo), a child's redo joins its parent's when it commits, and a
 * top-level commit numbers its redo (repl_seq, kept in the MDT in the same commit) and hands it to
 * the MDS once it is durable. A standby applies the same redo to its own MDT, commit by commit,
 * and so holds byte for byte the records the active held after that commit.
 *
 * Every write of the MDT goes through mdt_put, mdt_del and the cursor deletes (store.c,
 * replies.c), which call mdt_redo_note: nothing is written past the redo.
 */
#include "mdt/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define META_REPL_SEQ   "repl_seq"
#define META_REPL_EPOCH "repl_epoch"
#define META_REPL_PREV  "repl_prev"
#define REDO_KEY_MAX    511u /* LMDB's default key size limit */

/* A top-level transaction's redo starts with room for its commit header (zero copy to the MDS). */
static size_t redo_head(const struct mdt_txn *t)
{
	return t->parent ? 0 : sizeof(struct lw_repl_commit);
}

static int redo_reserve(struct mdt_txn *t, size_t more)
{
	size_t want, cap;
	uint8_t *p;

	if (!t->redo_len)
		t->redo_len = redo_head(t);
	want = t->redo_len + more;
	if (want <= t->redo_cap)
		return 0;
	cap = t->redo_cap ? t->redo_cap : 4096;
	while (cap < want)
		cap *= 2;
	p = realloc(t->redo, cap);
	if (!p)
		return -ENOMEM;
	t->redo = p;
	t->redo_cap = cap;
	return 0;
}

int mdt_redo_note(struct mdt_txn *t, uint8_t op, enum mdt_db db, const void *key, size_t klen,
		  const void *val, size_t vlen)
{
	struct lw_repl_rec rec = { .op = op, .db = (uint8_t)db, .klen = (uint16_t)klen,
				   .vlen = (uint32_t)vlen };
	int rc;

	if (!t->s->redo_fn)
		return 0;
	if (klen == 0 || klen > REDO_KEY_MAX || vlen > UINT32_MAX)
		return -EINVAL; /* LMDB took it, so this cannot be */
	rc = redo_reserve(t, sizeof(rec) + klen + vlen);
	if (rc)
		return rc;
	memcpy(t->redo + t->redo_len, &rec, sizeof(rec));
	memcpy(t->redo + t->redo_len + sizeof(rec), key, klen);
	if (vlen)
		memcpy(t->redo + t->redo_len + sizeof(rec) + klen, val, vlen);
	t->redo_len += sizeof(rec) + klen + vlen;
	t->redo_nrec++;
	return 0;
}

int mdt_redo_child_reserve(struct mdt_txn *child)
{
	size_t body = child->redo_len;

	return body ? redo_reserve(child->parent, body) : 0;
}

void mdt_redo_child_join(struct mdt_txn *child)
{
	struct mdt_txn *p = child->parent;

	if (!child->redo_len)
		return;
	/* mdt_redo_child_reserve made the room before the child committed. */
	memcpy(p->redo + p->redo_len, child->redo, child->redo_len);
	p->redo_len += child->redo_len;
	p->redo_nrec += child->redo_nrec;
}

static int meta_put_raw(struct mdt_txn *t, const char *key, const void *val, size_t len)
{
	MDB_val k = { .mv_size = strlen(key), .mv_data = (void *)key };
	MDB_val v = { .mv_size = len, .mv_data = (void *)val };

	return mdt_errno(mdb_put(t->mdb, t->s->dbi[MDT_DB_META], &k, &v, 0));
}

static int meta_get_u64(struct mdt_txn *t, const char *key, uint64_t *out)
{
	MDB_val v;
	int rc = mdt_get(t, MDT_DB_META, key, strlen(key), &v);

	if (rc == -ENOENT) {
		*out = 0;
		return 0;
	}
	if (rc)
		return rc;
	if (v.mv_size != sizeof(*out))
		return -EIO;
	memcpy(out, v.mv_data, sizeof(*out));
	return 0;
}

int mdt_redo_before_commit(struct mdt_txn *t)
{
	struct mdt_store *s = t->s;
	uint64_t seq = s->repl_seq + 1;
	int rc;

	if (!s->redo_fn || !t->redo_nrec)
		return 0;
	/* The position is written past the redo: a standby writes its own as it applies. */
	rc = meta_put_raw(t, META_REPL_SEQ, &seq, sizeof(seq));
	if (rc == 0)
		rc = meta_put_raw(t, META_REPL_EPOCH, &s->repl_epoch, sizeof(s->repl_epoch));
	return rc;
}

void mdt_redo_after_commit(struct mdt_txn *t)
{
	struct mdt_store *s = t->s;
	struct lw_repl_commit head;

	if (!s->redo_fn || !t->redo_nrec)
		return;
	head = (struct lw_repl_commit){ .seq = ++s->repl_seq, .epoch = s->repl_epoch,
					.len = (uint32_t)(t->redo_len - sizeof(head)), .nrec = t->redo_nrec };
	memcpy(t->redo, &head, sizeof(head));
	s->redo_fn(s->redo_arg, t->redo, t->redo_len);
	t->redo = NULL; /* the MDS's now */
	t->redo_len = t->redo_cap = 0;
}

int mdt_repl_pos_get(struct mdt_txn *t, struct mdt_repl_pos *pos)
{
	int rc = meta_get_u64(t, META_REPL_SEQ, &pos->seq);

	return rc ? rc : meta_get_u64(t, META_REPL_EPOCH, &pos->epoch);
}

int mdt_repl_pos_put(struct mdt_txn *t, const struct mdt_repl_pos *pos)
{
	int rc = meta_put_raw(t, META_REPL_SEQ, &pos->seq, sizeof(pos->seq));

	return rc ? rc : meta_put_raw(t, META_REPL_EPOCH, &pos->epoch, sizeof(pos->epoch));
}

int mdt_store_set_redo(struct mdt_store *s, uint64_t epoch, mdt_redo_fn fn, void *arg)
{
	struct mdt_repl_pos pos;
	struct mdt_txn *t;
	int rc = mdt_txn_begin(s, false, &t);

	if (rc)
		return rc;
	rc = mdt_repl_pos_get(t, &pos);
	mdt_txn_abort(t);
	if (rc)
		return rc;
	s->repl_seq = pos.seq;
	s->repl_epoch = epoch;
	s->redo_fn = fn;
	s->redo_arg = arg;
	return 0;
}

uint64_t mdt_store_repl_seq(const struct mdt_store *s)
{
	return s->repl_seq;
}

int mdt_repl_prev_get(struct mdt_txn *t, struct mdt_repl_pos *prev)
{
	MDB_val v;
	int rc = mdt_get(t, MDT_DB_META, META_REPL_PREV, strlen(META_REPL_PREV), &v);

	if (rc == -ENOENT) {
		*prev = (struct mdt_repl_pos){ 0 };
		return 0;
	}
	if (rc)
		return rc;
	if (v.mv_size != sizeof(*prev))
		return -EIO;
	memcpy(prev, v.mv_data, sizeof(*prev));
	return 0;
}

int mdt_repl_prev_put(struct mdt_txn *t, const struct mdt_repl_pos *prev)
{
	return mdt_put(t, MDT_DB_META, META_REPL_PREV, strlen(META_REPL_PREV), prev, sizeof(*prev));
}

int mdt_redo_apply(struct mdt_txn *t, const void *redo, size_t len, uint32_t nrec)
{
	const uint8_t *p = redo, *end = p + len;
	uint32_t n = 0;

	while (p < end) {
		struct lw_repl_rec rec;
		MDB_val k, v;
		int rc;

		if ((size_t)(end - p) < sizeof(rec))
			return -EPROTO;
		memcpy(&rec, p, sizeof(rec));
		p += sizeof(rec);
		if (rec.db >= MDT_DB_COUNT || rec.klen == 0 || rec.klen > REDO_KEY_MAX ||
		    (rec.op == LW_REPL_DEL && rec.vlen) || (rec.op != LW_REPL_PUT && rec.op != LW_REPL_DEL) ||
		    (size_t)(end - p) < (size_t)rec.klen + rec.vlen)
			return -EPROTO;
		k = (MDB_val){ .mv_size = rec.klen, .mv_data = (void *)p };
		v = (MDB_val){ .mv_size = rec.vlen, .mv_data = (void *)(p + rec.klen) };
		p += rec.klen + rec.vlen;
		if (rec.op == LW_REPL_PUT)
			rc = mdt_errno(mdb_put(t->mdb, t->s->dbi[rec.db], &k, &v, 0));
		else
			rc = mdt_errno(mdb_del(t->mdb, t->s->dbi[rec.db], &k, NULL));
		/* A delete of a key this MDT lacks: it is not the active's copy (diverged). */
		if (rc == -ENOENT)
			return -ESTALE;
		if (rc)
			return rc;
		n++;
	}
	return n == nrec ? 0 : -EPROTO;
}

int mdt_store_uuid(struct mdt_store *s, uint8_t uuid[16])
{
	struct mdt_txn *t;
	MDB_val v;
	int rc = mdt_txn_begin(s, false, &t);

	if (rc)
		return rc;
	rc = mdt_get(t, MDT_DB_META, "uuid", 4, &v);
	if (rc == 0 && v.mv_size != 16)
		rc = -EIO;
	if (rc == 0)
		memcpy(uuid, v.mv_data, 16);
	mdt_txn_abort(t);
	return rc;
}

int mdt_store_copy_fd(struct mdt_store *s, int fd)
{
	/* A read transaction of its own: the copy is the MDT as of one commit, its repl_seq with it. */
	return mdt_errno(mdb_env_copyfd2(s->env, fd, 0));
}

int mdt_store_sync(struct mdt_store *s)
{
	return mdt_errno(mdb_env_sync(s->env, 1));
}
