/*
 * Directory leases, the client's side (the MDS's: src/mds/leases.c). libloom keeps no cache
 * under them itself: loom-mount does (its negative lookups), and names a handler. Recalls come
 * as notifications on the MDS connection's I/O thread: the handler runs there at once (it only
 * drops what the lease covered, under a lock of its own), so that every reply that follows a
 * recall on the connection finds it handled; giving the leases back (MDS_LEASE, a call) is left
 * to the lease thread, since the I/O thread must not wait for a reply. "Lost" (a reply's
 * LW_RPF_LEASES_LOST, and every new MDS session) runs the handler the same way, with nothing to
 * give back.
 *
 * A lease is trusted only while the MDS was heard from within the lease_trust_ms its replies
 * say (loom_ll_leases_fresh): a client stopped (SIGSTOP, a swapped-out VM) past the MDS's
 * timeout may have lost its leases while a recall still waits in its socket.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "common/log.h"
#include "common/util.h"
#include "loom/loom_ll.h"

struct lease_item {
	uint64_t ino;   /* 0 with inode: every local open becomes real (leases lost) */
	uint64_t gen;
	bool inode;     /* an inode lease (ileases.c): its local opens become real first */
	struct loom_behind *orphan; /* not a lease: a create sent behind whose caller let go
	                             * before its answer came, to close (behind.c) */
};

struct loom_leases {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool started, stopping;
	loom_lease_fn fn;
	void *arg;
	struct lease_item *q;
	uint32_t n, cap;
	bool stopped;   /* the thread is gone: what comes later is done at once, or dropped */
};

static void push_item(loom_fs *fs, struct lease_item item)
{
	struct loom_leases *ls = fs->leases;
	uint64_t ino = item.ino;

	if (!ls) {
		if (item.orphan)
			behind_orphan_close(item.orphan, true);
		return;
	}
	pthread_mutex_lock(&ls->lock);
	if (ls->stopped) {
		/* Disconnecting: leases go back all at once (LW_LEASE_ALL), and an orphan's handle
		 * ends with the session; nothing is sent from here (perhaps the connection's own
		 * thread, under its locks). */
		pthread_mutex_unlock(&ls->lock);
		if (item.orphan)
			behind_orphan_close(item.orphan, false);
		return;
	}
	if (ls->n == ls->cap) {
		uint32_t cap = ls->cap ? ls->cap * 2 : 64;
		struct lease_item *q = realloc(ls->q, cap * sizeof(*q));

		if (!q) {
			/* Not given back: the MDS takes it back after its timeout. */
			pthread_mutex_unlock(&ls->lock);
			log_warn("no memory to answer a lease recall for inode %llu",
				 (unsigned long long)ino);
			return;
		}
		ls->q = q;
		ls->cap = cap;
	}
	ls->q[ls->n++] = item;
	pthread_cond_signal(&ls->cond);
	pthread_mutex_unlock(&ls->lock);
}

static void push(loom_fs *fs, uint64_t ino, uint64_t gen, bool inode)
{
	push_item(fs, (struct lease_item){ ino, gen, inode, NULL });
}

void leases_push_orphan(loom_fs *fs, struct loom_behind *b)
{
	push_item(fs, (struct lease_item){ 0, 0, false, b });
}

void leases_on_notify(void *arg, uint16_t opcode, const void *body, uint32_t len)
{
	loom_fs *fs = arg;
	const uint8_t *p;
	uint32_t count, flags;

	if (opcode != LW_OP_MDS_RECALL || lw_recall_decode(body, len, &p, &count, &flags)) {
		log_warn("MDS: malformed %s notification dropped", lw_op_name(opcode));
		return;
	}
	for (uint32_t i = 0; i < count; i++, p += sizeof(struct lw_lease)) {
		struct lw_lease l;

		memcpy(&l, p, sizeof(l));
		if (!l.ino || !fs->leases)
			continue;
		if (ileases_recalled(fs, l.ino, l.gen)) {
			/* Ended by the MDS (this client's own change): nothing to give back, and its
			 * local opens become real only if read again (ileases_file_check). */
			if (!(flags & LW_RC_ENDED))
				push(fs, l.ino, l.gen, true);
			continue;
		}
		atomic_fetch_add(&fs->dir_recalls, 1); /* files made behind learn their size anew */
		fs->leases->fn(fs->leases->arg, l.ino, l.gen);
		push(fs, l.ino, l.gen, false);
	}
}

void leases_lost(loom_fs *fs, uint64_t upto_gen)
{
	if (!fs->leases)
		return;
	atomic_fetch_add(&fs->dir_recalls, 1);
	fs->leases->fn(fs->leases->arg, 0, upto_gen);
	ileases_lost(fs, upto_gen);
}

void leases_drop_dir(loom_fs *fs, uint64_t dir)
{
	if (fs->leases && dir)
		fs->leases->fn(fs->leases->arg, dir, UINT64_MAX);
}

void leases_push_inode(loom_fs *fs, uint64_t ino, uint64_t gen)
{
	push(fs, ino, gen, true);
}

void leases_on_prefix(void *arg, const struct lw_mds_rep_prefix *pre, uint64_t sent_ns)
{
	loom_fs *fs = arg;
	uint64_t heard = atomic_load(&fs->mds_heard_ns);

	if (pre->flags & LW_RPF_LEASES_LOST)
		leases_lost(fs, pre->lease_gen);
	/* The reply was sent after any recall that came before it on this connection, which was
	 * handled as it came; and after its request left (sent_ns), which is where the trust runs
	 * from: the MDS, which cannot tell a client that is cut off, waits as long after its own
	 * last reply (leases.c's fence) before it lets others change what it covered. An error the
	 * frame layer answered has no prefix (all zeros). */
	if (pre->lease_trust_ms && sent_ns) {
		atomic_store(&fs->lease_trust_ms, pre->lease_trust_ms);
		if (sent_ns > heard)
			atomic_store(&fs->mds_heard_ns, sent_ns);
	}
}

bool loom_ll_leases_fresh(loom_fs *fs)
{
	uint64_t trust = (uint64_t)atomic_load(&fs->lease_trust_ms) * 1000000ull;

	return trust && clock_mono_ns() - atomic_load(&fs->mds_heard_ns) < trust;
}

/* Gives n leases back (from the lease thread). */
static void give_back(loom_fs *fs, const struct lease_item *items, uint32_t n)
{
	struct lw_lease_req req = { .count = 0 };
	struct lw_lease *ls = malloc((size_t)n * sizeof(*ls));
	uint64_t *inos = calloc(n, sizeof(*inos));
	uint32_t ninos = 0;
	int rc;

	for (uint32_t i = 0; i < n; i++)
		if (items[i].orphan)
			behind_orphan_close(items[i].orphan, true);
	if (!ls || !inos) {
		free(ls);
		free(inos);
		return;
	}
	/* Inode leases' local opens become real before they go (the MDS would let the file be
	 * unlinked and freed under them). */
	for (uint32_t i = 0; i < n; i++)
		if (items[i].inode)
			inos[ninos++] = items[i].ino;
	ileases_make_real(fs, inos, ninos);
	free(inos);
	for (uint32_t i = 0; i < n; i++)
		if (items[i].ino && items[i].gen)
			ls[req.count++] = (struct lw_lease){ items[i].ino, items[i].gen };
	if (req.count) {
		struct mdc_body b = { { &req, ls }, { sizeof(req), req.count * sizeof(*ls) } };
		struct rpc_call call;

		rc = mdc_call(fs, NULL, LW_OP_MDS_LEASE, &b, &call);
		if (rc == 0)
			rpc_call_release(&call);
		else
			log_debug("giving %u lease(s) back failed: %s", req.count, strerror(-rc));
	}
	free(ls);
}

/* At disconnect: every lease goes back in one MDS_LEASE (LW_LEASE_ALL), if the MDS is there, so
 * that it need not fence their files and directories for as long as this client might still have
 * trusted them (its connection just closing). What was cached under them is dropped first, and
 * the inode leases' local opens become real (the MDS would let the file be unlinked under them).
 * A recall that comes meanwhile needs no answer: the MDS takes this as one. */
static void give_back_all(loom_fs *fs)
{
	struct lw_lease_req req = { .count = 0, .flags = LW_LEASE_ALL };
	struct mdc_body b = { { &req }, { sizeof(req) } };
	const uint64_t every = 0;
	struct lw_lease *kept;
	struct rpc_call call;
	bool was;
	int rc;

	(void)ileases_take_all(fs, &kept);
	free(kept);
	fs->leases->fn(fs->leases->arg, 0, UINT64_MAX);
	was = rpc_nowait_swap(true);
	ileases_make_real(fs, &every, 1);
	rc = mdc_call(fs, NULL, LW_OP_MDS_LEASE, &b, &call);
	if (rc == 0)
		rpc_call_release(&call);
	else
		log_debug("giving every lease back failed: %s", strerror(-rc));
	rpc_nowait_swap(was);
}

static _Thread_local bool on_lease_thread;

bool leases_on_own_thread(void)
{
	return on_lease_thread;
}

static void *lease_thread(void *arg)
{
	loom_fs *fs = arg;
	struct loom_leases *ls = fs->leases;

	on_lease_thread = true;
	for (;;) {
		struct lease_item *items;
		uint32_t n;

		pthread_mutex_lock(&ls->lock);
		while (!ls->n && !ls->stopping)
			pthread_cond_wait(&ls->cond, &ls->lock);
		if (ls->stopping) {
			pthread_mutex_unlock(&ls->lock);
			return NULL;
		}
		n = ls->n > LW_LEASES_MAX ? LW_LEASES_MAX : ls->n;
		items = malloc((size_t)n * sizeof(*items));
		if (items) {
			memcpy(items, ls->q, (size_t)n * sizeof(*items));
			memmove(ls->q, ls->q + n, (size_t)(ls->n - n) * sizeof(*items));
			ls->n -= n;
		}
		pthread_mutex_unlock(&ls->lock);
		if (!items) {
			sleep_ms(10);
			continue;
		}
		give_back(fs, items, n);
		free(items);
	}
}

int loom_ll_set_lease_handler(loom_fs *fs, loom_lease_fn fn, void *arg)
{
	struct loom_leases *ls;
	int rc;

	if (!fn || fs->leases)
		return -EINVAL;
	ls = calloc(1, sizeof(*ls));
	if (!ls)
		return -ENOMEM;
	pthread_mutex_init(&ls->lock, NULL);
	pthread_cond_init(&ls->cond, NULL);
	ls->fn = fn;
	ls->arg = arg;
	/* Inode leases need the lease thread, which gives them back: with it, opens use them. */
	if (ileases_init(fs) != 0) {
		pthread_cond_destroy(&ls->cond);
		pthread_mutex_destroy(&ls->lock);
		free(ls);
		return -ENOMEM;
	}
	fs->leases = ls;
	rc = -pthread_create(&ls->thread, NULL, lease_thread, fs);
	if (rc) {
		fs->leases = NULL;
		ileases_destroy(fs);
		pthread_cond_destroy(&ls->cond);
		pthread_mutex_destroy(&ls->lock);
		free(ls);
		return rc;
	}
	ls->started = true;
	return 0;
}

void loom_ll_lease_return(loom_fs *fs, uint64_t ino, uint64_t gen)
{
	if (ino && gen)
		push(fs, ino, gen, false);
}

void leases_stop(loom_fs *fs)
{
	struct loom_leases *ls = fs->leases;

	if (!ls)
		return;
	pthread_mutex_lock(&ls->lock);
	ls->stopping = true;
	pthread_cond_signal(&ls->cond);
	pthread_mutex_unlock(&ls->lock);
	if (ls->started)
		pthread_join(ls->thread, NULL);
	/* Files made behind that are still owed their close; the leases queued (recalls that came
	 * after the thread's last turn) go back with all the others. */
	pthread_mutex_lock(&ls->lock);
	ls->stopped = true;
	pthread_mutex_unlock(&ls->lock);
	for (uint32_t i = 0; i < ls->n; i++)
		if (ls->q[i].orphan)
			behind_orphan_close(ls->q[i].orphan, true);
	ls->n = 0;
	give_back_all(fs);
}

void leases_destroy(loom_fs *fs)
{
	struct loom_leases *ls = fs->leases;

	if (!ls)
		return;
	fs->leases = NULL;
	ileases_destroy(fs);
	pthread_cond_destroy(&ls->cond);
	pthread_mutex_destroy(&ls->lock);
	free(ls->q);
	free(ls);
}
