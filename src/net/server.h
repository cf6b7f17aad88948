/*
 * The server side of the wire: one event-loop thread that accepts connections, reads frames and
 * writes replies for thousands of clients, with no thread per connection.
 *
 * The loop validates every frame (header, lengths, crc32c of header+body and of bulk, and after
 * the handshake its AES-GCM tag, net/seal.h) before a program sees it, and closes a connection
 * that sends garbage, or a frame that fails its tag, with a log line naming the peer. Replies
 * are sealed the same way.
 * Complete requests are handed to the program's deliver callback on the loop thread; the program
 * queues them to its own workers and answers each exactly once with srv_reply(), from any thread.
 *
 * Flow control: a connection with too many requests (or bytes) in flight stops being read until
 * replies drain, so one client cannot make the server buffer without bound.
 *
 * Strangers: with a key, a connection that has not authenticated costs a few hundred bytes, is
 * closed after handshake_timeout_ms, and is the first to go when descriptors run out, so that
 * thousands of idle or half-open connections cannot keep the server from its clients. What the
 * server logs about them is rate-limited (common/log.h, struct log_limit).
 *
 * Key holders: each peer address has a share of the memory and a cap on connections, and a frame
 * whose bytes stop coming is dropped (server_peers.c), so that no node can freeze the server for
 * the others.
 */
#ifndef LOOM_NET_SERVER_H
#define LOOM_NET_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/reqq.h"
#include "net/stats.h"
#include "proto/wire.h"

struct srv;
struct srv_conn;

struct srv_req {
	struct lw_hdr hdr;
	uint8_t *body;          /* hdr.body_len bytes, part of this allocation */
	uint8_t *bulk;          /* hdr.bulk_len bytes (NULL when 0), from bulk_alloc();
	                         * srv_req_take_bulk() steals it */
	struct srv_conn *conn;  /* held (referenced) until the reply */
	uint64_t conn_id;
	struct reqq_item qitem; /* its place in a program's queue (reqq.h); kind REQQ_SRV_REQ */
	uint64_t recv_ns;       /* clock_mono_ns() when the frame was complete */
	bool counted;           /* in its connection's in-flight count (see srv_req_park) */
	char job[LW_JOBID_LEN]; /* the job id it came with (LW_F_JOBID, taken off the body and
	                         * the flag cleared before delivery), printable; "" without */
	/* For the statistics (net/stats.h), set by a handler before it answers: the target the
	 * request was for (STATS_NO_TARGET until said) and the bytes of file data it read or
	 * wrote (counted when the answer is a success). */
	uint32_t stat_target;
	uint64_t stat_read, stat_write;
};

/* The request a queue item of kind REQQ_SRV_REQ belongs to (NULL for NULL). */
static inline struct srv_req *srv_req_of(struct reqq_item *item)
{
	return item ? (struct srv_req *)((char *)item - offsetof(struct srv_req, qitem)) : NULL;
}

/* Called on the loop thread for each complete, checked request. Takes ownership of req: the
 * program must eventually call srv_reply() on it (exactly once). */
typedef void (*srv_deliver_fn)(struct srv_req *req, void *arg);
/* Called on the loop thread when a connection has closed, after its last request was delivered
 * (replies to requests still being worked on are dropped). */
typedef void (*srv_disconnect_fn)(uint64_t conn_id, void *arg);

struct nodemap;

struct srv_opts {
	const char *name;         /* for log lines: "mds", "oss" */
	const char *listen_host;  /* numeric IPv4 address; "0.0.0.0" for all */
	uint16_t listen_port;     /* 0: any free port, see srv_port() */
	srv_deliver_fn deliver;
	srv_disconnect_fn disconnect; /* may be NULL */
	void *arg;
	uint32_t max_inflight;    /* requests per connection before it is paused; 0 = 64 */
	uint64_t max_inflight_bytes; /* request and reply bytes per connection; 0 = 64 MiB */
	uint64_t max_memory;      /* request and reply bytes for the whole server; 0 = 1 GiB.
	                           * Past it, no connection starts a new frame until replies drain. */
	bool (*bulk_ok)(uint16_t opcode); /* may this opcode carry bulk? NULL: any may. A request
	                           * with bulk it may not carry closes the connection. */
	const uint8_t *key;       /* the file system key: every connection must prove it holds it
	                           * (AUTH_CHALLENGE, AUTH_PROVE) before anything else. NULL: none. */
	size_t keylen;
	/* With a key only (without one there is no handshake to wait for): */
	struct nodemap *nodemap;  /* the nodes whose own keys are good (net/nodemap.h): a client
	                           * may prove a node's key instead of the file system's. NULL: only
	                           * the file system key is. */
	bool encrypt;             /* every connection must encrypt its frames (wire.h, "Sealed
	                           * frames"): a client that proves it holds the key without asking
	                           * for encryption is refused. Else encryption is the client's
	                           * choice, and frames are authenticated either way. */
	uint32_t handshake_timeout_ms; /* a connection that has not proved it holds the key this
	                           * long after it was accepted is closed, whether it sent nothing,
	                           * part of a frame or a challenge and no proof; 0 = 5000 */
	uint32_t max_unauthenticated; /* connections waiting to authenticate at once; a new one past
	                           * it closes the oldest. 0 = half the fd limit (RLIMIT_NOFILE). */
	/* Fair limits (server_peers.c): what one peer address may hold. */
	uint64_t max_peer_memory; /* bytes of max_memory one address's requests and replies may
	                           * hold; 0 = a quarter of it */
	uint32_t max_conns_per_peer; /* authenticated connections from one address; 0 = 256 */
	uint32_t fd_reserve;      /* descriptors below the fd limit that only addresses with few
	                           * connections may take; 0 = 64 (a quarter of a smaller limit) */
	uint32_t frame_timeout_ms; /* a frame begun whose bytes stop coming this long is dropped
	                           * with its connection; 0 = 30000 */
};

int srv_create(const struct srv_opts *opts, struct srv **out);
/* The daemons' --handshake-timeout and --frame-timeout SEC (whole seconds, 1..3600) into
 * milliseconds: 0, or -EINVAL. */
int srv_seconds_parse(const char *arg, uint32_t *ms_out);
/* --max-conns-per-peer N (1..1000000): 0, or -EINVAL. */
int srv_count_parse(const char *arg, uint32_t *out);
/* The bound port (useful with listen_port 0). */
uint16_t srv_port(const struct srv *s);
/* Runs the event loop on the calling thread until srv_stop(). Returns 0 or -errno. */
int srv_run(struct srv *s);
/* Asks the loop to return; safe from any thread and from a signal handler. */
void srv_stop(struct srv *s);
/* Closes every connection and frees the server. Only after srv_run() returned. Requests still
 * held by the program must have been answered or are answered into the void (their connections
 * stay allocated until then). */
void srv_destroy(struct srv *s);

/*
 * Answers req and frees it. body (body_len bytes) is copied. bulk, when not NULL, is owned by the
 * reply from now on and released with release(bulk) (or free() if release is NULL) once sent
 * or dropped; on an encrypted connection it is encrypted in place. status is 0 or a negative
 * errno. Safe from any thread.
 */
void srv_reply(struct srv_req *req, int status, const void *body, uint32_t body_len, void *bulk,
	       uint32_t bulk_len, void (*release)(void *));
/* srv_reply without bulk, whose body is pre (pre_len bytes) then body: both are copied. */
void srv_reply_pre(struct srv_req *req, int status, const void *pre, uint32_t pre_len,
		   const void *body, uint32_t body_len);
/* Frees a request that will get no reply (shutdown, or its client is gone). */
void srv_req_drop(struct srv_req *req);
/* The request will be answered much later (a lock wait): it stops counting against its
 * connection's in-flight limits, so that the client's other requests keep being read. */
void srv_req_park(struct srv_req *req);
/* Takes the bulk buffer out of the request (the caller releases it with bulk_free()). */
void *srv_req_take_bulk(struct srv_req *req);

/* What the server counted (net/stats.h): the program renders it, clears it, turns it off. */
struct srv_stats *srv_stats(struct srv *s);

/* The peer's "a.b.c.d:port", for log lines. */
const char *srv_req_peer(const struct srv_req *req);

/*
 * Notifications: frames a server sends a client unasked (ops.def's CLI rows, LW_F_NOTIFY),
 * on the connection a request of the client came on. srv_conn_hold takes a reference to that
 * connection (it stays valid memory until srv_conn_release, also once closed); srv_notify queues
 * a frame of opcode with body (copied) on it, from any thread: 0, or -ENOTCONN once the
 * connection is closed (the client will learn otherwise), -ENOMEM.
 */
struct srv_conn;
struct srv_conn *srv_conn_hold(struct srv_req *req);
void srv_conn_release(struct srv_conn *c);
int srv_notify(struct srv_conn *c, uint16_t opcode, const void *body, uint32_t body_len);
/* When c's last reply or notification was queued (clock_mono_ns; 0: none yet). */
uint64_t srv_conn_last_sent_ns(struct srv_conn *c);
/* The node whose key the request's connection proved (wire_auth.h, "Node keys"), or NULL for
 * the file system key (or a server without a key). */
const struct lw_auth_node *srv_req_node(const struct srv_req *req);

#endif
