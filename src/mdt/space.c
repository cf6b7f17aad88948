/*
 * The MDT's space: how much more LMDB's map and the disk under it can take, the reserve kept for
 * what frees space, and statfs.
 *
 * LMDB grows its data file as pages are first written and never shrinks it; a page a transaction
 * frees goes to the freelist, and later transactions reuse it. So the MDT can still take
 *
 *     room      = freelist pages + min(map left, disk left)
 *     map left  = map size - extent            extent = (last page in use + 1) * page size
 *     disk left = f_bavail of the MDT's file system + what the data file holds past the extent
 *
 * Deleting writes too (copied-on-write pages, the reply cache, the orphan list, the destroy
 * queue), so an MDT filled to the last page could not even unlink. A reserve is kept for that, as
 * ext4 keeps reserved blocks: what makes the MDT hold more (a new inode or name, an xattr, a
 * layout, Data-on-MDT bytes: mdt_txn_grow) is refused with -ENOSPC once room would drop below the
 * reserve, and everything else may use it. When the disk under the MDT runs low, the reserve is
 * also held in the data file itself (fallocate past the extent, reserve_hold), so that another
 * program filling that disk cannot take it.
 *
 * Reading the freelist means walking LMDB's free database in a read transaction of its own (a
 * write transaction may not open it); it is done only when the map and the disk alone leave too
 * little, that is near the full line.
 */
#include "mdt/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/log.h"

#define FREE_DBI 0 /* LMDB's freelist: txnid -> pgno_t[] whose first entry counts the others */

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The room kept for the numbers handed ahead, as last committed. */
static uint64_t kept_bytes(struct mdt_store *s)
{
	int64_t promised = atomic_load(&s->promised);

	return promised > 0 ? (uint64_t)promised * MDT_PROMISE_INO : 0;
}

/* Bytes of pages in LMDB's freelist, as of the last commit. */
static int freelist_bytes(struct mdt_store *s, uint64_t psize, uint64_t *out)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	uint64_t pages = 0;
	int rc, mrc;

	rc = mdt_errno(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn));
	if (rc)
		return rc;
	rc = mdt_errno(mdb_cursor_open(txn, FREE_DBI, &cur));
	if (rc == 0) {
		while ((mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == MDB_SUCCESS) {
			size_t count;

			if (v.mv_size < sizeof(count))
				continue;
			memcpy(&count, v.mv_data, sizeof(count));
			pages += count;
		}
		if (mrc != MDB_NOTFOUND)
			rc = mdt_errno(mrc);
		mdb_cursor_close(cur);
	}
	mdb_txn_abort(txn);
	*out = pages * psize;
	return rc;
}

/* What the space is made of, but the freelist: the map, the extent, the disk. */
struct space_parts {
	uint64_t psize, map_size, extent, disk_total;
	uint64_t disk_free; /* f_bavail */
	uint64_t disk_left; /* that, plus what the data file holds past the extent */
};

static int space_parts(struct mdt_store *s, struct space_parts *p)
{
	MDB_envinfo info;
	MDB_stat st;
	struct statvfs vfs;
	uint64_t frsize;
	int rc;

	rc = mdt_errno(mdb_env_info(s->env, &info));
	if (rc == 0)
		rc = mdt_errno(mdb_env_stat(s->env, &st));
	if (rc)
		return rc;
	if (statvfs(s->dir, &vfs) < 0)
		return -errno;
	frsize = vfs.f_frsize ? vfs.f_frsize : vfs.f_bsize;
	p->psize = st.ms_psize;
	p->map_size = info.me_mapsize;
	p->extent = ((uint64_t)info.me_last_pgno + 1) * p->psize;
	p->disk_total = (uint64_t)vfs.f_blocks * frsize;
	p->disk_free = (uint64_t)vfs.f_bavail * frsize;
	p->disk_left = p->disk_free;
	/* Bytes the data file already holds past the extent (the reserve held, or pages a commit
	 * that failed wrote) take no more disk when LMDB writes there. */
	if (s->file_end > p->extent)
		p->disk_left += s->file_end - p->extent;
	return 0;
}

static uint64_t tail_room(const struct space_parts *p)
{
	uint64_t map_left = p->map_size > p->extent ? p->map_size - p->extent : 0;

	return min_u64(map_left, p->disk_left);
}

int mdt_space(struct mdt_store *s, struct mdt_space *out)
{
	struct space_parts p = { 0 };
	uint64_t free_bytes;
	int rc;

	rc = space_parts(s, &p);
	if (rc == 0)
		rc = freelist_bytes(s, p.psize, &free_bytes);
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	out->page_size = p.psize;
	out->map_size = p.map_size;
	out->disk_total = p.disk_total;
	out->disk_left = p.disk_free;
	out->in_use = p.extent > free_bytes ? p.extent - free_bytes : 0;
	out->room = free_bytes + tail_room(&p);
	out->reserve = s->reserve;
	out->map_bound = p.map_size - min_u64(p.map_size, p.extent) <= p.disk_left;
	return 0;
}

int mdt_statfs(struct mdt_txn *t, struct lw_statfs *out)
{
	struct mdt_space sp;
	uint64_t avail, kept = kept_bytes(t->s);
	MDB_stat st;
	int rc;

	rc = mdt_space(t->s, &sp);
	if (rc == 0)
		rc = mdt_errno(mdb_stat(t->mdb, t->s->dbi[MDT_DB_INODES], &st));
	if (rc)
		return rc;
	/* The room kept for the creates of numbers handed ahead is theirs. */
	avail = sp.room > sp.reserve + kept ? sp.room - sp.reserve - kept : 0;
	memset(out, 0, sizeof(*out));
	out->bsize = (uint32_t)sp.page_size;
	/* What the MDT holds and can still take: the map when it fills first (then this is the map
	 * size), else what the disk under it leaves. As on ext4, bfree counts the reserve and bavail
	 * does not; neither counts the room kept for numbers handed ahead (used, as df shows it). */
	out->blocks = (sp.in_use + sp.room) / sp.page_size;
	out->bfree = (sp.room > kept ? sp.room - kept : 0) / sp.page_size;
	out->bavail = avail / sp.page_size;
	/* An inode is a few records in LMDB, not a file on the disk: as many more fit as growth
	 * lets in (mdt_txn_grow charges MDT_GROW_INODE for each, and its name's bytes), and the
	 * numbers handed ahead, not used yet. */
	out->ffree = avail / (MDT_GROW_INODE + MDT_GROW_RECORD) + kept / MDT_PROMISE_INO;
	out->files = st.ms_entries + out->ffree;
	out->namemax = LOOM_NAME_MAX;
	return 0;
}

/* ---- the reserve ---- */

void mdt_store_set_reserve(struct mdt_store *s, uint64_t bytes)
{
	s->reserve = bytes;
	mdt_reserve_hold(s);
}

int mdt_store_set_map_size(struct mdt_store *s, uint64_t bytes)
{
	MDB_envinfo info;
	MDB_stat st;
	int rc;

	rc = mdt_errno(mdb_env_stat(s->env, &st));
	if (rc)
		return rc;
	if (bytes < 64 * (uint64_t)st.ms_psize)
		return -EINVAL;
	/* LMDB keeps a map at least as large as what is in use. */
	rc = mdt_errno(mdb_env_set_mapsize(s->env, (size_t)(bytes / st.ms_psize * st.ms_psize)));
	if (rc == 0)
		rc = mdt_errno(mdb_env_info(s->env, &info));
	if (rc == 0 && info.me_mapsize != bytes / st.ms_psize * st.ms_psize)
		log_warn("mdt: %s: a map of %llu bytes, not %llu: the MDT holds that much already",
			 s->dir, (unsigned long long)info.me_mapsize, (unsigned long long)bytes);
	return rc;
}

int mdt_space_file_init(struct mdt_store *s)
{
	struct stat st;
	int fd;

	if (mdb_env_get_fd(s->env, &fd) != MDB_SUCCESS || fstat(fd, &st) < 0)
		return -EIO;
	s->file_end = (uint64_t)st.st_size;
	return 0;
}

/*
 * After a top-level commit: when the disk under the MDT has less left than twice the reserve,
 * the data file is extended past its extent by the reserve (which LMDB then writes into without
 * asking the disk for more). On a disk with room nothing is held, so an MDT on a roomy disk costs
 * no more than what it holds. Best effort: a disk already full holds what it can.
 */
void mdt_reserve_hold(struct mdt_store *s)
{
	/* The room kept for inode numbers handed ahead is held with the reserve: their creates were
	 * answered already. */
	uint64_t hold = s->reserve + kept_bytes(s);
	struct space_parts p = { 0 };
	uint64_t want, have;
	int fd;

	if (!s->reserve || space_parts(s, &p) != 0)
		return;
	want = p.extent + hold;
	if (want > p.map_size)
		want = p.map_size;
	have = s->file_end;
	if (have >= want || p.disk_free > 2 * hold)
		return;
	if (mdb_env_get_fd(s->env, &fd) != MDB_SUCCESS)
		return;
	if (have < p.extent)
		have = p.extent;
	/* In steps, so that a disk too full for all of it still holds what it can. */
	while (have < want) {
		uint64_t step = min_u64(want - have, 1u << 20);

		if (fallocate(fd, 0, (off_t)have, (off_t)step) != 0) {
			/* LMDB writes into the held bytes before it reuses its freelist at times: a
			 * few pages short is the normal state of a full MDT. */
			if (!s->reserve_short_logged && have - p.extent < s->reserve / 2)
				log_warn("mdt: %s: the disk under the MDT is full: %llu KiB of the %llu KiB "
					 "reserve held", s->dir,
					 (unsigned long long)((have - p.extent) >> 10),
					 (unsigned long long)(s->reserve >> 10));
			s->reserve_short_logged = true;
			break;
		}
		have += step;
	}
	if (have > s->file_end)
		s->file_end = have;
	if (have >= want)
		s->reserve_short_logged = false;
}

/* ---- growth ---- */

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The numbers handed ahead and not taken, as this transaction sees them. */
static uint64_t promised_now(const struct mdt_txn *t)
{
	int64_t n = atomic_load(&t->s->promised);

	for (; t; t = t->parent)
		n += t->promised;
	return n > 0 ? (uint64_t)n : 0;
}

/* Whether bytes more, and keep beyond the reserve and the room kept for the numbers handed
 * ahead, fit: 0, -ENOSPC or MDT_ETXNFULL (mdt_txn_grow). */
static int room_for(struct mdt_txn *t, uint64_t bytes, uint64_t keep)
{
	struct mdt_txn *top = t;
	uint64_t mine = bytes, need, kept;
	bool promised = t->took_promised;
	int rc;

	/* What this request grows (here and in the transactions under its own, up to the batch's),
	 * then what the batch grew before it, must leave the reserve and the promised room. */
	while (top->parent) {
		mine = add_sat(mine, top->grown);
		top = top->parent;
		promised |= top->parent && top->took_promised;
	}
	kept = promised_now(t);
	kept = kept > UINT64_MAX / MDT_PROMISE_INO ? UINT64_MAX : kept * MDT_PROMISE_INO;
	need = add_sat(add_sat(add_sat(mine, top->grown), t->s->reserve), add_sat(kept, keep));
	/* The create of a number handed ahead was answered already: its room was kept, but what
	 * grows is estimated, and what others grew may have taken more than they said. Half the
	 * reserve makes up for that; deletions keep the other half. */
	if (promised)
		need = add_sat(add_sat(mine, top->grown), t->s->reserve / 2);
	if (!top->room_known) {
		struct space_parts p = { 0 };

		rc = space_parts(t->s, &p);
		if (rc)
			return rc;
		top->room = tail_room(&p);
		top->page_size = p.psize;
		top->room_known = true;
	}
	if (top->room < need && !top->room_has_freelist) {
		/* Only near the full line does the freelist matter: it is read then, once. */
		uint64_t free_bytes;

		rc = freelist_bytes(t->s, top->page_size, &free_bytes);
		if (rc)
			return rc;
		top->room = add_sat(top->room, free_bytes);
		top->room_has_freelist = true;
	}
	if (top->room < need) {
		/* Without what the batch grew before, this request would fit: the batch commits,
		 * and the request runs again in a transaction of its own, which measures anew. */
		if (top->grown && top->room >= need - top->grown)
			return MDT_ETXNFULL;
		return -ENOSPC;
	}
	return 0;
}

int mdt_txn_grow(struct mdt_txn *t, uint64_t bytes)
{
	int rc = room_for(t, bytes, 0);

	if (rc == 0)
		t->grown += bytes;
	return rc;
}

int mdt_txn_promise(struct mdt_txn *t, uint32_t count)
{
	int rc = room_for(t, 0, add_sat(t->s->reserve, (uint64_t)count * MDT_PROMISE_INO));

	if (rc == 0)
		t->promised += count;
	return rc;
}

void mdt_txn_unpromise(struct mdt_txn *t, uint32_t count)
{
	t->promised -= count;
}

void mdt_txn_took_promised(struct mdt_txn *t)
{
	t->promised -= 1;
	t->took_promised = t->parent != NULL;
}
