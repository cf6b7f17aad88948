/*
 * loom-mds internals.
 *
 * Threads:
 *  - the event loop (main thread) reads and checks frames and queues them;
 *  - the metadata thread takes every queued request at once, runs them in one LMDB write
 *    transaction (one child transaction each, so a failed one leaves no trace), commits once
 *    (group commit: one fsync for the whole batch), and only then sends the replies, so nothing
 *    is acknowledged before it is durable;
 *  - the destroyer sends OST_DESTROY for the objects of released files, outside the metadata
 *    thread, and reports back through the same queue.
 * Only the metadata thread writes the store and touches the OST table. Requests that only read
 * the MDT, and opens for reading (which also add a handle, under sess_lock), are answered on the
 * network thread that received them, in a read transaction.
 */
#ifndef LOOM_MDS_MDS_H
#define LOOM_MDS_MDS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/u64map.h"
#include "mds/repl.h"
#include "mdt/store.h"
#include "net/nodemap.h"
#include "net/reqq.h"
#include "net/rpc.h"
#include "net/server.h"

/* A handle to end on the metadata thread (an open on the network thread that failed). */
struct mds_handle_ref {
	uint64_t handle, ino, sid;
};

/*
 * Work the MDS gives itself. It waits in the metadata thread's queue among the client requests
 * (a client's disconnect comes after its last request) and runs in the same batches and
 * transactions, but it comes from no connection and gets no reply.
 */
enum mds_work_kind {
	MDS_WORK_DISCONNECT = REQQ_SRV_REQ + 1, /* a client's connection closed */
	MDS_WORK_DROP_HANDLE, /* the handle of an open that failed on the network thread */
	MDS_WORK_DESTROYED,   /* the destroyer's report: objects destroyed on their OSTs */
	MDS_WORK_TRUNCATED,   /* the truncator's report: what it cut (truncator.c) */
	MDS_WORK_RESYNCED,    /* the resyncer's report: mirrored copies made again (resync.c) */
	MDS_WORK_MIRROR_TIDY, /* mirrored files whose entry in the MDT's table to put right */
};

struct mds_work {
	struct reqq_item qitem;       /* qitem.kind: its enum mds_work_kind */
	uint64_t conn_id;             /* DISCONNECT: the connection */
	struct mds_handle_ref handle; /* DROP_HANDLE */
	bool all_done;                /* DESTROYED: every object it was given is gone */
	uint32_t n;                   /* DESTROYED, TRUNCATED: entries in data */
	_Alignas(8) uint8_t data[];   /* DESTROYED: struct loom_ostobj[n]; TRUNCATED: results[n] */
};

/* A zeroed work item with room for n entries of entry_size bytes; NULL without memory. */
struct mds_work *mds_work_new(enum mds_work_kind kind, uint32_t n, size_t entry_size);
/* The work item a queue item of a kind other than REQQ_SRV_REQ is. */
struct mds_work *mds_work_of(struct reqq_item *item);

#define MDS_OST_DEAD_SECONDS 10 /* an OST not heard from this long is inactive */

/* One entry handed to the destroyer: an object and where its OST is served. */
struct mds_destroy_item {
	struct loom_ostobj obj;
	char host[64];
	uint16_t port;
};

/* truncator.c: cuts the objects of truncated files; replies wait for their truncation. */
struct mds_trunc_job;
struct mds_parked;
struct mds_truncator {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct mds_trunc_job *jobs; /* handed over by the metadata thread */
	uint32_t njobs;
	bool stopping;
	/* The metadata thread's: */
	bool busy;                 /* a list is out */
	bool more;                 /* the queue may hold more */
	uint64_t next_try_ns;      /* back-off after failures */
	struct mds_parked *parked; /* replies held until their truncation is cut */
	struct { uint64_t ino; uint32_t epoch; } *done; /* cut in the batch now committing */
	uint32_t ndone;
};

struct mds_destroyer {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct mds_destroy_item *items; /* handed over by the metadata thread */
	uint32_t nitems;
	bool busy;      /* metadata thread's view: a list is out */
	bool stopping;
	uint64_t next_try_ns; /* metadata thread: back-off after failures */
	bool more;      /* metadata thread: the queue may hold more */
	uint32_t next_ost; /* metadata thread: where the next batch starts in the OST table */
	bool gather;    /* metadata thread: the last pass took all there was (the next waits) */
};

/*
 * A client's session: what it holds (open handles, locks) outlives its connection, so that a
 * client that reconnects (after a network break, or its own restart of the link) finds it again.
 * A session whose client stays away longer than the recovery window ends, and what it held is
 * released. Sessions live in memory: after an MDS restart clients open their files again.
 */
struct mds_handle;
struct mds_session {
	uint64_t sid;            /* this MDS run's number for it */
	uint64_t uuid[2];        /* the client's, from MDS_CONNECT; zero for an anonymous one */
	uint64_t conn_id;        /* its connection now; 0 while its client is away */
	uint64_t away_since_ns;
	struct mds_handle *handles;
	/* Metadata thread only. `recorded`: its client is in the MDT's `clients` table (it may
	 * hold locks: a start after a crash waits for it to replay them). `replayed`: it said
	 * LW_LK_REPLAY_DONE in this run. */
	bool recorded;
	bool replayed;
	/* Its client said it goes (MDS_SYNC's BYE): the session ends with its connection. */
	bool leaving;
	/* Whose it is: the node whose key made it (owner), or the file system key's (owner ""),
	 * set at its first MDS_CONNECT. Another node cannot take it over by naming its uuid. */
	bool owner_set;
	char owner[LW_NODE_NAME];
};

/* A lease's holder, and what is held (leases.c). */
struct lease_holder {
	uint64_t sid;
	uint64_t conn_id;
	struct srv_conn *conn; /* held (srv_conn_hold): where recalls go */
	uint64_t gen;          /* its newest grant */
	uint64_t recalled_ns;  /* when a recall was sent (0: none) */
	bool overdue;          /* a tick found the recall overdue: the next one evicts */
	struct lease_holder *next;
};

struct lease_dir {
	uint64_t ino;
	bool inode;            /* a file's inode lease, not a directory's entries */
	struct lease_holder *holders;
	struct reqq_item *held, **held_tail; /* changes waiting for recalled leases */
	/* A holder was dropped without giving its lease back (its connection closed, its session
	 * ended, it was evicted): it may still trust its list until this (see trust_ns). */
	uint64_t fence_until_ns;
	/* The one holder's session when its lease is exclusive (protocol 8; 0: shared): others'
	 * reads of the entries wait for it too, since it makes files there before telling the MDS. */
	uint64_t excl_sid;
};

struct mmp;

/* What the metadata thread publishes for other threads to show (status.c). */
struct mds_status {
	pthread_mutex_t lock;
	bool published;           /* once: recovery_needed is known */
	bool recovery_needed;     /* the start waited for clients' replays or locks */
	bool recovering;
	uint64_t recovery_ended_ns;
	uint32_t replay_clients, replayed, refused;
	uint32_t sessions, connected;
	struct lw_statfs mdt;
	struct mdt_ost *osts;     /* a copy of the OST table */
	uint32_t nosts;
};

struct http_srv;
struct mds {
	struct mmp *mmp;                /* multi-mount protection of the MDT (NULL: none) */
	struct mds_status status;
	struct http_srv *http;          /* --http: /metrics (NULL: off) */
	struct mdt_store *store;
	struct srv *srv;
	struct reqq queue;
	pthread_t md_thread;
	uint64_t boot_id;          /* random per run: tells clients the MDS restarted */
	/* Directory renames committed (lw_open_rep.dir_moves): starts at the wall-clock ns of the
	 * start, so that it differs from whatever a previous run handed out; bumped after the
	 * commit of a batch that moved a directory, before its replies go out. */
	_Atomic uint64_t dir_moves;
	uint64_t started_ns;
	bool root_squash;          /* requests as uid 0 run as nobody (--root-squash) */
	/* A replicated MDT's SIGTERM: the metadata thread commits to the standby, then stops the
	 * server (batch.c). */
	_Atomic bool stop_asked;
	bool stop_sent;
	/* Client nodes with keys of their own (nodemap.c): read by the network thread at every
	 * node's authentication and request; replaced by the metadata thread after a commit that
	 * changed the MDT's table. */
	struct nodemap nodemap;
	uint32_t recovery_s;       /* how long a session waits for its client, and how long after
	                            * a start unlinked-but-open inodes wait to be reopened */
	bool orphans_released;     /* those left by the previous run, once the window passed */
	uint8_t key[64];           /* the file system key, for the destroyer's OSS connections */
	size_t keylen;
	bool encrypt;              /* --encrypt: those connections encrypt too */

	/* Sessions and open handles: changed by the metadata thread, and by read-only opens on the
	 * network thread (a new handle, an anonymous session), all under sess_lock. Only the
	 * metadata thread frees a session or a handle. */
	pthread_mutex_t sess_lock;
	uint64_t next_sid;
	struct u64map sessions;      /* sid -> struct mds_session */
	struct u64map conn_sessions; /* conn_id -> struct mds_session */
	uint64_t next_handle;
	struct u64map handles;     /* handle -> struct mds_handle */
	struct u64map open_counts; /* ino -> (uintptr_t) number of open handles */
	/* Inodes the metadata thread found unused and released in a transaction not committed yet:
	 * an open on the network thread, whose read transaction may not see that commit, leaves
	 * them to the metadata thread. Emptied after each commit (mds_releases_settled). */
	struct u64map releasing;
	struct u64map writers;     /* ino -> (uintptr_t) handles open for writing */
	struct u64map shared_writes; /* ino -> 1: a second writer opened while one was open */
	/* Migration: a file's old objects, now tmp's, stay while handles opened before the swap
	 * (which still read them) remain: holds ino -> struct mds_hold list, held tmp -> ino. */
	struct u64map holds;
	struct u64map held;

	/* File locks (locks.c): ino -> struct lk_inode. */
	struct u64map locks;
	uint32_t lock_waiters;
	struct u64map lock_wakes;  /* inodes whose waiters are looked at again after the batch */
	/* After a start: the clients the MDT's `clients` table listed (they may hold locks) that
	 * have not said LW_LK_REPLAY_DONE yet. While active, only replays are granted. */
	struct mds_lock_recovery {
		bool active;
		uint32_t n;          /* clients still awaited: uuids[0 .. n) */
		uint64_t (*uuids)[2];
		uint32_t clients;    /* listed at the start */
		uint32_t replayed;   /* locks replayed */
	} lock_recovery;

	/* OST index -> conn_id of the connection that registered it (metadata thread only): when
	 * that connection closes, the OST is down. */
	struct u64map ost_conns;

	struct mds_destroyer destroyer;
	struct mds_truncator truncator;
	/* The resync of mirrored files (resync.c). */
	struct mds_resync {
		pthread_t thread;
		pthread_mutex_t lock;
		pthread_cond_t cond;
		struct mds_resync_job *job; /* handed over by the metadata thread */
		bool stopping;
		_Atomic uint32_t rate_mib;  /* --resync-rate: MiB/s the copies may take (0: any);
		                             * resync_rate sets it at run time */
		/* The metadata thread's: */
		bool busy;                  /* a job is out */
		bool more;                  /* the table may hold work */
		bool dirty;                 /* a writer opened the file being resynced */
		uint64_t ino;               /* that file */
		uint64_t cursor;            /* where the next look at the table starts */
		uint64_t next_try_ns;       /* back-off after failures, or a pass without work */
		uint64_t resynced;          /* objects copied again since the start */
		uint32_t rotate;            /* failed rebuilds: where the next one starts choosing its
		                             * sources (an object that keeps failing is passed over) */
	} resync;
	struct reqq *queue_for_destroyer;

	/* Commit behind (commit.c): the metadata thread's, but for what the others read. */
	struct mds_commit {
		uint64_t transno;                /* the last number given */
		_Atomic uint64_t last_committed; /* every reply says it; read by any thread */
		/* Answered changes are not committed yet: the network thread, whose reads see only
		 * what is committed, leaves every request to the metadata thread meanwhile. Set
		 * before such a reply goes out. */
		_Atomic bool pending;
		struct mdt_txn *open;            /* the write transaction changes are applied in */
		uint32_t changes;                /* in it */
		uint64_t first_ns;               /* when its first change was applied */
		_Atomic uint32_t interval_ms;    /* --commit-ms: 0 commits every batch before answering;
		                                  * commit_ms sets it at run time (any thread) */
	} commit;
	struct mds_repl repl;           /* a replicated MDT (repl.h) */
	/* Directory and inode leases (leases.c): the metadata thread's, but for the lost marks. */
	struct mds_leases {
		struct u64map dirs;        /* ino -> struct lease_dir (a directory's or a file's) */
		uint32_t ninodes;          /* of them, files' */
		uint32_t ninode_holders;   /* holders of files' leases */
		/* A directory's rename waits here for every inode lease to come back. */
		struct lease_dir all_inodes;
		struct u64map per_session; /* sid -> how many directories it holds */
		struct u64map penalty;     /* sid -> no grants before this (monotonic ns) */
		uint32_t nholders;
		uint32_t nfenced;          /* directories fenced after a holder was dropped */
		uint32_t nheld;            /* changes waiting on leases */
		uint32_t timeout_s;        /* --lease-timeout */
		_Atomic uint64_t gen;      /* the last grant's number */
		uint64_t recalls, evictions;
		/* sid -> the newest grant it lost (taken back: its next reply says so) */
		pthread_mutex_t lost_lock;
		struct u64map lost;
		_Atomic uint32_t nlost;
		/* Directories leased exclusively: ino -> the holder's sid, for the network thread,
		 * which sends others' lookups and listings of them to the metadata thread. */
		pthread_mutex_t excl_lock;
		struct u64map excl;
		_Atomic uint32_t nexcl;
	} leases;
	/* Replays after a start (replay.c). */
	struct mds_replay {
		bool active;           /* clients' requests wait; replies say LW_RPF_RECOVERING */
		bool more;             /* something to look at (mds_replay_drain) */
		uint64_t applied;      /* the highest transno on disk or replayed */
		struct mds_replay_wait *pending; /* MDS_REPLAYs waiting, by transno */
		_Atomic bool recovering; /* active, for the network thread: it answers nothing */
		struct mds_replay_client *clients; /* those the MDT listed at the start */
		uint32_t nclients;
		struct mds_replay_bounds *bounds;  /* the numbers replays may take back */
		/* The transnos a crash before this start can have lost (empty when lo > hi), kept for
		 * the whole run: a replay of one that comes after the recovery is refused. */
		uint64_t lost_lo, lost_hi;
		struct reqq_item *held, **held_tail; /* requests that came meanwhile */
		uint32_t replayed, refused;
	} replay;
};

/* commit.c: answers req: for an MDS row, the body after the prefix of transno, the versions vers noted
 * (may be NULL) and last_committed; other rows as srv_reply. */
void mds_reply(struct mds *m, struct srv_req *req, int status, const void *body, uint32_t len,
	       uint64_t transno, const struct mdt_vers *vers);
/* mds_reply with a lease granted (lease_gen 0: none; dropped when status is an error), exclusive
 * or not. */
void mds_reply_granted(struct mds *m, struct srv_req *req, int status, const void *body, uint32_t len,
		       uint64_t transno, const struct mdt_vers *vers, uint64_t lease_ino, uint64_t lease_gen,
		       bool lease_excl);

/* replay.c */
int mds_replay_begin(struct mds *m);
/* Frees what recovery keeps (its requests are the caller's). */
void mds_replay_free(struct mds *m);
/* At exit, once the metadata thread stopped: drops the requests recovery holds, and frees. */
void mds_replay_stop(struct mds *m);
/* Whether req waits for the end of recovery; mds_replay_hold keeps it (from answer_batch). */
bool mds_replay_holds(struct mds *m, const struct srv_req *req);
void mds_replay_hold(struct mds *m, struct srv_req *req);
/* Applies the replays that may go now (after each batch, and from the periodic work). */
void mds_replay_drain(struct mds *m);
void mds_replay_expire(struct mds *m, uint64_t now_ns);
#define MDS_HELD 3 /* not an errno: a request that waits for the end of recovery */

/* leases.c */
/* --lease-timeout's default: how long a recalled lease may take to come back. */
#define MDS_LEASE_TIMEOUT_DEFAULT 10u
#define MDS_RESYNC_RATE_DEFAULT 256u /* MiB/s: a resync takes a share of an OSS, not all of it */
#define MDS_RESYNC_RATE_MAX (1 << 20)
#define MDS_LEASE_HELD 4 /* not an errno: a change that waits for recalled leases */
void mds_leases_init(struct mds *m);
/* At exit: drops the changes waiting, and frees. */
void mds_leases_stop(struct mds *m);
/* A lease on directory ino for req's session (READDIR with LW_RD_LEASE, on the metadata
 * thread): the grant's number, or 0 when none is granted. *excl: asked exclusive (a directory's
 * only); stays true if it is (nobody else holds one). */
uint64_t mds_lease_grant(struct mds *m, const struct srv_req *req, uint64_t ino, bool inode, bool *excl);
/* Whether another session than req's holds an exclusive lease on directory dir (for the network
 * thread: a lookup or listing there goes to the metadata thread), or on any with dir 0. */
bool mds_leases_excl_other(struct mds *m, const struct srv_req *req, uint64_t dir);
/* What req, decoded in q, must wait for (its recalls are sent): the lease it waits on (an inode
 * number, or LEASE_ALL_INODES), or 0 when nothing holds it up. t is the transaction it would run
 * in (names are looked up there). mds_leases_park then keeps it (from answer_batch), or queues
 * it again when the leases came back meanwhile. */
#define LEASE_ALL_INODES UINT64_MAX
uint64_t mds_leases_block(struct mds *m, struct mdt_txn *t, const struct srv_req *req,
			  const struct lw_mds_req *q);
void mds_leases_park(struct mds *m, struct srv_req *req, uint64_t on);

/* lease_targets.c: what a change touches that leases cover (inodes: look for files' too). */
#define LEASE_TARGET_INOS 3
struct lease_targets {
	uint64_t dirs[3];    /* whose entries it changes, or that it removes (an rmdir, a rename
	                      * over a directory: a holder may be making files there behind) */
	uint32_t ndirs;
	uint64_t inos[LEASE_TARGET_INOS]; /* files whose inode leases it breaks */
	uint32_t ninos;
	uint32_t may_free;   /* bit i: inos[i] may be freed by it (an unlink, a rename over it) */
	bool unleased;       /* its client opened nothing under a lease (LW_NM_UNLEASED): its own
	                      * leases need not come back first */
	bool all_inodes;     /* a directory's rename: every inode lease */
};
void mds_lease_targets(struct mdt_txn *t, const struct lw_mds_req *q, bool inodes,
		       struct lease_targets *out);
/* Periodic: a holder that did not give a recalled lease back in time loses all of its own. */
void mds_leases_expire(struct mds *m, uint64_t now_ns);
/* A connection closed, a session ended: their leases go. */
void mds_leases_drop_conn(struct mds *m, uint64_t conn_id);
void mds_leases_drop_session(struct mds *m, uint64_t sid);
/* Any thread, for a reply's prefix: LW_RPF_LEASES_LOST where the session lost its leases (and
 * on every MDS_CONNECT). */
void mds_leases_reply_flags(struct mds *m, const struct srv_req *req, int status,
			    struct lw_mds_rep_prefix *pre);

/* --commit-ms's default: how long an answered change may wait for its commit. */
#define MDS_COMMIT_MS_DEFAULT 5u
#define MDS_COMMIT_MS_MAX 60000

/* space.c: a full MDT (the store's reserve, src/mdt/space.c). */
struct mds_reserve {
	uint64_t bytes;
	uint32_t percent;   /* of the MDT's capacity, with is_percent */
	bool is_percent;
};
/* --reserve SIZE (k/M/G suffixes) or PCT% (0 to 50): 0 or -EINVAL. */
int mds_reserve_parse(const char *arg, struct mds_reserve *out);
/* At start: the map size (0: the store's default) and the reserve (NULL: 1% of the smaller of the
 * map and the file system under the MDT, at least 4 MiB, at most 256 MiB). */
int mds_space_setup(struct mds *m, uint64_t map_size, const struct mds_reserve *want);
/* The errno to answer a batch with whose commit failed with rc: -ENOSPC when the MDT had no room
 * (LMDB says -EIO for the short write of a full disk), else rc. */
int mds_space_commit_failed(struct mds *m, int rc);
/* Whether room is down to twice the reserve (the reply cache is then kept short). */
bool mds_space_short(struct mds *m);

/* batch.c: the metadata thread */
void mds_metadata_loop(struct mds *m);
/* netpath.c: the server's callbacks, on the network thread */
void mds_deliver(struct srv_req *req, void *arg);
void mds_disconnect(uint64_t conn_id, void *arg);

/* sessions.c: sessions, open handles, and release of unlinked inodes at their last close. */
struct mds_hold {
	uint64_t tmp;
	struct mds_hold *next;
};

struct mds_handle {
	uint64_t handle;
	uint64_t ino;
	uint64_t sid;
	bool writer;   /* opened for writing */
	uint64_t req_id; /* of the request that opened it: a resend of that request finds it */
	struct mds_handle *prev, *next; /* in the session's list */
};

void mds_sessions_init(struct mds *m);
void mds_sessions_destroy(struct mds *m);
/* The session of a connection (an anonymous one is made for a connection that never said
 * MDS_CONNECT: an OSS, a raw client). NULL only without memory. */
struct mds_session *mds_session_of(struct mds *m, uint64_t conn_id);
/* The number of the session of a connection (as mds_session_of); 0 only without memory. Any
 * thread. */
uint64_t mds_session_sid(struct mds *m, uint64_t conn_id);
/* The same, or 0 when the connection has no session (none is made). Any thread. */
uint64_t mds_session_sid_known(struct mds *m, uint64_t conn_id);
/* Runs fn(sid, session, arg) for every session, under the sessions' lock. */
void mds_sessions_each(struct mds *m, void (*fn)(uint64_t, void *, void *), void *arg);
/* MDS_CONNECT from a client with this uuid: its session, found again or new, now on conn_id. */
struct mds_session *mds_session_connect(struct mds *m, uint64_t conn_id, const uint64_t uuid[2]);
/* Whether a connection with node's key (NULL: the file system key, which may take any) may
 * take the session of client uuid, if there is one: 0 or -EPERM. */
int mds_session_may_take(struct mds *m, const uint64_t uuid[2], const char *node);
/* Metadata thread, before a batch: whether an MDS_LOCK from conn_id may have to write its
 * client into the MDT's `clients` table (mds_session_record), so the batch must be a write one. */
bool mds_session_needs_record(struct mds *m, uint64_t conn_id);
/* Metadata thread: writes s's client into `clients` in t, unless it is there already or
 * anonymous. The client is then waited for by a start after a crash, to replay its locks. */
int mds_session_record(struct mds *m, struct mdt_txn *t, struct mds_session *s);
/* MDS_SYNC's BYE: the client goes; it is no longer listed (in t) unless it holds locks. */
int mds_session_bye(struct mds *m, struct mdt_txn *t, struct mds_session *s);
/* Whether the client with this uuid has a session on a live connection now. */
bool mds_session_connected(struct mds *m, const uint64_t uuid[2]);
/* A connection went away: its session waits for its client (an anonymous one ends now). */
int mds_session_disconnect(struct mds *m, struct mdt_txn *t, uint64_t conn_id, bool *released);
/* Ends the sessions whose client has been away longer than the recovery window. */
int mds_sessions_expire(struct mds *m, struct mdt_txn *t, uint64_t now_ns, bool *released);
/* Once clients had their recovery window to come back after a start: the inode numbers handed
 * ahead to those with no session here are forgotten, and the room kept for them freed (a
 * session that ends forgets its own). */
int mds_sessions_forget_ranges(struct mds *m, struct mdt_txn *t);

/* A new handle on ino for session sid, made by request req_id. */
int mds_handle_open(struct mds *m, uint64_t ino, uint64_t sid, bool writer, uint64_t req_id,
		    uint64_t *handle);
/* The same from the network thread, before the open's read transaction begins: -EAGAIN when
 * the metadata thread is releasing ino (the open must go there). */
int mds_handle_open_shared(struct mds *m, uint64_t ino, uint64_t sid, uint64_t req_id,
			   uint64_t *handle);
/* The handle that request req_id of session sid opened on ino (a resend's first run): 0, or
 * -ENOENT when there is none. */
int mds_handle_find(struct mds *m, uint64_t sid, uint64_t ino, uint64_t req_id, uint64_t *handle);
/* A handle that request req_id of session sid opened on an inode other than ino (a resent walk
 * whose path leads elsewhere now): 0 with *handle and *other, or -ENOENT. */
int mds_handle_find_other(struct mds *m, uint64_t sid, uint64_t ino, uint64_t req_id, uint64_t *handle,
			  uint64_t *other);
/* Forgets a handle the metadata thread just made for an open that failed (nothing to release:
 * no release could have been decided meanwhile). */
void mds_handle_forget(struct mds *m, uint64_t handle);
/* Checks that a handle, if this MDS knows it, was opened on ino by session sid: -EBADF if not.
 * An unknown handle is fine: it comes from before a restart. */
int mds_handle_check(struct mds *m, uint64_t handle, uint64_t ino, uint64_t sid);
/* Whether session sid holds ino open (for writing, with writer), through handle (0: any of its
 * handles). Unlike mds_handle_check, a handle this MDS does not know is no proof. */
bool mds_session_holds(struct mds *m, uint64_t sid, uint64_t ino, uint64_t handle, bool writer);
/* Ends a handle (checked as mds_handle_check does); when it was the last on an unlinked inode,
 * releases the inode in t. */
int mds_handle_close(struct mds *m, struct mdt_txn *t, uint64_t handle, uint64_t ino, uint64_t sid,
		     bool *released);
bool mds_ino_is_open(struct mds *m, uint64_t ino);
bool mds_ino_has_writer(struct mds *m, uint64_t ino);
/* Metadata thread, after swapping ino's objects to tmp in the open transaction: network-thread
 * opens of ino wait for the commit (as for a release), and if ino is open, tmp (with the old
 * objects) is held until ino's handles are all closed. */
void mds_swap_done(struct mds *m, uint64_t ino, uint64_t tmp);
/* Metadata thread: ino is released in the open transaction unless it is open (then false). */
bool mds_ino_release_if_closed(struct mds *m, uint64_t ino);
/* Metadata thread, after each commit or abort: the releases decided before are settled. */
void mds_releases_settled(struct mds *m);

/* locks.c */
/* A request answered later: the lock manager keeps it until the lock is granted or cancelled. */
#define MDS_PARKED 1
/* Requests waiting for a lock, over all clients: beyond, -ENOLCK (memory stays bounded). */
#define MDS_MAX_LOCK_WAITERS 65536
/* MDS_LOCK for session sid: 0 with a reply (malloc'd lw_lock_rep in *reply), a negative errno,
 * or MDS_PARKED. */
int mds_lock(struct mds *m, struct srv_req *req, uint64_t sid, const struct lw_lock_req *q,
	     void **reply, uint32_t *reply_len);
/* A connection went away: its waiting requests are dropped (their client resends them). */
void mds_locks_drop_waiters(struct mds *m, uint64_t conn_id);
/* A session ended: its locks go, and others may be granted. */
void mds_locks_drop_session(struct mds *m, uint64_t sid);
/* Whether session sid holds a granted lock. */
bool mds_locks_held_by(struct mds *m, uint64_t sid);
/* After each batch was answered (and after housekeeping): the waiters of the inodes whose locks
 * changed are decided, so that their replies follow the batch's. */
void mds_locks_wake(struct mds *m);
void mds_locks_destroy(struct mds *m);

/* Lock recovery after a start (docs/architecture.md, Recovery). */
/* Takes the array (malloc'd) of the n clients the MDT's `clients` table lists: while any of
 * them has not said LW_LK_REPLAY_DONE, and the recovery window since the start lasts, only
 * replays are granted. n 0: nothing to wait for. */
void mds_locks_recovery_begin(struct mds *m, uint64_t (*uuids)[2], uint32_t n);
/* Whether recovery still waits for the client with this uuid. */
bool mds_locks_awaiting(const struct mds *m, const uint64_t uuid[2]);
/* MDS_LOCK with LW_LK_REPLAY from session sid of client uuid (replayed_before: the session said
 * LW_LK_REPLAY_DONE before in this run): granted at once (0 with a reply), -EAGAIN when it
 * conflicts with a lock replayed before, -ENOLCK when the lock was not kept for this client. */
int mds_lock_replay(struct mds *m, uint64_t sid, const uint64_t uuid[2], bool replayed_before,
		    const struct lw_lock_req *q, void **reply, uint32_t *reply_len);
/* LW_LK_REPLAY_DONE from client uuid: no longer waited for; the last one ends recovery. */
void mds_lock_replay_done(struct mds *m, const uint64_t uuid[2]);
/* Housekeeping: once the recovery window since the start has passed, recovery ends, and the
 * clients still awaited leave the `clients` table in t (the error of that, if any). */
int mds_locks_recovery_expire(struct mds *m, struct mdt_txn *t, uint64_t now_ns);

/* ossconns.c: a thread's connections to OSSs, by address, kept from one list of work to the next. */
struct oss_conn;
struct oss_pool {
	struct oss_conn *conns;
	uint32_t n, cap;
};
int oss_pool_init(struct oss_pool *p, uint32_t cap);
void oss_pool_fini(struct oss_pool *p);
/* The connection to host:port, opened when needed; NULL when it cannot be had. */
struct rpc_conn *oss_pool_conn(struct mds *m, struct oss_pool *p, const char *host, uint16_t port);

/* truncator.c */
int mds_truncator_start(struct mds *m);
void mds_truncator_stop(struct mds *m);
/* Metadata thread, after a commit: hands truncations still to cut to the truncator if it is
 * idle. */
void mds_truncator_kick(struct mds *m, struct mdt_txn *read_txn);
/* Metadata thread: the truncator's report (its MDS_WORK_TRUNCATED item); the truncations it
 * cut leave the queue in t. */
int mds_truncator_done(struct mds *m, struct mdt_txn *t, const struct mds_work *report);
/* Metadata thread: req's reply (body, malloc'd, taken) waits until truncation (ino, epoch) is
 * cut; replies released once the batch that recorded the cut committed (mds_trunc_release), or
 * after a while regardless (mds_trunc_expire); a connection that goes drops its own. */
void mds_trunc_park(struct mds *m, struct srv_req *req, void *body, uint32_t len, uint64_t ino,
		    uint32_t epoch);
void mds_trunc_release(struct mds *m);
void mds_trunc_expire(struct mds *m, uint64_t now_ns);
void mds_trunc_drop_conn(struct mds *m, uint64_t conn_id);

/* resync.c */
int mds_resync_start(struct mds *m);
void mds_resync_stop(struct mds *m);
/* Metadata thread, after a commit and on each tick: hands the resyncer a mirrored file's stale
 * copies if it is idle, and queues (MDS_WORK_MIRROR_TIDY) the table's entries to put right. */
void mds_resync_kick(struct mds *m, struct mdt_txn *read_txn);
/* Metadata thread, in t: the resyncer's report (MDS_WORK_RESYNCED), and the kick's tidying. */
int mds_resync_done(struct mds *m, struct mdt_txn *t, const struct mds_work *report);
int mds_resync_tidy(struct mds *m, struct mdt_txn *t, const struct mds_work *w);
/* Metadata thread: a writer opened ino (a resync of it under way keeps its marks). */
void mds_resync_writer(struct mds *m, uint64_t ino);
/* Metadata thread: look at ino first, now (loom mirror resync). */
int mds_resync_now(struct mds *m, uint64_t ino);

/* destroyer.c */
int mds_destroyer_start(struct mds *m);
void mds_destroyer_stop(struct mds *m);
/* Metadata thread, after a commit: hands pending destroys to the destroyer if it is idle. */
void mds_destroyer_kick(struct mds *m, struct mdt_txn *read_txn);
/* Metadata thread: the destroyer finished a list (its MDS_WORK_DESTROYED report). */
int mds_destroyer_done(struct mds *m, struct mdt_txn *t, const struct mds_work *report);

/* status.c: what the MDS shows of itself (parameters, /metrics). */
struct textbuf;
void mds_status_init(struct mds *m);
void mds_status_destroy(struct mds *m);
/* Metadata thread, on each periodic pass: the copy the others read. */
void mds_status_publish(struct mds *m);
/* GET_PARAM / SET_PARAM, on the network thread. */
void mds_params_answer(struct mds *m, struct srv_req *req);
void mds_metrics(struct mds *m, struct textbuf *tb);
/* Serves /metrics and /params on addr ("HOST:PORT"); logs why not. */
int mds_http_start(struct mds *m, const char *addr);

#endif
