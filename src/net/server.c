/*
 * The server's event loop: creating the server, the loop itself (srv_run), waking it, closing
 * connections and freeing them at the end of a turn. Reading frames is server_read.c, writing
 * replies and the memory they hold server_reply.c, accepting and the strangers' handshake
 * server_accept.c; what they share is in server_impl.h.
 */
#include "net/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "net/bulk.h"
#include "net/server_impl.h"

#define HANDSHAKE_TIMEOUT_MS 5000u
#define FRAME_TIMEOUT_MS     30000u
#define MAX_CONNS_PER_PEER   256u

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
	[LIM_BAD_TAG] = { LOG_WARN, "connections closed: a frame failed authentication" },
	[LIM_NO_ENCRYPT] = { LOG_WARN, "connections refused: a client that does not encrypt" },
	[LIM_PEER_FULL] = { LOG_WARN, "connections refused: too many from one address" },
	[LIM_SERVER_FULL] = { LOG_WARN, "connections refused: the server is full" },
	[LIM_STALLED] = { LOG_WARN, "connections closed: a frame stopped coming" },
	[LIM_VERSION] = { LOG_WARN, "connections refused: a peer of another protocol version" },
};

void conn_unref(struct srv_conn *c)
{
	int left;

	pthread_mutex_lock(&c->lock);
	left = --c->refs;
	pthread_mutex_unlock(&c->lock);
	if (left > 0)
		return;
	pthread_mutex_destroy(&c->lock);
	seal_clear(&c->rx);
	seal_clear(&c->tx);
	free(c->rbuf);
	peer_put(c->srv, c->from);
	free(c);
}

void srv_wake(struct srv *s)
{
	uint64_t one = 1;

	if (write(s->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("%s: eventfd write: %s", s->name, strerror(errno));
}

/* Takes the listen fd out of epoll until `until`, or until a connection closes. */
void accept_pause(struct srv *s, uint64_t until)
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

/* Loop thread. Idempotent. The memory goes at the end of the loop iteration, so that events
 * of the same epoll batch that name this connection find it (closed) rather than freed. */
void conn_close(struct srv_conn *c, const char *why)
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
		out_frame_free(c, f);
	}
	c->out_tail = NULL;
	pthread_mutex_unlock(&c->lock);

	if (c->req) {
		bulk_free(c->req->bulk);
		mem_release(c, req_charge(&c->req->hdr));
		free(c->req);
		c->req = NULL;
	}
	if (c->starved)
		starved_remove(s, c);
	if (!c->authed)
		preauth_remove(s, c);
	conn_leave(c);
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

/* How long the loop may sleep: until the next handshake deadline, accept retry or held log
 * count, whichever is first (-1: none). Rounded up, so that it wakes with the time passed. */
static int srv_timeout_ms(struct srv *s, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	if (s->preauth_head)
		next = s->preauth_head->deadline_ns;
	if (s->open_conns)
		next = MIN(next, s->next_stall_scan);
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
		c->rx_ns = clock_mono_ns(); /* the wait was the server's: the peer's time starts again */
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
		c->rx_ns = clock_mono_ns();
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
	stats_init(&s->stats);
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
	if (!s->opts.max_peer_memory || s->opts.max_peer_memory > s->opts.max_memory)
		s->opts.max_peer_memory = s->opts.max_memory / 4;
	if (!s->opts.max_conns_per_peer)
		s->opts.max_conns_per_peer = MAX_CONNS_PER_PEER;
	if (!s->opts.frame_timeout_ms)
		s->opts.frame_timeout_ms = FRAME_TIMEOUT_MS;
	s->frame_ns = (uint64_t)s->opts.frame_timeout_ms * 1000000u;
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
	pthread_mutex_init(&s->peers_lock, NULL);
	u64map_init(&s->peers);

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
	pthread_mutex_destroy(&s->peers_lock);
	u64map_destroy(&s->peers);
	free(s);
	return rc;
}

int srv_seconds_parse(const char *arg, uint32_t *ms_out)
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

int srv_count_parse(const char *arg, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || *arg == '-' || v < 1 || v > 1000000)
		return -EINVAL;
	*out = (uint32_t)v;
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
		stalled_expire(s, now);
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
	pthread_mutex_destroy(&s->peers_lock);
	u64map_destroy(&s->peers); /* empty: every connection was freed */
	stats_fini(&s->stats);
	free(s);
}

struct srv_stats *srv_stats(struct srv *s)
{
	return &s->stats;
}
