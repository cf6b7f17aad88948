/* What every operation shares: the caller's identity, replies, open handles. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/util.h"
#include "fuse/lmount.h"

struct lmount *lm_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

void lm_cred(fuse_req_t req, struct loom_cred *cr)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t groups[LOOM_MAX_GROUPS];
	int n;

	cr->uid = ctx->uid;
	cr->gid = ctx->gid;
	cr->ngroups = 0;
	if (ctx->uid == 0 && lm_of(req)->opts.root_squash) {
		/* As Lustre's root_squash: root of this node is nobody to the file system. */
		cr->uid = LOOM_SQUASH_ID;
		cr->gid = LOOM_SQUASH_ID;
		return;
	}
	/* Root passes every check that groups decide, so spare it the read of /proc. */
	if (ctx->uid == 0)
		return;
	n = fuse_req_getgroups(req, LOOM_MAX_GROUPS, groups);
	if (n > LOOM_MAX_GROUPS)
		n = LOOM_MAX_GROUPS; /* the first ones; more than the wire carries */
	for (int i = 0; i < n; i++)
		cr->groups[i] = groups[i];
	cr->ngroups = n > 0 ? (uint32_t)n : 0;
}

void lm_reply_entry(fuse_req_t req, int rc, uint64_t parent, const char *name, const struct loom_ll_attr *a)
{
	struct lmount *m = lm_of(req);
	struct fuse_entry_param e;

	if (rc) {
		lm_reply_err(req, rc);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = a->st.st_ino;
	e.generation = 1; /* inode numbers are never reused */
	e.attr = a->st;
	e.attr_timeout = m->opts.attr_timeout;
	e.entry_timeout = m->opts.entry_timeout;
	lm_told_entry(m, parent, name, a);
	fuse_reply_entry(req, &e);
}

void lm_reply_attr(fuse_req_t req, int rc, const struct stat *st)
{
	if (rc) {
		lm_reply_err(req, rc);
		return;
	}
	lm_told_attr(lm_of(req), st);
	fuse_reply_attr(req, st, lm_of(req)->opts.attr_timeout);
}

void lm_stamps_fini(struct lmount *m)
{
	u64map_destroy(&m->posix_locked); /* its values are markers, not memory */
	u64map_destroy(&m->open_handles); /* and counts */
	pthread_cond_destroy(&m->handles_done);
	pthread_cond_destroy(&m->unlocks_done);
	pthread_mutex_destroy(&m->stamp_lock);
}

void lm_handle_opened(struct lmount *m, uint64_t ino)
{
	uintptr_t n;

	pthread_mutex_lock(&m->stamp_lock);
	n = (uintptr_t)u64map_get(&m->open_handles, ino);
	if (u64map_put(&m->open_handles, ino, (void *)(n + 1)) < 0)
		log_warn("inode %llu: no memory to count its handles", (unsigned long long)ino);
	pthread_mutex_unlock(&m->stamp_lock);
}

void lm_handle_released(struct lmount *m, uint64_t ino)
{
	uintptr_t n;

	pthread_mutex_lock(&m->stamp_lock);
	n = (uintptr_t)u64map_get(&m->open_handles, ino);
	if (n > 1) {
		u64map_put(&m->open_handles, ino, (void *)(n - 1)); /* replaces: needs no memory */
	} else {
		u64map_del(&m->open_handles, ino);
		pthread_cond_broadcast(&m->handles_done);
	}
	pthread_mutex_unlock(&m->stamp_lock);
}

bool lm_handles_wait(struct lmount *m, uint64_t ino, unsigned ms)
{
	struct timespec until = deadline_after_ms(ms);
	bool none;
	int rc = 0;

	pthread_mutex_lock(&m->stamp_lock);
	while (u64map_get(&m->open_handles, ino) && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&m->handles_done, &m->stamp_lock, &until);
	none = u64map_get(&m->open_handles, ino) == NULL;
	pthread_mutex_unlock(&m->stamp_lock);
	return none;
}
