/*
 * The client side of the wire, inside: a connection's state, shared by rpc.c (calls, queues,
 * sending, the I/O thread), rpc_recv.c (replies), rpc_recover.c (resending and reconnecting),
 * rpc_timeout.c (hung servers, soft deadlines), rpc_dial.c (connecting, authenticating, the
 * handshake) and rpc_wait.c (waiting for calls, interrupts, deadlines, cancelling).
 */
#ifndef LOOM_NET_RPC_IMPL_H
#define LOOM_NET_RPC_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/log.h"
#include "net/rpc.h"
#include "net/seal.h"
#include "proto/wire.h"

#define RBUF_SIZE (64u << 10)

enum rstate { RS_HDR, RS_BODY, RS_BULK, RS_TAG };

enum conn_state {
	CS_CONNECTED,
	CS_RECOVERING, /* the socket is gone; reconnecting until recover_deadline */
	CS_FAILED,     /* for good: calls fail at once */
};

struct rpc_hs {
	struct rpc_conn *conn;
	int fd;
	int timeout_ms;
	/* The new connection's seals, on once authenticated: the hello's calls are sealed too, and
	 * the connection takes them over when the dial succeeds. */
	struct seal tx, rx;
	struct lw_mds_rep_prefix last_pre; /* of the last reply that had one */
};

struct rpc_conn {
	int fd;
	int wake_fd;
	pthread_t thread;
	char peer[96];
	char name[32];        /* opts.name, kept (the caller's string may not live on) */
	char host[64];
	uint16_t port;
	struct rpc_conn_opts opts;
	uint8_t key[LOOM_KEY_MAX];
	struct loom_key_id key_id;   /* a node's key: whose (node "": the file system's) */

	/* Writing to the socket: the send queue head's progress, and moving sent calls to the
	 * in-flight list. Taken before lock, never while waiting for the I/O thread. A caller
	 * sends its own request when it finds the queue empty (rpc_submit), which saves waking
	 * the I/O thread; the I/O thread sends the rest. */
	pthread_mutex_t send_lock;
	pthread_mutex_t lock;        /* the queues, next_id, state, stopping */
	struct rpc_call *sendq_head; /* submitted, not yet (fully) sent */
	struct rpc_call *sendq_tail;
	struct rpc_call *inflight;   /* sent, awaiting a reply */
	uint64_t next_id;
	struct seal tx;              /* requests, sealed as each starts to go out; under send_lock */
	uint8_t *sbuf;               /* with encryption: the ciphertext of the call being sent */
	size_t sbuf_cap;
	enum conn_state state;
	uint64_t recover_deadline_ns;
	bool stopping;
	bool joined;                 /* the thread was stopped (rpc_conn_stop) */
	/* Request ids of calls cancelled while in flight: their replies, when they come, are
	 * dropped rather than taken for a broken peer's. A ring: older ones are long answered. */
	uint64_t cancelled[64];
	uint32_t ncancelled;
	/* The slowest reply in each of the last AT_SLOTS minutes (the adaptive timeout). */
	uint32_t at_slow_ms[4];
	uint64_t at_slot_min[4];     /* which minute each slot holds */

	/* Receive state, I/O thread only. */
	uint8_t *rbuf;
	uint32_t rpos, rlen;
	enum rstate rstate;
	struct lw_hdr hdr;
	uint32_t hgot;
	struct rpc_call *rcall; /* the call the reply being read belongs to */
	bool discarding;        /* the reply being read is a cancelled call's: dropped */
	/* A replicated MDT's fencing (wire.h, lw_mds_rep_prefix.epoch): the highest epoch an MDS
	 * answered on this connection, across reconnections; a reply with a lower one came from a
	 * deposed MDS: its call goes back to be resent, and the connection to the next address. */
	uint32_t epoch_seen;
	bool deposed;
	/* The protocol version the server answers with on the current socket (0 before its first
	 * answer): requests carry job ids from version 10 on. */
	_Atomic uint16_t peer_version;
	bool notifying;         /* the frame being read is a notification (LW_F_NOTIFY) */
	uint8_t *rbody;
	uint32_t got;
	uint32_t rbulk_crc;
	struct seal rx;         /* replies */
	const char *rerr;       /* sealed: why the reply being read cannot be its call's, told
	                         * once its tag passed (its bytes are dropped meanwhile) */
	uint8_t rtag[LW_TAG_LEN];
	struct log_limit lim_tag; /* replies that failed their tag */
};

/* rpc.c */
/* Completes a call with status: its waiter wakes, or a detached call's done() runs. */
void rpc_call_complete(struct rpc_call *call, int status);

/* Takes call off its connection's queues and completes it with err, unless it is being sent or
 * received right now (then the caller tries again later), or completed already. */
void rpc_call_cancel(struct rpc_call *call, int err);

void conn_fail_locked(struct rpc_conn *c, const char *why);
bool take_off_queues(struct rpc_conn *c, struct rpc_call *call);

/* rpc_recv.c */
void recv_reset(struct rpc_conn *c);
int conn_recv(struct rpc_conn *c);

/* rpc_recover.c */
void conn_broken(struct rpc_conn *c, const char *why);
void conn_reconnect(struct rpc_conn *c);

/* rpc_timeout.c */
uint64_t half_at_min_ns(const struct rpc_conn *c);
void expire_late_calls(struct rpc_conn *c);
uint64_t next_check_ns(struct rpc_conn *c);
bool server_hangs(struct rpc_conn *c, char *why, size_t cap);
void at_record(struct rpc_conn *c, uint64_t sent_ns);

/* rpc_dial.c */
/* A connected, authenticated socket that has said hello, or a negative errno; the seals of its
 * frames in *tx and *rx (off without a key), which the caller owns then. */
int rpc_dial(struct rpc_conn *c, int *fd_out, struct seal *tx, struct seal *rx);
/* Errors of the handshake that end a connection for good. */
bool rpc_fatal_hello_error(int rc);

#endif
