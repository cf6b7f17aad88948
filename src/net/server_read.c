/*
 * Reading frames: a connection's read buffer, the frame state machine (header, body, bulk), the
 * checks on each part, the server's memory budget for requests (a connection waits, starved,
 * while it is spent), and handing complete requests to the program.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/crc.h"
#include "common/log.h"
#include "common/util.h"
#include "common/version.h"
#include "net/bulk.h"
#include "net/server_impl.h"
#include "proto/codec.h"

#define RBUF_SIZE     (64u << 10)
#define PREAUTH_RBUF  256u        /* read buffer before authentication: its frames are small */
#define READ_BUDGET   (4u << 20)  /* bytes read from one connection per event, for fairness */
#define SRV_PREAUTH_BODY_MAX 1024u /* bytes of body a frame may carry before authentication */

void starved_remove(struct srv *s, struct srv_conn *c)
{
	for (struct srv_conn **pp = &s->starved; *pp; pp = &(*pp)->next_starved) {
		if (*pp == c) {
			*pp = c->next_starved;
			break;
		}
	}
	c->starved = false;
}

/* The job id off the front of the body (lw_hdr_check saw it is there): what a client sent is
 * kept to its first NUL, and any byte a job id may not hold becomes '_'. */
static void req_take_job(struct srv_req *req)
{
	size_t i;

	for (i = 0; i < LW_JOBID_LEN - 1 && req->body[i]; i++)
		req->job[i] = req->body[i] > ' ' && req->body[i] < 0x7f ? (char)req->body[i] : '_';
	req->job[i] = '\0';
	req->body += LW_JOBID_LEN;
	req->hdr.body_len -= LW_JOBID_LEN;
	req->hdr.flags &= ~LW_F_JOBID;
}

static void conn_deliver(struct srv_conn *c)
{
	struct srv *s = c->srv;
	struct srv_req *req = c->req;
	uint16_t op = req->hdr.opcode;

	c->req = NULL;
	req->recv_ns = clock_mono_ns();
	if (req->hdr.flags & LW_F_JOBID)
		req_take_job(req);
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

/* Returned when the line was logged already: the connection closes without another. */
static const char TAG_REFUSED[] = "a frame failed authentication";
static const char VERSION_REFUSED[] = "a peer of another protocol version";

/*
 * A first frame from a peer of an incompatible build: it gets the refusal that names this
 * server's versions (struct lw_version_refusal), sent at once (a new connection's socket buffer
 * is empty, and the frame is 72 bytes), and the connection closes.
 */
static const char *conn_refuse_version(struct srv_conn *c)
{
	struct srv *s = c->srv;
	struct {
		struct lw_hdr h;
		struct lw_version_refusal body;
	} out;

	if (c->authed)
		return "a frame of another protocol version on an authenticated connection";
	lw_version_refusal_fill(&c->hdr, &out.h, &out.body);
	if (send(c->fd, &out, sizeof(out), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		log_debug("%s: connection %llu from %s: cannot send the version refusal: %s", s->name,
			  (unsigned long long)c->id, c->peer, strerror(errno));
	log_limited(&s->lim[LIM_VERSION], clock_mono_ns(),
		    "%s: connection %llu from %s speaks protocol %u; this server (loom %s) speaks %u to %u: "
		    "refused (docs/operations.md, \"Upgrades\")", s->name, (unsigned long long)c->id,
		    c->peer, c->hdr.version, LOOM_RELEASE, LW_VERSION_MIN, LW_VERSION);
	return VERSION_REFUSED;
}

/*
 * The header is complete: check it and allocate the request, if the server has the memory.
 * Returns NULL (c->req set, or c->starved when it must wait), or why the peer is dropped.
 */
static const char *conn_hdr_done(struct srv_conn *c)
{
	struct srv *s = c->srv;
	struct lw_hdr *h = &c->hdr;
	uint64_t need = req_charge(h);
	struct srv_req *req;

	if (lw_hdr_version_foreign(h))
		return conn_refuse_version(c);
	if (lw_hdr_check(h))
		return h->magic != LW_MAGIC ? "not a Loom frame (bad magic)" : "malformed frame header";
	if (h->flags & LW_F_REPLY)
		return "reply frame sent to a server";
	if (h->flags & LW_F_NOTIFY)
		return "notification frame sent to a server";
	if (h->bulk_len && s->opts.bulk_ok && !s->opts.bulk_ok(h->opcode))
		return "bulk data with an opcode that takes none";
	/* Until the peer proved it holds the key, it gets no memory beyond a small frame (which
	 * is answered by the gate): a stranger cannot eat the budget of the clients. */
	if (!c->authed && s->opts.keylen && (h->bulk_len || h->body_len > SRV_PREAUTH_BODY_MAX))
		return "a large frame before authenticating (the client has no key or the wrong one)";

	if (!mem_charge(c, need)) {
		/* Over the server's budget or its peer's share: this connection waits until
		 * replies free memory, holding nothing but its header. */
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
		req->stat_target = STATS_NO_TARGET;
		req->bulk = h->bulk_len ? bulk_alloc(h->bulk_len) : NULL;
	}
	if (!req || (h->bulk_len && !req->bulk)) {
		free(req);
		mem_release(c, need);
		return "out of memory for a request";
	}
	req->hdr = *h;
	req->body = (uint8_t *)(req + 1);
	req->conn = c;
	req->conn_id = c->id;
	c->req = req;
	c->got = 0;
	c->rstate = RS_BODY;
	if (seal_on(&c->rx) && seal_begin(&c->rx, h))
		return "cannot check frames (libcrypto failed)";
	return NULL;
}

/* The frame is whole (and on a sealed connection, its tag checked): its checksums, then the
 * program. */
static const char *req_done(struct srv_conn *c, bool hdr_crc_checked)
{
	struct srv_req *req = c->req;

	if (!hdr_crc_checked && lw_hdr_crc_check(&req->hdr, req->body))
		return "header checksum mismatch";
	c->rstate = RS_HDR;
	c->hgot = 0;
	if (req->hdr.bulk_len && crc32c(0, req->bulk, req->hdr.bulk_len) != req->hdr.bulk_crc)
		conn_reject_bulk(c);
	else
		conn_deliver(c);
	return NULL;
}

/*
 * On a connection without a seal the header checksum is checked as soon as the body is in, as
 * it always was. On a sealed one every check waits for the tag: a frame a relay altered is then
 * refused for what it is (and logged so), and no byte of it is looked at before.
 */
static const char *conn_body_done(struct srv_conn *c)
{
	struct srv_req *req = c->req;

	c->got = 0;
	if (seal_on(&c->rx)) {
		if (seal_update(&c->rx, req->body, req->body, req->hdr.body_len))
			return "cannot check frames (libcrypto failed)";
		c->rstate = req->hdr.bulk_len ? RS_BULK : RS_TAG;
		return NULL;
	}
	if (lw_hdr_crc_check(&req->hdr, req->body))
		return "header checksum mismatch";
	if (req->hdr.bulk_len) {
		c->rstate = RS_BULK;
		return NULL;
	}
	return req_done(c, true);
}

/* n more bytes of bulk are in, at req->bulk + got. NULL, or why the peer is dropped. */
static const char *conn_bulk_in(struct srv_conn *c, uint32_t n)
{
	struct srv_req *req = c->req;

	if (seal_on(&c->rx) && seal_update(&c->rx, req->bulk + c->got, req->bulk + c->got, n))
		return "cannot check frames (libcrypto failed)";
	c->got += n;
	if (c->got < req->hdr.bulk_len)
		return NULL;
	if (seal_on(&c->rx)) {
		c->got = 0;
		c->rstate = RS_TAG;
		return NULL;
	}
	return req_done(c, false);
}

/* A frame that fails its tag was not sent by the peer as it came (a relay altered, replayed,
 * reordered, dropped or injected frames): it is never used, and the connection is closed. The
 * line is rate-limited like the strangers' (who can do this thousands of times a second).
 * Returns TAG_REFUSED, which conn_read closes the connection for without another line. */

static const char *conn_tag_done(struct srv_conn *c)
{
	struct srv *s = c->srv;

	if (seal_check(&c->rx, c->tag) == 0)
		return req_done(c, false);
	log_limited(&s->lim[LIM_BAD_TAG], clock_mono_ns(),
		    "%s: connection %llu from %s: %s (frame %llu, %s): altered, replayed, reordered, "
		    "dropped or injected on the way; closing the connection", s->name,
		    (unsigned long long)c->id, c->peer, TAG_REFUSED,
		    (unsigned long long)(c->rx.counter - 1), lw_op_name(c->req->hdr.opcode));
	return TAG_REFUSED;
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
			c->rpos += n;
			why = conn_bulk_in(c, n);
			break;
		case RS_TAG:
			n = MIN(avail, LW_TAG_LEN - c->got);
			memcpy(c->tag + c->got, p, n);
			c->got += n;
			c->rpos += n;
			if (c->got == LW_TAG_LEN)
				why = conn_tag_done(c);
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

void conn_read(struct srv_conn *c)
{
	uint32_t budget = READ_BUDGET;
	const char *why;
	char ebuf[64];

	if (c->fd < 0)
		return;
	why = conn_retry_alloc(c);
	if (why) {
		conn_close(c, why == VERSION_REFUSED ? NULL : why);
		return;
	}
	for (;;) {
		ssize_t n;

		why = conn_parse(c);
		if (why) {
			conn_close(c, why == TAG_REFUSED || why == VERSION_REFUSED ? NULL : why);
			return;
		}
		if (c->rpos < c->rlen || !conn_reading(c) || budget == 0)
			return;
		if (c->rstate == RS_BULK && c->req->hdr.bulk_len - c->got >= RBUF_SIZE) {
			/* Large bulk goes straight into the request, not through rbuf. */
			n = recv(c->fd, c->req->bulk + c->got, c->req->hdr.bulk_len - c->got, 0);
			if (n > 0 && (why = conn_bulk_in(c, (uint32_t)n)) != NULL) {
				conn_close(c, why);
				return;
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
		if (n > 0)
			c->rx_ns = clock_mono_ns();
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
