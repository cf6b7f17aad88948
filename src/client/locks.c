/*
 * The locks this client holds, as the MDS granted them: after an MDS restart the MDS forgot
 * them (they live in its memory), and the MDS connection's hello replays them, after the files
 * are opened again and before anything is resent (docs/architecture.md, Recovery).
 *
 * The record changes with every MDS_LOCK the MDS answered with 0 that granted or released a
 * lock, by the MDS's own code (common/lockrange.c: the same merges and splits), and in the
 * order the replies arrive: the change is made by the call's completion hook, on the MDS
 * connection's I/O thread. The MDS sends MDS_LOCK replies in the order it decided them
 * (src/mds/locks.c), so even two requests of one owner on one file in flight at once leave the
 * same ranges here as there. What is not known is not recorded: a call that failed (the
 * connection lost past the recovery window, an interrupted wait whose grant came too late)
 * records nothing, and the lock, if the MDS took it, is not replayed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "common/lockrange.h"
#include "common/log.h"

void held_locks_init(loom_fs *fs)
{
	pthread_mutex_init(&fs->held_lock, NULL);
	u64map_init(&fs->held);
}

static void free_list(uint64_t ino, void *val, void *arg)
{
	struct lock_range *head = val;

	(void)ino;
	(void)arg;
	lock_ranges_free(&head);
}

void held_locks_destroy(loom_fs *fs)
{
	u64map_each(&fs->held, free_list, NULL);
	u64map_destroy(&fs->held);
	pthread_mutex_destroy(&fs->held_lock);
}

static struct lock_op op_of(const struct lw_lock_req *q)
{
	return (struct lock_op){ .owner = q->owner, .start = q->start, .end = q->end, .type = q->type,
				 .pid = q->pid, .flock = (q->flags & LW_LK_FLOCK) != 0 };
}

/* Applies op to ino's ranges (held_lock held). */
static int apply_locked(loom_fs *fs, uint64_t ino, const struct lock_op *op)
{
	struct lock_range *head = u64map_get(&fs->held, ino), *was = head;
	int rc = lock_ranges_apply(&head, op);

	if (rc == 0 && head != was) {
		if (!head)
			u64map_del(&fs->held, ino);
		else if ((rc = u64map_put(&fs->held, ino, head)) < 0)
			lock_ranges_free(&head); /* only when ino was new: nothing else is lost */
	}
	return rc;
}

void held_locks_on_reply(struct rpc_call *call, void *arg)
{
	const struct held_note *n = arg;
	const struct lw_lock_req *q = &n->req;
	struct lock_op op = op_of(q);
	int rc;

	/* Tests and cancels change nothing; replays are the hello's own business. */
	if (call->status != 0 || (q->flags & (LW_LK_TEST | LW_LK_CANCEL | LW_LK_REPLAY | LW_LK_REPLAY_DONE)))
		return;
	pthread_mutex_lock(&n->fs->held_lock);
	rc = apply_locked(n->fs, q->ino, &op);
	pthread_mutex_unlock(&n->fs->held_lock);
	if (rc)
		log_warn("no memory to record a lock on inode %llu: it will not be replayed should the "
			 "MDS restart", (unsigned long long)q->ino);
}

size_t held_locks_count(loom_fs *fs, uint64_t ino)
{
	size_t n = 0;

	pthread_mutex_lock(&fs->held_lock);
	for (const struct lock_range *l = u64map_get(&fs->held, ino); l; l = l->next)
		n++;
	pthread_mutex_unlock(&fs->held_lock);
	return n;
}

/* A copy of every range held, for the replay (held_lock is not kept across requests). */
struct held_copy {
	uint64_t ino;
	struct lock_range l;
};

struct copy_scan {
	struct held_copy *v;
	size_t n, cap;
	int err;
};

static void copy_one(uint64_t ino, void *val, void *arg)
{
	struct copy_scan *c = arg;

	for (const struct lock_range *l = val; l && !c->err; l = l->next) {
		if (c->n == c->cap) {
			size_t cap = c->cap ? c->cap * 2 : 16;
			struct held_copy *p = realloc(c->v, cap * sizeof(*p));
			if (!p) {
				c->err = -ENOMEM;
				return;
			}
			c->v = p;
			c->cap = cap;
		}
		c->v[c->n].ino = ino;
		c->v[c->n].l = *l;
		c->v[c->n].l.next = NULL;
		c->n++;
	}
}

/* One MDS_LOCK in the hello: 0, the MDS's refusal, or a connection error. */
static int hs_lock(struct rpc_hs *hs, const struct loom_cred *cr, const struct lw_lock_req *q)
{
	uint8_t body[sizeof(struct lw_cred) + LOOM_MAX_GROUPS * 4 + sizeof(*q)];
	uint8_t reply[sizeof(struct lw_lock_rep)];
	uint32_t len = 0;
	struct lw_wr w;
	int rc;

	lw_wr_init(&w, body, sizeof(body));
	lw_put_cred(&w, cr);
	lw_wr_put(&w, q, sizeof(*q));
	rc = rpc_hs_call(hs, LW_OP_MDS_LOCK, body, (uint32_t)w.len, reply, sizeof(reply), &len);
	/* A replay is answered with lw_lock_rep, its end with nothing. */
	if (rc == 0 && len != ((q->flags & LW_LK_REPLAY) ? sizeof(struct lw_lock_rep) : 0))
		rc = -EPROTO;
	return rc;
}

int held_locks_replay(loom_fs *fs, struct rpc_hs *hs)
{
	struct copy_scan c = { 0 };
	struct lw_lock_req done = { .type = F_UNLCK, .end = UINT64_MAX, .flags = LW_LK_REPLAY_DONE };
	struct loom_cred cr;
	uint32_t lost = 0;
	int rc = 0;

	fs_cred(fs, &cr);
	pthread_mutex_lock(&fs->held_lock);
	u64map_each(&fs->held, copy_one, &c);
	pthread_mutex_unlock(&fs->held_lock);
	if (c.err) {
		free(c.v);
		return c.err; /* tried again with the next connection */
	}
	for (size_t i = 0; i < c.n; i++) {
		const struct lock_range *l = &c.v[i].l;
		struct lw_lock_req q = { .ino = c.v[i].ino, .owner = l->owner, .start = l->start,
					 .end = l->end, .type = l->type, .pid = l->pid,
					 .flags = LW_LK_REPLAY | (l->flock ? LW_LK_FLOCK : 0) };
		struct lock_op unlock = op_of(&q);

		rc = hs_lock(hs, &cr, &q);
		if (rc && fs_conn_error(rc))
			break;
		if (rc == 0)
			continue;
		/* Refused: the MDS did not keep it for this client (-ENOLCK: its session ended, or it
		 * came back too late; -EAGAIN: another client replayed a conflicting lock; -ESTALE:
		 * the file is gone; -EINVAL: an MDS that does not replay locks). Its process believes
		 * it still holds it: say so. */
		if (rc != -ESTALE)
			log_warn("a %s lock on inode %llu (%llu-%llu, pid %u) was lost when the MDS "
				 "restarted: %s", l->flock ? "flock" : "fcntl", (unsigned long long)q.ino,
				 (unsigned long long)l->start, (unsigned long long)l->end, l->pid,
				 strerror(-rc));
		unlock.type = F_UNLCK;
		pthread_mutex_lock(&fs->held_lock);
		apply_locked(fs, q.ino, &unlock); /* an unlock of a whole range needs no memory */
		pthread_mutex_unlock(&fs->held_lock);
		lost++;
		rc = 0;
	}
	/* Said also with nothing to replay: the MDS may be waiting for this client anyway. An MDS
	 * that does not know LW_LK_REPLAY_DONE answers -EINVAL, which changes nothing. */
	if (rc == 0) {
		rc = hs_lock(hs, &cr, &done);
		if (rc && !fs_conn_error(rc))
			rc = 0;
	}
	if (rc == 0 && c.n)
		log_info("replayed %zu lock(s) to the MDS (%u lost)", c.n - lost, lost);
	free(c.v);
	return rc;
}
