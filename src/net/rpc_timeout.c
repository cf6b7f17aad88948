/*
 * The I/O thread's clocks: the adaptive timeout (the slowest reply of each of the last minutes),
 * which tells a hung server from a slow one, and the soft deadline of calls on soft connections
 * (the waiter's side of it is rpc_wait.c).
 */
#include <errno.h>
#include <stdio.h>

#include "common/log.h"
#include "common/util.h"
#include "net/rpc_impl.h"
#include "proto/codec.h"

static uint64_t at_timeout_ns(const struct rpc_conn *c);

/* The least time without a reply that means a hung server (rpc_conn_opts.at_min_ms). */
static uint64_t at_min_ms(const struct rpc_conn *c)
{
	return c->opts.at_min_ms ? c->opts.at_min_ms : 20000;
}

uint64_t half_at_min_ns(const struct rpc_conn *c)
{
	return at_min_ms(c) * 500000ull;
}

/* Soft connections: calls past their deadline fail with -EIO (detached ones too: nobody else
 * would end them). I/O thread, holding nothing. */
void expire_late_calls(struct rpc_conn *c)
{
	struct rpc_call *late = NULL;
	uint64_t now = clock_mono_ns();

	if (!c->opts.soft_ms)
		return;
	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->lock);
	for (struct rpc_call **list = &c->sendq_head; list; list = list == &c->sendq_head ? &c->inflight : NULL) {
		struct rpc_call *call = *list, *next;

		for (; call; call = next) {
			next = call->next;
			if (call->deadline_ns && now >= call->deadline_ns && take_off_queues(c, call)) {
				call->next = late;
				late = call;
			}
		}
	}
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->send_lock);
	if (late)
		log_warn("%s did not answer within timeout=%u s (soft mount): failing its calls with EIO",
			 c->peer, c->opts.soft_ms / 1000);
	while (late) {
		struct rpc_call *call = late;
		late = call->next;
		rpc_call_complete(call, -EIO);
	}
}

/* When the I/O thread must look again: the oldest timed call in flight times out, or a soft
 * deadline comes. 0: nothing to time. Under c->lock. */
uint64_t next_check_ns(struct rpc_conn *c)
{
	uint64_t at = at_timeout_ns(c), next = 0;
	struct rpc_call *lists[2] = { c->sendq_head, c->inflight };

	for (struct rpc_call *call = c->inflight; call; call = call->next)
		if (!(call->flags & RPC_NOTIMEOUT) && (!next || call->sent_ns + at < next))
			next = call->sent_ns + at;
	if (c->rcall && !(c->rcall->flags & RPC_NOTIMEOUT) && (!next || c->rcall->sent_ns + at < next))
		next = c->rcall->sent_ns + at;
	for (int i = 0; i < 2 && c->opts.soft_ms; i++)
		for (struct rpc_call *call = lists[i]; call; call = call->next)
			if (call->deadline_ns && (!next || call->deadline_ns < next))
				next = call->deadline_ns;
	return next;
}

/* The oldest timed call that has waited past the adaptive timeout, if any: the server hangs.
 * Fills why. Under c->lock. */
bool server_hangs(struct rpc_conn *c, char *why, size_t cap)
{
	uint64_t now = clock_mono_ns(), at = at_timeout_ns(c);
	struct rpc_call *late = NULL;

	for (struct rpc_call *call = c->inflight; call && !late; call = call->next)
		if (!(call->flags & RPC_NOTIMEOUT) && now >= call->sent_ns + at)
			late = call;
	if (!late && c->rcall && !(c->rcall->flags & RPC_NOTIMEOUT) && now >= c->rcall->sent_ns + at)
		late = c->rcall;
	if (late)
		snprintf(why, cap, "no reply to %s in %llu s: the server is not answering",
			 lw_op_name(late->opcode), (unsigned long long)(at / 1000000000ull));
	return late != NULL;
}

/* The slowest reply of the current minute, for the adaptive timeout. I/O thread. */
void at_record(struct rpc_conn *c, uint64_t sent_ns)
{
	uint64_t now = clock_mono_ns(), minute = now / 60000000000ull;
	uint32_t ms = (uint32_t)MIN((now - sent_ns) / 1000000ull, UINT32_MAX);
	uint32_t slot = (uint32_t)(minute % ARRAY_SIZE(c->at_slow_ms));

	pthread_mutex_lock(&c->lock);
	if (c->at_slot_min[slot] != minute) {
		c->at_slot_min[slot] = minute;
		c->at_slow_ms[slot] = 0;
	}
	c->at_slow_ms[slot] = MAX(c->at_slow_ms[slot], ms);
	pthread_mutex_unlock(&c->lock);
}

/* How long a call may wait for its reply before the server counts as hung: three times the
 * slowest reply of the last minutes, plus two seconds, and at least at_min_ms. Under c->lock. */
static uint64_t at_timeout_ns(const struct rpc_conn *c)
{
	uint64_t minute = clock_mono_ns() / 60000000000ull, slow = 0;
	uint64_t floor = at_min_ms(c);

	for (size_t i = 0; i < ARRAY_SIZE(c->at_slow_ms); i++)
		if (c->at_slot_min[i] + ARRAY_SIZE(c->at_slow_ms) > minute)
			slow = MAX(slow, c->at_slow_ms[i]);
	return MAX(floor, 3 * slow + 2000) * 1000000ull;
}
