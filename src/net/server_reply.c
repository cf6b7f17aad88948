/*
 * Replies: srv_reply() and its kin, from any thread; the out queue of a connection and writing
 * it to the socket; and the accounting that pauses a connection (too much in flight) and resumes
 * it when its replies drain.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "common/crc.h"
#include "common/log.h"
#include "common/util.h"
#include "net/bulk.h"
#include "net/server_impl.h"
#include "proto/codec.h"

#define WRITE_IOVS    64

void out_frame_free(struct srv_conn *c, struct out_frame *f)
{
	if (f->bulk) {
		if (f->bulk_free)
			f->bulk_free(f->bulk);
		else
			free(f->bulk);
	}
	mem_release(c, f->charge);
	free(f);
}

/* Under c->lock. Asks epoll for what the connection needs now. */
void conn_set_events(struct srv_conn *c)
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
void conn_check_pause(struct srv_conn *c)
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
void conn_frame_done(struct srv_conn *c, struct out_frame *f)
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

		for (struct out_frame *f = c->out_head; f && n + 3 <= WRITE_IOVS; f = f->next) {
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
				off = 0;
			} else {
				off -= f->bulk_len;
			}
			if (f->tag_len > off) {
				iov[n].iov_base = f->tag + off;
				iov[n++].iov_len = f->tag_len - off;
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
			size_t left = f->hb_len + (size_t)f->bulk_len + f->tag_len - f->sent;
			if ((size_t)w < left) {
				f->sent += (size_t)w;
				break;
			}
			w -= (ssize_t)left;
			c->out_head = f->next;
			if (!c->out_head)
				c->out_tail = NULL;
			conn_frame_done(c, f);
			out_frame_free(c, f);
		}
	}
	if (!c->out_head && c->close_when_flushed && !c->closed)
		shutdown(c->fd, SHUT_RDWR); /* the loop closes it on the hang-up */
	return 0;
}

void conn_write_ready(struct srv_conn *c)
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

/* Frees a request's own memory (not its connection's count, which its reply or drop settles). */
static void req_free(struct srv_req *req)
{
	bulk_free(req->bulk);
	mem_release(req->conn, req_charge(&req->hdr));
	free(req);
}

/* Under c->lock: seals a reply about to be queued, in queue order (which is the order it goes
 * out in, and so its counter's). With encryption the body and bulk become ciphertext here. */
static int frame_seal_out(struct srv_conn *c, struct out_frame *f)
{
	struct lw_hdr *h = (struct lw_hdr *)f->hb;
	int rc;

	if (!seal_on(&c->tx))
		return 0;
	rc = seal_frame(&c->tx, h, f->hb + sizeof(*h), f->bulk, f->tag);
	if (rc == 0)
		f->tag_len = LW_TAG_LEN;
	return rc;
}

/* Under c->lock, c open: f (sealed) joins c's queue, its bytes counted until sent. Written at
 * once from this thread when nothing is queued ahead of it: one system call instead of a wake-up
 * of the loop; if the socket is full, epoll takes over. */
static void queue_frame(struct srv_conn *c, struct out_frame *f)
{
	bool was_idle = c->out_head == NULL;

	c->last_sent_ns = clock_mono_ns();
	c->inflight_bytes += f->charge;
	if (c->out_tail)
		c->out_tail->next = f;
	else
		c->out_head = f;
	c->out_tail = f;
	if (was_idle && conn_flush(c) < 0)
		shutdown(c->fd, SHUT_RDWR);
}

static void reply(struct srv_req *req, int status, uint32_t flags, const void *pre, uint32_t pre_len,
		  const void *body, uint32_t body_len, void *bulk, uint32_t bulk_len,
		  void (*release)(void *))
{
	struct srv_conn *c = req->conn;
	struct srv *s = c->srv;
	struct out_frame *f;
	struct lw_hdr *h;
	bool resume = false;

	if (body_len > UINT32_MAX - pre_len) {
		body_len = 0; /* cannot be: bodies are far below the limit */
		status = -EOVERFLOW;
	}
	if (!s->stats.off) {
		struct stats_req r = {
			.opcode = req->hdr.opcode,
			.resent = (req->hdr.flags & LW_F_RESENT) != 0,
			.status = status,
			.bytes_in = (uint64_t)req->hdr.body_len + req->hdr.bulk_len,
			.bytes_out = (uint64_t)pre_len + body_len + (bulk ? bulk_len : 0),
			.usec = (clock_mono_ns() - req->recv_ns) / 1000,
			.target = req->stat_target,
			.read_bytes = status >= 0 ? req->stat_read : 0,
			.write_bytes = status >= 0 ? req->stat_write : 0,
			.job = req->job,
		};

		stats_note(&s->stats, &r);
	}
	f = malloc(sizeof(*f) + sizeof(*h) + pre_len + body_len);
	if (f) {
		f->next = NULL;
		f->bulk = bulk;
		f->bulk_free = release;
		f->bulk_len = bulk ? bulk_len : 0;
		f->hb_len = (uint32_t)sizeof(*h) + pre_len + body_len;
		f->tag_len = 0;
		f->sent = 0;
		f->charge = (uint64_t)f->hb_len + f->bulk_len;
		f->ends_req = req->counted;
		h = (struct lw_hdr *)f->hb;
		if (pre_len)
			memcpy(f->hb + sizeof(*h), pre, pre_len);
		if (body_len)
			memcpy(f->hb + sizeof(*h) + pre_len, body, body_len);
		lw_hdr_fill(h, req->hdr.opcode, LW_F_REPLY | flags, lw_errno_to_wire(status),
			    req->hdr.req_id, f->hb + sizeof(*h), pre_len + body_len, f->bulk_len,
			    f->bulk_len ? crc32c(0, bulk, f->bulk_len) : 0);
		mem_charge_reply(c, f->charge);
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
	if (f && !c->closed && frame_seal_out(c, f)) {
		log_err("%s: cannot seal a reply to %s; dropping the connection", s->name,
			lw_op_name(req->hdr.opcode));
		out_frame_free(c, f);
		f = NULL;
	}
	if (!f) {
		/* Without its reply the client would wait forever: make it see a broken connection. */
		if (req->counted)
			c->inflight--;
		if (!c->closed)
			shutdown(c->fd, SHUT_RDWR);
	} else if (c->closed) {
		if (req->counted)
			c->inflight--;
		out_frame_free(c, f);
	} else {
		queue_frame(c, f);
		conn_check_pause(c);
	}
	conn_set_events(c);
	resume = conn_check_resume(c);
	pthread_mutex_unlock(&c->lock);
	if (resume)
		conn_queue_resume(c);
	req_free(req);
	conn_unref(c);
}

struct srv_conn *srv_conn_hold(struct srv_req *req)
{
	struct srv_conn *c = req->conn;

	pthread_mutex_lock(&c->lock);
	c->refs++;
	pthread_mutex_unlock(&c->lock);
	return c;
}

uint64_t srv_conn_last_sent_ns(struct srv_conn *c)
{
	uint64_t ns;

	pthread_mutex_lock(&c->lock);
	ns = c->last_sent_ns;
	pthread_mutex_unlock(&c->lock);
	return ns;
}

void srv_conn_release(struct srv_conn *c)
{
	if (c)
		conn_unref(c);
}

int srv_notify(struct srv_conn *c, uint16_t opcode, const void *body, uint32_t body_len)
{
	struct out_frame *f = malloc(sizeof(*f) + sizeof(struct lw_hdr) + body_len);
	struct lw_hdr *h;
	int rc = 0;

	if (!f)
		return -ENOMEM;
	memset(f, 0, sizeof(*f));
	f->hb_len = (uint32_t)sizeof(*h) + body_len;
	f->charge = f->hb_len;
	h = (struct lw_hdr *)f->hb;
	if (body_len)
		memcpy(f->hb + sizeof(*h), body, body_len);
	mem_charge_reply(c, f->charge);
	pthread_mutex_lock(&c->lock);
	lw_hdr_fill(h, opcode, LW_F_NOTIFY, 0, ++c->notify_id, f->hb + sizeof(*h), body_len, 0, 0);
	if (c->closed) {
		out_frame_free(c, f);
		rc = -ENOTCONN;
	} else if (frame_seal_out(c, f)) {
		out_frame_free(c, f);
		shutdown(c->fd, SHUT_RDWR);
		rc = -ENOTCONN;
	} else {
		/* Counted as a reply's bytes are, until sent (it ends no request). */
		queue_frame(c, f);
		conn_set_events(c);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void srv_reply(struct srv_req *req, int status, const void *body, uint32_t body_len, void *bulk,
	       uint32_t bulk_len, void (*release)(void *))
{
	reply(req, status, 0, NULL, 0, body, body_len, bulk, bulk_len, release);
}

void srv_reply_pre(struct srv_req *req, int status, const void *pre, uint32_t pre_len,
		   const void *body, uint32_t body_len)
{
	reply(req, status, 0, pre, pre_len, body, body_len, NULL, 0, NULL);
}

void srv_reply_flags(struct srv_req *req, int status, uint32_t flags, const void *body,
		     uint32_t body_len)
{
	reply(req, status, flags, NULL, 0, body, body_len, NULL, 0, NULL);
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
	req_free(req);
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

const struct lw_auth_node *srv_req_node(const struct srv_req *req)
{
	return req->conn && req->conn->is_node ? &req->conn->node : NULL;
}
