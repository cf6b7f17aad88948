/*
 * Recovery, on the I/O thread: a broken socket puts the calls in flight back at the front of the
 * queue, marked resent, in the order they were first sent; the thread dials again until the
 * recovery window ends, and then fails them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "net/rpc_impl.h"
#include "proto/codec.h"

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
	call->sealed = false; /* sealed again, on the new connection's counter */
	lw_hdr_fill(&call->hdr, call->opcode, LW_F_RESENT, 0, call->req_id, call->body, call->body_len,
		    call->bulk_len, call->hdr.bulk_crc);
}

/*
 * The socket broke. Without recovery every call fails. With it, the calls that were in flight
 * (and the one whose reply was being read) go back to the front of the queue to be resent after
 * reconnecting, except RPC_NOWAIT ones, which fail now. I/O thread.
 */
void conn_broken(struct rpc_conn *c, const char *why)
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
			rpc_call_complete(c->rcall, -EIO);
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
		rpc_call_complete(call, -EIO);
	}
	recv_reset(c);
}

/* One reconnection attempt while recovering; on success the queue flows again. I/O thread. */
void conn_reconnect(struct rpc_conn *c)
{
	struct seal tx = { 0 }, rx = { 0 };
	int fd = -1, rc;

	rc = rpc_dial(c, &fd, &tx, &rx);
	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->lock);
	if (rc == 0) {
		/* New session keys, counters from 0 (the old connection's are worthless now). */
		seal_clear(&c->tx);
		seal_clear(&c->rx);
		c->tx = tx;
		c->rx = rx;
		c->fd = fd;
		c->state = CS_CONNECTED;
		snprintf(c->peer, sizeof(c->peer), "%s (%s:%u)", c->name, c->host, c->port);
		log_info("reconnected to %s; resending what was in flight", c->peer);
	} else if (rpc_fatal_hello_error(rc)) {
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
