/*
 * Calls and a connection's queues: submitting, sending (from the caller's thread when nothing is
 * queued, else from the I/O thread), cancelling, failing every call; the I/O thread's loop; and
 * opening and closing a connection. What the files of the client side share is in rpc_impl.h.
 */
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
#include "net/rpc_impl.h"
#include "proto/codec.h"

void rpc_call_complete(struct rpc_call *call, int status)
{
	struct rpc_wait *w = call->wait;

	call->status = status;
	if (call->on_complete)
		call->on_complete(call, call->on_complete_arg);
	if (!w) {
		call->done(call); /* detached: nothing may touch call after this */
		return;
	}
	pthread_mutex_lock(&w->lock);
	call->completed = true;
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
	memcpy(call->job, rpc_job_get(), sizeof(call->job));
}

/*
 * The header of a call about to go out (nothing of it sent yet): with its job id before the body
 * (LW_F_JOBID) when it has one and the peer speaks version 10, else without (again: a resend may
 * go to an older server than the first send did). Under send_lock.
 */
static void call_tag(struct rpc_conn *c, struct rpc_call *call)
{
	uint32_t flags = call->hdr.flags & LW_F_RESENT;
	bool tag = call->job[0] && atomic_load_explicit(&c->peer_version, memory_order_relaxed) >= 10 &&
		   call->body_len <= LW_MAX_BODY - LW_JOBID_LEN;
	uint32_t crc;

	if (!tag && !(call->hdr.flags & LW_F_JOBID))
		return; /* filled untagged at submit */
	if (!tag) {
		lw_hdr_fill(&call->hdr, call->opcode, flags, 0, call->req_id, call->body, call->body_len,
			    call->bulk_len, call->hdr.bulk_crc);
		return;
	}
	/* The checksum covers the header, then the body as sent: the job id, then the body. */
	lw_hdr_fill(&call->hdr, call->opcode, flags | LW_F_JOBID, 0, call->req_id, NULL, 0, call->bulk_len,
		    call->hdr.bulk_crc);
	call->hdr.body_len = LW_JOBID_LEN + call->body_len;
	call->hdr.hdr_crc = 0;
	crc = crc32c(0, &call->hdr, sizeof(call->hdr));
	crc = crc32c(crc, call->job, LW_JOBID_LEN);
	call->hdr.hdr_crc = crc32c(crc, call->body, call->body_len);
}

void rpc_call_release(struct rpc_call *call)
{
	free(call->rbody);
	call->rbody = NULL;
	call->rbody_len = 0;
}

/* Fails every queued and in-flight call. Under send_lock (a caller may be sending the queue's
 * head) and c->lock. */
void conn_fail_locked(struct rpc_conn *c, const char *why)
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
			rpc_call_complete(call, -EIO);
		}
	}
}

static void conn_fail(struct rpc_conn *c, const char *why)
{
	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->lock);
	if (c->rcall) {
		/* Taken off the in-flight list while its reply was being read. */
		rpc_call_complete(c->rcall, -EIO);
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

	if (rpc_nowait_thread())
		call->flags |= RPC_NOWAIT;
	call->wait = w;
	call->conn = c;
	call->next = NULL;
	call->sent = 0;
	call->sealed = false;
	call->sent_ns = 0;
	call->completed = false;
	call->deadline_ns = c->opts.soft_ms ? clock_mono_ns() + (uint64_t)c->opts.soft_ms * 1000000ull : 0;
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
		call->wnext = w->calls;
		w->calls = call;
		if (call->deadline_ns && (!w->deadline_ns || call->deadline_ns < w->deadline_ns))
			w->deadline_ns = call->deadline_ns;
		pthread_mutex_unlock(&w->lock);
	}

	if (call->bulk_cnt < 0 || call->bulk_cnt > RPC_MAX_IOV || call->rbulk_cnt < 0) {
		rpc_call_complete(call, -EINVAL);
		return;
	}
	pthread_mutex_lock(&c->lock);
	if (c->state == CS_FAILED || (c->state == CS_RECOVERING && (call->flags & RPC_NOWAIT))) {
		pthread_mutex_unlock(&c->lock);
		rpc_call_complete(call, -EIO);
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
 * Seals the head of the send queue before its first byte goes: its tag, and with encryption its
 * body and bulk as ciphertext in c->sbuf (the caller's buffers are never written, and stay the
 * plain bytes for a resend). From here on the call holds its frame's counter, so it must go out
 * whole before any other (take_off_queues leaves it alone). Under send_lock.
 */
static int call_seal(struct rpc_conn *c, struct rpc_call *call)
{
	uint32_t job_len = call->hdr.body_len - call->body_len; /* LW_JOBID_LEN when tagged */
	size_t need = (size_t)call->hdr.body_len + call->bulk_len, off = 0;
	void *out = NULL;
	int rc;

	if (c->tx.encrypt && need > c->sbuf_cap) {
		uint8_t *p = realloc(c->sbuf, need);
		if (!p)
			return -ENOMEM;
		c->sbuf = p;
		c->sbuf_cap = need;
	}
	rc = seal_begin(&c->tx, &call->hdr);
	if (c->tx.encrypt)
		out = c->sbuf;
	if (rc == 0 && job_len)
		rc = seal_update(&c->tx, call->job, out, job_len);
	if (rc == 0 && call->body_len)
		rc = seal_update(&c->tx, call->body, out ? c->sbuf + job_len : NULL, call->body_len);
	off = call->hdr.body_len;
	for (int i = 0; rc == 0 && i < call->bulk_cnt; i++) {
		size_t n = MIN(call->bulk[i].iov_len, (size_t)call->bulk_len - (off - call->hdr.body_len));

		rc = seal_update(&c->tx, call->bulk[i].iov_base, out ? c->sbuf + off : NULL, n);
		off += n;
	}
	if (rc == 0)
		rc = seal_final(&c->tx, call->tag);
	call->sealed = rc == 0;
	return rc;
}

/*
 * Sends from the head of the send queue until the socket is full. A call moves to the in-flight
 * list once its last byte is written. Returns 0, or -errno on a broken socket (or a frame that
 * could not be sealed). Under send_lock.
 */
static int conn_send(struct rpc_conn *c)
{
	for (;;) {
		struct iovec iov[RPC_MAX_IOV + 4];
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
		if (!call->sealed && call->sent == 0)
			call_tag(c, call);
		if (seal_on(&c->tx) && !call->sealed) {
			int rc = call_seal(c, call);
			if (rc)
				return rc;
		}
		iov[n].iov_base = &call->hdr;
		iov[n++].iov_len = sizeof(call->hdr);
		if (call->sealed && c->tx.encrypt) {
			if (call->hdr.body_len + call->bulk_len) {
				iov[n].iov_base = c->sbuf;
				iov[n++].iov_len = (size_t)call->hdr.body_len + call->bulk_len;
			}
		} else {
			if (call->hdr.body_len > call->body_len) {
				iov[n].iov_base = call->job;
				iov[n++].iov_len = call->hdr.body_len - call->body_len;
			}
			if (call->body_len) {
				iov[n].iov_base = (void *)call->body;
				iov[n++].iov_len = call->body_len;
			}
			for (int i = 0; i < call->bulk_cnt && n < RPC_MAX_IOV + 3; i++)
				iov[n++] = call->bulk[i];
		}
		total = sizeof(call->hdr) + call->hdr.body_len + call->bulk_len;
		if (call->sealed) {
			iov[n].iov_base = call->tag;
			iov[n++].iov_len = LW_TAG_LEN;
			total += LW_TAG_LEN;
		}
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
		call->sent_ns = clock_mono_ns();
		c->inflight = call;
		pthread_mutex_unlock(&c->lock);
	}
}

/* Unlinks call from a list; true if it was there. Under c->lock. */
static bool list_unlink(struct rpc_call **head, struct rpc_call *call, struct rpc_call **tail)
{
	struct rpc_call *prev = NULL;

	for (struct rpc_call **pp = head; *pp; prev = *pp, pp = &(*pp)->next) {
		if (*pp != call)
			continue;
		*pp = call->next;
		if (tail && *tail == call)
			*tail = prev;
		call->next = NULL;
		return true;
	}
	return false;
}

/* Takes call off the queues if nothing is using its buffers now: not the queue's head while it
 * is half sent, or sealed (its frame holds a counter the server expects next). A call taken from the in-flight list is remembered, so its reply is dropped.
 * Under send_lock and c->lock. */
bool take_off_queues(struct rpc_conn *c, struct rpc_call *call)
{
	if (call == c->sendq_head && (call->sent > 0 || call->sealed))
		return false;
	if (list_unlink(&c->sendq_head, call, &c->sendq_tail))
		return true;
	if (!list_unlink(&c->inflight, call, NULL))
		return false; /* being received, or completed */
	c->cancelled[c->ncancelled++ % ARRAY_SIZE(c->cancelled)] = call->req_id;
	return true;
}

void rpc_call_cancel(struct rpc_call *call, int err)
{
	struct rpc_conn *c = call->conn;
	bool taken;

	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->lock);
	taken = take_off_queues(c, call);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->send_lock);
	if (taken)
		rpc_call_complete(call, err);
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
		bool stopping, want_out, hangs;
		uint64_t v, next, now;
		int rc, timeout_ms;
		char hang_why[128];

		pthread_mutex_lock(&c->lock);
		stopping = c->stopping;
		state = c->state;
		want_out = c->sendq_head != NULL;
		pthread_mutex_unlock(&c->lock);
		if (stopping || state == CS_FAILED)
			break; /* a failed connection fails new calls at once: nothing left to do here */
		expire_late_calls(c);
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
		pthread_mutex_lock(&c->lock);
		next = next_check_ns(c);
		pthread_mutex_unlock(&c->lock);
		now = clock_mono_ns();
		/* Calls a caller sent itself (rpc_submit) were not seen when next was reckoned: look
		 * again within half the least timeout anyway, rather than wake this thread at every
		 * such send. */
		if (!next || next > now + half_at_min_ns(c))
			next = now + half_at_min_ns(c);
		timeout_ms = next <= now ? 0 : (int)MIN((next - now) / 1000000ull + 1, 60000);
		rc = poll(pfd, 2, timeout_ms);
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
		pthread_mutex_lock(&c->lock);
		hangs = server_hangs(c, hang_why, sizeof(hang_why));
		pthread_mutex_unlock(&c->lock);
		if (hangs) {
			/* Stopped or wedged, with its socket up: as if it had gone away. */
			if (c->opts.on_silence)
				c->opts.on_silence(c->opts.arg);
			conn_broken(c, hang_why);
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
	log_limit_init(&c->lim_tag, LOG_WARN, "replies that failed authentication");
	if (c->opts.keylen > sizeof(c->key)) {
		free(c);
		return -EINVAL;
	}
	if (c->opts.keylen)
		memcpy(c->key, c->opts.key, c->opts.keylen);
	c->next_id = c->opts.first_req_id;
	if (c->opts.key_id)
		c->key_id = *c->opts.key_id;
	c->opts.key = NULL;
	c->opts.key_id = NULL;
	snprintf(c->name, sizeof(c->name), "%s", opts && opts->name ? opts->name : "server");
	c->opts.name = NULL; /* the caller's string may not live on: c->name keeps it */
	snprintf(c->host, sizeof(c->host), "%s", host);
	c->port = port;
	snprintf(c->peer, sizeof(c->peer), "%s (%s:%u)", c->name, host, port);
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->send_lock, NULL);
	c->rbuf = malloc(RBUF_SIZE);
	c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!c->rbuf || c->wake_fd < 0) {
		rc = c->rbuf ? -errno : -ENOMEM;
		goto fail;
	}
	rc = rpc_dial(c, &fd, &c->tx, &c->rx);
	if (rc) {
		/* With recovery and lazy, a server that is away is waited for like one that left. */
		if (!(c->opts.lazy && c->opts.recovery_ms) || rpc_fatal_hello_error(rc))
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
	seal_clear(&c->tx);
	seal_clear(&c->rx);
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
	seal_clear(&c->tx);
	seal_clear(&c->rx);
	free(c->sbuf);
	free(c->rbuf);
	free(c);
}
