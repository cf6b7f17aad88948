/*
 * Creates sent behind (protocol 8; docs/architecture.md, "Creates sent behind"): CephFS's
 * asynchronous creates. Under an exclusive directory lease (nobody else holds one, and others'
 * lookups and listings of the directory wait for it at the MDS) the caller knows the name is
 * free, and the directory's owner and mode. The create is then answered here, with an inode
 * number the MDS handed this client ahead (MDS_INOS) and the attributes the MDS will give, and
 * sent (MDS_CREATE with LW_CR_INO) without waiting for its reply.
 *
 * What keeps it right:
 *  - every other MDS request of this client waits until every create sent behind was answered
 *    (behind_barrier, from mdc.c), so the MDS sees them in the order the caller made them: a
 *    give-back of the lease, a lookup of the new name, a close of the file;
 *  - the file's own I/O waits for its create's reply (loom_behind_file: the layout and the
 *    handle come with it);
 *  - the MDS takes a number only from the range it handed this client, once (kept with the
 *    client on the MDT): a resend after a reconnection, or a replay after an MDS restart, makes
 *    the same inode.
 * A create refused after all (the MDT full, the lease lost to a client that did not answer in
 * time) fails the file's every later call with that error, and is logged.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "client/cstats.h"
#include "client/internal.h"
#include "common/log.h"
#include "common/util.h"
#include "loom/loom_ll.h"

/* Creates in flight at once: beyond, the next one waits for one to be answered. */
#define BEHIND_INFLIGHT_MAX 64u
/* Numbers asked for at a time, and how long a refusal of MDS_INOS holds further asks off. Few
 * enough that what they make cannot take an MDT from the room at which the MDS stops handing
 * numbers out (twice its reserve) to full: creates near a full MDT are answered by the MDS. */
#define BEHIND_INOS_ASK   256u
#define BEHIND_REFUSED_NS (10ull * 1000000000ull)

struct loom_behind {
	loom_fs *fs;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	_Atomic int refs;        /* the caller's and the call's (atomic: the I/O thread drops
	                          * the call's while another thread may hold lock across a call,
	                          * settling the file) */
	bool done;               /* the reply came, or the call failed */
	int status;
	void *rbody;             /* the reply's body (the create's answer and layout) */
	uint32_t rbody_len;
	uint64_t parent, ino;
	uint64_t mds_gen;        /* fs_mds_gen() at sending: a restart since reopens its handle */
	struct loom_cred cred;
	int flags;
	loom_file *file;         /* made from the reply by the first loom_behind_file */
	uint64_t own_gen, own_lease; /* loom_behind_own: passed to the file */
	bool released;           /* the caller let go before the answer (loom_behind_close) */
	int err;                 /* the create's failure, for every later call */
	struct rpc_call call;
	uint8_t body[];          /* the request */
};

void behind_init(loom_fs *fs)
{
	u64map_init(&fs->unsettled);
	pthread_mutex_init(&fs->behind_lock, NULL);
	pthread_cond_init(&fs->behind_cond, NULL);
	atomic_init(&fs->behind_inflight, 0);
	atomic_init(&fs->behind_orphans, 0);
	atomic_init(&fs->inos_stale, false);
	atomic_init(&fs->dir_recalls, 0);
	fs->inos_next = fs->inos_end = 0;
	fs->inos_refused_ns = 0;
}

void behind_destroy(loom_fs *fs)
{
	u64map_destroy(&fs->unsettled);
	pthread_cond_destroy(&fs->behind_cond);
	pthread_mutex_destroy(&fs->behind_lock);
}

/* Under behind_lock: waits for the count in flight to fall to most, and with orphans, for the
 * closes of files let go before their answer to be sent (-EINTR if the caller was interrupted;
 * the creates go on). A caller that must not wait for an MDS that is away or hung (umount's
 * stat of the root: rpc_nowait_thread) waits while it answers, and gets -EIO once it does not. */
static int wait_inflight(loom_fs *fs, uint32_t most, bool orphans)
{
	bool nowait = rpc_nowait_thread();

	while (atomic_load(&fs->behind_inflight) > most ||
	       (orphans && atomic_load(&fs->behind_orphans) > 0)) {
		struct timespec until;
		bool away;

		if (rpc_intr_fired())
			return -EINTR;
		if (nowait) {
			pthread_mutex_unlock(&fs->behind_lock);
			away = loom_ll_mds_away(fs);
			pthread_mutex_lock(&fs->behind_lock);
			if (away)
				return -EIO;
			if (atomic_load(&fs->behind_inflight) <= most &&
			    (!orphans || atomic_load(&fs->behind_orphans) == 0))
				break; /* answered while the lock was let go */
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 100000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&fs->behind_cond, &fs->behind_lock, &until);
	}
	return 0;
}

int behind_barrier(loom_fs *fs)
{
	int rc;

	/* The lease thread closes the orphans itself: it waits for the creates alone. */
	bool orphans = !leases_on_own_thread();

	if (atomic_load(&fs->behind_inflight) == 0 && (!orphans || atomic_load(&fs->behind_orphans) == 0))
		return 0;
	pthread_mutex_lock(&fs->behind_lock);
	rc = wait_inflight(fs, 0, orphans);
	pthread_mutex_unlock(&fs->behind_lock);
	return rc;
}

static void behind_put(struct loom_behind *b)
{
	if (atomic_fetch_sub(&b->refs, 1) != 1)
		return;
	free(b->rbody);
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

/* The call completed (on the MDS connection's thread, perhaps under its locks: only locks under
 * which nothing calls into the RPC layer). */
static void behind_done(struct rpc_call *call)
{
	struct loom_behind *b = (struct loom_behind *)((char *)call - offsetof(struct loom_behind, call));
	loom_fs *fs = b->fs;
	bool orphan;

	pthread_mutex_lock(&b->lock);
	b->status = call->status;
	b->rbody = call->rbody;
	b->rbody_len = call->rbody_len;
	call->rbody = NULL;
	b->done = true;
	orphan = b->released;
	if (call->status == -EINVAL)
		atomic_store(&fs->inos_stale, true); /* its session ended there: ask anew */
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	pthread_mutex_lock(&fs->behind_lock);
	/* An orphan's close is owed: what comes after must find the handle closed (a layout
	 * change waits for no handle open), so the barrier waits for it too. */
	if (orphan)
		atomic_fetch_add(&fs->behind_orphans, 1);
	atomic_fetch_sub(&fs->behind_inflight, 1);
	pthread_cond_broadcast(&fs->behind_cond);
	pthread_mutex_unlock(&fs->behind_lock);
	if (orphan)
		leases_push_orphan(fs, b); /* the call's reference goes with it */
	else
		behind_put(b);
}

void behind_orphan_close(struct loom_behind *b, bool send)
{
	loom_fs *fs = b->fs;
	struct lw_create_rep rep;

	if (!send) {
		/* The session ends soon (disconnect), and its handles with it. */
	} else if (b->status == 0 && b->rbody_len >= sizeof(rep)) {
		memcpy(&rep, b->rbody, sizeof(rep));
		if (rep.handle && rep.attr.ino == b->ino) {
			/* Nothing used it: the create's answer is its attributes (made.c). */
			if (mdc_close_detached(b->fs, &b->cred, b->ino, rep.handle) == 0)
				made_put(fs, &rep.attr, true);
		}
	} else if (b->status) {
		log_err("a create answered before the MDS had it failed there: inode %llu in directory "
			"%llu: %s", (unsigned long long)b->ino, (unsigned long long)b->parent,
			strerror(-b->status));
	}
	behind_put(b);
	pthread_mutex_lock(&fs->behind_lock);
	atomic_fetch_sub(&fs->behind_orphans, 1);
	pthread_cond_broadcast(&fs->behind_cond);
	pthread_mutex_unlock(&fs->behind_lock);
}

/* Under behind_lock: numbers at hand, asking the MDS for more when none is left. The range it
 * hands replaces the last (kept with this client on the MDT), so every create that took a number
 * from the last must have been answered first. */
static int take_ino(loom_fs *fs, uint64_t *ino)
{
	struct lw_inos_rep rep;
	uint64_t now;
	int rc;

	/* A new session at the MDS, or a number refused: the range may be gone there. */
	if (atomic_exchange(&fs->inos_stale, false))
		fs->inos_next = fs->inos_end;
	if (fs->inos_next < fs->inos_end) {
		*ino = fs->inos_next++;
		return 0;
	}
	now = clock_mono_ns();
	if (fs->inos_refused_ns && now - fs->inos_refused_ns < BEHIND_REFUSED_NS)
		return -EAGAIN;
	/* None in flight, no close owed (so that the call's own barrier, which would take
	 * behind_lock, has nothing to wait for: none can start while it is held). */
	rc = wait_inflight(fs, 0, true);
	if (rc)
		return rc;
	rc = mdc_inos(fs, BEHIND_INOS_ASK, &rep);
	if (rc == 0 && (rep.count == 0 || rep.count > BEHIND_INOS_ASK || rep.first <= LOOM_ROOT_INO ||
			rep.first > UINT64_MAX - rep.count))
		rc = -EPROTO;
	if (rc) {
		if (rc != -EINTR) {
			log_warn("the MDS handed no inode numbers ahead (%s): creates wait for its answers "
				 "for a while", strerror(-rc));
			fs->inos_refused_ns = now;
		}
		return -EAGAIN;
	}
	fs->inos_refused_ns = 0;
	fs->inos_next = rep.first;
	fs->inos_end = rep.first + rep.count;
	*ino = fs->inos_next++;
	return 0;
}

static bool in_group(const struct loom_cred *cr, uint32_t gid)
{
	if (cr->gid == gid)
		return true;
	for (uint32_t i = 0; i < cr->ngroups && i < LOOM_MAX_GROUPS; i++)
		if (cr->groups[i] == gid)
			return true;
	return false;
}

/* Whether cr may make a name in a directory of these owner and mode (write and search), as the
 * MDS would judge; if not, the MDS is asked and says why. */
static bool may_create(const struct loom_cred *cr, const struct stat *dir)
{
	mode_t need = S_IWOTH | S_IXOTH, bits = dir->st_mode;

	if (!S_ISDIR(dir->st_mode))
		return false;
	if (cr->uid == 0)
		return true;
	if (cr->uid == dir->st_uid)
		bits >>= 6;
	else if (in_group(cr, dir->st_gid))
		bits >>= 3;
	return (bits & need) == need;
}

/* One change sent behind less in flight (and, for an unlink, its name's count): a barrier or a
 * give-back waiting for them looks again. */
static void inflight_end(loom_fs *fs, const unsigned *slot)
{
	pthread_mutex_lock(&fs->behind_lock);
	if (slot)
		fs->unlinking[*slot]--;
	atomic_fetch_sub(&fs->behind_inflight, 1);
	pthread_cond_broadcast(&fs->behind_cond);
	pthread_mutex_unlock(&fs->behind_lock);
}

/* The counter of fs->unlinking for name in parent. */
static unsigned unlink_slot(uint64_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return (unsigned)(h >> 58) & 63u;
}

/* The attributes the MDS gives a new file (mdt_perm_new_inode, mdt_inode_init). */
static void new_attr(const struct loom_cred *cr, const struct stat *dir, uint64_t ino, mode_t mode,
		     struct lw_attr *a)
{
	struct timespec now = clock_real();

	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->gen = 1;
	a->mode = S_IFREG | (mode & 07777);
	a->uid = cr->uid;
	a->gid = cr->gid;
	if (dir->st_mode & S_ISGID) {
		a->gid = (uint32_t)dir->st_gid;
		if ((a->mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) && cr->uid != 0 &&
		    !in_group(cr, (uint32_t)dir->st_gid))
			a->mode &= ~(uint32_t)S_ISGID;
	}
	a->nlink = 1;
	a->blksize = LOOM_DEFAULT_STRIPE_SIZE;
	a->atime = a->mtime = a->ctime = now.tv_sec;
	a->atime_ns = a->mtime_ns = a->ctime_ns = (uint32_t)now.tv_nsec;
	a->data_version = 1;
	a->name_version = 1;
}

int loom_ll_create_behind(loom_fs *fs, const struct loom_cred *cr, uint64_t parent,
			  const struct stat *dir, const char *name, mode_t mode, int flags,
			  bool (*still)(void *arg), void *arg, struct loom_ll_attr *a, loom_behind **out)
{
	size_t len = strlen(name);
	struct lw_create_req req = { .parent = parent, .mode = S_IFREG | (mode & 07777),
				     .flags = LW_CR_OPEN | LW_CR_EXCL | LW_CR_INO,
				     .open_flags = (uint32_t)(flags & (O_ACCMODE | O_TRUNC | O_APPEND)),
				     .namelen = (uint16_t)len };
	size_t cap = sizeof(struct lw_cred) + LOOM_MAX_GROUPS * sizeof(uint32_t) + sizeof(req) + len +
		     sizeof(uint64_t);
	struct loom_behind *b;
	struct rpc_conn *conn;
	struct lw_attr attr;
	struct lw_wr w;
	uint64_t ino;
	int rc;

	*out = NULL;
	/* What the MDS would refuse, or map (a node key's nodemap may squash identities), it says
	 * itself. */
	if (len == 0 || len > LOOM_NAME_MAX || fs->key_id.node[0] || !may_create(cr, dir))
		return -EAGAIN;
	b = calloc(1, sizeof(*b) + cap);
	if (!b)
		return -EAGAIN;
	rc = fs_mds_conn(fs, &conn);
	if (rc) {
		free(b);
		return rc;
	}
	pthread_mutex_lock(&fs->behind_lock);
	rc = wait_inflight(fs, BEHIND_INFLIGHT_MAX - 1, false);
	/* The name's unlink sent behind may wait at the MDS (for another client's inode lease on
	 * the file) while this create would run: the MDS must have answered it first. */
	if (rc == 0 && fs->unlinking[unlink_slot(parent, name)])
		rc = -EAGAIN;
	if (rc == 0)
		rc = take_ino(fs, &ino);
	if (rc) {
		pthread_mutex_unlock(&fs->behind_lock);
		free(b);
		return rc;
	}
	b->fs = fs;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	atomic_init(&b->refs, 2);
	b->parent = parent;
	b->ino = ino;
	b->cred = *cr;
	b->flags = flags;
	b->mds_gen = fs_mds_gen(fs);
	lw_wr_init(&w, b->body, cap);
	lw_put_cred(&w, cr);
	lw_wr_put(&w, &req, sizeof(req));
	lw_wr_put(&w, name, len);
	lw_wr_put(&w, &ino, sizeof(ino));
	fs_call_init(fs, &b->call, LW_OP_MDS_CREATE, b->body, (uint32_t)w.len);
	b->call.done = behind_done;
	/* Counted in flight under behind_lock: a refill of numbers (which waits for none in
	 * flight) cannot come between the number and its sending, and from here a give-back of the
	 * lease waits for it. Sent outside the lock: a connection that fails completes calls (this
	 * one, or others whose behind_done takes the lock) under its own locks. */
	atomic_fetch_add(&fs->behind_inflight, 1);
	pthread_mutex_unlock(&fs->behind_lock);
	/* The lease may have been recalled before it counted: given back already, the MDS would
	 * let another client make the name first. Then the MDS is asked instead. */
	if (still && !still(arg)) {
		inflight_end(fs, NULL);
		pthread_cond_destroy(&b->cond);
		pthread_mutex_destroy(&b->lock);
		free(b);
		return -EAGAIN;
	}
	pthread_mutex_lock(&fs->behind_lock);
	/* Not watched without memory; the value is never NULL (bit 1 set). */
	(void)u64map_put(&fs->unsettled, ino,
			 (void *)(uintptr_t)((atomic_load(&fs->dir_recalls) << 2) | 2));
	pthread_mutex_unlock(&fs->behind_lock);
	rpc_submit_detached(conn, &b->call);
	cstat_add(CSTAT_CREATE_BEHIND);
	new_attr(cr, dir, ino, mode, &attr);
	attr_to_ll(&attr, a);
	*out = b;
	return 0;
}

void loom_behind_own(loom_behind *b, uint64_t gen, uint64_t lease_gen)
{
	pthread_mutex_lock(&b->lock);
	b->own_gen = gen;
	b->own_lease = lease_gen;
	if (b->file) {
		pthread_mutex_lock(&b->file->lock);
		b->file->own_gen = gen;
		b->file->own_parent = b->parent;
		b->file->own_lease = lease_gen;
		pthread_mutex_unlock(&b->file->lock);
	}
	pthread_mutex_unlock(&b->lock);
}

uint64_t loom_behind_ino(const loom_behind *b)
{
	return b->ino;
}

uint64_t loom_behind_parent(const loom_behind *b)
{
	return b->parent;
}

bool loom_behind_used(loom_behind *b)
{
	bool used;

	pthread_mutex_lock(&b->lock);
	used = b->file || b->err;
	pthread_mutex_unlock(&b->lock);
	return used;
}

void behind_touch(loom_fs *fs, uint64_t ino)
{
	uintptr_t v;

	pthread_mutex_lock(&fs->behind_lock);
	v = (uintptr_t)u64map_get(&fs->unsettled, ino);
	if (v)
		(void)u64map_put(&fs->unsettled, ino, (void *)(v | 1));
	pthread_mutex_unlock(&fs->behind_lock);
}

/* Whether the file b made may have been opened or set by anyone else before its first use: an
 * open or setattr through this client, or a directory lease recalled since (another client may
 * have reached it). It is not watched any more. */
static bool untrack(struct loom_behind *b)
{
	uintptr_t was;

	pthread_mutex_lock(&b->fs->behind_lock);
	was = (uintptr_t)u64map_del(&b->fs->unsettled, b->ino);
	pthread_mutex_unlock(&b->fs->behind_lock);
	return !was || (was & 1) || (was >> 2) != (uintptr_t)atomic_load(&b->fs->dir_recalls);
}

/* Under b->lock, the reply in: the file, or the create's error. */
static int settle(struct loom_behind *b)
{
	struct mdc_dom dom = { .known = true }; /* a new file: no Data-on-MDT bytes yet */
	struct loom_layout *layout = NULL;
	struct lw_create_rep rep;
	bool touched = untrack(b);
	int rc = b->status;

	if (rc == 0)
		rc = mdc_create_rep_decode(b->rbody, b->rbody_len, &rep, &layout);
	if (rc == 0 && (rep.attr.ino != b->ino || !(rep.flags & LW_CRR_CREATED) || !rep.handle))
		rc = -EPROTO;
	if (rc == 0)
		rc = file_finish_open(b->fs, &b->cred, b->flags, &rep.attr, rep.handle, layout, true, &dom,
				      b->mds_gen, &b->file);
	else
		free(layout);
	if (rc == 0)
		b->file->made_here = true;
	if (rc == 0 && b->own_gen) {
		pthread_mutex_lock(&b->file->lock);
		b->file->own_gen = b->own_gen;
		b->file->own_parent = b->parent;
		b->file->own_lease = b->own_lease;
		pthread_mutex_unlock(&b->file->lock);
	}
	if (rc) {
		log_err("a create answered before the MDS had it failed there: inode %llu in directory "
			"%llu: %s; the file's calls fail with EIO", (unsigned long long)b->ino,
			(unsigned long long)b->parent, strerror(-rc));
		b->err = -EIO;
	} else if (touched) {
		struct stat st;

		/* Another program wrote or truncated it meanwhile: the size, and with it the
		 * Data-on-MDT bytes (dropped when the size moved), are the MDS's and this client's
		 * other handles', not the create's. */
		(void)loom_fstat(b->file, &st);
	}
	free(b->rbody);
	b->rbody = NULL;
	return b->err;
}

int loom_behind_file(loom_behind *b, loom_file **f)
{
	int rc = 0;

	*f = NULL;
	pthread_mutex_lock(&b->lock);
	while (!b->done && rc == 0) {
		struct timespec until;

		if (rpc_intr_fired()) {
			rc = -EINTR;
			break;
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		pthread_cond_timedwait(&b->cond, &b->lock, &until);
	}
	if (rc == 0 && !b->file && !b->err)
		rc = settle(b);
	else if (rc == 0)
		rc = b->err;
	*f = rc ? NULL : b->file;
	pthread_mutex_unlock(&b->lock);
	return rc;
}

int loom_behind_close(loom_behind *b)
{
	int rc;

	pthread_mutex_lock(&b->lock);
	if (!b->done && !b->file) {
		/* Nothing used it (its file is made at first use, after the answer): the answer is
		 * not waited for, and its handle is closed behind (behind_orphan_close). */
		b->released = true;
		pthread_mutex_unlock(&b->lock);
		(void)untrack(b);
		behind_put(b);
		return 0;
	}
	if (!b->file && !b->err)
		settle(b);
	rc = b->err;
	pthread_mutex_unlock(&b->lock);
	if (b->file)
		rc = loom_close(b->file);
	behind_put(b);
	return rc;
}

/*
 * Unlinks sent behind, under the same exclusive lease: nobody else can look the name up or list
 * the directory until the lease is given back, which waits for the unlink's answer as for a
 * create's. The caller's right is judged as the MDS would (write and search on the directory;
 * a sticky one is left to the MDS, which knows the file's owner). The client says it has nothing
 * open under an inode lease (LW_NM_UNLEASED: the MDS then ends this client's lease on the file
 * at once), and opens nothing under one until the answer (ileases_unlink_begin).
 */
struct unlink_behind {
	loom_fs *fs;
	uint64_t parent;
	unsigned slot;           /* in fs->unlinking */
	size_t name_at, namelen; /* where the name is in body */
	struct rpc_call call;
	uint8_t body[];          /* the request */
};

static void unlink_behind_done(struct rpc_call *call)
{
	struct unlink_behind *u = (struct unlink_behind *)((char *)call - offsetof(struct unlink_behind, call));
	loom_fs *fs = u->fs;

	if (call->status) {
		log_err("an unlink answered before the MDS had it failed there: '%.*s' in directory "
			"%llu: %s", (int)u->namelen, (const char *)u->body + u->name_at,
			(unsigned long long)u->parent, strerror(-call->status));
		leases_drop_dir(fs, u->parent);
	}
	free(call->rbody);
	call->rbody = NULL;
	ileases_unlink_end(fs);
	inflight_end(fs, &u->slot);
	free(u);
}

int loom_ll_unlink_behind(loom_fs *fs, const struct loom_cred *cr, uint64_t parent,
			  const struct stat *dir, const char *name, bool (*still)(void *arg), void *arg)
{
	size_t len = strlen(name);
	struct lw_name_req req = { .parent = parent, .namelen = (uint16_t)len, .flags = LW_NM_UNLEASED };
	size_t cap = sizeof(struct lw_cred) + LOOM_MAX_GROUPS * sizeof(uint32_t) + sizeof(req) + len;
	struct unlink_behind *u;
	struct rpc_conn *conn;
	struct lw_wr w;
	int rc;

	if (len == 0 || len > LOOM_NAME_MAX || fs->key_id.node[0] || !may_create(cr, dir) ||
	    ((dir->st_mode & S_ISVTX) && cr->uid != 0 && cr->uid != dir->st_uid))
		return -EAGAIN;
	u = calloc(1, sizeof(*u) + cap);
	if (!u)
		return -EAGAIN;
	rc = fs_mds_conn(fs, &conn);
	if (rc) {
		free(u);
		return rc;
	}
	/* Files open here under inode leases: the MDS must wait for them to become real. */
	if (!ileases_unlink_begin(fs)) {
		ileases_unlink_end(fs);
		free(u);
		return -EAGAIN;
	}
	u->fs = fs;
	u->parent = parent;
	u->slot = unlink_slot(parent, name);
	lw_wr_init(&w, u->body, cap);
	lw_put_cred(&w, cr);
	lw_wr_put(&w, &req, sizeof(req));
	u->name_at = w.len;
	u->namelen = len;
	lw_wr_put(&w, name, len);
	fs_call_init(fs, &u->call, LW_OP_MDS_UNLINK, u->body, (uint32_t)w.len);
	u->call.done = unlink_behind_done;
	pthread_mutex_lock(&fs->behind_lock);
	rc = wait_inflight(fs, BEHIND_INFLIGHT_MAX - 1, false);
	if (rc == 0) {
		/* From here a give-back of the lease waits for it (as for a create). */
		fs->unlinking[u->slot]++;
		atomic_fetch_add(&fs->behind_inflight, 1);
	}
	pthread_mutex_unlock(&fs->behind_lock);
	if (rc == 0 && still && !still(arg)) {
		inflight_end(fs, &u->slot);
		rc = -EAGAIN;
	}
	if (rc) {
		ileases_unlink_end(fs);
		free(u);
		return rc == -EINTR ? rc : -EAGAIN;
	}
	rpc_submit_detached(conn, &u->call);
	cstat_add(CSTAT_UNLINK_BEHIND);
	return 0;
}
