/* What every operation shares: the caller's identity and job id, replies, open handles. */
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

/*
 * Interrupt slots: one per thread that serves requests, never freed (a thread that exits gives
 * its slot back for the next). An interrupt names the slot and the generation of the request
 * it is for: it may come after that request was answered (libfuse calls the function outside
 * the reply's locking), and must not end the slot's next request.
 */
#define LM_INTR_SLOTS 4096
struct lm_intr_slot {
	pthread_mutex_t lock;
	uint64_t gen;     /* bumped at every request's start and end */
	loom_intr *intr;
	int next_free;
};
static struct lm_intr_slot intr_slots[LM_INTR_SLOTS];
static pthread_mutex_t intr_slots_lock = PTHREAD_MUTEX_INITIALIZER;
static int intr_slots_used, intr_free = -1;
static pthread_key_t intr_key;
static pthread_once_t intr_key_once = PTHREAD_ONCE_INIT;
static _Thread_local int intr_slot_of_thread = -1;

static void intr_slot_give_back(void *arg)
{
	int slot = (int)(intptr_t)arg - 1;

	pthread_mutex_lock(&intr_slots_lock);
	intr_slots[slot].next_free = intr_free;
	intr_free = slot;
	pthread_mutex_unlock(&intr_slots_lock);
}

static void intr_key_make(void)
{
	if (pthread_key_create(&intr_key, intr_slot_give_back) != 0)
		log_warn("no thread key for interrupts: requests are not interruptible");
}

/* This thread's slot, taken at its first request; -1 when there is none to take. */
static int intr_slot(void)
{
	int slot = intr_slot_of_thread;

	if (slot >= 0)
		return slot;
	pthread_once(&intr_key_once, intr_key_make);
	pthread_mutex_lock(&intr_slots_lock);
	if (intr_free >= 0) {
		slot = intr_free;
		intr_free = intr_slots[slot].next_free;
	} else if (intr_slots_used < LM_INTR_SLOTS) {
		slot = intr_slots_used;
		intr_slots[slot].intr = loom_intr_new();
		if (intr_slots[slot].intr) {
			pthread_mutex_init(&intr_slots[slot].lock, NULL);
			intr_slots_used++;
		} else {
			slot = -1;
		}
	}
	pthread_mutex_unlock(&intr_slots_lock);
	if (slot >= 0 && pthread_setspecific(intr_key, (void *)(intptr_t)(slot + 1)) != 0)
		log_warn("interrupt slot %d will not be given back", slot);
	intr_slot_of_thread = slot;
	return slot;
}

static void on_interrupt(fuse_req_t req, void *data)
{
	uintptr_t v = (uintptr_t)data;
	int slot = (int)(v >> 40);
	struct lm_intr_slot *s = &intr_slots[slot];

	(void)req;
	pthread_mutex_lock(&s->lock);
	if ((s->gen & ((1ull << 40) - 1)) == (v & ((1ull << 40) - 1)))
		loom_intr_fire(s->intr);
	pthread_mutex_unlock(&s->lock);
}

void lm_job_enter(struct lmount *m, pid_t pid, uid_t uid, gid_t gid)
{
	char job[LOOM_JOBID_LEN];

	if (pid <= 0 || !m->jobs) {
		loom_job_set(NULL);
		return;
	}
	jobid_cache_get(m->jobs, pid, uid, gid, job);
	loom_job_set(job);
}

void lm_job_leave(void)
{
	loom_job_set(NULL);
}

struct lm_intr_scope lm_intr_enter(fuse_req_t req, int row)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct lm_intr_scope scope;
	struct lm_intr_slot *s;
	uint64_t gen;

	lm_op_begin(&lm_of(req)->mstats, row);
	scope.slot = intr_slot();

	/* The kernel names the calling thread (ctx->pid is its thread id, as Lustre's %p), and its
	 * uid and gid, not squashed: a job is the caller's, whatever the MDS is told. */
	lm_job_enter(lm_of(req), ctx->pid, ctx->uid, ctx->gid);
	if (scope.slot < 0)
		return scope;
	s = &intr_slots[scope.slot];
	pthread_mutex_lock(&s->lock);
	gen = ++s->gen;
	loom_intr_enter(s->intr); /* cleared: an interrupt of an earlier request is not this one's */
	pthread_mutex_unlock(&s->lock);
	fuse_req_interrupt_func(req, on_interrupt,
				(void *)(uintptr_t)(((uint64_t)scope.slot << 40) | (gen & ((1ull << 40) - 1))));
	return scope;
}

void lm_intr_leave(struct lm_intr_scope *scope)
{
	struct lm_intr_slot *s;

	lm_op_end(); /* (done already if the reply went through LM_REPLY) */
	lm_job_leave();
	if (scope->slot < 0)
		return;
	s = &intr_slots[scope->slot];
	pthread_mutex_lock(&s->lock);
	s->gen++; /* a late interrupt of the request just answered finds another generation */
	loom_intr_enter(NULL);
	pthread_mutex_unlock(&s->lock);
}

struct lm_count_scope lm_count_enter(fuse_req_t req, int row)
{
	lm_op_begin(&lm_of(req)->mstats, row);
	return (struct lm_count_scope){ .row = row };
}

void lm_count_leave(struct lm_count_scope *scope)
{
	(void)scope;
	lm_op_end();
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
	LM_REPLY(fuse_reply_entry(req, &e));
}

void lm_reply_attr(fuse_req_t req, int rc, const struct stat *st)
{
	if (rc) {
		lm_reply_err(req, rc);
		return;
	}
	lm_told_attr(lm_of(req), st);
	LM_REPLY(fuse_reply_attr(req, st, lm_of(req)->opts.attr_timeout));
}

void lm_stamps_fini(struct lmount *m)
{
	u64map_destroy(&m->posix_locked); /* its values are markers, not memory */
	u64map_destroy(&m->open_handles); /* and counts */
	u64map_destroy(&m->fhs);          /* closed by lm_handles_close_left */
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

void lm_fh_held(struct lmount *m, uint64_t fh)
{
	pthread_mutex_lock(&m->stamp_lock);
	if (u64map_put(&m->fhs, fh, (void *)1) < 0)
		log_warn("no memory to note a handle: left open at the MDS should its release not come");
	pthread_mutex_unlock(&m->stamp_lock);
}

void lm_fh_given_back(struct lmount *m, uint64_t fh)
{
	pthread_mutex_lock(&m->stamp_lock);
	u64map_del(&m->fhs, fh);
	pthread_mutex_unlock(&m->stamp_lock);
}

struct fh_list {
	uint64_t *fh;
	size_t n;
};

static void collect_fh(uint64_t key, void *val, void *arg)
{
	struct fh_list *l = arg;

	(void)val;
	l->fh[l->n++] = key;
}

void lm_handles_close_left(struct lmount *m)
{
	struct fh_list l = { NULL, 0 };

	pthread_mutex_lock(&m->stamp_lock);
	l.fh = calloc(m->fhs.count + 1, sizeof(*l.fh));
	if (l.fh)
		u64map_each(&m->fhs, collect_fh, &l);
	pthread_mutex_unlock(&m->stamp_lock);
	if (l.n)
		log_info("closing %zu handle(s) whose release did not come before the unmount", l.n);
	for (size_t i = 0; i < l.n; i++) {
		lm_fh_given_back(m, l.fh[i]);
		if (l.fh[i] & LM_FH_BEHIND)
			(void)loom_behind_close((loom_behind *)(uintptr_t)(l.fh[i] & ~LM_FH_BEHIND));
		else
			(void)loom_close((loom_file *)(uintptr_t)l.fh[i]);
	}
	free(l.fh);
}
