/*
 * The client side of the wire: one TCP connection to one server carrying many requests at once,
 * matched to their replies by request id.
 *
 * Each connection has one I/O thread that sends queued requests and receives replies, so that the
 * pieces of one striped read or write travel to all their servers at the same time: the caller
 * submits every piece (rpc_submit), then waits for all of them (rpc_wait). Bulk data moves
 * between the socket and the caller's own buffers with no copy in between; the caller's body and
 * bulk buffers must stay valid until the call completes.
 */
#ifndef LOOM_NET_RPC_H
#define LOOM_NET_RPC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "proto/wire.h"

struct rpc_conn;

/* Completion of a group of calls. */
struct rpc_call;
struct rpc_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int pending;
	struct rpc_call *calls;  /* those submitted with it, for cancelling (rpc_wait.c) */
	uint64_t deadline_ns;    /* soft connections: the earliest of its calls' deadlines, or 0 */
};

/*
 * Interrupts: a thread that does work on behalf of someone who may give up (a FUSE request the
 * kernel interrupts, as for a signal or kill -9) enters an rpc_intr; rpc_intr_fire, from any
 * thread, then ends that thread's waits for calls: the calls not yet answered are cancelled and
 * complete with -EINTR (a reply that comes later is dropped). A call being sent or received at
 * that moment finishes first, so no buffer is used after its wait returned.
 */
struct rpc_intr {
	pthread_mutex_t lock;
	_Atomic bool fired;
	struct rpc_wait *waiting; /* the wait the thread is in, if any */
};
void rpc_intr_init(struct rpc_intr *in);
void rpc_intr_destroy(struct rpc_intr *in);
/* From now on this thread's waits end when `in` fires (fired is cleared); NULL: they do not. */
void rpc_intr_enter(struct rpc_intr *in);
void rpc_intr_fire(struct rpc_intr *in);
/* Whether the calling thread's rpc_intr fired. */
bool rpc_intr_fired(void);
/* Sets the calling thread's rpc_intr without clearing it, and returns the one it had: waits
 * that must not end early (for data already acknowledged to an application) run between two
 * swaps, the first with NULL. */
struct rpc_intr *rpc_intr_swap(struct rpc_intr *in);
/* While on, the calling thread's calls are RPC_NOWAIT; returns what it was. */
bool rpc_nowait_swap(bool on);
bool rpc_nowait_thread(void);
/* The job id the calling thread's requests are for from now on (NULL or "": none), as libloom
 * and the mount work it out (common/jobid.h); cut to LW_JOBID_LEN - 1 bytes. */
void rpc_job_set(const char *job);
const char *rpc_job_get(void);

#define RPC_MAX_IOV 64

#define RPC_NOWAIT 0x1u /* while the server is away, fail at once with -EIO instead of waiting
                          * for it to come back (and never resend) */
#define RPC_NOTIMEOUT 0x2u /* its reply may take any time (a lock request that waits for the
                            * lock): no reply in time does not mean the server hangs */

struct rpc_call {
	/* The request, filled by the caller. */
	uint16_t opcode;
	uint32_t flags;      /* RPC_* */
	const void *body;
	uint32_t body_len;
	const struct iovec *bulk;   /* request bulk, bulk_cnt iovecs totalling bulk_len bytes */
	int bulk_cnt;
	uint32_t bulk_len;
	/* Where reply bulk goes: rbulk_cnt iovecs; a reply with more bulk than they hold is a broken
	 * peer: the connection is closed and its calls fail with -EIO. */
	const struct iovec *rbulk;
	int rbulk_cnt;

	/* The result, valid once the call completed. */
	int status;          /* 0, the server's negative errno, or -EIO (connection lost or peer
	                      * broken), -EINVAL (too many iovecs), -EBADMSG (bulk checksum mismatch) */
	void *rbody;         /* reply body (malloc'd; released by rpc_call_release) */
	uint32_t rbody_len;
	uint32_t rbulk_len;  /* reply bulk bytes received into rbulk */
	/* Replies from the MDS (wire.h, struct lw_mds_rep_prefix): taken off the body, which
	 * rbody then holds without them. */
	uint64_t transno;
	uint64_t last_committed;
	uint32_t nvers;
	uint32_t rp_flags;   /* LW_RPF_* */
	uint64_t lease_ino;  /* a lease granted, or with LW_RPF_LEASES_LOST the newest lost */
	uint64_t lease_gen;
	uint32_t lease_trust_ms;
	struct lw_obj_version vers[LW_MAX_VERS];

	/* rpc_submit_detached: runs once the call completed (on whichever thread completed it,
	 * perhaps under the connection's locks: it must only free), instead of a wait. */
	void (*done)(struct rpc_call *call);
	/* Optional, set after rpc_call_init: runs first when the call completes (status and reply
	 * set), on the thread that completes it. For a reply that is the connection's I/O thread,
	 * in the order the replies arrive, which lets a caller keep state in the server's order
	 * (libloom's record of held locks). Perhaps under the connection's locks: it may take only
	 * locks under which nothing calls into this layer, and must not block. */
	void (*on_complete)(struct rpc_call *call, void *arg);
	void *on_complete_arg;
	/* The job the request is for (wire.h, LW_F_JOBID): rpc_call_init copies the calling
	 * thread's (rpc_job_set); "" sends none. A caller may set it after rpc_call_init. */
	char job[LW_JOBID_LEN];

	/* Internal. */
	struct lw_hdr hdr;
	uint64_t req_id;
	size_t sent;
	bool sealed;          /* its tag is made (the counter taken): it must go out whole */
	uint8_t tag[LW_TAG_LEN];
	struct rpc_conn *conn;
	uint64_t sent_ns;     /* when its last byte went out (in flight) */
	uint64_t deadline_ns; /* soft connections: when it fails with -EIO unanswered; else 0 */
	bool completed;       /* under its wait's lock */
	struct rpc_call *wnext; /* in its wait's list */
	uint32_t rbulk_cap;
	struct rpc_wait *wait;
	struct rpc_call *next;
};

/* A handshake: requests sent and answered one at a time on a fresh socket, before any other
 * traffic (authentication, session set-up, replay after a server restart). */
struct rpc_hs;
/* Sends one request (no bulk) and waits for its reply body (cap bytes at most; *rlen gets its
 * length). Returns the server's status, or -EIO/-ETIMEDOUT/-EPROTO for a transport failure. */
int rpc_hs_call(struct rpc_hs *hs, uint16_t opcode, const void *body, uint32_t len, void *reply,
		uint32_t cap, uint32_t *rlen);
/* As rpc_hs_call, but 0 once an answer came, the server's status in *status: a transport failure
 * and the server's answer cannot be taken for each other. */
int rpc_hs_call_status(struct rpc_hs *hs, uint16_t opcode, const void *body, uint32_t len, void *reply,
		       uint32_t cap, uint32_t *rlen, int *status);
/* From now on the handshake's calls wait up to ms for their replies (an MDS holds replays, and
 * the opens after them, until every client replayed: up to its recovery window). */
void rpc_hs_set_timeout(struct rpc_hs *hs, int ms);
/* The prefix of the handshake's last reply from the MDS (zeros before any). */
void rpc_hs_prefix(const struct rpc_hs *hs, struct lw_mds_rep_prefix *out);

struct loom_key_id;

struct rpc_conn_opts {
	const char *name;       /* for log lines, e.g. "OST0003" */
	int connect_timeout_ms; /* 0 = 5000 */
	/*
	 * Recovery. With recovery_ms 0, a broken connection fails its calls with -EIO at once. Else
	 * the connection keeps its calls, reconnects (asking `resolve` where the server is now), runs
	 * its handshake again, and resends what was in flight (marked LW_F_RESENT, same request
	 * ids), for up to recovery_ms; only then do calls fail with -EIO. Meanwhile new calls wait
	 * (unless RPC_NOWAIT).
	 */
	uint32_t recovery_ms;
	/*
	 * Hangs. A call that gets no reply within the connection's adaptive timeout (three times
	 * the slowest reply seen in the last minutes, plus two seconds, and at least at_min_ms;
	 * 0 = 20000) means a server that is stopped or wedged although its socket is up: the
	 * connection is treated as broken (reconnect, resend, as after a restart). Calls with
	 * RPC_NOTIMEOUT are not timed.
	 */
	uint32_t at_min_ms;
	/* Soft: a call not answered within soft_ms of its submission fails with -EIO, whatever the
	 * connection is doing (0: hard, calls wait for the recovery window). */
	uint32_t soft_ms;
	/* With recovery: rpc_conn_open succeeds although the server cannot be reached yet. */
	bool lazy;
	/* Request ids continue after this one: a connection that replaces a failed one keeps
	 * counting where it stopped (rpc_conn_last_id), so that a server's reply cache, keyed by
	 * client and request id, never mistakes a new request for an old one. */
	uint64_t first_req_id;
	const uint8_t *key;     /* the file system key (NULL: none), to authenticate every connection
	                         * and seal its frames (wire.h, "Sealed frames") */
	size_t keylen;
	/* With a node's key (wire_auth.h, "Node keys"): whose it is, sent in AUTH_PROVE. NULL: the
	 * key is the file system's. */
	const struct loom_key_id *key_id;
	bool encrypt;           /* with a key: encrypt the frames too (as does every connection to a
	                         * server that requires it, whatever this says) */
	/* Runs on every (re)connection after authentication and before anything is (re)sent.
	 * Returns 0, or a negative errno: -EACCES, -ENODEV, -EPROTONOSUPPORT end the connection for
	 * good; others are retried like a failed connect. */
	int (*hello)(struct rpc_hs *hs, void *arg);
	/* Runs on the I/O thread for every reply of a call that carried a prefix (the MDS's), before
	 * the call completes and in the order the replies arrive: where a client keeps the changes
	 * it may have to replay. Perhaps under the connection's locks: it must not block nor call
	 * into this layer. */
	void (*on_reply)(void *arg, struct rpc_call *call);
	/* The same for the prefix of every MDS reply, also of a call that was cancelled (and whose
	 * reply is dropped), before on_reply: sent_ns, when the request went out (0: not known). */
	void (*on_prefix)(void *arg, const struct lw_mds_rep_prefix *pre, uint64_t sent_ns);
	/* Runs on the I/O thread for each notification (a frame with LW_F_NOTIFY of an opcode
	 * ops.def gives the client, CLI), its body checked as a reply's is, in the order frames
	 * arrive; the same rules as on_reply. NULL: notifications are read and dropped. */
	void (*on_notify)(void *arg, uint16_t opcode, const void *body, uint32_t len);
	/* Before each reconnection attempt: may change host/port (a server that moved). */
	void (*resolve)(void *arg, char *host, size_t cap, uint16_t *port);
	/* The connection is given up for a server that stopped answering with its socket up (the
	 * adaptive timeout), before the reconnection: a failover list may try another address
	 * first. On the I/O thread, no lock of this layer held. */
	void (*on_silence)(void *arg);
	void *arg;
};

/* Connects to host:port (numeric IPv4 or a name) and runs the handshake. -ECONNREFUSED,
 * -ETIMEDOUT, -EHOSTUNREACH (nothing there), -EACCES (authentication failed or missing), or the
 * hello's error. */
int rpc_conn_open(const char *host, uint16_t port, const struct rpc_conn_opts *opts,
		  struct rpc_conn **out);
/* Fails calls still in flight with -EIO, stops the thread and frees the connection. */
void rpc_conn_close(struct rpc_conn *c);
/* The same without freeing: later calls fail at once with -EIO, and the connection stays valid
 * memory until rpc_conn_close (for teardowns where other threads may still hold it). */
void rpc_conn_stop(struct rpc_conn *c);
/* false once the connection has failed for good (no recovery, or its window passed); every
 * later call then fails at once with -EIO. */
bool rpc_conn_alive(struct rpc_conn *c);
/* true while a connection is away and being recovered. */
bool rpc_conn_recovering(struct rpc_conn *c);
/* The last request id this connection gave out. */
uint64_t rpc_conn_last_id(struct rpc_conn *c);
const char *rpc_conn_peer(const struct rpc_conn *c);
/* The local address of the connection (numeric), which is how the peer reaches us back. */
int rpc_conn_local_host(const struct rpc_conn *c, char *buf, size_t cap);

void rpc_wait_init(struct rpc_wait *w);
void rpc_wait_destroy(struct rpc_wait *w);
/* Blocks until every call submitted with w completed. */
void rpc_wait_all(struct rpc_wait *w);
/* Waits, cancelling nothing, until every call of w has completed (0), the calling thread's
 * rpc_intr fired (-EINTR), or w's soft deadline passed (-ETIMEDOUT). The calls not completed
 * stay in flight: rpc_wait_all() still has to end them. For waits on work that must not be
 * given up (write-behind) while the one waiting may give up waiting. */
int rpc_wait_settled(struct rpc_wait *w);

/* Sets up a call; the caller then sets bulk/rbulk as needed. */
void rpc_call_init(struct rpc_call *call, uint16_t opcode, const void *body, uint32_t body_len);
/* Queues the call for sending; completion is signalled on w. Never blocks on the network. */
void rpc_submit(struct rpc_conn *c, struct rpc_call *call, struct rpc_wait *w);
/* Queues a call nobody waits for: call->done (set) gets it when it completed, and frees it.
 * The call and its body must stay valid until then (allocate them together). */
void rpc_submit_detached(struct rpc_conn *c, struct rpc_call *call);
/* Submit and wait: returns call->status. */
int rpc_call_sync(struct rpc_conn *c, struct rpc_call *call);
/* Frees the reply body. */
void rpc_call_release(struct rpc_call *call);

#endif
