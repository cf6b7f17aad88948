/*
 * The active MDS's half of replication (repl.h): the commit log a standby pulls from, its
 * acknowledgements, the wait that holds last_committed back until the standby has a commit, and
 * the copy a new standby starts from.
 *
 * The pulls are answered on the network thread (ops.def's NET column, repl): the metadata thread
 * may be the one waiting for the acknowledgement a pull carries.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/dispatch.h"
#include "mds/repl.h"
#include "net/bulk.h"


struct repl_commit {
	struct repl_commit *next;
	uint64_t seq;
	size_t len;    /* of frame */
	uint8_t *frame; /* lw_repl_commit + records (the redo the MDT handed over) */
};

/* Every MDS reply starts with the prefix (wire.h): this MDS's epoch and what is committed. */
static void repl_reply(struct mds *m, struct srv_req *req, int status, const void *body, uint32_t len,
		       void *bulk, uint32_t bulk_len)
{
	struct {
		struct lw_mds_rep_prefix pre;
		uint8_t body[sizeof(struct lw_repl_pull_rep) > sizeof(struct lw_repl_copy_rep) ?
				     sizeof(struct lw_repl_pull_rep) : sizeof(struct lw_repl_copy_rep)];
	} r = { .pre = { .last_committed = atomic_load(&m->commit.last_committed),
			 .epoch = (uint32_t)m->repl.epoch } };

	if (status || len > sizeof(r.body))
		len = 0;
	if (len)
		memcpy(r.body, body, len);
	srv_reply(req, status, &r, (uint32_t)(sizeof(r.pre) + len), status ? NULL : bulk,
		  status ? 0 : bulk_len, bulk_free);
	if (status)
		bulk_free(bulk);
}

/* The MDT's commit hook (mdt_store_set_redo), on the thread that commits. */
static void on_commit(void *arg, void *frame, size_t len)
{
	struct mds *m = arg;
	struct mds_repl *r = &m->repl;
	struct repl_commit *c = malloc(sizeof(*c));
	struct lw_repl_commit head;
	struct srv_req *wake = NULL;

	memcpy(&head, frame, sizeof(head));
	pthread_mutex_lock(&r->lock);
	r->last_seq = head.seq;
	if (!c) {
		/* A standby that needs this commit will not find it: it takes a copy. */
		free(frame);
		while (r->head) {
			struct repl_commit *old = r->head;

			r->head = old->next;
			free(old->frame);
			free(old);
		}
		r->tail = NULL;
		r->bytes = 0;
	} else {
		*c = (struct repl_commit){ .seq = head.seq, .len = len, .frame = frame };
		if (r->tail)
			r->tail->next = c;
		else
			r->head = c;
		r->tail = c;
		r->bytes += len;
		/* The oldest go once the log is too big (a standby that far behind takes a copy),
		 * never the newest. */
		while (r->bytes > MDS_REPL_LOG_BYTES && r->head != r->tail) {
			struct repl_commit *old = r->head;

			r->head = old->next;
			r->bytes -= old->len;
			free(old->frame);
			free(old);
		}
	}
	if (r->parked && r->parked_from <= r->last_seq) {
		wake = r->parked;
		r->parked = NULL;
	}
	pthread_mutex_unlock(&r->lock);
	if (wake)
		mds_repl_pull(m, wake); /* answered with what it asked for, there now */
}

int mds_repl_start(struct mds *m)
{
	struct mds_repl *r = &m->repl;
	struct mdt_repl_pos pos;
	struct mdt_txn *t;
	int rc;

	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	pthread_mutex_init(&r->copy_lock, NULL);
	r->copy_fd = -1;
	if (!r->timeout_ms)
		r->timeout_ms = MDS_REPL_TIMEOUT_MS;
	rc = mdt_store_uuid(m->store, r->uuid);
	if (rc)
		return rc;
	rc = mdt_txn_begin(m->store, false, &t);
	if (rc)
		return rc;
	rc = mdt_repl_pos_get(t, &pos);
	if (rc == 0)
		rc = mdt_repl_prev_get(t, &r->prev);
	mdt_txn_abort(t);
	if (rc)
		return rc;
	rc = mdt_store_set_redo(m->store, r->epoch, on_commit, m);
	if (rc)
		return rc;
	r->last_seq = pos.seq;
	if (pos.epoch != r->epoch) {
		/* A new epoch begins after the last commit of the one before: a standby that holds
		 * no more of that one than this MDT does is a copy of its history (mds_repl_pull). */
		r->prev = pos;
		rc = mdt_txn_begin(m->store, true, &t);
		if (rc == 0) {
			rc = mdt_repl_prev_put(t, &r->prev);
			rc = rc ? (mdt_txn_abort(t), rc) : mdt_txn_commit(t);
		}
		if (rc)
			return rc;
	}
	log_info("replication: epoch %llu begins after commit %llu of epoch %llu",
		 (unsigned long long)r->epoch, (unsigned long long)r->prev.seq,
		 (unsigned long long)r->prev.epoch);
	return 0;
}

void mds_repl_stop(struct mds *m)
{
	struct mds_repl *r = &m->repl;

	if (!r->on)
		return;
	/* A copy being made reads the MDT, which closes after this. */
	for (;;) {
		bool busy;

		pthread_mutex_lock(&r->copy_lock);
		busy = r->copy_busy;
		pthread_mutex_unlock(&r->copy_lock);
		if (!busy)
			break;
		sleep_ms(50);
	}
	pthread_mutex_lock(&r->lock);
	while (r->head) {
		struct repl_commit *c = r->head;

		r->head = c->next;
		free(c->frame);
		free(c);
	}
	r->tail = NULL;
	if (r->parked)
		srv_req_drop(r->parked);
	r->parked = NULL;
	pthread_mutex_unlock(&r->lock);
	pthread_mutex_lock(&r->copy_lock);
	if (r->copy_fd >= 0)
		close(r->copy_fd);
	r->copy_fd = -1;
	pthread_mutex_unlock(&r->copy_lock);
}

/* The standby falls (r->lock held): commits stop waiting for it once it is struck. */
static void fall_locked(struct mds_repl *r)
{
	if (r->state != REPL_ALONE)
		r->strike_pending = true;
	r->state = REPL_ALONE;
	r->gen++;
}

int mds_repl_wait(struct mds *m, uint64_t seq)
{
	struct mds_repl *r = &m->repl;
	uint64_t deadline = clock_mono_ns() + (uint64_t)r->timeout_ms * 1000000ull;
	bool pending;

	if (!r->on || atomic_load(&r->draining))
		return 0;
	pthread_mutex_lock(&r->lock);
	while (r->state != REPL_ALONE && r->acked_seq < seq && clock_mono_ns() < deadline) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 100 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&r->cond, &r->lock, &ts);
	}
	if (r->state != REPL_ALONE && r->acked_seq < seq) {
		log_warn("replication: standby %s did not acknowledge commit %llu within %u ms: going on "
			 "without it", r->standby, (unsigned long long)seq, r->timeout_ms);
		fall_locked(r);
	}
	pending = r->strike_pending;
	pthread_mutex_unlock(&r->lock);
	/* A standby that fell (here, or silent, or behind what it acknowledged) is struck before
	 * this commit counts: the coordinator must not list an MDS that lacks it. */
	return pending ? mds_coord_strike(r->coord, m) : 0;
}

void mds_repl_view(struct mds *m, struct mds_repl_view *v)
{
	struct mds_repl *r = &m->repl;

	pthread_mutex_lock(&r->lock);
	v->state = r->state;
	v->gen = r->gen;
	v->strike_pending = r->strike_pending;
	v->silent = r->state != REPL_ALONE &&
		    clock_mono_ns() - r->heard_ns > (uint64_t)r->timeout_ms * 1000000ull;
	snprintf(v->standby, sizeof(v->standby), "%s", r->standby);
	pthread_mutex_unlock(&r->lock);
}

void mds_repl_listed(struct mds *m, uint64_t gen)
{
	struct mds_repl *r = &m->repl;

	pthread_mutex_lock(&r->lock);
	if (r->gen == gen && r->state == REPL_JOINING)
		r->state = REPL_SYNC;
	pthread_mutex_unlock(&r->lock);
}

void mds_repl_struck(struct mds *m, uint64_t gen)
{
	struct mds_repl *r = &m->repl;

	pthread_mutex_lock(&r->lock);
	if (r->gen == gen)
		r->strike_pending = false;
	pthread_mutex_unlock(&r->lock);
}

void mds_repl_fall_silent(struct mds *m, uint64_t gen)
{
	struct mds_repl *r = &m->repl;

	pthread_mutex_lock(&r->lock);
	if (r->gen == gen && r->state != REPL_ALONE) {
		log_warn("replication: standby %s silent for %u ms: going on without it", r->standby,
			 r->timeout_ms);
		fall_locked(r);
	}
	pthread_mutex_unlock(&r->lock);
}

/* Is the standby's MDT, which holds every commit up to seq, the last of epoch, a copy of this
 * MDT's history? Only as far back as the epoch before this one is known. */
static bool history_holds(const struct mds_repl *r, uint64_t seq, uint64_t epoch)
{
	if (seq == 0 || seq > r->last_seq)
		return false;
	if (seq > r->prev.seq)
		return epoch == r->epoch;
	return epoch == r->prev.epoch;
}

/* The stream from (from, off), up to max bytes, in a bulk buffer; under r->lock. -ERANGE when
 * `from` is gone from the log. */
static int stream_take(struct mds_repl *r, uint64_t from, uint32_t off, uint32_t max, void **bulk,
		       uint32_t *bytes)
{
	struct repl_commit *c = r->head;
	uint32_t n = 0;
	uint8_t *buf;

	while (c && c->seq < from)
		c = c->next;
	if (!c || c->seq != from || off >= c->len)
		return -ERANGE;
	buf = bulk_alloc(max);
	if (!buf)
		return -ENOMEM;
	for (; c && n < max; c = c->next, off = 0) {
		size_t take = c->len - off < max - n ? c->len - off : max - n;

		memcpy(buf + n, c->frame + off, take);
		n += (uint32_t)take;
	}
	*bulk = buf;
	*bytes = n;
	return 0;
}

/* The standby's acknowledgement, in a pull (r->lock held). -EBUSY for another standby while
 * this one counts: it must be struck first (silent, the coordinator does it). */
static int take_ack(struct mds_repl *r, const struct lw_repl_pull_req *p)
{
	if (strcmp(r->standby, p->name)) {
		if (r->state != REPL_ALONE || r->strike_pending)
			return -EBUSY;
		if (r->standby[0])
			log_info("replication: standby %s replaces %s", p->name, r->standby);
		snprintf(r->standby, sizeof(r->standby), "%s", p->name);
		r->gen++;
		r->acked_seq = 0;
	} else if (p->applied_seq < r->acked_seq) {
		/* It holds less than it acknowledged (its host lost what it had written?). */
		if (r->state != REPL_ALONE)
			log_warn("replication: standby %s holds commit %llu, after acknowledging %llu",
				 r->standby, (unsigned long long)p->applied_seq,
				 (unsigned long long)r->acked_seq);
		fall_locked(r);
		r->acked_seq = p->applied_seq;
	}
	if (p->applied_seq > r->acked_seq)
		r->acked_seq = p->applied_seq;
	r->heard_ns = clock_mono_ns();
	if (r->state == REPL_ALONE && !r->strike_pending && r->acked_seq == r->last_seq) {
		r->state = REPL_JOINING;
		log_info("replication: standby %s has every commit (%llu): it counts from now on", r->standby,
			 (unsigned long long)r->last_seq);
	}
	pthread_cond_broadcast(&r->cond);
	return 0;
}

/* What a pull says of itself that the decoder does not check: a name that can sit in the
 * coordinator's comma-separated list and is not this MDS's, and a uuid with any position. */
static int pull_check(const struct mds_repl *r, const struct lw_repl_pull_req *p)
{
	static const uint8_t no_uuid[16];
	bool has_uuid = memcmp(p->mdt_uuid, no_uuid, 16) != 0;

	if (p->mdt_version != MDT_FORMAT_VERSION)
		return -EPROTONOSUPPORT;
	if (strchr(p->name, ',') || strchr(p->name, ' ') || (!has_uuid && p->applied_seq))
		return -EPROTO;
	if (!strcmp(p->name, r->name)) {
		log_err("replication: a standby calls itself %s, this MDS's name: two MDSs with one name "
			"(--advertise)", p->name);
		return -EADDRINUSE;
	}
	return has_uuid && memcmp(p->mdt_uuid, r->uuid, 16) ? -EXDEV : 0;
}

void mds_repl_pull(struct mds *m, struct srv_req *req)
{
	struct mds_repl *r = &m->repl;
	struct lw_repl_pull_rep rep = { 0 };
	struct lw_mds_req q;
	void *bulk = NULL;
	int rc = mds_decode_req(m, req, &q);
	const struct lw_repl_pull_req *p = &q.u.repl_pull;

	if (rc == 0 && !r->on)
		rc = -EOPNOTSUPP; /* not replicating: no standby follows this MDS */
	if (rc == 0)
		rc = pull_check(r, p);
	if (rc) {
		repl_reply(m, req, rc, NULL, 0, NULL, 0);
		return;
	}
	pthread_mutex_lock(&r->lock);
	rep.epoch = r->epoch;
	rep.last_seq = r->last_seq;
	if (p->applied_seq && !history_holds(r, p->applied_seq, p->applied_epoch))
		rc = -ESTALE;
	else if (!p->applied_seq)
		rc = -ERANGE; /* an empty standby starts from a copy */
	else
		rc = take_ack(r, p);
	if (rc == 0 && p->from_seq > r->last_seq) {
		struct srv_req *old = r->parked;

		/* Nothing new: held until a commit, or the wait it asked for. Parked before anyone
		 * can take it from r->parked and answer it. */
		srv_req_park(req);
		r->parked = req;
		r->parked_from = p->from_seq;
		r->parked_until_ns = clock_mono_ns() + (uint64_t)p->wait_ms * 1000000ull;
		pthread_mutex_unlock(&r->lock);
		if (old)
			repl_reply(m, old, 0, &rep, sizeof(rep), NULL, 0);
		return;
	}
	if (rc == 0)
		rc = stream_take(r, p->from_seq, p->from_off, p->max_bytes, &bulk, &rep.bytes);
	rep.flags = r->state == REPL_SYNC ? LW_REPL_F_SYNC : 0;
	pthread_mutex_unlock(&r->lock);
	if (rc)
		repl_reply(m, req, rc, NULL, 0, NULL, 0);
	else
		repl_reply(m, req, 0, &rep, sizeof(rep), bulk, rep.bytes);
}

void mds_repl_tick(struct mds *m)
{
	struct mds_repl *r = &m->repl;
	struct lw_repl_pull_rep rep = { 0 };
	struct srv_req *req = NULL;

	if (!r->on)
		return;
	pthread_mutex_lock(&r->lock);
	if (r->parked && clock_mono_ns() >= r->parked_until_ns) {
		req = r->parked;
		r->parked = NULL;
		rep = (struct lw_repl_pull_rep){ .last_seq = r->last_seq, .epoch = r->epoch,
						 .flags = r->state == REPL_SYNC ? LW_REPL_F_SYNC : 0 };
	}
	pthread_mutex_unlock(&r->lock);
	if (req)
		repl_reply(m, req, 0, &rep, sizeof(rep), NULL, 0);
}

/* ---- the copy ---- */

struct copy_job {
	struct mds *m;
	struct srv_req *req;
	struct lw_repl_copy_req q;
};

static void copy_answer(struct mds *m, struct srv_req *req, const struct lw_repl_copy_req *q)
{
	struct mds_repl *r = &m->repl;
	struct lw_repl_copy_rep rep = { 0 };
	void *bulk = NULL;
	ssize_t n = 0;
	int rc = 0;

	pthread_mutex_lock(&r->copy_lock);
	if (r->copy_fd < 0) {
		rc = -ENOENT; /* no copy made: ask for offset 0 first */
	} else {
		rep.size = r->copy_size;
		rep.gen = r->copy_gen;
		if (q->offset < r->copy_size) {
			uint64_t left = r->copy_size - q->offset;
			size_t want = left < q->max_bytes ? (size_t)left : q->max_bytes;

			bulk = bulk_alloc(want);
			n = bulk ? pread(r->copy_fd, bulk, want, (off_t)q->offset) : -1;
			if (!bulk)
				rc = -ENOMEM;
			else if (n != (ssize_t)want)
				rc = n < 0 ? -errno : -EIO;
		}
		/* Read to its end: its disk space (as large as the MDT) goes back now. */
		if (rc == 0 && q->offset + (uint64_t)n >= r->copy_size) {
			close(r->copy_fd);
			r->copy_fd = -1;
		}
	}
	pthread_mutex_unlock(&r->copy_lock);
	if (rc) {
		bulk_free(bulk);
		repl_reply(m, req, rc, NULL, 0, NULL, 0);
		return;
	}
	rep.bytes = (uint32_t)n;
	repl_reply(m, req, 0, &rep, sizeof(rep), bulk, rep.bytes);
}

/* Makes a new copy (a thread of its own: a large MDT takes a while), then answers. */
static void *copy_make(void *arg)
{
	struct copy_job *j = arg;
	struct mds_repl *r = &j->m->repl;
	int fd = open(r->mdt_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	int rc = fd < 0 ? -errno : mdt_store_copy_fd(j->m->store, fd);
	off_t size = rc == 0 ? lseek(fd, 0, SEEK_END) : -1;

	if (rc == 0 && size < 0)
		rc = -errno;
	pthread_mutex_lock(&r->copy_lock);
	if (rc == 0) {
		if (r->copy_fd >= 0)
			close(r->copy_fd);
		r->copy_fd = fd;
		r->copy_size = (uint64_t)size;
		r->copy_gen++;
		log_info("replication: a copy of the MDT for a standby (%llu bytes)",
			 (unsigned long long)size);
	} else if (fd >= 0) {
		close(fd);
	}
	pthread_mutex_unlock(&r->copy_lock);
	if (rc) {
		log_err("replication: cannot copy the MDT for a standby: %s", strerror(-rc));
		repl_reply(j->m, j->req, rc, NULL, 0, NULL, 0);
	} else {
		copy_answer(j->m, j->req, &j->q);
	}
	/* Only now: the MDS's shutdown waits for this, and its server must outlive the reply. */
	pthread_mutex_lock(&r->copy_lock);
	r->copy_busy = false;
	pthread_mutex_unlock(&r->copy_lock);
	free(j);
	return NULL;
}

void mds_repl_copy(struct mds *m, struct srv_req *req)
{
	struct mds_repl *r = &m->repl;
	struct lw_mds_req q;
	struct copy_job *j;
	pthread_attr_t attr;
	pthread_t th;
	int rc = mds_decode_req(m, req, &q);

	if (rc == 0 && !r->on)
		rc = -EOPNOTSUPP;
	if (rc == 0 && q.u.repl_copy.offset) {
		copy_answer(m, req, &q.u.repl_copy);
		return;
	}
	if (rc == 0) {
		pthread_mutex_lock(&r->copy_lock);
		rc = r->copy_busy ? -EBUSY : 0;
		r->copy_busy = true;
		pthread_mutex_unlock(&r->copy_lock);
	}
	j = rc ? NULL : malloc(sizeof(*j));
	if (rc == 0 && !j)
		rc = -ENOMEM;
	if (rc == 0) {
		*j = (struct copy_job){ .m = m, .req = req, .q = q.u.repl_copy };
		srv_req_park(req);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = -pthread_create(&th, &attr, copy_make, j);
		pthread_attr_destroy(&attr);
		if (rc == 0)
			return;
		free(j);
	}
	if (rc != -EBUSY) {
		pthread_mutex_lock(&r->copy_lock);
		r->copy_busy = false;
		pthread_mutex_unlock(&r->copy_lock);
	}
	repl_reply(m, req, rc, NULL, 0, NULL, 0);
}
