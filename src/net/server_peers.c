/*
 * Fair limits: what one peer address may hold of a server, so that a key holder cannot freeze it
 * for the others (architecture.md, "Fair limits").
 *
 * - Memory. A request is charged from its header (its whole claim: body and bulk are allocated
 *   then) to the server's budget and to its peer's share of it (max_peer_memory, a quarter of the
 *   budget by default). A header that would take either past its limit waits, unread and holding
 *   nothing, until replies release memory; one frame always goes when nothing is charged, so
 *   nobody waits for itself. A peer that stalls frames it began holds only its own share, and
 *   those frames are dropped after frame_timeout.
 * - Connections. A peer may keep max_conns_per_peer authenticated connections. And the server
 *   keeps fd_reserve descriptors below its fd limit for its own files and for peers that hold
 *   fewer than PEER_QUIET connections: an OSS coming back, the admin tool, a node's first mount
 *   get in when the busy peers have taken the rest. A connection past either cap is refused at
 *   its authentication with -EUSERS, which the client reports and retries.
 *
 * Peers are counted by IPv4 address: the processes of one node share its share.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "common/log.h"
#include "common/util.h"
#include "net/server_impl.h"
#include "proto/codec.h"

#define PEER_QUIET 16u     /* a peer with fewer connections may use the server's reserve */
#define FD_RESERVE_MAX 64u /* descriptors kept from connections that are not quiet */
#define STALL_SCAN_NS 1000000000ull /* how often stalled frames are looked for */

struct srv_peer *peer_get(struct srv *s, uint32_t addr)
{
	struct srv_peer *p;

	pthread_mutex_lock(&s->peers_lock);
	p = u64map_get(&s->peers, addr);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (p) {
			p->addr = addr;
			atomic_init(&p->mem, 0);
			if (u64map_put(&s->peers, addr, p) < 0) {
				free(p);
				p = NULL;
			}
		}
	}
	if (p)
		p->refs++;
	pthread_mutex_unlock(&s->peers_lock);
	return p;
}

void peer_put(struct srv *s, struct srv_peer *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&s->peers_lock);
	if (--p->refs == 0) {
		u64map_del(&s->peers, p->addr);
		free(p);
	}
	pthread_mutex_unlock(&s->peers_lock);
}

bool mem_charge(struct srv_conn *c, uint64_t bytes)
{
	struct srv *s = c->srv;
	struct srv_peer *p = c->from;
	uint64_t before = atomic_fetch_add(&s->mem, bytes);
	uint64_t mine = atomic_fetch_add(&p->mem, bytes);

	/* A stranger's frames are small and few (server_accept.c bounds them): they do not wait
	 * for the share its address's other connections hold, so that a busy node still connects. */
	if ((before + bytes > s->opts.max_memory && before > 0) ||
	    (c->authed && mine + bytes > s->opts.max_peer_memory && mine > 0)) {
		atomic_fetch_sub(&s->mem, bytes);
		atomic_fetch_sub(&p->mem, bytes);
		atomic_store(&s->starving, true);
		return false;
	}
	return true;
}

void mem_charge_reply(struct srv_conn *c, uint64_t bytes)
{
	atomic_fetch_add(&c->srv->mem, bytes);
	atomic_fetch_add(&c->from->mem, bytes);
}

void mem_release(struct srv_conn *c, uint64_t bytes)
{
	struct srv *s = c->srv;
	uint64_t now = atomic_fetch_sub(&s->mem, bytes) - bytes;
	uint64_t mine = atomic_fetch_sub(&c->from->mem, bytes) - bytes;

	/* Waiters retry when the server is half empty, or when this peer (whose connections may be
	 * the ones waiting) is below half its share. */
	if (atomic_load(&s->starving) && (now < s->opts.max_memory / 2 || mine < s->opts.max_peer_memory / 2) &&
	    atomic_exchange(&s->starving, false))
		srv_wake(s);
}

/* Connections past which only quiet peers get in: the fd limit less the reserve (a quarter of a
 * small limit). The limit is read each time: prlimit may lower it under a running server. */
static uint32_t admit_cap(const struct srv *s)
{
	struct rlimit rl;
	uint64_t lim, reserve;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return UINT32_MAX;
	lim = rl.rlim_cur;
	reserve = s->opts.fd_reserve ? s->opts.fd_reserve : MIN((uint64_t)FD_RESERVE_MAX, lim / 4);
	if (lim <= reserve)
		return 0;
	return (uint32_t)MIN(lim - reserve, (uint64_t)UINT32_MAX);
}

int conn_admit(struct srv_conn *c)
{
	struct srv *s = c->srv;
	struct srv_peer *p = c->from;
	uint64_t now = clock_mono_ns();

	if (c->admitted)
		return 0;
	if (p->admitted >= s->opts.max_conns_per_peer) {
		log_limited(&s->lim[LIM_PEER_FULL], now,
			    "%s: refusing connection %llu from %s: its address has %u connections, the "
			    "most one address may keep (--max-conns-per-peer)", s->name,
			    (unsigned long long)c->id, c->peer, p->admitted);
		return -EUSERS;
	}
	if (p->admitted >= PEER_QUIET && s->admitted >= admit_cap(s)) {
		log_limited(&s->lim[LIM_SERVER_FULL], now,
			    "%s: refusing connection %llu from %s: the server has %u connections, and the "
			    "descriptors left are kept for addresses with fewer than %u (its has %u)",
			    s->name, (unsigned long long)c->id, c->peer, s->admitted, PEER_QUIET, p->admitted);
		return -EUSERS;
	}
	c->admitted = true;
	p->admitted++;
	s->admitted++;
	return 0;
}

void conn_leave(struct srv_conn *c)
{
	if (!c->admitted)
		return;
	c->admitted = false;
	c->from->admitted--;
	c->srv->admitted--;
}

/* Is c in the middle of a frame that it has to send the rest of? Not when the server stopped
 * reading it (paused, or waiting for memory): that wait is the server's, not the peer's. */
static bool conn_stalls(const struct srv_conn *c)
{
	return c->authed && c->fd >= 0 && (c->hgot > 0 || c->rstate != RS_HDR) && !c->starved &&
	       !atomic_load(&c->paused) && !c->close_when_flushed;
}

void stalled_expire(struct srv *s, uint64_t now)
{
	struct srv_conn *c, *next;

	if (now < s->next_stall_scan)
		return;
	for (c = s->open_conns; c; c = next) {
		next = c->next_open;
		if (!conn_stalls(c) || now - c->rx_ns < s->frame_ns)
			continue;
		log_limited(&s->lim[LIM_STALLED], now,
			    "%s: closing connection %llu from %s: a frame stopped coming (%s, nothing for "
			    "%llu s)", s->name, (unsigned long long)c->id, c->peer,
			    c->req ? lw_op_name(c->req->hdr.opcode) : "its header",
			    (unsigned long long)((now - c->rx_ns) / 1000000000ull));
		conn_close(c, NULL);
	}
	s->next_stall_scan = now + MIN(STALL_SCAN_NS, s->frame_ns);
}
