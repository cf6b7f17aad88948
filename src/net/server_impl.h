/*
 * The server side of the wire, inside: a server's and a connection's state, shared by server.c
 * (the loop, creating and closing), server_read.c (frames in), server_reply.c (replies out,
 * flow control and memory) and server_accept.c (accepting, authentication, strangers).
 */
#ifndef LOOM_NET_SERVER_IMPL_H
#define LOOM_NET_SERVER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/u64map.h"
#include "net/seal.h"
#include "net/server.h"
#include "proto/wire.h"

/*
 * Memory accounting. Every request is charged to the server from the moment its header is
 * accepted (bytes, which past a limit pause every connection that wants to start a new frame),
 * and to its connection from the moment it is complete (count and bytes, which past a limit
 * pause that connection's reading), until its reply has been written to the socket (or dropped). A reply is charged its own size too,
 * so a client that asks for data and never reads it stops being served instead of growing the
 * server without bound.
 */

struct out_frame {
	struct out_frame *next;
	void *bulk;
	void (*bulk_free)(void *);
	uint32_t bulk_len;
	uint32_t hb_len;  /* header + body */
	uint32_t tag_len; /* LW_TAG_LEN on a sealed connection, else 0 */
	uint8_t tag[LW_TAG_LEN]; /* sent after the bulk */
	size_t sent;      /* bytes of hb, bulk, then tag already written */
	uint64_t charge;  /* bytes charged for it (its own size) */
	bool ends_req;    /* its request is still counted in the connection's in-flight count */
	_Alignas(8) uint8_t hb[]; /* the header is read as struct lw_hdr: keep it aligned */
};

enum rstate { RS_HDR, RS_BODY, RS_BULK, RS_TAG };

/* The kinds of rate-limited log lines (lim_kinds in server.c). */
enum lim_kind { LIM_TIMEOUT, LIM_WRONG_KEY, LIM_BAD_AUTH, LIM_NO_AUTH, LIM_DROPPED, LIM_EVICTED,
		LIM_ACCEPT, LIM_BAD_TAG, LIM_NO_ENCRYPT, LIM_PEER_FULL, LIM_SERVER_FULL, LIM_STALLED,
		LIM_VERSION, LIM_COUNT };

/*
 * A peer address (server_peers.c): what all its connections hold together, so that one node
 * cannot take what the others need. Created with its first connection, freed with its last
 * (conn_unref, on any thread: the table has a lock of its own).
 */
struct srv_peer {
	uint32_t addr;              /* IPv4, network order */
	int refs;                   /* connections (open or not yet freed); under peers_lock */
	uint32_t admitted;          /* of them, authenticated and open; loop thread only */
	atomic_uint_fast64_t mem;   /* bytes charged to its requests and replies */
};

struct srv_conn {
	struct srv *srv;
	int fd;
	uint64_t id;
	char peer[48];
	struct srv_peer *from;  /* its address's account, for its life */

	pthread_mutex_t lock;   /* everything below up to the read state */
	int refs;               /* the loop's while open, plus one per request handed out */
	bool closed;            /* fd closed: replies are dropped */
	bool close_when_flushed;/* an authentication failure: say why, then hang up */
	atomic_bool paused;     /* not reading: too much in flight (written under lock) */
	bool resume_queued;     /* on srv->resume, to parse what rbuf still holds */
	uint32_t events;        /* what epoll is asked for now */
	uint32_t inflight;      /* requests read and not yet answered on the wire */
	uint64_t inflight_bytes;
	struct out_frame *out_head;
	struct out_frame *out_tail;
	uint64_t notify_id;     /* the last notification's req_id (srv_notify) */
	uint64_t last_sent_ns;  /* when the last reply or notification was queued (monotonic) */
	struct seal tx;         /* replies, sealed as they are queued (so in queue order); on
	                         * once the AUTH_PROVE reply is queued */

	/* Loop thread only. */
	uint8_t *rbuf;
	uint32_t rcap;           /* PREAUTH_RBUF until authenticated, then RBUF_SIZE */
	uint32_t rpos;
	uint32_t rlen;
	enum rstate rstate;
	struct lw_hdr hdr;
	uint32_t hgot;
	struct srv_req *req;
	uint32_t got;            /* of body, bulk or tag, per rstate */
	struct seal rx;          /* requests; on from the first frame after a good AUTH_PROVE */
	uint8_t tag[LW_TAG_LEN]; /* the tag being read (RS_TAG) */
	bool starved;            /* waiting for server memory to start its next frame */
	bool authed;             /* proved it holds the key (always true when the server has none);
	                          * until then, the connection is on srv->preauth */
	bool challenged;
	bool admitted;           /* counted in its peer's and the server's admitted connections */
	bool is_node;            /* authenticated with node's key, not the file system's */
	struct lw_auth_node node;
	uint64_t rx_ns;          /* when bytes last came, or reading last resumed: a frame begun
	                          * and silent for frame_timeout since is dropped */
	uint8_t nonce[LW_AUTH_NONCE];
	uint64_t deadline_ns;    /* not authenticated by then: closed */
	struct srv_conn *prev_open, *next_open;
	struct srv_conn *prev_preauth, *next_preauth;
	struct srv_conn *next_starved;
	struct srv_conn *next_grave;

	struct srv_conn *next_resume; /* under srv->resume_lock */
};

struct srv {
	struct srv_opts opts;
	struct srv_stats stats;
	char name[16];
	int epfd;
	int listen_fd;
	int wake_fd;
	uint16_t port;
	atomic_int stopping;
	uint64_t next_conn_id;
	uint64_t accept_paused_until; /* listen fd out of epoll until then, or until a close */
	uint64_t handshake_ns;
	uint64_t frame_ns;        /* opts.frame_timeout_ms */
	uint64_t next_stall_scan; /* when the open connections are next looked at for stalls */
	uint32_t max_preauth;     /* connections on preauth at most */
	uint32_t admitted;        /* authenticated connections open (loop thread) */

	atomic_uint_fast64_t mem; /* bytes charged to requests and replies */
	uint8_t key[LOOM_KEY_MAX];
	atomic_bool starving;     /* some connection waits for mem to fall */

	/* Loop thread only. */
	struct srv_conn *open_conns;
	struct srv_conn *starved;
	struct srv_conn *grave;   /* closed during this loop iteration, freed at its end */
	/* Connections that have not authenticated, oldest first. All wait the same time, so the
	 * head has the nearest deadline (no timer heap) and is the one evicted first. */
	struct srv_conn *preauth_head, *preauth_tail;
	uint32_t npreauth;
	struct log_limit lim[LIM_COUNT];

	pthread_mutex_t peers_lock;
	struct u64map peers;      /* addr -> struct srv_peer */

	pthread_mutex_t resume_lock;
	struct srv_conn *resume;
};

/* The bytes a request is charged, from its header. */
static inline uint64_t req_charge(const struct lw_hdr *h)
{
	return sizeof(struct srv_req) + h->body_len + (uint64_t)h->bulk_len;
}

/* server.c */
void conn_unref(struct srv_conn *c);
void srv_wake(struct srv *s);
void accept_pause(struct srv *s, uint64_t until);
void conn_close(struct srv_conn *c, const char *why);

/* server_read.c */
void starved_remove(struct srv *s, struct srv_conn *c);
void conn_read(struct srv_conn *c);

/* server_peers.c */
/* The account of a new connection's address (a reference), or NULL without memory. */
struct srv_peer *peer_get(struct srv *s, uint32_t addr);
void peer_put(struct srv *s, struct srv_peer *p);
/* Charges bytes for a request of c to the server and to c's peer: false (nothing charged)
 * when either is over its budget and holds something already, so that one frame always goes. */
bool mem_charge(struct srv_conn *c, uint64_t bytes);
/* Charges a reply's bytes (always: its request was admitted). */
void mem_charge_reply(struct srv_conn *c, uint64_t bytes);
/* Memory charged to c's peer was released: connections waiting for it may go on. */
void mem_release(struct srv_conn *c, uint64_t bytes);
/* c authenticated (or the server has no key): counts it against its peer's cap and the
 * server's, or returns -EUSERS (logged, rate-limited) when it may not stay. */
int conn_admit(struct srv_conn *c);
/* c closes: its place is free. */
void conn_leave(struct srv_conn *c);
/* Closes the connections whose frame stopped coming (a scan a second at most: srv->next_stall_scan
 * says when the next is due). */
void stalled_expire(struct srv *s, uint64_t now);

/* server_reply.c */
void out_frame_free(struct srv_conn *c, struct out_frame *f);
void conn_set_events(struct srv_conn *c);
void conn_check_pause(struct srv_conn *c);
void conn_frame_done(struct srv_conn *c, struct out_frame *f);
/* srv_reply with header flags (LW_F_ENCRYPT on the AUTH_* replies). */
void srv_reply_flags(struct srv_req *req, int status, uint32_t flags, const void *body,
		     uint32_t body_len);
void conn_write_ready(struct srv_conn *c);

/* server_accept.c */
void preauth_remove(struct srv *s, struct srv_conn *c);
void conn_authenticate(struct srv_conn *c, struct srv_req *req);
uint32_t preauth_cap(const struct srv *s);
void srv_accept(struct srv *s);
void preauth_expire(struct srv *s, uint64_t now);

#endif
