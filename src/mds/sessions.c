/*
 * Client sessions and open handles. A handle keeps an unlinked file's inode and objects alive
 * until its last close; it belongs to a session, which outlives a broken connection for the
 * recovery window, so a client that reconnects keeps what it had open (and locked).
 *
 * Every public function takes sess_lock: read-only opens add handles (and anonymous sessions)
 * from the network thread. Sessions and handles are freed only by the metadata thread, so it
 * may keep using a session pointer after the lock is dropped.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/mds.h"

void mds_sessions_init(struct mds *m)
{
	m->next_sid = 0;
	/* Handles are numbered from a point of this run's own (the random boot id, below 2^62 so
	 * that no run wraps): a client's handle from an earlier run, which it did not open again
	 * (its open was answered as the MDS went down), must not name another file's handle now.
	 * The MDS takes a handle it does not know on trust; one it gave out to someone else is
	 * refused (-EBADF). */
	m->next_handle = (m->boot_id >> 2) & ~0xffffull;
	u64map_init(&m->sessions);
	u64map_init(&m->conn_sessions);
	u64map_init(&m->handles);
	u64map_init(&m->open_counts);
	u64map_init(&m->releasing);
	u64map_init(&m->writers);
	u64map_init(&m->shared_writes);
	u64map_init(&m->holds);
	u64map_init(&m->held);
	pthread_mutex_init(&m->sess_lock, NULL);
}

static void free_holds(uint64_t key, void *val, void *arg)
{
	(void)key;
	(void)arg;
	for (struct mds_hold *h = val, *next; h; h = next) {
		next = h->next;
		free(h);
	}
}

void mds_sessions_destroy(struct mds *m)
{
	u64map_destroy_free(&m->handles);
	u64map_destroy(&m->open_counts);
	u64map_destroy_free(&m->sessions); /* sessions hold no other memory */
	u64map_destroy(&m->conn_sessions);
	u64map_destroy(&m->releasing);
	u64map_each(&m->holds, free_holds, NULL);
	u64map_destroy(&m->holds);
	u64map_destroy(&m->held);
	u64map_destroy(&m->writers);
	u64map_destroy(&m->shared_writes);
	pthread_mutex_destroy(&m->sess_lock);
}

static struct mds_session *session_new(struct mds *m, uint64_t conn_id, const uint64_t uuid[2])
{
	struct mds_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->sid = ++m->next_sid;
	if (uuid)
		memcpy(s->uuid, uuid, sizeof(s->uuid));
	s->conn_id = conn_id;
	if (u64map_put(&m->sessions, s->sid, s) < 0 || u64map_put(&m->conn_sessions, conn_id, s) < 0) {
		u64map_del(&m->sessions, s->sid);
		free(s);
		return NULL;
	}
	return s;
}

static struct mds_session *session_of(struct mds *m, uint64_t conn_id)
{
	struct mds_session *s = u64map_get(&m->conn_sessions, conn_id);

	return s ? s : session_new(m, conn_id, NULL);
}

struct mds_session *mds_session_of(struct mds *m, uint64_t conn_id)
{
	struct mds_session *s;

	pthread_mutex_lock(&m->sess_lock);
	s = session_of(m, conn_id);
	pthread_mutex_unlock(&m->sess_lock);
	return s;
}

uint64_t mds_session_sid_known(struct mds *m, uint64_t conn_id)
{
	struct mds_session *s;
	uint64_t sid;

	pthread_mutex_lock(&m->sess_lock);
	s = u64map_get(&m->conn_sessions, conn_id);
	sid = s ? s->sid : 0;
	pthread_mutex_unlock(&m->sess_lock);
	return sid;
}

uint64_t mds_session_sid(struct mds *m, uint64_t conn_id)
{
	struct mds_session *s;
	uint64_t sid;

	pthread_mutex_lock(&m->sess_lock);
	s = session_of(m, conn_id);
	sid = s ? s->sid : 0;
	pthread_mutex_unlock(&m->sess_lock);
	return sid;
}

void mds_sessions_each(struct mds *m, void (*fn)(uint64_t, void *, void *), void *arg)
{
	pthread_mutex_lock(&m->sess_lock);
	u64map_each(&m->sessions, fn, arg);
	pthread_mutex_unlock(&m->sess_lock);
}

bool mds_session_needs_record(struct mds *m, uint64_t conn_id)
{
	struct mds_session *s;
	bool needs;

	pthread_mutex_lock(&m->sess_lock);
	s = u64map_get(&m->conn_sessions, conn_id);
	/* No session yet (its MDS_CONNECT may be in the same batch): perhaps. */
	needs = !s || ((s->uuid[0] || s->uuid[1]) && !s->recorded);
	pthread_mutex_unlock(&m->sess_lock);
	return needs;
}

int mds_session_record(struct mds *m, struct mdt_txn *t, struct mds_session *s)
{
	int rc;

	if (s->recorded || (!s->uuid[0] && !s->uuid[1]))
		return 0;
	rc = mdt_client_put(t, s->uuid);
	if (rc == 0)
		s->recorded = true;
	return rc;
}

int mds_session_bye(struct mds *m, struct mdt_txn *t, struct mds_session *s)
{
	int rc;

	s->leaving = true;
	if (!s->recorded || mds_locks_awaiting(m, s->uuid) || mds_locks_held_by(m, s->sid))
		return 0;
	rc = mdt_client_del(t, s->uuid);
	if (rc == 0)
		s->recorded = false;
	return rc;
}

struct uuid_find {
	const uint64_t *uuid;
	struct mds_session *found;
};

static void find_uuid(uint64_t key, void *val, void *arg)
{
	struct uuid_find *f = arg;
	struct mds_session *s = val;

	(void)key;
	if (s->uuid[0] == f->uuid[0] && s->uuid[1] == f->uuid[1])
		f->found = s;
}

static struct mds_session *session_connect(struct mds *m, uint64_t conn_id, const uint64_t uuid[2])
{
	struct uuid_find f = { .uuid = uuid };
	struct mds_session *cur = u64map_get(&m->conn_sessions, conn_id);

	if (uuid[0] == 0 && uuid[1] == 0)
		return session_of(m, conn_id);
	/* Connecting is rare (once per client and reconnection): a walk over the sessions will do. */
	u64map_each(&m->sessions, find_uuid, &f);
	if (!f.found) {
		if (cur) {
			/* The connection said something before connecting: its anonymous session
			 * becomes this client's. */
			memcpy(cur->uuid, uuid, sizeof(cur->uuid));
			return cur;
		}
		return session_new(m, conn_id, uuid);
	}
	if (cur && cur != f.found && !cur->handles) {
		/* An anonymous session of this connection gives way to the client's own. */
		mds_locks_drop_session(m, cur->sid);
		mds_leases_drop_session(m, cur->sid);
		u64map_del(&m->sessions, cur->sid);
		free(cur);
	} else if (cur && cur != f.found) {
		/* ... and one that opened files first is left to expire like a lost client's. */
		cur->conn_id = 0;
		cur->away_since_ns = clock_mono_ns();
	}
	if (f.found->conn_id && f.found->conn_id != conn_id)
		u64map_del(&m->conn_sessions, f.found->conn_id); /* its old connection is dead */
	if (f.found->conn_id != conn_id)
		log_info("client session %llu resumed on connection %llu", (unsigned long long)f.found->sid,
			 (unsigned long long)conn_id);
	f.found->conn_id = conn_id;
	f.found->away_since_ns = 0;
	if (u64map_put(&m->conn_sessions, conn_id, f.found) < 0)
		return NULL;
	return f.found;
}

int mds_sessions_forget_ranges(struct mds *m, struct mdt_txn *t)
{
	uint64_t (*uuids)[2];
	uint32_t n, forgotten = 0;
	int rc = mdt_client_inos_owners(t, &uuids, &n);

	for (uint32_t i = 0; i < n && rc == 0; i++) {
		struct uuid_find f = { .uuid = uuids[i] };

		pthread_mutex_lock(&m->sess_lock);
		u64map_each(&m->sessions, find_uuid, &f);
		pthread_mutex_unlock(&m->sess_lock);
		if (f.found)
			continue;
		rc = mdt_client_inos_del(t, uuids[i]);
		forgotten += rc == 0;
	}
	free(uuids);
	if (forgotten)
		log_info("forgot the inode numbers handed ahead to %u client(s) that did not come back "
			 "after the start", forgotten);
	return rc;
}

bool mds_session_connected(struct mds *m, const uint64_t uuid[2])
{
	struct uuid_find f = { .uuid = uuid };

	pthread_mutex_lock(&m->sess_lock);
	u64map_each(&m->sessions, find_uuid, &f);
	pthread_mutex_unlock(&m->sess_lock);
	return f.found && f.found->conn_id;
}

int mds_session_may_take(struct mds *m, const uint64_t uuid[2], const char *node)
{
	struct uuid_find f = { .uuid = uuid };
	int rc = 0;

	if (!node || (uuid[0] == 0 && uuid[1] == 0))
		return 0;
	pthread_mutex_lock(&m->sess_lock);
	u64map_each(&m->sessions, find_uuid, &f);
	if (f.found && f.found->owner_set && strncmp(f.found->owner, node, LW_NODE_NAME) != 0)
		rc = -EPERM;
	pthread_mutex_unlock(&m->sess_lock);
	return rc;
}

struct mds_session *mds_session_connect(struct mds *m, uint64_t conn_id, const uint64_t uuid[2])
{
	struct mds_session *s;

	pthread_mutex_lock(&m->sess_lock);
	s = session_connect(m, conn_id, uuid);
	pthread_mutex_unlock(&m->sess_lock);
	return s;
}

/* Whether one of the sessions' maps holds key, under the lock. */
static bool has_locked(struct mds *m, const struct u64map *map, uint64_t key)
{
	bool has;

	pthread_mutex_lock(&m->sess_lock);
	has = u64map_get(map, key) != NULL;
	pthread_mutex_unlock(&m->sess_lock);
	return has;
}

bool mds_ino_is_open(struct mds *m, uint64_t ino)
{
	return has_locked(m, &m->open_counts, ino);
}

/* Marks ino as being released (the lock held): opens from the network thread wait for the
 * commit. Without memory for the mark, false: the caller keeps the inode (an orphan, released
 * at the next start) rather than race an open. */
static bool mark_releasing(struct mds *m, uint64_t ino)
{
	return u64map_put(&m->releasing, ino, (void *)1) >= 0;
}

bool mds_ino_release_if_closed(struct mds *m, uint64_t ino)
{
	bool release;

	/* A replayed unlink: its client may still hold the file open and open it again once its
	 * replays are done. It stays an orphan, released after the recovery window if nobody did
	 * (housekeeping.c). */
	if (m->replay.active)
		return false;

	pthread_mutex_lock(&m->sess_lock);
	release = u64map_get(&m->open_counts, ino) == NULL && u64map_get(&m->held, ino) == NULL &&
		  mark_releasing(m, ino);
	pthread_mutex_unlock(&m->sess_lock);
	return release;
}

void mds_releases_settled(struct mds *m)
{
	pthread_mutex_lock(&m->sess_lock);
	if (m->releasing.count) { /* rare: only unlinked inodes are marked */
		u64map_destroy(&m->releasing);
		u64map_init(&m->releasing);
	}
	pthread_mutex_unlock(&m->sess_lock);
}

bool mds_ino_has_writer(struct mds *m, uint64_t ino)
{
	return has_locked(m, &m->writers, ino);
}

/* A per-inode count kept as the map's value; one that falls to 0 (or would go below) is removed. */
static int count_add(struct u64map *map, uint64_t key, int delta)
{
	uintptr_t old = (uintptr_t)u64map_get(map, key);

	if (delta < 0 && old <= (uintptr_t)-delta) {
		u64map_del(map, key);
		return 0;
	}
	return u64map_put(map, key, (void *)(old + (uintptr_t)(intptr_t)delta));
}

void mds_swap_done(struct mds *m, uint64_t ino, uint64_t tmp)
{
	struct mds_hold *h;

	pthread_mutex_lock(&m->sess_lock);
	/* Without memory for either note: opens still see the commit (mark failed: they may read the
	 * old layout, whose objects then stay until tmp is released, which the hold would delay). */
	mark_releasing(m, ino);
	if (u64map_get(&m->open_counts, ino) && (h = malloc(sizeof(*h)))) {
		h->tmp = tmp;
		h->next = u64map_get(&m->holds, ino);
		if (u64map_put(&m->holds, ino, h) < 0 || u64map_put(&m->held, tmp, (void *)(uintptr_t)ino) < 0) {
			if (h->next)
				u64map_put(&m->holds, ino, h->next);
			else
				u64map_del(&m->holds, ino);
			u64map_del(&m->held, tmp);
			free(h);
		}
	}
	pthread_mutex_unlock(&m->sess_lock);
}

/* ino's last handle closed (the lock held): the old objects its migrations kept for those
 * handles go now, with their tmp inodes once unlinked. */
static int holds_end(struct mds *m, struct mdt_txn *t, uint64_t ino, bool *released)
{
	struct mds_hold *h = u64map_get(&m->holds, ino);
	int rc = 0;

	while (h && rc == 0) {
		struct mds_hold *next = h->next;
		struct lw_attr a;

		u64map_del(&m->held, h->tmp);
		rc = mdt_getattr(t, h->tmp, &a);
		if (rc == 0 && a.nlink == 0 && !u64map_get(&m->open_counts, h->tmp)) {
			rc = mark_releasing(m, h->tmp) ? mdt_inode_release(t, h->tmp) : -ENOMEM;
			*released = true;
		} else if (rc == -ENOENT) {
			rc = 0;
		}
		if (rc) {
			u64map_put(&m->held, h->tmp, (void *)(uintptr_t)ino);
			break;
		}
		free(h);
		h = next;
	}
	if (h)
		u64map_put(&m->holds, ino, h);
	else
		u64map_del(&m->holds, ino);
	return rc;
}

static int handle_new(struct mds *m, uint64_t ino, uint64_t sid, bool writer, uint64_t req_id,
		      uint64_t *handle)
{
	struct mds_session *s = u64map_get(&m->sessions, sid);
	struct mds_handle *h;
	uintptr_t count = (uintptr_t)u64map_get(&m->open_counts, ino);

	if (!s)
		return -EIO;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->handle = ++m->next_handle;
	h->ino = ino;
	h->sid = sid;
	h->writer = writer;
	h->req_id = req_id;
	/* A second writer while one is open: their writes may cross (see handle_end). */
	if (writer && u64map_get(&m->writers, ino) &&
	    u64map_put(&m->shared_writes, ino, (void *)(uintptr_t)1) < 0) {
		free(h);
		return -ENOMEM;
	}
	if (writer && count_add(&m->writers, ino, 1) < 0) {
		free(h);
		return -ENOMEM;
	}
	if (writer)
		mds_resync_writer(m, ino);
	if (u64map_put(&m->handles, h->handle, h) < 0 ||
	    u64map_put(&m->open_counts, ino, (void *)(count + 1)) < 0) {
		u64map_del(&m->handles, h->handle);
		if (count)
			u64map_put(&m->open_counts, ino, (void *)count);
		else
			u64map_del(&m->open_counts, ino);
		free(h);
		return -ENOMEM;
	}
	h->next = s->handles;
	if (s->handles)
		s->handles->prev = h;
	s->handles = h;
	*handle = h->handle;
	return 0;
}

int mds_handle_open(struct mds *m, uint64_t ino, uint64_t sid, bool writer, uint64_t req_id,
		    uint64_t *handle)
{
	int rc;

	pthread_mutex_lock(&m->sess_lock);
	rc = handle_new(m, ino, sid, writer, req_id, handle);
	pthread_mutex_unlock(&m->sess_lock);
	return rc;
}

int mds_handle_open_shared(struct mds *m, uint64_t ino, uint64_t sid, uint64_t req_id,
			   uint64_t *handle)
{
	int rc = -EAGAIN;

	pthread_mutex_lock(&m->sess_lock);
	if (!u64map_get(&m->releasing, ino))
		rc = handle_new(m, ino, sid, false, req_id, handle);
	pthread_mutex_unlock(&m->sess_lock);
	return rc;
}

int mds_handle_find(struct mds *m, uint64_t sid, uint64_t ino, uint64_t req_id, uint64_t *handle)
{
	struct mds_session *s;
	int rc = -ENOENT;

	pthread_mutex_lock(&m->sess_lock);
	s = u64map_get(&m->sessions, sid);
	for (struct mds_handle *h = s ? s->handles : NULL; h; h = h->next)
		if (h->req_id == req_id && h->ino == ino) {
			*handle = h->handle;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&m->sess_lock);
	return rc;
}

int mds_handle_find_other(struct mds *m, uint64_t sid, uint64_t ino, uint64_t req_id, uint64_t *handle,
			  uint64_t *other)
{
	struct mds_session *s;
	int rc = -ENOENT;

	pthread_mutex_lock(&m->sess_lock);
	s = u64map_get(&m->sessions, sid);
	for (struct mds_handle *h = s ? s->handles : NULL; h; h = h->next)
		if (h->req_id == req_id && h->ino != ino) {
			*handle = h->handle;
			*other = h->ino;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&m->sess_lock);
	return rc;
}

int mds_handle_check(struct mds *m, uint64_t handle, uint64_t ino, uint64_t sid)
{
	struct mds_handle *h;
	int rc = 0;

	pthread_mutex_lock(&m->sess_lock);
	h = u64map_get(&m->handles, handle);
	if (h && (h->ino != ino || h->sid != sid))
		rc = -EBADF;
	pthread_mutex_unlock(&m->sess_lock);
	return rc;
}

bool mds_session_holds(struct mds *m, uint64_t sid, uint64_t ino, uint64_t handle, bool writer)
{
	struct mds_session *s;
	bool holds = false;

	pthread_mutex_lock(&m->sess_lock);
	if (handle) {
		struct mds_handle *h = u64map_get(&m->handles, handle);

		holds = h && h->ino == ino && h->sid == sid && (h->writer || !writer);
	} else if ((s = u64map_get(&m->sessions, sid))) {
		for (struct mds_handle *h = s->handles; h && !holds; h = h->next)
			holds = h->ino == ino && (h->writer || !writer);
	}
	pthread_mutex_unlock(&m->sess_lock);
	return holds;
}

/* Takes h out of the tables and frees it (the lock held). */
static void handle_unlink(struct mds *m, struct mds_handle *h)
{
	struct mds_session *s = u64map_get(&m->sessions, h->sid);

	/* Decrements need no memory. */
	count_add(&m->open_counts, h->ino, -1);
	if (h->writer)
		count_add(&m->writers, h->ino, -1);
	if (h->writer && !u64map_get(&m->writers, h->ino))
		u64map_del(&m->shared_writes, h->ino);
	u64map_del(&m->handles, h->handle);
	if (h->prev)
		h->prev->next = h->next;
	else if (s)
		s->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	free(h);
}

/* Ends a known handle (the lock held). The inode is released first, and the handle forgotten
 * only if that worked, so that a failure (the request is answered with it) leaves the handle to
 * retry. A mirrored file's last writer that closes (clean) ends its write-pending state; one
 * whose session ends without a close leaves it, for the resync to put the copies right. */
static int handle_end(struct mds *m, struct mdt_txn *t, struct mds_handle *h, bool clean, bool *released)
{
	uintptr_t count = (uintptr_t)u64map_get(&m->open_counts, h->ino);

	if (clean && h->writer && (uintptr_t)u64map_get(&m->writers, h->ino) == 1) {
		/* Writers that had the file open at once may have written the same stripe or row
		 * together, each to every copy (or with its parity) in an order of its own: the
		 * copies, or data and parity, may disagree though each write succeeded. As for a
		 * writer that went without closing, the first copy (the data) is taken as the file's
		 * and the others (the parity) made again from it. */
		uint32_t marked = 0;
		int rc = u64map_get(&m->shared_writes, h->ino) ? mdt_mirror_abandoned(t, h->ino, &marked) :
								 mdt_mirror_write_end(t, h->ino);

		if (rc)
			return rc;
		if (marked) {
			log_info("file %llu: written through several handles at once; %u of its objects to "
				 "make again from its others", (unsigned long long)h->ino, marked);
			m->truncator.more = true; /* an erasure-coded file is cut at its size first */
		}
	}

	if (count <= 1) {
		/* The last handle: a no-op for an inode that still has names. An unlinked one is
		 * marked first, so that no open on the network thread slips in before the commit.
		 * A migration's copy that holds the old objects of a file its readers still read
		 * (held) stays: holds_end releases it after their last close. */
		struct lw_attr a;
		int rc = mdt_getattr(t, h->ino, &a);
		bool held = rc == 0 && u64map_get(&m->held, h->ino) != NULL;

		if (rc == 0 && a.nlink == 0 && !held && !mark_releasing(m, h->ino))
			rc = -ENOMEM;
		if ((rc == 0 && !held) || rc == -ENOENT)
			rc = mdt_inode_release(t, h->ino);
		if (rc == 0)
			rc = holds_end(m, t, h->ino, released);
		if (rc)
			return rc;
		*released = true;
	}
	handle_unlink(m, h);
	return 0;
}

int mds_handle_close(struct mds *m, struct mdt_txn *t, uint64_t handle, uint64_t ino, uint64_t sid,
		     bool *released)
{
	struct mds_handle *h;
	int rc = 0;

	pthread_mutex_lock(&m->sess_lock);
	h = u64map_get(&m->handles, handle);
	if (h && (h->ino != ino || h->sid != sid))
		rc = -EBADF;
	else if (h)
		rc = handle_end(m, t, h, true, released);
	pthread_mutex_unlock(&m->sess_lock);
	return rc;
}

void mds_handle_forget(struct mds *m, uint64_t handle)
{
	struct mds_handle *h;

	pthread_mutex_lock(&m->sess_lock);
	h = u64map_get(&m->handles, handle);
	if (h)
		handle_unlink(m, h);
	pthread_mutex_unlock(&m->sess_lock);
}

/* Ends a session: its handles close (releasing unlinked inodes), its locks go. */
static int session_end(struct mds *m, struct mdt_txn *t, struct mds_session *s, bool *released)
{
	/* The inode numbers it was handed ahead: nobody creates with them any more. */
	int rc = s->uuid[0] || s->uuid[1] ? mdt_client_inos_del(t, s->uuid) : 0;

	if (rc)
		return rc;
	/* Its client holds nothing now: a start need not wait for it (unless a start is waiting
	 * for it right now: it may hold locks it has not replayed yet). */
	if (s->recorded && !mds_locks_awaiting(m, s->uuid)) {
		rc = mdt_client_del(t, s->uuid);
		if (rc)
			return rc;
		s->recorded = false;
	}
	while (s->handles) {
		int r = handle_end(m, t, s->handles, false, released);
		if (r) {
			rc = r;
			break; /* keep the session: its end is tried again on the next tick */
		}
	}
	if (rc)
		return rc;
	mds_locks_drop_session(m, s->sid);
	mds_leases_drop_session(m, s->sid);
	if (s->conn_id)
		u64map_del(&m->conn_sessions, s->conn_id);
	u64map_del(&m->sessions, s->sid);
	free(s);
	return 0;
}

static int session_disconnect(struct mds *m, struct mdt_txn *t, uint64_t conn_id, bool *released)
{
	struct mds_session *s = u64map_get(&m->conn_sessions, conn_id);

	if (!s)
		return 0;
	u64map_del(&m->conn_sessions, conn_id);
	if (s->conn_id != conn_id)
		return 0; /* it moved to a newer connection already */
	s->conn_id = 0;
	/* An anonymous session has no client that could come back for it, nor has one that said
	 * it goes. */
	if ((!s->uuid[0] && !s->uuid[1]) || s->leaving)
		return session_end(m, t, s, released);
	s->away_since_ns = clock_mono_ns();
	/* A client that goes away holding no lock has nothing to replay should the MDS restart
	 * meanwhile: a start need not wait for it. Its next MDS_LOCK records it again. */
	if (s->recorded && !mds_locks_awaiting(m, s->uuid) && !mds_locks_held_by(m, s->sid)) {
		int rc = mdt_client_del(t, s->uuid);
		if (rc)
			return rc;
		s->recorded = false;
	}
	return 0;
}

int mds_session_disconnect(struct mds *m, struct mdt_txn *t, uint64_t conn_id, bool *released)
{
	int rc;

	pthread_mutex_lock(&m->sess_lock);
	rc = session_disconnect(m, t, conn_id, released);
	pthread_mutex_unlock(&m->sess_lock);
	return rc;
}

struct expire_scan {
	uint64_t deadline;
	uint64_t *sids;
	size_t n, cap;
};

static void expire_scan_one(uint64_t sid, void *val, void *arg)
{
	struct expire_scan *e = arg;
	struct mds_session *s = val;

	if (s->conn_id || s->away_since_ns > e->deadline)
		return;
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 16;
		uint64_t *p = realloc(e->sids, cap * sizeof(*p));
		if (!p)
			return;
		e->sids = p;
		e->cap = cap;
	}
	e->sids[e->n++] = sid;
}

int mds_sessions_expire(struct mds *m, struct mdt_txn *t, uint64_t now_ns, bool *released)
{
	uint64_t window = (uint64_t)m->recovery_s * 1000000000ull;
	struct expire_scan e = { .deadline = now_ns > window ? now_ns - window : 0 };
	int rc = 0;

	if (now_ns <= window)
		return 0;
	pthread_mutex_lock(&m->sess_lock);
	u64map_each(&m->sessions, expire_scan_one, &e);
	for (size_t i = 0; i < e.n && rc == 0; i++) {
		struct mds_session *s = u64map_get(&m->sessions, e.sids[i]);
		if (!s)
			continue;
		log_info("client session %llu ended: its client has been away for %u s",
			 (unsigned long long)s->sid, m->recovery_s);
		rc = session_end(m, t, s, released);
	}
	pthread_mutex_unlock(&m->sess_lock);
	free(e.sids);
	return rc;
}
