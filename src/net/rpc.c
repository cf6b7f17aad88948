#include "net/rpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/crc.h"
#include "common/log.h"
#include "common/util.h"
#include "proto/codec.h"

#define RBUF_SIZE (64u << 10)

enum rstate { RS_HDR, RS_BODY, RS_BULK };

enum conn_state {
	CS_CONNECTED,
	CS_RECOVERING, /* the socket is gone; reconnecting until recover_deadline */
	CS_FAILED,     /* for good: calls fail at once */
};

struct rpc_hs {
	struct rpc_conn *conn;
	int fd;
	int timeout_ms;
};

struct rpc_conn {
	int fd;
	int wake_fd;
	pthread_t thread;
	char peer[96];
	char host[64];
	uint16_t port;
	struct rpc_conn_opts opts;
	uint8_t key[LOOM_KEY_MAX];

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
	enum conn_state state;
	uint64_t recover_deadline_ns;
	bool stopping;
	bool joined;                 /* the thread was stopped (rpc_conn_stop) */

	/* Receive state, I/O thread only. */
	uint8_t *rbuf;
	uint32_t rpos, rlen;
	enum rstate rstate;
	struct lw_hdr hdr;
	uint32_t hgot;
	struct rpc_call *rcall; /* the call the reply being read belongs to */
	uint8_t *rbody;
	uint32_t got;
	uint32_t rbulk_crc;
};

void rpc_wait_init(struct rpc_wait *w)
{
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->pending = 0;
}

void rpc_wait_destroy(struct rpc_wait *w)
{
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
}

void rpc_wait_all(struct rpc_wait *w)
{
	pthread_mutex_lock(&w->lock);
	while (w->pending > 0)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

static void call_complete(struct rpc_call *call, int status)
{
	struct rpc_wait *w = call->wait;

	call->status = status;
	if (!w) {
		call->done(call); /* detached: nothing may touch call after this */
		return;
	}
	pthread_mutex_lock(&w->lock);
	if (--w->pending == 0)
		pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

void rpc_call_init(struct rpc_call *call, uint16_t opcode, const void *body, uint32_t body_len)
{
	memset(call, 0, sizeof(*call));
	call->opcode = opcode;
	call->body = body;
	call->body_len = body_len;
}

void rpc_call_release(struct rpc_call *call)
{
	free(call->rbody);
	call->rbody = NULL;
	call->rbody_len = 0;
}

/* Fails every queued and in-flight call. Under send_lock (a caller may be sending the queue's
 * head) and c->lock. */
static void conn_fail_locked(struct rpc_conn *c, const char *why)
{
	struct rpc_call *list[2] = { c->sendq_head, c->inflight };

	if (c->state != CS_FAILED && !c->stopping && why)
		log_warn("connection to %s lost: %s", c->peer, why);
	c->state = CS_FAILED;
	c->sendq_head = c->sendq_tail = NULL;
	c->inflight = NULL;
	for (int i = 0; i < 2; i++) {
		while (list[i]) {
			struct rpc_call *call = list[i];
			list[i] = call->next;
			call_complete(call, -EIO);
		}
	}
}

static void conn_fail(struct rpc_conn *c, const char *why)
{
	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->lock);
	if (c->rcall) {
		/* Taken off the in-flight list while its reply was being read. */
		call_complete(c->rcall, -EIO);
		c->rcall = NULL;
	}
	conn_fail_locked(c, why);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->send_lock);
	free(c->rbody);
	c->rbody = NULL;
}

static int conn_send(struct rpc_conn *c);

void rpc_submit(struct rpc_conn *c, struct rpc_call *call, struct rpc_wait *w)
{
	uint64_t one = 1;
	bool was_empty;

	call->wait = w;
	call->next = NULL;
	call->sent = 0;
	call->status = 0;
	call->rbody = NULL;
	call->rbody_len = 0;
	call->rbulk_len = 0;
	call->rbulk_cap = 0;
	for (int i = 0; i < call->rbulk_cnt; i++)
		call->rbulk_cap += (uint32_t)call->rbulk[i].iov_len;
	if (w) {
		pthread_mutex_lock(&w->lock);
		w->pending++;
		pthread_mutex_unlock(&w->lock);
	}

	if (call->bulk_cnt < 0 || call->bulk_cnt > RPC_MAX_IOV || call->rbulk_cnt < 0) {
		call_complete(call, -EINVAL);
		return;
	}
	pthread_mutex_lock(&c->lock);
	if (c->state == CS_FAILED || (c->state == CS_RECOVERING && (call->flags & RPC_NOWAIT))) {
		pthread_mutex_unlock(&c->lock);
		call_complete(call, -EIO);
		return;
	}
	call->req_id = ++c->next_id;
	lw_hdr_fill(&call->hdr, call->opcode, 0, 0, call->req_id, call->body, call->body_len,
		    call->bulk_len,
		    call->bulk_len ? crc32c_iov(0, call->bulk, call->bulk_cnt, call->bulk_len) : 0);
	was_empty = c->sendq_head == NULL;
	if (c->sendq_tail)
		c->sendq_tail->next = call;
	else
		c->sendq_head = call;
	c->sendq_tail = call;
	pthread_mutex_unlock(&c->lock);
	if (!was_empty)
		return; /* the I/O thread was woken for the first one and sends this one too */
	/* Send it from here if nobody is sending: the I/O thread needs waking only for what the
	 * socket did not take (or if this thread cannot send). */
	if (pthread_mutex_trylock(&c->send_lock) == 0) {
		bool connected, left;
		int rc = 0;

		pthread_mutex_lock(&c->lock);
		connected = c->state == CS_CONNECTED && c->fd >= 0 && !c->stopping;
		pthread_mutex_unlock(&c->lock);
		if (connected)
			rc = conn_send(c);
		pthread_mutex_lock(&c->lock);
		left = c->sendq_head != NULL;
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(&c->send_lock);
		if (connected && rc == 0 && !left)
			return;
	}
	if (write(c->wake_fd, &one, sizeof(one)) < 0)
		log_warn("connection to %s: eventfd write: %s", c->peer, strerror(errno));
}

void rpc_submit_detached(struct rpc_conn *c, struct rpc_call *call)
{
	rpc_submit(c, call, NULL);
}

int rpc_call_sync(struct rpc_conn *c, struct rpc_call *call)
{
	struct rpc_wait w;

	rpc_wait_init(&w);
	rpc_submit(c, call, &w);
	rpc_wait_all(&w);
	rpc_wait_destroy(&w);
	return call->status;
}

bool rpc_conn_alive(struct rpc_conn *c)
{
	bool alive;

	pthread_mutex_lock(&c->lock);
	alive = c->state != CS_FAILED;
	pthread_mutex_unlock(&c->lock);
	return alive;
}

bool rpc_conn_recovering(struct rpc_conn *c)
{
	bool r;

	pthread_mutex_lock(&c->lock);
	r = c->state == CS_RECOVERING;
	pthread_mutex_unlock(&c->lock);
	return r;
}

uint64_t rpc_conn_last_id(struct rpc_conn *c)
{
	uint64_t id;

	pthread_mutex_lock(&c->lock);
	id = c->next_id;
	pthread_mutex_unlock(&c->lock);
	return id;
}

const char *rpc_conn_peer(const struct rpc_conn *c)
{
	return c->peer;
}

int rpc_conn_local_host(const struct rpc_conn *c, char *buf, size_t cap)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);

	if (c->fd < 0)
		return -ENOTCONN;
	if (getsockname(c->fd, (struct sockaddr *)&sa, &sl) < 0)
		return -errno;
	if (!inet_ntop(AF_INET, &sa.sin_addr, buf, (socklen_t)cap))
		return -errno;
	return 0;
}

/*
 * Sends from the head of the send queue until the socket is full. A call moves to the in-flight
 * list once its last byte is written. Returns 0, or -errno on a broken socket.
 */
/* Sends what is queued until the socket is full. Under send_lock. */
static int conn_send(struct rpc_conn *c)
{
	for (;;) {
		struct iovec iov[RPC_MAX_IOV + 2];
		struct rpc_call *call;
		size_t total, skip;
		int n = 0, first = 0;
		ssize_t w;

		pthread_mutex_lock(&c->lock);
		call = c->sendq_head;
		pthread_mutex_unlock(&c->lock);
		if (!call)
			return 0;

		/* The queue head is stable: only this thread removes from it. */
		iov[n].iov_base = &call->hdr;
		iov[n++].iov_len = sizeof(call->hdr);
		if (call->body_len) {
			iov[n].iov_base = (void *)call->body;
			iov[n++].iov_len = call->body_len;
		}
		for (int i = 0; i < call->bulk_cnt && n < (int)ARRAY_SIZE(iov); i++)
			iov[n++] = call->bulk[i];
		total = sizeof(call->hdr) + call->body_len + call->bulk_len;
		/* Skip what was already written. */
		skip = call->sent;
		while (skip > 0 && first < n) {
			if (skip >= iov[first].iov_len) {
				skip -= iov[first].iov_len;
				first++;
			} else {
				iov[first].iov_base = (uint8_t *)iov[first].iov_base + skip;
				iov[first].iov_len -= skip;
				skip = 0;
			}
		}
		struct msghdr mh = { .msg_iov = iov + first, .msg_iovlen = (size_t)(n - first) };
		/* MSG_NOSIGNAL: a library must not raise SIGPIPE in its host program. */
		w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			return -errno;
		}
		call->sent += (size_t)w;
		if (call->sent < total)
			continue;
		pthread_mutex_lock(&c->lock);
		c->sendq_head = call->next;
		if (!c->sendq_head)
			c->sendq_tail = NULL;
		call->next = c->inflight;
		c->inflight = call;
		pthread_mutex_unlock(&c->lock);
	}
}

/* Takes the call with this request id off the in-flight list. */
static struct rpc_call *conn_take_inflight(struct rpc_conn *c, uint64_t id)
{
	struct rpc_call **pp, *call = NULL;

	pthread_mutex_lock(&c->lock);
	for (pp = &c->inflight; *pp; pp = &(*pp)->next) {
		if ((*pp)->req_id == id) {
			call = *pp;
			*pp = call->next;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return call;
}

/* Copies reply bulk bytes into the call's iovecs at offset `off`. */
static void rbulk_copy(struct rpc_call *call, uint32_t off, const uint8_t *p, uint32_t n)
{
	for (int i = 0; i < call->rbulk_cnt && n > 0; i++) {
		uint32_t len = (uint32_t)call->rbulk[i].iov_len, k;
		if (off >= len) {
			off -= len;
			continue;
		}
		k = MIN(n, len - off);
		memcpy((uint8_t *)call->rbulk[i].iov_base + off, p, k);
		p += k;
		n -= k;
		off = 0;
	}
}

/* Finds where reply bulk offset `off` lands, to receive straight into the caller's buffer. */
static void *rbulk_at(struct rpc_call *call, uint32_t off, uint32_t *room)
{
	for (int i = 0; i < call->rbulk_cnt; i++) {
		uint32_t len = (uint32_t)call->rbulk[i].iov_len;
		if (off < len) {
			*room = len - off;
			return (uint8_t *)call->rbulk[i].iov_base + off;
		}
		off -= len;
	}
	*room = 0;
	return NULL;
}

static void reply_done(struct rpc_conn *c)
{
	struct rpc_call *call = c->rcall;
	int status = lw_errno_from_wire(c->hdr.status);

	c->rcall = NULL;
	c->rstate = RS_HDR;
	c->hgot = 0;
	call->rbody = c->rbody;
	call->rbody_len = c->hdr.body_len;
	call->rbulk_len = c->hdr.bulk_len;
	c->rbody = NULL;
	if (c->hdr.bulk_len && crc32c_iov(0, call->rbulk, call->rbulk_cnt, c->hdr.bulk_len) != c->hdr.bulk_crc) {
		log_warn("reply from %s to %s: bulk checksum mismatch", c->peer, lw_op_name(c->hdr.opcode));
		status = -EBADMSG;
	}
	call_complete(call, status);
}

/* The reply header is complete. NULL, or why the connection is unusable. */
static const char *reply_hdr_done(struct rpc_conn *c)
{
	struct lw_hdr *h = &c->hdr;

	if (lw_hdr_check(h) || !(h->flags & LW_F_REPLY))
		return "malformed reply header";
	c->rcall = conn_take_inflight(c, h->req_id);
	if (!c->rcall) {
		/* A caller that sent its request itself may not have put it on the in-flight list
		 * yet (it does so under send_lock, right after the send): wait for it once. */
		pthread_mutex_lock(&c->send_lock);
		pthread_mutex_unlock(&c->send_lock);
		c->rcall = conn_take_inflight(c, h->req_id);
	}
	if (!c->rcall)
		return "reply to an unknown request";
	if (h->opcode != c->rcall->opcode)
		return "reply opcode differs from the request's";
	if (h->bulk_len > c->rcall->rbulk_cap)
		return "reply bulk larger than the buffer for it";
	c->rbody = malloc(h->body_len ? h->body_len : 1);
	if (!c->rbody)
		return "out of memory";
	c->got = 0;
	c->rstate = RS_BODY;
	return NULL;
}

static const char *reply_body_done(struct rpc_conn *c)
{
	if (lw_hdr_crc_check(&c->hdr, c->rbody))
		return "reply header checksum mismatch";
	c->got = 0;
	if (c->hdr.bulk_len)
		c->rstate = RS_BULK;
	else
		reply_done(c);
	return NULL;
}

static const char *conn_parse(struct rpc_conn *c)
{
	while (c->rpos < c->rlen) {
		const uint8_t *p = c->rbuf + c->rpos;
		uint32_t avail = c->rlen - c->rpos, n = 0;
		const char *why = NULL;

		switch (c->rstate) {
		case RS_HDR:
			n = MIN(avail, (uint32_t)sizeof(c->hdr) - c->hgot);
			memcpy((uint8_t *)&c->hdr + c->hgot, p, n);
			c->hgot += n;
			if (c->hgot == sizeof(c->hdr)) {
				why = reply_hdr_done(c);
				if (!why && c->hdr.body_len == 0)
					why = reply_body_done(c);
			}
			break;
		case RS_BODY:
			n = MIN(avail, c->hdr.body_len - c->got);
			memcpy(c->rbody + c->got, p, n);
			c->got += n;
			if (c->got == c->hdr.body_len)
				why = reply_body_done(c);
			break;
		case RS_BULK:
			n = MIN(avail, c->hdr.bulk_len - c->got);
			rbulk_copy(c->rcall, c->got, p, n);
			c->got += n;
			if (c->got == c->hdr.bulk_len)
				reply_done(c);
			break;
		}
		c->rpos += n;
		if (why)
			return why;
	}
	c->rpos = c->rlen = 0;
	return NULL;
}

/* Orders calls by request id, so that resent calls go out in the order they were first sent. */
static struct rpc_call *sort_by_id(struct rpc_call *list)
{
	struct rpc_call *sorted = NULL;

	while (list) {
		struct rpc_call *c = list, **pp = &sorted;

		list = c->next;
		while (*pp && (*pp)->req_id < c->req_id)
			pp = &(*pp)->next;
		c->next = *pp;
		*pp = c;
	}
	return sorted;
}

/* The call goes out again: marked resent (the server may have applied it already and answers
 * from its reply cache then), same request id; the bulk checksum stays what it was. */
static void call_mark_resent(struct rpc_call *call)
{
	call->sent = 0;
	lw_hdr_fill(&call->hdr, call->opcode, LW_F_RESENT, 0, call->req_id, call->body, call->body_len,
		    call->bulk_len, call->hdr.bulk_crc);
}

/* Clears the receive state after the socket went away. I/O thread. */
static void recv_reset(struct rpc_conn *c)
{
	free(c->rbody);
	c->rbody = NULL;
	c->rstate = RS_HDR;
	c->hgot = 0;
	c->rpos = c->rlen = 0;
	c->got = 0;
}

/*
 * The socket broke. Without recovery every call fails. With it, the calls that were in flight
 * (and the one whose reply was being read) go back to the front of the queue to be resent after
 * reconnecting, except RPC_NOWAIT ones, which fail now. I/O thread.
 */
static void conn_broken(struct rpc_conn *c, const char *why)
{
	struct rpc_call *back, *keep = NULL, **kt = &keep, *fail = NULL;

	pthread_mutex_lock(&c->send_lock); /* no caller is writing, nor holds a half-sent head */
	pthread_mutex_lock(&c->lock);
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	if (!c->opts.recovery_ms || c->stopping) {
		if (c->rcall) {
			call_complete(c->rcall, -EIO);
			c->rcall = NULL;
		}
		conn_fail_locked(c, why);
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(&c->send_lock);
		recv_reset(c);
		return;
	}
	back = c->inflight;
	c->inflight = NULL;
	if (c->rcall) {
		c->rcall->next = back;
		back = c->rcall;
		c->rcall = NULL;
	}
	if (c->sendq_head) {
		/* The head may be half sent: it goes again too. */
		struct rpc_call *h = c->sendq_head;
		c->sendq_head = h->next;
		if (!c->sendq_head)
			c->sendq_tail = NULL;
		h->next = back;
		back = h;
	}
	back = sort_by_id(back);
	while (back) {
		struct rpc_call *call = back;
		back = call->next;
		call->next = NULL;
		if (call->flags & RPC_NOWAIT) {
			call->next = fail;
			fail = call;
			continue;
		}
		call_mark_resent(call);
		*kt = call;
		kt = &call->next;
	}
	*kt = c->sendq_head;
	c->sendq_head = keep;
	if (!c->sendq_tail || !*kt)
		for (c->sendq_tail = c->sendq_head; c->sendq_tail && c->sendq_tail->next;)
			c->sendq_tail = c->sendq_tail->next;
	if (c->state != CS_RECOVERING)
		log_warn("connection to %s lost: %s; reconnecting for up to %u s", c->peer, why,
			 c->opts.recovery_ms / 1000);
	c->state = CS_RECOVERING;
	c->recover_deadline_ns = clock_mono_ns() + (uint64_t)c->opts.recovery_ms * 1000000ull;
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->send_lock);
	while (fail) {
		struct rpc_call *call = fail;
		fail = call->next;
		call_complete(call, -EIO);
	}
	recv_reset(c);
}

/* Reads what the socket has. 0, or -1 when the connection broke (already handled). */
static int conn_recv(struct rpc_conn *c)
{
	char why[96];

	for (;;) {
		const char *err;
		ssize_t n;
		uint32_t room;
		void *dst;

		if (c->rstate == RS_BULK && c->hdr.bulk_len - c->got >= RBUF_SIZE &&
		    (dst = rbulk_at(c->rcall, c->got, &room)) != NULL) {
			/* Large reply bulk lands straight in the caller's buffer. */
			n = recv(c->fd, dst, MIN(room, c->hdr.bulk_len - c->got), 0);
			if (n > 0) {
				c->got += (uint32_t)n;
				if (c->got == c->hdr.bulk_len)
					reply_done(c);
				continue;
			}
		} else {
			n = recv(c->fd, c->rbuf, RBUF_SIZE, 0);
			if (n > 0) {
				c->rpos = 0;
				c->rlen = (uint32_t)n;
				err = conn_parse(c);
				if (err) {
					/* A peer that breaks the protocol is not recovered. */
					pthread_mutex_lock(&c->send_lock);
					pthread_mutex_lock(&c->lock);
					if (c->rcall) {
						call_complete(c->rcall, -EIO);
						c->rcall = NULL;
					}
					conn_fail_locked(c, err);
					pthread_mutex_unlock(&c->lock);
					pthread_mutex_unlock(&c->send_lock);
					recv_reset(c);
					return -1;
				}
				continue;
			}
		}
		if (n == 0) {
			conn_broken(c, "server closed the connection");
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			return 0;
		snprintf(why, sizeof(why), "receive error: %s", strerror(errno));
		conn_broken(c, why);
		return -1;
	}
}

/* ---- connecting, the handshake, authentication ---- */

static int wait_fd(int fd, short ev, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = ev };

	for (;;) {
		int rc = poll(&pfd, 1, timeout_ms);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -errno;
		return rc == 0 ? -ETIMEDOUT : 0;
	}
}

static int hs_send(int fd, const void *buf, size_t len, int timeout_ms)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				int rc = wait_fd(fd, POLLOUT, timeout_ms);
				if (rc)
					return rc;
				continue;
			}
			return -EIO;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int hs_recv(int fd, void *buf, size_t len, int timeout_ms)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = recv(fd, p, len, 0);
		if (n == 0)
			return -EIO;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				int rc = wait_fd(fd, POLLIN, timeout_ms);
				if (rc)
					return rc;
				continue;
			}
			return -EIO;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int rpc_hs_call(struct rpc_hs *hs, uint16_t opcode, const void *body, uint32_t len, void *reply,
		uint32_t cap, uint32_t *rlen)
{
	struct lw_hdr h;
	uint8_t *rbody = NULL;
	uint64_t id;
	int rc;

	pthread_mutex_lock(&hs->conn->lock);
	id = ++hs->conn->next_id;
	pthread_mutex_unlock(&hs->conn->lock);
	lw_hdr_fill(&h, opcode, 0, 0, id, body, len, 0, 0);
	rc = hs_send(hs->fd, &h, sizeof(h), hs->timeout_ms);
	if (rc == 0 && len)
		rc = hs_send(hs->fd, body, len, hs->timeout_ms);
	if (rc == 0)
		rc = hs_recv(hs->fd, &h, sizeof(h), hs->timeout_ms);
	if (rc)
		return rc;
	if (lw_hdr_check(&h) || !(h.flags & LW_F_REPLY) || h.req_id != id || h.opcode != opcode ||
	    h.bulk_len != 0)
		return -EPROTO;
	rbody = malloc(h.body_len ? h.body_len : 1);
	if (!rbody)
		return -ENOMEM;
	rc = hs_recv(hs->fd, rbody, h.body_len, hs->timeout_ms);
	if (rc == 0 && lw_hdr_crc_check(&h, rbody))
		rc = -EPROTO;
	if (rc == 0) {
		memcpy(reply, rbody, MIN(cap, h.body_len));
		if (rlen)
			*rlen = h.body_len;
		rc = lw_errno_from_wire(h.status);
	}
	free(rbody);
	return rc;
}

/* Proves to the server that we hold the key, and has it prove the same to us. */
static int authenticate(struct rpc_hs *hs)
{
	struct rpc_conn *c = hs->conn;
	struct lw_auth_challenge ch;
	struct lw_auth_prove pr;
	struct lw_auth_proof proof;
	uint8_t want[LOOM_MAC_LEN];
	uint32_t len = 0;
	int rc;

	rc = rpc_hs_call(hs, LW_OP_AUTH_CHALLENGE, NULL, 0, &ch, sizeof(ch), &len);
	if (rc == -EOPNOTSUPP) {
		log_err("%s does not authenticate clients, but this client has a key: refusing it", c->peer);
		return -EACCES;
	}
	if (rc)
		return rc;
	if (len != sizeof(ch))
		return -EPROTO;
	rc = random_bytes(pr.nonce, sizeof(pr.nonce));
	if (rc)
		return rc;
	rc = loom_auth_mac(c->key, c->opts.keylen, "loom-auth-client", ch.nonce, pr.nonce,
			   LW_AUTH_NONCE, pr.mac);
	if (rc)
		return rc;
	rc = rpc_hs_call(hs, LW_OP_AUTH_PROVE, &pr, sizeof(pr), &proof, sizeof(proof), &len);
	if (rc == -EACCES) {
		log_err("%s refused this client's file system key", c->peer);
		return rc;
	}
	if (rc)
		return rc;
	rc = loom_auth_mac(c->key, c->opts.keylen, "loom-auth-server", pr.nonce, ch.nonce,
			   LW_AUTH_NONCE, want);
	if (rc || len != sizeof(proof) || !loom_auth_equal(proof.mac, want)) {
		log_err("%s could not prove it holds the file system key: refusing it", c->peer);
		return -EACCES;
	}
	return 0;
}

static int connect_timeout(int fd, const struct sockaddr *sa, socklen_t len, int timeout_ms)
{
	int err = 0, rc;
	socklen_t el = sizeof(err);

	if (connect(fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -errno;
	rc = wait_fd(fd, POLLOUT, timeout_ms);
	if (rc)
		return rc;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		return -errno;
	return -err;
}

static bool fatal_hello_error(int rc)
{
	return rc == -EACCES || rc == -ENODEV || rc == -EPROTONOSUPPORT || rc == -EPROTO;
}

/* A connected, authenticated socket that has said hello, or a negative errno. */
static int conn_dial(struct rpc_conn *c, int *fd_out)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	char portstr[8];
	int one = 1, fd, rc;
	int timeout = c->opts.connect_timeout_ms ? c->opts.connect_timeout_ms : 5000;
	struct rpc_hs hs = { .conn = c, .timeout_ms = timeout };

	if (c->opts.resolve)
		c->opts.resolve(c->opts.arg, c->host, sizeof(c->host), &c->port);
	snprintf(portstr, sizeof(portstr), "%u", c->port);
	rc = getaddrinfo(c->host, portstr, &hints, &ai);
	if (rc != 0)
		return rc == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	rc = connect_timeout(fd, ai->ai_addr, ai->ai_addrlen, timeout);
	hs.fd = fd;
	if (rc == 0 && c->opts.keylen)
		rc = authenticate(&hs);
	if (rc == 0 && c->opts.hello)
		rc = c->opts.hello(&hs, c->opts.arg);
	if (rc) {
		close(fd);
		goto out;
	}
	*fd_out = fd;
out:
	freeaddrinfo(ai);
	return rc;
}

/* One reconnection attempt while recovering; on success the queue flows again. I/O thread. */
static void conn_reconnect(struct rpc_conn *c)
{
	int fd = -1, rc;

	rc = conn_dial(c, &fd);
	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->lock);
	if (rc == 0) {
		c->fd = fd;
		c->state = CS_CONNECTED;
		snprintf(c->peer, sizeof(c->peer), "%s (%s:%u)", c->opts.name ? c->opts.name : "server",
			 c->host, c->port);
		log_info("reconnected to %s; resending what was in flight", c->peer);
	} else if (fatal_hello_error(rc)) {
		conn_fail_locked(c, "the server refused this client after it restarted");
	} else if (clock_mono_ns() >= c->recover_deadline_ns) {
		char why[96];
		snprintf(why, sizeof(why), "still unreachable after %u s (%s)", c->opts.recovery_ms / 1000,
			 strerror(-rc));
		conn_fail_locked(c, why);
	}
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->send_lock);
}

static void *conn_thread(void *arg)
{
	struct rpc_conn *c = arg;
	int backoff_ms = 50;

	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = c->fd, .events = POLLIN },
			{ .fd = c->wake_fd, .events = POLLIN },
		};
		enum conn_state state;
		bool stopping, want_out;
		uint64_t v;
		int rc;

		pthread_mutex_lock(&c->lock);
		stopping = c->stopping;
		state = c->state;
		want_out = c->sendq_head != NULL;
		pthread_mutex_unlock(&c->lock);
		if (stopping || state == CS_FAILED)
			break; /* a failed connection fails new calls at once: nothing left to do here */
		if (state == CS_RECOVERING) {
			/* Wait a little (a stop request cuts it short), then try again. */
			pfd[0].fd = -1;
			if (poll(pfd, 2, backoff_ms) > 0 && (pfd[1].revents & POLLIN) &&
			    read(c->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				break;
			backoff_ms = MIN(backoff_ms * 2, 1000);
			pthread_mutex_lock(&c->lock);
			stopping = c->stopping;
			pthread_mutex_unlock(&c->lock);
			if (stopping)
				break;
			conn_reconnect(c);
			continue;
		}
		backoff_ms = 50;
		if (want_out)
			pfd[0].events |= POLLOUT;
		rc = poll(pfd, 2, -1);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			conn_fail(c, "poll failed");
			break;
		}
		if ((pfd[1].revents & POLLIN) && read(c->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
			conn_fail(c, "eventfd failed");
			break;
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (conn_recv(c) < 0)
				continue;
		}
		/* Try to send whenever something is queued; POLLOUT only matters when it was full. */
		pthread_mutex_lock(&c->send_lock);
		rc = conn_send(c);
		pthread_mutex_unlock(&c->send_lock);
		if (rc < 0) {
			char why[96];
			snprintf(why, sizeof(why), "send error: %s", strerror(-rc));
			conn_broken(c, why);
		}
	}
	/* Give the socket back now; the connection object lives until rpc_conn_close. */
	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->lock);
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->send_lock);
	return NULL;
}

int rpc_conn_open(const char *host, uint16_t port, const struct rpc_conn_opts *opts,
		  struct rpc_conn **out)
{
	struct rpc_conn *c;
	int rc, fd = -1;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = c->wake_fd = -1;
	if (opts)
		c->opts = *opts;
	if (c->opts.keylen > sizeof(c->key)) {
		free(c);
		return -EINVAL;
	}
	if (c->opts.keylen)
		memcpy(c->key, c->opts.key, c->opts.keylen);
	c->next_id = c->opts.first_req_id;
	c->opts.key = NULL;
	c->opts.name = NULL; /* the caller's string may not live on: the name is kept in peer */
	snprintf(c->host, sizeof(c->host), "%s", host);
	c->port = port;
	snprintf(c->peer, sizeof(c->peer), "%s (%s:%u)", opts && opts->name ? opts->name : "server", host, port);
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->send_lock, NULL);
	c->rbuf = malloc(RBUF_SIZE);
	c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!c->rbuf || c->wake_fd < 0) {
		rc = c->rbuf ? -errno : -ENOMEM;
		goto fail;
	}
	rc = conn_dial(c, &fd);
	if (rc) {
		/* With recovery and lazy, a server that is away is waited for like one that left. */
		if (!(c->opts.lazy && c->opts.recovery_ms) || fatal_hello_error(rc))
			goto fail;
		c->state = CS_RECOVERING;
		c->recover_deadline_ns = clock_mono_ns() + (uint64_t)c->opts.recovery_ms * 1000000ull;
		log_warn("cannot reach %s yet (%s); waiting for it for up to %u s", c->peer, strerror(-rc),
			 c->opts.recovery_ms / 1000);
	}
	c->fd = fd;
	rc = -pthread_create(&c->thread, NULL, conn_thread, c);
	if (rc) {
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->send_lock);
	free(c->rbuf);
	free(c);
	return rc;
}

void rpc_conn_stop(struct rpc_conn *c)
{
	uint64_t one = 1;
	bool joined;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	joined = c->joined;
	c->joined = true;
	pthread_mutex_unlock(&c->lock);
	if (joined)
		return;
	if (write(c->wake_fd, &one, sizeof(one)) < 0)
		log_warn("connection to %s: eventfd write: %s", c->peer, strerror(errno));
	pthread_join(c->thread, NULL);
	conn_fail(c, NULL);
}

void rpc_conn_close(struct rpc_conn *c)
{
	if (!c)
		return;
	rpc_conn_stop(c);
	if (c->fd >= 0)
		close(c->fd);
	close(c->wake_fd);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->send_lock);
	free(c->rbuf);
	free(c);
}
