/*
 * Receiving replies, on the I/O thread: the reply state machine (header, body, bulk, and the tag
 * of a sealed connection), matching each reply to its call in flight (or to a cancelled one,
 * whose reply is dropped), bulk straight into the caller's buffers, and a peer that breaks the
 * protocol failing the connection (or, on a sealed one, reconnecting).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/crc.h"
#include "common/log.h"
#include "common/util.h"
#include "net/rpc_impl.h"
#include "proto/codec.h"

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

/* Is this reply from an MDS that was deposed (its epoch below one this connection heard)? */
static bool from_deposed(struct rpc_conn *c)
{
	struct lw_mds_rep_prefix pre;

	if (!lw_op_mds_prefixed(c->hdr.opcode) || c->hdr.body_len < sizeof(pre))
		return false;
	memcpy(&pre, c->rbody, sizeof(pre));
	if (pre.epoch && pre.epoch < c->epoch_seen) {
		log_warn("reply from %s to %s: epoch %u, and epoch %u was heard: a deposed MDS; "
			 "resending elsewhere", c->peer, lw_op_name(c->hdr.opcode), pre.epoch, c->epoch_seen);
		return true;
	}
	if (pre.epoch > c->epoch_seen)
		c->epoch_seen = pre.epoch;
	return false;
}

static void reply_done(struct rpc_conn *c)
{
	struct rpc_call *call = c->rcall;
	int status = lw_errno_from_wire(c->hdr.status);

	if (call && !c->notifying && !c->discarding && from_deposed(c)) {
		/* Not an answer: the call goes back in flight, and conn_broken resends it. */
		pthread_mutex_lock(&c->lock);
		call->next = c->inflight;
		c->inflight = call;
		pthread_mutex_unlock(&c->lock);
		c->rcall = NULL;
		c->rstate = RS_HDR;
		c->hgot = 0;
		free(c->rbody);
		c->rbody = NULL;
		c->deposed = true;
		return;
	}

	c->rcall = NULL;
	c->rstate = RS_HDR;
	c->hgot = 0;
	if (c->notifying) {
		c->notifying = false;
		if (c->opts.on_notify)
			c->opts.on_notify(c->opts.arg, c->hdr.opcode, c->rbody, c->hdr.body_len);
		free(c->rbody);
		c->rbody = NULL;
		return;
	}
	if (c->discarding) {
		/* A cancelled call's reply: nobody waits for it. What its prefix says of the client's
		 * leases still holds (the MDS tells a loss once). */
		struct lw_mds_rep_prefix pre;
		struct lw_obj_version vers[LW_MAX_VERS];
		uint32_t len = c->hdr.body_len;

		c->discarding = false;
		if (c->opts.on_prefix && lw_op_mds_prefixed(c->hdr.opcode) && len &&
		    lw_mds_prefix_take(c->rbody, &len, &pre, vers) == 0)
			c->opts.on_prefix(c->opts.arg, &pre, 0);
		free(c->rbody);
		c->rbody = NULL;
		return;
	}
	at_record(c, call->sent_ns);
	call->rbody = c->rbody;
	call->rbody_len = c->hdr.body_len;
	call->rbulk_len = c->hdr.bulk_len;
	c->rbody = NULL;
	if (c->hdr.bulk_len && crc32c_iov(0, call->rbulk, call->rbulk_cnt, c->hdr.bulk_len) != c->hdr.bulk_crc) {
		log_warn("reply from %s to %s: bulk checksum mismatch", c->peer, lw_op_name(c->hdr.opcode));
		status = -EBADMSG;
	}
	if (lw_op_mds_prefixed(call->opcode)) {
		struct lw_mds_rep_prefix pre;

		if (lw_mds_prefix_take(call->rbody, &call->rbody_len, &pre, call->vers)) {
			log_warn("reply from %s to %s: malformed transaction prefix", c->peer,
				 lw_op_name(c->hdr.opcode));
			status = -EPROTO;
		} else {
			call->transno = status ? 0 : pre.transno;
			call->last_committed = pre.last_committed;
			call->nvers = status ? 0 : pre.nvers;
			call->rp_flags = pre.flags;
			call->lease_ino = pre.lease_ino;
			call->lease_gen = pre.lease_gen;
			call->lease_trust_ms = pre.lease_trust_ms;
			if (c->opts.on_prefix)
				c->opts.on_prefix(c->opts.arg, &pre, call->sent_ns);
			if (c->opts.on_reply)
				c->opts.on_reply(c->opts.arg, call);
		}
	}
	rpc_call_complete(call, status);
}

/* Whether a call with this request id was cancelled while in flight. */
static bool was_cancelled(struct rpc_conn *c, uint64_t id)
{
	bool found = false;

	if (id == 0)
		return false; /* no request has id 0: the ring's empty slots hold it */
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < ARRAY_SIZE(c->cancelled) && !found; i++)
		found = c->cancelled[i] == id;
	pthread_mutex_unlock(&c->lock);
	return found;
}

/* The call a reply header names. NULL, or why the reply cannot be its. */
static const char *reply_match(struct rpc_conn *c)
{
	struct lw_hdr *h = &c->hdr;

	c->rcall = conn_take_inflight(c, h->req_id);
	if (!c->rcall) {
		/* A caller that sent its request itself may not have put it on the in-flight list
		 * yet (it does so under send_lock, right after the send): wait for it once. */
		pthread_mutex_lock(&c->send_lock);
		pthread_mutex_unlock(&c->send_lock);
		c->rcall = conn_take_inflight(c, h->req_id);
	}
	c->discarding = !c->rcall && was_cancelled(c, h->req_id);
	if (!c->rcall && !c->discarding)
		return "reply to an unknown request";
	if (c->discarding)
		; /* read and dropped: its size was checked with the header */
	else if (h->opcode != c->rcall->opcode)
		return "reply opcode differs from the request's";
	if (c->rcall && h->bulk_len > c->rcall->rbulk_cap)
		return "reply bulk larger than the buffer for it";
	return NULL;
}

/*
 * The reply header is complete. NULL, or why the connection is unusable. On a sealed connection
 * a header that names no call (or the wrong one) is read to its tag first, its bytes dropped:
 * a frame a relay replayed or made up is then refused as what it is, and the reason given is
 * the header's only for a frame that did come from the server.
 */
static const char *reply_hdr_done(struct rpc_conn *c)
{
	struct lw_hdr *h = &c->hdr;
	const char *why;

	if (lw_hdr_check(h))
		return "malformed reply header";
	if (h->flags & LW_F_NOTIFY) {
		const struct lw_op_info *info = lw_op_info(h->opcode);

		/* Unasked: it belongs to no call, and carries no bulk. */
		if (!info || info->server != LW_SRV_CLI || h->bulk_len)
			return "malformed notification";
		c->notifying = true;
		why = NULL;
	} else if (!(h->flags & LW_F_REPLY)) {
		return "malformed reply header";
	} else {
		why = reply_match(c);
		if (!why)
			atomic_store_explicit(&c->peer_version, h->version, memory_order_relaxed);
	}
	if (why && !seal_on(&c->rx))
		return why;
	c->rerr = why;
	c->rbody = malloc(h->body_len ? h->body_len : 1);
	if (!c->rbody)
		return "out of memory";
	c->got = 0;
	c->rstate = RS_BODY;
	if (seal_on(&c->rx) && seal_begin(&c->rx, h))
		return "cannot check replies (libcrypto failed)";
	return NULL;
}

/*
 * Without a seal the header checksum is checked once the body is in, as it always was; on a
 * sealed connection every check of the body waits for the tag, and nothing of the reply reaches
 * its call before the tag passed (bulk lands in the caller's buffers as it comes, but the call
 * completes only then).
 */
static const char *reply_body_done(struct rpc_conn *c)
{
	c->got = 0;
	if (seal_on(&c->rx)) {
		if (seal_update(&c->rx, c->rbody, c->rbody, c->hdr.body_len))
			return "cannot check replies (libcrypto failed)";
		c->rstate = c->hdr.bulk_len ? RS_BULK : RS_TAG;
		return NULL;
	}
	if (lw_hdr_crc_check(&c->hdr, c->rbody))
		return "reply header checksum mismatch";
	if (c->hdr.bulk_len)
		c->rstate = RS_BULK;
	else
		reply_done(c);
	return NULL;
}

/* The whole bulk is in. */
static void reply_bulk_done(struct rpc_conn *c)
{
	c->got = 0;
	if (seal_on(&c->rx))
		c->rstate = RS_TAG;
	else
		reply_done(c);
}

/* What a reply that failed its tag is reported as (conn_recv then reconnects). */
static const char TAG_REFUSED[] = "a reply failed authentication";

static const char *reply_tag_done(struct rpc_conn *c)
{
	const char *why = c->rerr;

	c->rerr = NULL;
	if (seal_check(&c->rx, c->rtag)) {
		log_limited(&c->lim_tag, clock_mono_ns(),
			    "%s from %s (reply %llu, %s): altered, replayed, reordered, dropped or "
			    "injected on the way; reconnecting", TAG_REFUSED, c->peer,
			    (unsigned long long)(c->rx.counter - 1), lw_op_name(c->hdr.opcode));
		return TAG_REFUSED;
	}
	if (why)
		return why;
	if (lw_hdr_crc_check(&c->hdr, c->rbody))
		return "reply header checksum mismatch";
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
			/* Opened in rbuf (decrypted in place there with encryption), then copied. */
			if (seal_on(&c->rx) && seal_update(&c->rx, p, (uint8_t *)p, n)) {
				why = "cannot check replies (libcrypto failed)";
				break;
			}
			if (c->rcall && !c->rerr)
				rbulk_copy(c->rcall, c->got, p, n);
			c->got += n;
			if (c->got == c->hdr.bulk_len)
				reply_bulk_done(c);
			break;
		case RS_TAG:
			n = MIN(avail, LW_TAG_LEN - c->got);
			memcpy(c->rtag + c->got, p, n);
			c->got += n;
			if (c->got == LW_TAG_LEN)
				why = reply_tag_done(c);
			break;
		}
		c->rpos += n;
		if (why)
			return why;
	}
	c->rpos = c->rlen = 0;
	return NULL;
}

/* Clears the receive state after the socket went away. I/O thread. */
/* A reply of a deposed MDS came (reply_done put its call back): the connection goes to the next
 * address and resends there. true when it did (the connection is broken now). */
static bool deposed_break(struct rpc_conn *c)
{
	if (!c->deposed)
		return false;
	c->deposed = false;
	if (c->opts.on_silence)
		c->opts.on_silence(c->opts.arg); /* the next address first */
	conn_broken(c, "a deposed MDS answered");
	return true;
}

void recv_reset(struct rpc_conn *c)
{
	c->deposed = false;
	c->notifying = false;
	free(c->rbody);
	c->rbody = NULL;
	c->rerr = NULL;
	c->rstate = RS_HDR;
	c->hgot = 0;
	c->rpos = c->rlen = 0;
	c->got = 0;
}

/* Reads what the socket has. 0, or -1 when the connection broke (already handled). */
int conn_recv(struct rpc_conn *c)
{
	char why[96];

	for (;;) {
		const char *err;
		ssize_t n;
		uint32_t room;
		void *dst;

		if (c->rstate == RS_BULK && c->hdr.bulk_len - c->got >= RBUF_SIZE && c->rcall && !c->rerr &&
		    (dst = rbulk_at(c->rcall, c->got, &room)) != NULL) {
			/* Large reply bulk lands straight in the caller's buffer. */
			n = recv(c->fd, dst, MIN(room, c->hdr.bulk_len - c->got), 0);
			if (n > 0) {
				if (seal_on(&c->rx) && seal_update(&c->rx, dst, dst, (size_t)n)) {
					conn_broken(c, "cannot check replies (libcrypto failed)");
					return -1;
				}
				c->got += (uint32_t)n;
				if (c->got == c->hdr.bulk_len)
					reply_bulk_done(c);
				if (deposed_break(c))
					return -1;
				continue;
			}
		} else {
			n = recv(c->fd, c->rbuf, RBUF_SIZE, 0);
			if (n > 0) {
				c->rpos = 0;
				c->rlen = (uint32_t)n;
				err = conn_parse(c);
				if (!err && deposed_break(c))
					return -1;
				if (err && seal_on(&c->rx)) {
					/* On a sealed connection, what breaks the protocol may be a relay's
					 * doing rather than the server's: reconnect and resend, as after a
					 * broken socket. */
					conn_broken(c, err);
					return -1;
				}
				if (err) {
					/* A peer that breaks the protocol is not recovered. */
					pthread_mutex_lock(&c->send_lock);
					pthread_mutex_lock(&c->lock);
					if (c->rcall) {
						rpc_call_complete(c->rcall, -EIO);
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
