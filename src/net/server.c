#include "net/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/crc.h"
#include "common/log.h"
#include "common/util.h"
#include "net/bulk.h"
#include "proto/codec.h"

#define RBUF_SIZE     (64u << 10)
#define PREAUTH_RBUF  256u        /* read buffer before authentication: its frames are small */
#define READ_BUDGET   (4u << 20)  /* bytes read from one connection per event, for fairness */
#define WRITE_IOVS    64
#define SRV_PREAUTH_BODY_MAX 1024u /* bytes of body a frame may carry before authentication */
#define HANDSHAKE_TIMEOUT_MS 5000u
#define ACCEPT_RETRY_NS 100000000ull /* accepts paused for lack of memory or descriptors: retry */

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
	size_t sent;      /* bytes of hb then bulk already written */
	uint64_t charge;  /* bytes charged for it (its own size) */
	bool ends_req;    /* its request is still counted in the connection's in-flight count */
	_Alignas(8) uint8_t hb[]; /* the header is read as struct lw_hdr: keep it aligned */
};

enum rstate { RS_HDR, RS_BODY, RS_BULK };

/* The kinds of rate-limited log lines (lim_kinds below). */
enum lim_kind { LIM_TIMEOUT, LIM_WRONG_KEY, LIM_BAD_AUTH, LIM_NO_AUTH, LIM_DROPPED, LIM_EVICTED,
		LIM_ACCEPT, LIM_COUNT };

struct srv_conn {
	struct srv *srv;
	int fd;
	uint64_t id;
	char peer[48];

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

	/* Loop thread only. */
	uint8_t *rbuf;
	uint32_t rcap;           /* PREAUTH_RBUF until authenticated, then RBUF_SIZE */
	uint32_t rpos;
	uint32_t rlen;
	enum rstate rstate;
	struct lw_hdr hdr;
	uint32_t hgot;
	struct srv_req *req;
	uint32_t got;            /* of body or bulk, per rstate */
	bool starved;            /* waiting for server memory to start its next frame */
	bool authed;             /* proved it holds the key (always true when the server has none);
	                          * until then, the connection is on srv->preauth */
	bool challenged;
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
	char name[16];
	int epfd;
	int listen_fd;
	int wake_fd;
	uint16_t port;
	atomic_int stopping;
	uint64_t next_conn_id;
	uint64_t accept_paused_until; /* listen fd out of epoll until then, or until a close */
	uint64_t handshake_ns;
	uint32_t max_preauth;     /* connections on preauth at most */

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

	pthread_mutex_t resume_lock;
	struct srv_conn *resume;
};

/* epoll data for the two non-connection fds */
static char tag_listen, tag_wake;

/*
 * What a stranger can make the server say, each kind at most once a second (common/log.h): a
 * flood of connections must not become a flood of log lines. The summaries keep the phrases of
 * the lines themselves, so that a search for "wrong file system key" finds both.
 */
static const struct {
	enum log_level level;
	const char *what;
} lim_kinds[LIM_COUNT] = {
	[LIM_TIMEOUT] = { LOG_WARN, "unauthenticated connections closed: no authentication in time" },
	[LIM_WRONG_KEY] = { LOG_WARN, "connections refused: wrong file system key" },
	[LIM_BAD_AUTH] = { LOG_WARN, "connections refused: malformed authentication" },
	[LIM_NO_AUTH] = { LOG_WARN, "connections refused: a request before authenticating" },
	[LIM_DROPPED] = { LOG_INFO, "unauthenticated connections closed: bad frames" },
	[LIM_EVICTED] = { LOG_WARN, "unauthenticated connections closed to make room" },
	[LIM_ACCEPT] = { LOG_WARN, "cannot accept" },
};

static void conn_unref(struct srv_conn *c)
{
	int left;

	pthread_mutex_lock(&c->lock);
	left = --c->refs;
	pthread_mutex_unlock(&c->lock);
	if (left > 0)
		return;
	pthread_mutex_destroy(&c->lock);
	free(c->rbuf);
	free(c);
}

static void srv_wake(struct srv *s)
{
	uint64_t one = 1;

	if (write(s->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("%s: eventfd write: %s", s->name, strerror(errno));
}

/* Server memory was released: connections waiting for it may go on. */
static void mem_release(struct srv *s, uint64_t bytes)
{
	uint64_t now = atomic_fetch_sub(&s->mem, bytes) - bytes;

	if (atomic_load(&s->starving) && now < s->opts.max_memory / 2 &&
	    atomic_exchange(&s->starving, false))
		srv_wake(s);
}

static void out_frame_free(struct srv *s, struct out_frame *f)
{
	if (f->bulk) {
		if (f->bulk_free)
			f->bulk_free(f->bulk);
		else
			free(f->bulk);
	}
	mem_release(s, f->charge);
	free(f);
}

/* Under c->lock. Asks epoll for what the connection needs now. */
static void conn_set_events(struct srv_conn *c)
{
	uint32_t ev = 0;
	struct epoll_event e;

	if (c->closed)
		return;
	/* Not even RDHUP while paused: it would be reported on every wait, and spin the loop. */
	if (!atomic_load(&c->paused) && !c->starved)
		ev |= EPOLLIN | EPOLLRDHUP;
	if (c->out_head)
		ev |= EPOLLOUT;
	if (ev == c->events)
		return;
	e.events = ev;
	e.data.ptr = c;
	if (epoll_ctl(c->srv->epfd, EPOLL_CTL_MOD, c->fd, &e) == 0)
		c->events = ev;
	else
		log_warn("%s: epoll_ctl for connection %llu: %s", c->srv->name, (unsigned long long)c->id,
			 strerror(errno));
}

/* Under c->lock: pauses reading past the connection's limits. */
static void conn_check_pause(struct srv_conn *c)
{
	struct srv *s = c->srv;

	if (!atomic_load(&c->paused) &&
	    (c->inflight >= s->opts.max_inflight || c->inflight_bytes >= s->opts.max_inflight_bytes)) {
		atomic_store(&c->paused, true);
		conn_set_events(c);
	}
}

/*
 * Under c->lock: if the connection is paused and has drained enough, un-pauses it and queues it
 * for the loop (its read buffer may hold whole frames that no event will announce). Returns
 * true when the caller must hand it over with conn_queue_resume() after unlocking.
 */
static bool conn_check_resume(struct srv_conn *c)
{
	struct srv *s = c->srv;

	if (!atomic_load(&c->paused) || c->closed || c->inflight > s->opts.max_inflight / 2 ||
	    c->inflight_bytes > s->opts.max_inflight_bytes / 2)
		return false;
	atomic_store(&c->paused, false);
	conn_set_events(c);
	if (c->resume_queued)
		return false;
	c->resume_queued = true;
	c->refs++;
	return true;
}

static void conn_queue_resume(struct srv_conn *c)
{
	struct srv *s = c->srv;

	pthread_mutex_lock(&s->resume_lock);
	c->next_resume = s->resume;
	s->resume = c;
	pthread_mutex_unlock(&s->resume_lock);
	srv_wake(s);
}

/* Under c->lock: a reply frame left (sent or dropped). */
static void conn_frame_done(struct srv_conn *c, struct out_frame *f)
{
	if (f->ends_req)
		c->inflight--;
	c->inflight_bytes -= f->charge;
}

/*
 * Under c->lock. Writes as much of the out queue as the socket takes, several frames per call.
 * Returns 0, or -errno when the connection is broken (the loop closes it on its next event).
 */
static int conn_flush(struct srv_conn *c)
{
	while (c->out_head && !c->closed) {
		struct iovec iov[WRITE_IOVS];
		struct msghdr mh = { .msg_iov = iov };
		int n = 0;
		ssize_t w;

		for (struct out_frame *f = c->out_head; f && n + 2 <= WRITE_IOVS; f = f->next) {
			size_t off = f == c->out_head ? f->sent : 0;
			if (off < f->hb_len) {
				iov[n].iov_base = f->hb + off;
				iov[n++].iov_len = f->hb_len - off;
				off = 0;
			} else {
				off -= f->hb_len;
			}
			if (f->bulk_len > off) {
				iov[n].iov_base = (uint8_t *)f->bulk + off;
				iov[n++].iov_len = f->bulk_len - off;
			}
		}
		mh.msg_iovlen = (size_t)n;
		w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			return -errno;
		}
		while (w > 0 && c->out_head) {
			struct out_frame *f = c->out_head;
			size_t left = f->hb_len + (size_t)f->bulk_len - f->sent;
			if ((size_t)w < left) {
				f->sent += (size_t)w;
				break;
			}
			w -= (ssize_t)left;
			c->out_head = f->next;
			if (!c->out_head)
				c->out_tail = NULL;
			conn_frame_done(c, f);
			out_frame_free(c->srv, f);
		}
	}
	if (!c->out_head && c->close_when_flushed && !c->closed)
		shutdown(c->fd, SHUT_RDWR); /* the loop closes it on the hang-up */
	return 0;
}

static void starved_remove(struct srv *s, struct srv_conn *c)
{
	for (struct srv_conn **pp = &s->starved; *pp; pp = &(*pp)->next_starved) {
		if (*pp == c) {
			*pp = c->next_starved;
			break;
		}
	}
	c->starved = false;
}

static void preauth_append(struct srv *s, struct srv_conn *c)
{
	c->prev_preauth = s->preauth_tail;
	c->next_preauth = NULL;
	if (s->preauth_tail)
		s->preauth_tail->next_preauth = c;
	else
		s->preauth_head = c;
	s->preauth_tail = c;
	s->npreauth++;
}

static void preauth_remove(struct srv *s, struct srv_conn *c)
{
	if (c->prev_preauth)
		c->prev_preauth->next_preauth = c->next_preauth;
	else
		s->preauth_head = c->next_preauth;
	if (c->next_preauth)
		c->next_preauth->prev_preauth = c->prev_preauth;
	else
		s->preauth_tail = c->prev_preauth;
	c->prev_preauth = c->next_preauth = NULL;
	s->npreauth--;
}

/* Takes the listen fd out of epoll until `until`, or until a connection closes. */
static void accept_pause(struct srv *s, uint64_t until)
{
	struct epoll_event e = { .events = 0, .data.ptr = &tag_listen };

	s->accept_paused_until = until;
	epoll_ctl(s->epfd, EPOLL_CTL_MOD, s->listen_fd, &e);
}

static void accept_resume(struct srv *s)
{
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = &tag_listen };

	s->accept_paused_until = 0;
	epoll_ctl(s->epfd, EPOLL_CTL_MOD, s->listen_fd, &e);
}

/* What a connection that did not authenticate got as far as, for the line that closes it. */
static const char *preauth_progress(const struct srv_conn *c, char *buf, size_t cap)
{
	if (c->close_when_flushed)
		return "it was refused and has not taken the answer";
	if (c->challenged)
		return "it took a challenge and sent no proof";
	if (c->rstate != RS_HDR || c->rlen > c->rpos)
		return "it sent part of a frame";
	if (c->hgot) {
		snprintf(buf, cap, "it sent %u of a header's %zu bytes", c->hgot, sizeof(c->hdr));
		return buf;
	}
	return "it sent nothing";
}

/* Loop thread. Idempotent. The memory goes at the end of the loop iteration, so that events
 * of the same epoll batch that name this connection find it (closed) rather than freed. */
static void conn_close(struct srv_conn *c, const char *why)
{
	struct srv *s = c->srv;
	struct out_frame *f;

	if (c->fd < 0)
		return;
	if (why && !c->authed)
		log_limited(&s->lim[LIM_DROPPED], clock_mono_ns(),
			    "%s: closing connection %llu from %s, which has not authenticated: %s", s->name,
			    (unsigned long long)c->id, c->peer, why);
	else if (why)
		log_info("%s: closing connection %llu from %s: %s", s->name, (unsigned long long)c->id,
			 c->peer, why);
	pthread_mutex_lock(&c->lock);
	c->closed = true;
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	while ((f = c->out_head)) {
		c->out_head = f->next;
		conn_frame_done(c, f);
		out_frame_free(s, f);
	}
	c->out_tail = NULL;
	pthread_mutex_unlock(&c->lock);

	if (c->req) {
		bulk_free(c->req->bulk);
		mem_release(s, sizeof(*c->req) + c->req->hdr.body_len + (uint64_t)c->req->hdr.bulk_len);
		free(c->req);
		c->req = NULL;
	}
	if (c->starved)
		starved_remove(s, c);
	if (!c->authed)
		preauth_remove(s, c);
	/* A descriptor is free: accepts that waited for one go on at once. */
	if (s->accept_paused_until)
		accept_resume(s);
	if (c->prev_open)
		c->prev_open->next_open = c->next_open;
	else
		s->open_conns = c->next_open;
	if (c->next_open)
		c->next_open->prev_open = c->prev_open;
	if (s->opts.disconnect)
		s->opts.disconnect(c->id, s->opts.arg);
	c->next_grave = s->grave;
	s->grave = c;
}

static void srv_bury(struct srv *s)
{
	while (s->grave) {
		struct srv_conn *c = s->grave;
		s->grave = c->next_grave;
		conn_unref(c);
	}
}

static uint64_t req_charge(const struct lw_hdr *h)
{
	return sizeof(struct srv_req) + h->body_len + (uint64_t)h->bulk_len;
}

static void conn_authenticate(struct srv_conn *c, struct srv_req *req);

static void conn_deliver(struct srv_conn *c)
{
	struct srv *s = c->srv;
	struct srv_req *req = c->req;
	uint16_t op = req->hdr.opcode;

	c->req = NULL;
	req->recv_ns = clock_mono_ns();
	pthread_mutex_lock(&c->lock);
	c->refs++;
	c->inflight++;
	c->inflight_bytes += req_charge(&req->hdr);
	req->counted = true;
	conn_check_pause(c);
	pthread_mutex_unlock(&c->lock);
	if (op == LW_OP_AUTH_CHALLENGE || op == LW_OP_AUTH_PROVE || !c->authed) {
		conn_authenticate(c, req);
		return;
	}
	s->opts.deliver(req, s->opts.arg);
}

/* Loop thread: the authentication exchange (wire.h), and the gate before it is done. */
static void conn_authenticate(struct srv_conn *c, struct srv_req *req)
{
	struct srv *s = c->srv;
	uint16_t op = req->hdr.opcode;

	if (!s->opts.keylen) {
		/* A server without a key answers the exchange with "not supported"; a client that
		 * wants one then refuses the server. */
		c->authed = true;
		if (op == LW_OP_AUTH_CHALLENGE || op == LW_OP_AUTH_PROVE)
			srv_reply(req, -EOPNOTSUPP, NULL, 0, NULL, 0, NULL);
		else
			s->opts.deliver(req, s->opts.arg);
		return;
	}
	if (op == LW_OP_AUTH_CHALLENGE && req->hdr.body_len == 0 && random_bytes(c->nonce, sizeof(c->nonce)) == 0) {
		struct lw_auth_challenge ch;

		memcpy(ch.nonce, c->nonce, sizeof(ch.nonce));
		c->challenged = true;
		srv_reply(req, 0, &ch, sizeof(ch), NULL, 0, NULL);
		return;
	}
	if (op == LW_OP_AUTH_PROVE && c->challenged && req->hdr.body_len == sizeof(struct lw_auth_prove)) {
		struct lw_auth_prove pr;
		struct lw_auth_proof proof;
		uint8_t want[LOOM_MAC_LEN];

		memcpy(&pr, req->body, sizeof(pr));
		c->challenged = false; /* one proof per challenge */
		if (loom_auth_mac(s->key, s->opts.keylen, "loom-auth-client", c->nonce, pr.nonce,
				  LW_AUTH_NONCE, want) == 0 &&
		    loom_auth_equal(pr.mac, want) &&
		    loom_auth_mac(s->key, s->opts.keylen, "loom-auth-server", pr.nonce, c->nonce,
				  LW_AUTH_NONCE, proof.mac) == 0) {
			if (!c->authed) { /* AUTH_* again later is a new challenge, no more */
				c->authed = true;
				preauth_remove(s, c);
			}
			srv_reply(req, 0, &proof, sizeof(proof), NULL, 0, NULL);
			return;
		}
		log_limited(&s->lim[LIM_WRONG_KEY], clock_mono_ns(),
			    "%s: connection %llu from %s: wrong file system key; refusing it", s->name,
			    (unsigned long long)c->id, c->peer);
	} else if (op == LW_OP_AUTH_CHALLENGE || op == LW_OP_AUTH_PROVE) {
		log_limited(&s->lim[LIM_BAD_AUTH], clock_mono_ns(),
			    "%s: connection %llu from %s: malformed authentication; refusing it", s->name,
			    (unsigned long long)c->id, c->peer);
	} else {
		log_limited(&s->lim[LIM_NO_AUTH], clock_mono_ns(),
			    "%s: connection %llu from %s: %s before authenticating (the client has no key "
			    "or the wrong one); refusing it", s->name, (unsigned long long)c->id, c->peer,
			    lw_op_name(op));
	}
	/* Tell the client why (EACCES), then hang up. */
	pthread_mutex_lock(&c->lock);
	c->close_when_flushed = true;
	atomic_store(&c->paused, true); /* read nothing more from it */
	conn_set_events(c);
	pthread_mutex_unlock(&c->lock);
	srv_reply(req, -EACCES, NULL, 0, NULL, 0, NULL);
}

/* A request whose bulk failed its checksum is answered here; the framing is still sound. */
static void conn_reject_bulk(struct srv_conn *c)
{
	struct srv_req *req = c->req;

	log_warn("%s: %s from %s: bulk checksum mismatch, answering EBADMSG", c->srv->name,
		 lw_op_name(req->hdr.opcode), c->peer);
	c->req = NULL;
	pthread_mutex_lock(&c->lock);
	c->refs++;
	c->inflight++;
	c->inflight_bytes += req_charge(&req->hdr);
	req->counted = true;
	pthread_mutex_unlock(&c->lock);
	srv_reply(req, -EBADMSG, NULL, 0, NULL, 0, NULL);
}

/*
 * The header is complete: check it and allocate the request, if the server has the memory.
 * Returns NULL (c->req set, or c->starved when it must wait), or why the peer is dropped.
 */
static const char *conn_hdr_done(struct srv_conn *c)
{
	struct srv *s = c->srv;
	struct lw_hdr *h = &c->hdr;
	uint64_t need = req_charge(h), before;
	struct srv_req *req;

	if (lw_hdr_check(h))
		return h->magic != LW_MAGIC ? "not a Loom frame (bad magic)" : "malformed frame header";
	if (h->flags & LW_F_REPLY)
		return "reply frame sent to a server";
	if (h->bulk_len && s->opts.bulk_ok && !s->opts.bulk_ok(h->opcode))
		return "bulk data with an opcode that takes none";
	/* Until the peer proved it holds the key, it gets no memory beyond a small frame (which
	 * is answered by the gate): a stranger cannot eat the budget of the clients. */
	if (!c->authed && s->opts.keylen && (h->bulk_len || h->body_len > SRV_PREAUTH_BODY_MAX))
		return "a large frame before authenticating (the client has no key or the wrong one)";

	before = atomic_fetch_add(&s->mem, need);
	if (before + need > s->opts.max_memory && before > 0) {
		/* Over budget: this connection waits until replies free memory. (With nothing
		 * charged at all, one frame always goes, so the server cannot stall itself.) */
		atomic_fetch_sub(&s->mem, need);
		atomic_store(&s->starving, true);
		if (!c->starved) {
			c->starved = true;
			c->next_starved = s->starved;
			s->starved = c;
			pthread_mutex_lock(&c->lock);
			conn_set_events(c);
			pthread_mutex_unlock(&c->lock);
		}
		return NULL;
	}
	req = malloc(sizeof(*req) + h->body_len);
	if (req) {
		memset(req, 0, sizeof(*req));
		req->bulk = h->bulk_len ? bulk_alloc(h->bulk_len) : NULL;
	}
	if (!req || (h->bulk_len && !req->bulk)) {
		free(req);
		atomic_fetch_sub(&s->mem, need);
		return "out of memory for a request";
	}
	req->hdr = *h;
	req->body = (uint8_t *)(req + 1);
	req->conn = c;
	req->conn_id = c->id;
	c->req = req;
	c->got = 0;
	c->rstate = RS_BODY;
	return NULL;
}

static const char *conn_body_done(struct srv_conn *c)
{
	if (lw_hdr_crc_check(&c->req->hdr, c->req->body))
		return "header checksum mismatch";
	c->got = 0;
	if (c->req->hdr.bulk_len) {
		c->rstate = RS_BULK;
		return NULL;
	}
	c->rstate = RS_HDR;
	c->hgot = 0;
	conn_deliver(c);
	return NULL;
}

static void conn_bulk_done(struct srv_conn *c)
{
	struct srv_req *req = c->req;

	c->rstate = RS_HDR;
	c->hgot = 0;
	if (crc32c(0, req->bulk, req->hdr.bulk_len) != req->hdr.bulk_crc)
		conn_reject_bulk(c);
	else
		conn_deliver(c);
}

/* A header waiting for memory gets it now, if there is some. NULL, or why to drop the peer. */
static const char *conn_retry_alloc(struct srv_conn *c)
{
	const char *why;

	if (c->rstate != RS_HDR || c->hgot != sizeof(c->hdr) || c->req)
		return NULL;
	if (c->starved)
		starved_remove(c->srv, c);
	why = conn_hdr_done(c);
	if (why || c->starved)
		return why;
	if (c->req->hdr.body_len == 0)
		return conn_body_done(c);
	return NULL;
}

static bool conn_reading(struct srv_conn *c)
{
	return !atomic_load(&c->paused) && !c->starved;
}

/* Consumes buffered bytes through the frame state machine. NULL, or why the peer is dropped. */
static const char *conn_parse(struct srv_conn *c)
{
	while (c->rpos < c->rlen && conn_reading(c)) {
		const uint8_t *p = c->rbuf + c->rpos;
		uint32_t avail = c->rlen - c->rpos, n;
		const char *why = NULL;

		switch (c->rstate) {
		case RS_HDR:
			n = MIN(avail, (uint32_t)sizeof(c->hdr) - c->hgot);
			memcpy((uint8_t *)&c->hdr + c->hgot, p, n);
			c->hgot += n;
			c->rpos += n;
			if (c->hgot == sizeof(c->hdr))
				why = conn_retry_alloc(c);
			break;
		case RS_BODY:
			n = MIN(avail, c->req->hdr.body_len - c->got);
			memcpy(c->req->body + c->got, p, n);
			c->got += n;
			c->rpos += n;
			if (c->got == c->req->hdr.body_len)
				why = conn_body_done(c);
			break;
		case RS_BULK:
			n = MIN(avail, c->req->hdr.bulk_len - c->got);
			memcpy(c->req->bulk + c->got, p, n);
			c->got += n;
			c->rpos += n;
			if (c->got == c->req->hdr.bulk_len)
				conn_bulk_done(c);
			break;
		}
		if (why)
			return why;
	}
	if (c->rpos == c->rlen)
		c->rpos = c->rlen = 0;
	return NULL;
}

/*
 * The read buffer, sized for what the connection may send now: a stranger's frames are small
 * (SRV_PREAUTH_BODY_MAX), so until it authenticates it gets PREAUTH_RBUF bytes, not RBUF_SIZE;
 * a thousand idle or half-open connections then hold a few hundred KiB, not 64 MiB. Called only
 * with everything in the buffer parsed (rpos == rlen == 0), so growing it moves nothing.
 */
static bool conn_rbuf_ready(struct srv_conn *c)
{
	uint32_t want = c->authed ? RBUF_SIZE : PREAUTH_RBUF;
	uint8_t *p;

	if (c->rcap >= want)
		return true;
	free(c->rbuf);
	c->rbuf = NULL;
	c->rcap = 0;
	p = malloc(want);
	if (!p)
		return false;
	c->rbuf = p;
	c->rcap = want;
	return true;
}

static void conn_read(struct srv_conn *c)
{
	uint32_t budget = READ_BUDGET;
	const char *why;
	char ebuf[64];

	if (c->fd < 0)
		return;
	why = conn_retry_alloc(c);
	if (why) {
		conn_close(c, why);
		return;
	}
	for (;;) {
		ssize_t n;

		why = conn_parse(c);
		if (why) {
			conn_close(c, why);
			return;
		}
		if (c->rpos < c->rlen || !conn_reading(c) || budget == 0)
			return;
		if (c->rstate == RS_BULK && c->req->hdr.bulk_len - c->got >= RBUF_SIZE) {
			/* Large bulk goes straight into the request, not through rbuf. */
			n = recv(c->fd, c->req->bulk + c->got, c->req->hdr.bulk_len - c->got, 0);
			if (n > 0) {
				c->got += (uint32_t)n;
				if (c->got == c->req->hdr.bulk_len)
					conn_bulk_done(c);
			}
		} else {
			if (!conn_rbuf_ready(c)) {
				conn_close(c, "out of memory for a read buffer");
				return;
			}
			n = recv(c->fd, c->rbuf, c->rcap, 0);
			if (n > 0) {
				c->rpos = 0;
				c->rlen = (uint32_t)n;
			}
		}
		if (n == 0) {
			conn_close(c, c->rstate == RS_HDR && c->hgot == 0 ? NULL : "peer closed mid-frame");
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			snprintf(ebuf, sizeof(ebuf), "read error: %s", strerror(errno));
			conn_close(c, ebuf);
			return;
		}
		budget = (uint32_t)n >= budget ? 0 : budget - (uint32_t)n;
	}
}

static void conn_write_ready(struct srv_conn *c)
{
	bool resume;
	int rc;

	if (c->fd < 0)
		return;
	pthread_mutex_lock(&c->lock);
	rc = conn_flush(c);
	conn_set_events(c);
	resume = conn_check_resume(c);
	pthread_mutex_unlock(&c->lock);
	if (resume)
		conn_queue_resume(c);
	if (rc < 0)
		conn_close(c, "write error");
}

/* At most half the descriptors for strangers, so that the other half stays for the clients
 * that hold the key and for the program's own files. */
static uint32_t preauth_cap(const struct srv *s)
{
	struct rlimit rl;

	if (s->opts.max_unauthenticated)
		return s->opts.max_unauthenticated;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 2 > UINT32_MAX)
		return UINT32_MAX;
	return rl.rlim_cur / 2 > 0 ? (uint32_t)(rl.rlim_cur / 2) : 1;
}

/* Does a connection wait in the listen backlog? */
static bool listen_backlogged(const struct srv *s)
{
	struct pollfd p = { .fd = s->listen_fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* Closes the oldest connection that has not authenticated, to make room for a new one. */
static void preauth_evict(struct srv *s, const char *why)
{
	struct srv_conn *c = s->preauth_head;
	uint64_t now = clock_mono_ns();
	char buf[64];

	log_limited(&s->lim[LIM_EVICTED], now,
		    "%s: closing connection %llu from %s to make room (%s): not authenticated after "
		    "%llu ms, %s", s->name, (unsigned long long)c->id, c->peer, why,
		    (unsigned long long)((now - (c->deadline_ns - s->handshake_ns)) / 1000000),
		    preauth_progress(c, buf, sizeof(buf)));
	conn_close(c, NULL);
}

/*
 * Accepts what the listen backlog holds, 64 at a time (the listen fd is level-triggered: the
 * rest comes on the next turn).
 *
 * Out of descriptors (EMFILE, or ENFILE for the whole system), the server must neither spin on
 * the listen fd nor leave a client waiting in the backlog while strangers hold every
 * descriptor. The classic answers are to close an idle connection, or to keep a spare
 * descriptor to accept the newcomer with and close it at once. Here the server knows who the
 * strangers are, so it closes the oldest connection that has not authenticated (a real client
 * authenticates within milliseconds of connecting, so the oldest unauthenticated one is the
 * likeliest to be idle on purpose) and accepts again at once with the descriptor that freed. The
 * spare-descriptor trick would refuse the newcomer instead, who is as likely to be the client
 * the server is there for. When every descriptor serves an authenticated peer (or the program's
 * own files), the server is full, not attacked: it stops accepting until a connection closes
 * (conn_close re-arms the listen fd) or ACCEPT_RETRY_NS pass (for descriptors the program frees),
 * and the newcomers wait in the backlog. The same cap applies before descriptors run out:
 * strangers may hold at most preauth_cap(), so that they never hold them all.
 */
static void srv_accept(struct srv *s)
{
	for (int i = 0; i < 64; i++) {
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		struct srv_conn *c;
		struct epoll_event e;
		int one = 1, fd, err;

		fd = accept4(s->listen_fd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			err = errno;
			/* Linux's accept takes a descriptor before it looks at the queue: EMFILE says
			 * nothing about whether anyone waits. Nobody: nothing to make room for (the
			 * next arrival wakes the loop again). */
			if ((err == EMFILE || err == ENFILE) && !listen_backlogged(s))
				return;
			if ((err == EMFILE || err == ENFILE) && s->preauth_head) {
				/* The limit may have been lowered since (prlimit): strangers get half of
				 * what it is now. */
				s->max_preauth = preauth_cap(s);
				preauth_evict(s, strerror(err));
				continue;
			}
			if (err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS) {
				log_limited(&s->lim[LIM_ACCEPT], clock_mono_ns(),
					    "%s: cannot accept: %s%s; new connections wait until one closes",
					    s->name, strerror(err),
					    err == EMFILE || err == ENFILE ?
					    " (no connection waits to authenticate)" : "");
				accept_pause(s, clock_mono_ns() + ACCEPT_RETRY_NS);
			}
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			accept_pause(s, clock_mono_ns() + ACCEPT_RETRY_NS);
			return;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->srv = s;
		c->fd = fd;
		c->id = ++s->next_conn_id;
		c->refs = 1;
		c->authed = s->opts.keylen == 0;
		atomic_init(&c->paused, false);
		pthread_mutex_init(&c->lock, NULL);
		inet_ntop(AF_INET, &sa.sin_addr, c->peer, sizeof(c->peer));
		snprintf(c->peer + strlen(c->peer), sizeof(c->peer) - strlen(c->peer), ":%u",
			 ntohs(sa.sin_port));
		c->events = EPOLLIN | EPOLLRDHUP;
		e.events = c->events;
		e.data.ptr = c;
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
			close(fd);
			pthread_mutex_destroy(&c->lock);
			free(c);
			continue;
		}
		c->next_open = s->open_conns;
		if (s->open_conns)
			s->open_conns->prev_open = c;
		s->open_conns = c;
		if (!c->authed) {
			c->deadline_ns = clock_mono_ns() + s->handshake_ns;
			preauth_append(s, c);
			while (s->npreauth > s->max_preauth) /* more than one when the cap fell */
				preauth_evict(s, "too many connections waiting to authenticate");
		}
		log_debug("%s: connection %llu from %s", s->name, (unsigned long long)c->id, c->peer);
	}
}

/* Closes the connections whose time to authenticate is over. */
static void preauth_expire(struct srv *s, uint64_t now)
{
	struct srv_conn *c;
	char buf[64];

	while ((c = s->preauth_head) && c->deadline_ns <= now) {
		uint64_t ms = s->handshake_ns / 1000000;

		log_limited(&s->lim[LIM_TIMEOUT], now,
			    "%s: closing connection %llu from %s: no authentication within %llu %s (%s)",
			    s->name, (unsigned long long)c->id, c->peer,
			    (unsigned long long)(ms % 1000 ? ms : ms / 1000), ms % 1000 ? "ms" : "s",
			    preauth_progress(c, buf, sizeof(buf)));
		conn_close(c, NULL);
	}
}

/* How long the loop may sleep: until the next handshake deadline, accept retry or held log
 * count, whichever is first (-1: none). Rounded up, so that it wakes with the time passed. */
static int srv_timeout_ms(struct srv *s, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	if (s->preauth_head)
		next = s->preauth_head->deadline_ns;
	if (s->accept_paused_until)
		next = MIN(next, s->accept_paused_until);
	for (int k = 0; k < LIM_COUNT; k++) {
		uint64_t t = log_limit_flush(&s->lim[k], now);
		if (t)
			next = MIN(next, t);
	}
	if (next == UINT64_MAX)
		return -1;
	if (next <= now)
		return 0;
	return (int)MIN((next - now + 999999) / 1000000, (uint64_t)INT_MAX);
}

/* Connections un-paused by replies, and those that waited for memory: read on. */
static void srv_resume(struct srv *s)
{
	struct srv_conn *list, *starved;
	uint64_t v;

	if (read(s->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("%s: eventfd read: %s", s->name, strerror(errno));
	pthread_mutex_lock(&s->resume_lock);
	list = s->resume;
	s->resume = NULL;
	pthread_mutex_unlock(&s->resume_lock);
	while (list) {
		struct srv_conn *c = list;
		bool closed;

		list = c->next_resume;
		pthread_mutex_lock(&c->lock);
		c->resume_queued = false;
		closed = c->closed;
		pthread_mutex_unlock(&c->lock);
		if (!closed)
			conn_read(c);
		conn_unref(c);
	}
	/* Each starved connection retries its allocation; those that fail join the list again. */
	starved = s->starved;
	s->starved = NULL;
	while (starved) {
		struct srv_conn *c = starved;

		starved = c->next_starved;
		c->starved = false;
		pthread_mutex_lock(&c->lock);
		conn_set_events(c);
		pthread_mutex_unlock(&c->lock);
		conn_read(c);
	}
}

static bool any_bulk(uint16_t opcode)
{
	(void)opcode;
	return true;
}

int srv_create(const struct srv_opts *opts, struct srv **out)
{
	struct srv *s;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct epoll_event e;
	int one = 1, rc;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->opts = *opts;
	if (!s->opts.max_inflight)
		s->opts.max_inflight = 64;
	if (!s->opts.max_inflight_bytes)
		s->opts.max_inflight_bytes = 64ull << 20;
	if (!s->opts.max_memory)
		s->opts.max_memory = 1ull << 30;
	if (!s->opts.bulk_ok)
		s->opts.bulk_ok = any_bulk;
	if (!s->opts.handshake_timeout_ms)
		s->opts.handshake_timeout_ms = HANDSHAKE_TIMEOUT_MS;
	s->handshake_ns = (uint64_t)s->opts.handshake_timeout_ms * 1000000u;
	s->max_preauth = preauth_cap(s);
	if (s->opts.keylen > sizeof(s->key)) {
		free(s);
		return -EINVAL;
	}
	if (s->opts.keylen)
		memcpy(s->key, opts->key, s->opts.keylen);
	s->opts.key = NULL;
	snprintf(s->name, sizeof(s->name), "%s", opts->name ? opts->name : "srv");
	for (int k = 0; k < LIM_COUNT; k++) {
		char what[96];

		snprintf(what, sizeof(what), "%s: %s", s->name, lim_kinds[k].what);
		log_limit_init(&s->lim[k], lim_kinds[k].level, what);
	}
	s->listen_fd = s->wake_fd = s->epfd = -1;
	atomic_init(&s->mem, 0);
	atomic_init(&s->starving, false);
	atomic_init(&s->stopping, 0);
	pthread_mutex_init(&s->resume_lock, NULL);

	if (inet_pton(AF_INET, opts->listen_host ? opts->listen_host : "0.0.0.0", &sa.sin_addr) != 1) {
		rc = -EINVAL;
		goto fail;
	}
	sa.sin_port = htons(opts->listen_port);
	s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0) {
		rc = -errno;
		goto fail;
	}
	setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s->listen_fd, 4096) < 0 ||
	    getsockname(s->listen_fd, (struct sockaddr *)&sa, &sl) < 0) {
		rc = -errno;
		goto fail;
	}
	s->port = ntohs(sa.sin_port);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->epfd < 0 || s->wake_fd < 0) {
		rc = -errno;
		goto fail;
	}
	e.events = EPOLLIN;
	e.data.ptr = &tag_listen;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->listen_fd, &e) < 0) {
		rc = -errno;
		goto fail;
	}
	e.data.ptr = &tag_wake;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wake_fd, &e) < 0) {
		rc = -errno;
		goto fail;
	}
	*out = s;
	return 0;
fail:
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	pthread_mutex_destroy(&s->resume_lock);
	free(s);
	return rc;
}

int srv_handshake_timeout_parse(const char *arg, uint32_t *ms_out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || v < 1 || v > 3600)
		return -EINVAL;
	*ms_out = (uint32_t)v * 1000u;
	return 0;
}

uint16_t srv_port(const struct srv *s)
{
	return s->port;
}

int srv_run(struct srv *s)
{
	struct epoll_event evs[128];

	while (!atomic_load(&s->stopping)) {
		int n = epoll_wait(s->epfd, evs, (int)ARRAY_SIZE(evs), srv_timeout_ms(s, clock_mono_ns()));
		uint64_t now;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (s->accept_paused_until && clock_mono_ns() >= s->accept_paused_until)
			accept_resume(s);
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			uint32_t ev = evs[i].events;
			struct srv_conn *c;

			if (p == &tag_listen) {
				srv_accept(s);
				continue;
			}
			if (p == &tag_wake) {
				srv_resume(s);
				continue;
			}
			/* A connection closed earlier in this batch is still allocated (its memory
			 * goes in srv_bury below), with fd -1: the handlers then do nothing. */
			c = p;
			if (ev & EPOLLERR) {
				conn_close(c, "socket error");
				continue;
			}
			if (ev & EPOLLOUT)
				conn_write_ready(c);
			if (ev & (EPOLLIN | EPOLLRDHUP))
				conn_read(c);
			if ((ev & EPOLLHUP) && c->fd >= 0)
				conn_close(c, NULL); /* both directions gone: nothing more can be said */
		}
		/* After the batch, so that a proof that came in it is read before its deadline is
		 * checked. */
		now = clock_mono_ns();
		preauth_expire(s, now);
		srv_bury(s);
	}
	return 0;
}

void srv_stop(struct srv *s)
{
	atomic_store(&s->stopping, 1);
	srv_wake(s);
}

void srv_destroy(struct srv *s)
{
	while (s->open_conns)
		conn_close(s->open_conns, NULL);
	for (int k = 0; k < LIM_COUNT; k++)
		log_limit_flush(&s->lim[k], UINT64_MAX); /* the counts still held */
	srv_resume(s);
	srv_bury(s);
	close(s->listen_fd);
	close(s->epfd);
	close(s->wake_fd);
	pthread_mutex_destroy(&s->resume_lock);
	free(s);
}

/* Frees a request's own memory (not its connection's count, which its reply or drop settles). */
static void req_free(struct srv *s, struct srv_req *req)
{
	bulk_free(req->bulk);
	mem_release(s, req_charge(&req->hdr));
	free(req);
}

void srv_reply(struct srv_req *req, int status, const void *body, uint32_t body_len, void *bulk,
	       uint32_t bulk_len, void (*release)(void *))
{
	struct srv_conn *c = req->conn;
	struct srv *s = c->srv;
	struct out_frame *f;
	struct lw_hdr *h;
	bool resume = false;
	int rc = 0;

	f = malloc(sizeof(*f) + sizeof(*h) + body_len);
	if (f) {
		f->next = NULL;
		f->bulk = bulk;
		f->bulk_free = release;
		f->bulk_len = bulk ? bulk_len : 0;
		f->hb_len = (uint32_t)sizeof(*h) + body_len;
		f->sent = 0;
		f->charge = (uint64_t)f->hb_len + f->bulk_len;
		f->ends_req = req->counted;
		h = (struct lw_hdr *)f->hb;
		if (body_len)
			memcpy(f->hb + sizeof(*h), body, body_len);
		lw_hdr_fill(h, req->hdr.opcode, LW_F_REPLY, lw_errno_to_wire(status), req->hdr.req_id,
			    f->hb + sizeof(*h), body_len, f->bulk_len,
			    f->bulk_len ? crc32c(0, bulk, f->bulk_len) : 0);
		atomic_fetch_add(&s->mem, f->charge);
	} else {
		log_err("%s: out of memory for a reply to %s; dropping the connection", s->name,
			lw_op_name(req->hdr.opcode));
		if (bulk)
			release ? release(bulk) : free(bulk);
	}

	pthread_mutex_lock(&c->lock);
	/* The request's bytes leave the connection's count; its reply's join it until sent. */
	if (req->counted)
		c->inflight_bytes -= req_charge(&req->hdr);
	if (!f) {
		/* Without its reply the client would wait forever: make it see a broken connection. */
		if (req->counted)
			c->inflight--;
		if (!c->closed)
			shutdown(c->fd, SHUT_RDWR);
	} else if (c->closed) {
		if (req->counted)
			c->inflight--;
		out_frame_free(s, f);
	} else {
		bool was_idle = c->out_head == NULL;

		c->inflight_bytes += f->charge;
		if (c->out_tail)
			c->out_tail->next = f;
		else
			c->out_head = f;
		c->out_tail = f;
		/* Write at once from this thread when nothing is queued ahead of us: one system call
		 * instead of a wake-up of the loop. If the socket is full, epoll takes over. */
		if (was_idle)
			rc = conn_flush(c);
		if (rc < 0)
			shutdown(c->fd, SHUT_RDWR);
		conn_check_pause(c);
	}
	conn_set_events(c);
	resume = conn_check_resume(c);
	pthread_mutex_unlock(&c->lock);
	if (resume)
		conn_queue_resume(c);
	req_free(s, req);
	conn_unref(c);
}

void srv_req_drop(struct srv_req *req)
{
	struct srv_conn *c = req->conn;
	bool resume;

	pthread_mutex_lock(&c->lock);
	if (req->counted) {
		c->inflight--;
		c->inflight_bytes -= req_charge(&req->hdr);
	}
	resume = conn_check_resume(c);
	pthread_mutex_unlock(&c->lock);
	if (resume)
		conn_queue_resume(c);
	req_free(c->srv, req);
	conn_unref(c);
}

void srv_req_park(struct srv_req *req)
{
	struct srv_conn *c = req->conn;
	bool resume;

	pthread_mutex_lock(&c->lock);
	if (req->counted) {
		req->counted = false;
		c->inflight--;
		c->inflight_bytes -= req_charge(&req->hdr);
	}
	resume = conn_check_resume(c);
	pthread_mutex_unlock(&c->lock);
	if (resume)
		conn_queue_resume(c);
}

void *srv_req_take_bulk(struct srv_req *req)
{
	void *b = req->bulk;

	req->bulk = NULL;
	return b;
}

const char *srv_req_peer(const struct srv_req *req)
{
	return req->conn->peer;
}
