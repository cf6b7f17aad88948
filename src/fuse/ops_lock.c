/* fcntl(2) and flock(2) locks, held at the MDS so that they hold across mounts. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>

#include "fuse/lmount.h"

/* struct flock (already made absolute by the kernel) -> an inclusive byte range. */
static int flock_range(const struct flock *fl, struct loom_lock *lk)
{
	if (fl->l_start < 0)
		return -EINVAL;
	lk->start = (uint64_t)fl->l_start;
	if (fl->l_len == 0) {
		lk->end = UINT64_MAX;
	} else if (fl->l_len > 0) {
		lk->end = lk->start + (uint64_t)fl->l_len - 1;
	} else {
		/* A negative length covers the bytes before l_start. */
		if ((uint64_t)-fl->l_len > lk->start)
			return -EINVAL;
		lk->end = lk->start - 1;
		lk->start -= (uint64_t)-fl->l_len;
	}
	lk->type = fl->l_type;
	lk->pid = (uint32_t)fl->l_pid;
	return 0;
}

static void lm_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *fl)
{
	LM_INTERRUPTIBLE(req);
	struct loom_lock lk;
	int rc = flock_range(fl, &lk);

	if (rc == 0)
		rc = loom_ll_getlock(lm_of(req)->fs, ino, fi->lock_owner, &lk, 0);
	if (rc) {
		lm_reply_err(req, rc);
		return;
	}
	fl->l_type = (short)lk.type;
	if (lk.type != F_UNLCK) {
		fl->l_whence = SEEK_SET;
		fl->l_start = (off_t)lk.start;
		fl->l_len = lk.end == UINT64_MAX ? 0 : (off_t)(lk.end - lk.start + 1);
		fl->l_pid = (pid_t)lk.pid;
	}
	LM_REPLY(fuse_reply_lock(req, fl));
}

struct waiting_lock {
	loom_fs *fs;
	uint64_t ino;
	uint64_t owner;
};

/* The waiting process got a signal: withdraw its request, which then fails with EINTR. A
 * request without LOOM_LOCK_WAIT may be waiting too: for the MDS's lock recovery after a
 * restart. */
static void cancel_wait(fuse_req_t req, void *data)
{
	struct waiting_lock *w = data;

	(void)req;
	loom_ll_lock_cancel(w->fs, w->ino, w->owner);
}

/*
 * Locks also order data between mounts, as NFS's lock consistency does: before a lock is let go
 * the size of what was written under it reaches the MDS, and once one is granted, pages this
 * mount caches of a file that changed elsewhere are dropped, so the holder reads what the
 * previous holder wrote (SQLite on two mounts depends on this).
 */
static void revalidate(fuse_req_t req, uint64_t ino)
{
	struct lmount *m = lm_of(req);
	struct loom_ll_attr a;
	struct loom_cred cr;

	lm_cred(req, &cr);
	if (loom_ll_getattr(m->fs, &cr, ino, &a) != 0 || lm_data_current(m, ino, a.data_version))
		return;
	fuse_lowlevel_notify_inval_inode(m->se, ino, 0, 0);
}

void lm_unlock_begin(struct lmount *m)
{
	pthread_mutex_lock(&m->stamp_lock);
	m->unlocks_running++;
	pthread_mutex_unlock(&m->stamp_lock);
}

void lm_unlock_end(struct lmount *m)
{
	pthread_mutex_lock(&m->stamp_lock);
	if (--m->unlocks_running == 0)
		pthread_cond_broadcast(&m->unlocks_done);
	pthread_mutex_unlock(&m->stamp_lock);
}

/* Waits (a second at most) for the closes under way; true if there were any. */
static bool unlocks_settled(struct lmount *m)
{
	struct timespec until;
	bool any;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	pthread_mutex_lock(&m->stamp_lock);
	any = m->unlocks_running > 0;
	while (m->unlocks_running > 0)
		if (pthread_cond_timedwait(&m->unlocks_done, &m->stamp_lock, &until) != 0)
			break;
	pthread_mutex_unlock(&m->stamp_lock);
	return any;
}

static void set_lock(fuse_req_t req, fuse_ino_t ino, uint64_t owner, const struct loom_lock *lk,
		     unsigned flags)
{
	struct waiting_lock w = { .fs = lm_of(req)->fs, .ino = ino, .owner = owner };
	int rc;

	if (lk->type == F_UNLCK)
		loom_ll_flush_ino(w.fs, ino);
	else
		fuse_req_interrupt_func(req, cancel_wait, &w);
	rc = loom_ll_lock(w.fs, ino, owner, lk, flags);
	if (rc == -EAGAIN && !(flags & LOOM_LOCK_WAIT) && unlocks_settled(lm_of(req)))
		rc = loom_ll_lock(w.fs, ino, owner, lk, flags);
	if (lk->type != F_UNLCK)
		fuse_req_interrupt_func(req, NULL, NULL);
	if (rc == 0 && lk->type != F_UNLCK)
		revalidate(req, ino);
	lm_reply_err(req, rc);
}

static void lm_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *fl,
		     int sleep)
{
	LM_INTERRUPTIBLE(req);
	struct loom_lock lk;
	int rc = flock_range(fl, &lk);

	if (rc) {
		lm_reply_err(req, rc);
		return;
	}
	lk.pid = (uint32_t)fuse_req_ctx(req)->pid;
	if (lk.type != F_UNLCK)
		lm_locks_note(lm_of(req), ino);
	set_lock(req, ino, fi->lock_owner, &lk, sleep ? LOOM_LOCK_WAIT : 0);
}

static void lm_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
	LM_INTERRUPTIBLE(req);
	struct loom_lock lk = { .start = 0, .end = UINT64_MAX, .pid = (uint32_t)fuse_req_ctx(req)->pid };
	unsigned flags = LOOM_LOCK_FLOCK;

	switch (op & ~LOCK_NB) {
	case LOCK_SH: lk.type = F_RDLCK; break;
	case LOCK_EX: lk.type = F_WRLCK; break;
	case LOCK_UN: lk.type = F_UNLCK; break;
	default:
		lm_reply_err(req, EINVAL);
		return;
	}
	if (!(op & LOCK_NB) && lk.type != F_UNLCK)
		flags |= LOOM_LOCK_WAIT;
	set_lock(req, ino, fi->lock_owner, &lk, flags);
}

void lm_locks_note(struct lmount *m, uint64_t ino)
{
	pthread_mutex_lock(&m->stamp_lock);
	u64map_put(&m->posix_locked, ino, (void *)1);
	pthread_mutex_unlock(&m->stamp_lock);
}

void lm_locks_on_close(fuse_req_t req, uint64_t ino, struct fuse_file_info *fi)
{
	struct lmount *m = lm_of(req);
	struct loom_lock all = { .type = F_UNLCK, .start = 0, .end = UINT64_MAX };
	bool posix;

	pthread_mutex_lock(&m->stamp_lock);
	posix = u64map_get(&m->posix_locked, ino) != NULL;
	pthread_mutex_unlock(&m->stamp_lock);
	/* The kernel leaves remote locks to us: any close by a process drops its fcntl locks on the
	 * file; the last close of an open file drops its flock. */
	if (posix || fi->flock_release)
		loom_ll_flush_ino(m->fs, ino);
	if (posix)
		loom_ll_lock(m->fs, ino, fi->lock_owner, &all, 0);
	if (fi->flock_release)
		loom_ll_lock(m->fs, ino, fi->lock_owner, &all, LOOM_LOCK_FLOCK);
}

void lm_lock_ops(struct fuse_lowlevel_ops *ops)
{
	ops->getlk = lm_getlk;
	ops->setlk = lm_setlk;
	ops->flock = lm_flock;
}
