/*
 * The standby MDS (repl.h): until the coordinator makes it active, it follows the active MDS the
 * leader key names, pulls its commits (MDS_REPL_PULL) and applies each in a transaction of its
 * own MDT, which then holds what the active's held after that commit; the next pull says so
 * (the acknowledgement). A standby without an MDT, or whose MDT the active does not recognise as
 * a copy of its history, first takes a copy of the active's (MDS_REPL_COPY). It serves no client
 * meanwhile: it does not listen until it is active.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/dispatch.h"
#include "mds/repl.h"

#define PULL_WAIT_MS   1000
#define PULL_BYTES     (8u << 20)
#define COPY_BYTES     (8u << 20)
#define LOOK_EVERY_NS  1000000000ull /* how often a follower asks who leads */
#define COMMIT_MAX_BYTES (1ull << 30) /* a commit's records: LMDB's dirty pages bound them far below */

struct follower {
	const char *mdt_dir;
	struct mdt_store *store;    /* NULL while it has no MDT */
	struct mdt_repl_pos pos;
	struct mdt_repl_pos prev;   /* where the epoch of its last commit began */
	uint8_t uuid[16];
	int said;                   /* the failure last logged, said once while it repeats */
	struct rpc_conn *conn;
	char unreachable[MDS_REPL_NAME_MAX + 1]; /* the leader last found unreachable */
	uint8_t *pending;           /* the stream received past pos: a commit that came in part */
	size_t have, cap;
};

static int follower_open(struct follower *f)
{
	struct mdt_txn *t;
	int rc = mdt_store_open(f->mdt_dir, &f->store);

	if (rc == -ENOENT) {
		f->store = NULL;
		f->pos = f->prev = (struct mdt_repl_pos){ 0 };
		memset(f->uuid, 0, sizeof(f->uuid));
		return 0;
	}
	if (rc == 0)
		rc = mdt_store_uuid(f->store, f->uuid);
	if (rc == 0 && (rc = mdt_txn_begin(f->store, false, &t)) == 0) {
		rc = mdt_repl_pos_get(t, &f->pos);
		if (rc == 0)
			rc = mdt_repl_prev_get(t, &f->prev);
		mdt_txn_abort(t);
	}
	if (rc) {
		log_err("standby: cannot open the MDT in %s: %s", f->mdt_dir, strerror(-rc));
		mdt_store_close(f->store);
		f->store = NULL;
	}
	return rc;
}

static void follower_close_store(struct follower *f)
{
	mdt_store_close(f->store);
	f->store = NULL;
	f->have = 0;
}

/* Applies the complete commits at the front of pending, in one transaction. */
static int apply_pending(struct follower *f)
{
	struct mdt_txn *t = NULL;
	size_t used = 0;
	int rc = 0;

	while (f->have - used >= sizeof(struct lw_repl_commit)) {
		struct lw_repl_commit head;

		memcpy(&head, f->pending + used, sizeof(head));
		if (head.len > COMMIT_MAX_BYTES) {
			rc = -EPROTO; /* more than one transaction can hold */
			break;
		}
		if (head.seq != f->pos.seq + 1) {
			rc = -ESTALE; /* not the commit after this MDT's: not a copy of that history */
			break;
		}
		if (f->have - used - sizeof(head) < head.len)
			break; /* the rest comes with the next pull */
		if (!t && (rc = mdt_txn_begin(f->store, true, &t)) != 0)
			break;
		rc = mdt_redo_apply(t, f->pending + used + sizeof(head), head.len, head.nrec);
		if (rc)
			break;
		f->pos = (struct mdt_repl_pos){ .seq = head.seq, .epoch = head.epoch };
		used += sizeof(head) + head.len;
	}
	if (t && rc == 0)
		rc = mdt_repl_pos_put(t, &f->pos);
	if (t)
		rc = rc ? (mdt_txn_abort(t), rc) : mdt_txn_commit(t);
	/* Its acknowledgement is the next pull: what it says is on the disk (the MDT's commits
	 * leave the last meta page to the next sync otherwise). */
	if (t && rc == 0)
		rc = mdt_store_sync(f->store);
	if (rc) {
		/* Nothing of it was written: this MDT is as before, at the position it had. */
		struct mdt_txn *rt;

		if (mdt_txn_begin(f->store, false, &rt) == 0) {
			mdt_repl_pos_get(rt, &f->pos);
			mdt_txn_abort(rt);
		}
		f->have = 0;
		return rc;
	}
	memmove(f->pending, f->pending + used, f->have - used);
	f->have -= used;
	return 0;
}

static int pending_room(struct follower *f, size_t more)
{
	size_t want = f->have + more;
	uint8_t *p;

	if (want <= f->cap)
		return 0;
	p = realloc(f->pending, want);
	if (!p)
		return -ENOMEM;
	f->pending = p;
	f->cap = want;
	return 0;
}

/* One request to the active whose reply is a fixed struct (rep, len bytes) and bulk into buf (cap
 * bytes at most): -EPROTO unless the reply's struct is whole and says, in its first field after
 * `bytes_at`, as many bulk bytes as came. */
static int repl_call(struct rpc_conn *conn, uint16_t opcode, uint32_t flags, const void *req, uint32_t req_len,
		     void *buf, size_t cap, void *rep, size_t len, size_t bytes_at)
{
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct rpc_call call;
	uint32_t bytes;
	int rc;

	rpc_call_init(&call, opcode, req, req_len);
	call.flags = flags;
	call.rbulk = &iov;
	call.rbulk_cnt = 1;
	rc = rpc_call_sync(conn, &call);
	if (rc == 0 && call.rbody_len != len)
		rc = -EPROTO;
	if (rc == 0) {
		memcpy(rep, call.rbody, len);
		memcpy(&bytes, (const uint8_t *)rep + bytes_at, sizeof(bytes));
		if (bytes != call.rbulk_len)
			rc = -EPROTO;
	}
	rpc_call_release(&call);
	return rc;
}

static int pull_once(struct follower *f, const char *name)
{
	struct lw_repl_pull_req q = {
		.from_seq = f->pos.seq + 1, .applied_seq = f->pos.seq, .applied_epoch = f->pos.epoch,
		.from_off = (uint32_t)f->have, .max_bytes = PULL_BYTES, .wait_ms = PULL_WAIT_MS,
		.mdt_version = MDT_FORMAT_VERSION,
	};
	struct lw_repl_pull_rep rep;
	int rc = pending_room(f, PULL_BYTES);

	if (rc)
		return rc;
	memcpy(q.mdt_uuid, f->uuid, sizeof(q.mdt_uuid));
	snprintf(q.name, sizeof(q.name), "%s", name);
	rc = repl_call(f->conn, LW_OP_MDS_REPL_PULL, 0, &q, sizeof(q), f->pending + f->have, PULL_BYTES, &rep,
		       sizeof(rep), offsetof(struct lw_repl_pull_rep, bytes));
	if (rc)
		return rc;
	f->have += rep.bytes;
	return rep.bytes ? apply_pending(f) : 0;
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = fd < 0 || fsync(fd) != 0 ? -errno : 0;

	if (fd >= 0)
		close(fd);
	return rc;
}

/* Fetches a copy of the active's MDT and puts it in place of this one. One that diverged (it holds
 * commits the active never made) is kept aside, data.mdb.diverged-EPOCH-SEQ, for an admin to
 * look at; one that was only behind is simply replaced. */
static int take_copy(struct follower *f, bool diverged)
{
	char tmp[PATH_MAX], data[PATH_MAX], aside[PATH_MAX];
	uint64_t off = 0, size = UINT64_MAX;
	uint32_t gen = 0;
	uint8_t *buf = malloc(COPY_BYTES);
	int fd = -1, rc;

	if (!buf)
		return -ENOMEM;
	snprintf(aside, sizeof(aside), "%s/data.mdb.diverged-%llu-%llu", f->mdt_dir,
		 (unsigned long long)f->pos.epoch, (unsigned long long)f->pos.seq);
	follower_close_store(f);
	snprintf(tmp, sizeof(tmp), "%s/data.mdb.copy", f->mdt_dir);
	snprintf(data, sizeof(data), "%s/data.mdb", f->mdt_dir);
	rc = mkdir_p(f->mdt_dir, 0700);
	if (rc == 0) {
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		rc = fd < 0 ? -errno : 0;
	}
	log_info("standby: taking a copy of the active MDS's MDT");
	while (rc == 0 && off < size) {
		struct lw_repl_copy_req q = { .offset = off, .max_bytes = COPY_BYTES };
		struct lw_repl_copy_rep rep;

		/* The first waits while the copy is made. */
		rc = repl_call(f->conn, LW_OP_MDS_REPL_COPY, off ? 0 : RPC_NOTIMEOUT, &q, sizeof(q), buf, COPY_BYTES,
			       &rep, sizeof(rep), offsetof(struct lw_repl_copy_rep, bytes));
		/* A copy holds two meta pages at least; one copy, read in order to its end. */
		if (rc == 0 && (rep.size < 8192 || rep.bytes > rep.size - off ||
				(off && (rep.size != size || rep.gen != gen)) || (rep.bytes == 0 && off < rep.size)))
			rc = -EPROTO;
		if (rc == 0 && rep.bytes && pwrite(fd, buf, rep.bytes, (off_t)off) != (ssize_t)rep.bytes)
			rc = -EIO;
		if (rc == 0) {
			size = rep.size;
			gen = rep.gen;
			off += rep.bytes;
		}
	}
	free(buf);
	if (rc == 0 && fsync(fd) != 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc == 0 && diverged && access(data, F_OK) == 0 && rename(data, aside) != 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, data) != 0)
		rc = -errno;
	if (rc == 0)
		rc = fsync_dir(f->mdt_dir);
	if (rc) {
		unlink(tmp);
		log_err("standby: cannot take a copy of the active's MDT: %s", strerror(-rc));
		return rc;
	}
	log_info("standby: copy in place (%llu bytes)", (unsigned long long)size);
	return follower_open(f);
}

/* Follows `leader` while the coordinator names it. 0: look at the coordinator again; a negative
 * errno stops the standby for good. */
static int follow(struct follower *f, struct mds_coord *coord, const char *leader, const char *name,
		  const struct rpc_conn_opts *co)
{
	char host[64];
	uint16_t port;
	uint64_t looked = clock_mono_ns();
	int rc;

	if (addr_parse(leader, host, sizeof(host), &port, LW_DEFAULT_MDS_PORT)) {
		log_err("standby: the leader key names '%s', not an address", leader);
		return 0;
	}
	rc = rpc_conn_open(host, port, co, &f->conn);
	if (rc) {
		/* Said once per leader: it may be gone, its lease not expired yet. */
		if (strcmp(f->unreachable, leader))
			log_warn("standby: cannot reach the active MDS %s: %s", leader, strerror(-rc));
		snprintf(f->unreachable, sizeof(f->unreachable), "%s", leader);
		return 0;
	}
	f->unreachable[0] = '\0';
	f->have = 0; /* a commit begun under another leader, or run, is not this one's */
	log_info("standby: following %s from commit %llu", leader, (unsigned long long)f->pos.seq);
	for (;;) {
		if (!f->store || !f->pos.seq)
			rc = -ERANGE;
		else
			rc = pull_once(f, name);
		if (rc == -ERANGE || rc == -ESTALE) {
			if (rc == -ESTALE)
				log_warn("standby: this MDT holds commits the active never made (it served "
					 "before, and what it did not hand over was replayed by the clients)");
			rc = take_copy(f, rc == -ESTALE);
			if (rc == 0 && (!f->store || !f->pos.seq))
				rc = -EIO; /* a copy without a position: not a replicating MDS's */
		}
		if (rc == -EXDEV) {
			log_err("standby: the MDT in %s belongs to another file system than %s's", f->mdt_dir,
				leader);
			break;
		}
		if (rc == -EPROTONOSUPPORT) {
			log_err("standby: %s runs another MDT format", leader);
			break;
		}
		if (rc) {
			if (rc != f->said)
				log_warn("standby: following %s: %s", leader, strerror(-rc));
			f->said = rc;
			rc = 0;
			break;
		}
		f->said = 0;
		if (clock_mono_ns() - looked >= LOOK_EVERY_NS) {
			bool same;

			looked = clock_mono_ns();
			if (mds_coord_leader_is(coord, leader, &same) == 0 && !same)
				break;
		}
	}
	rpc_conn_close(f->conn);
	f->conn = NULL;
	return rc;
}

int mds_standby_run(struct mds *m, struct mds_coord *coord, const char *mdt_dir, const char *name,
		    const struct rpc_conn_opts *co)
{
	struct follower f = { .mdt_dir = mdt_dir };
	bool said_etcd = false;
	int rc = follower_open(&f);

	while (rc == 0) {
		enum mds_coord_role role;
		char leader[MDS_REPL_NAME_MAX + 1];
		uint64_t epoch = 0;

		struct mds_coord_mdt mdt = { .exists = f.store != NULL, .pos = f.pos, .prev = f.prev };

		rc = mds_coord_campaign(coord, &mdt, &role, &epoch, leader, sizeof(leader));
		if (rc) {
			if (!said_etcd)
				log_warn("standby: asking etcd who serves: %s (trying again)", strerror(-rc));
			said_etcd = true;
			rc = 0;
			sleep(1);
			continue;
		}
		said_etcd = false;
		if (role == COORD_ACTIVE) {
			m->repl.epoch = epoch;
			break;
		}
		if (role == COORD_FOLLOW)
			rc = follow(&f, coord, leader, name, co);
		if (rc == 0 && role != COORD_FOLLOW)
			sleep(1);
		else if (rc == 0)
			usleep(200 * 1000);
	}
	mdt_store_close(f.store);
	free(f.pending);
	return rc;
}
