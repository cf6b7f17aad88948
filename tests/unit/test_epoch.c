/*
 * A replicated MDT's fencing, on the client's side (net/rpc_recv.c, from_deposed and reply_done,
 * and conn_recv's handling of c->deposed): every reply of an MDS to an MDS_* opcode starts with
 * struct lw_mds_rep_prefix, whose epoch is the MDS's (0: no replication). A connection remembers
 * the highest epoch it heard, and a reply with a lower nonzero one is a deposed MDS's: its call
 * does not complete with it, but goes back in flight; the connection calls on_silence (a failover
 * list moves to its next address), breaks, reconnects where resolve says, and resends the call
 * (LW_F_RESENT), which completes with the next server's reply.
 *
 * The MDSs are fakes of this file: a listening socket on 127.0.0.1 each, speaking Loom's frames
 * without a key (with none, the client dials and sends at once: no AUTH exchange, no hello),
 * answering with an epoch the test chooses, and logging what they saw. After the prefix a fake
 * puts a struct fake_rep saying who answered what, so that a test can tell whose reply a call
 * completed with.
 *
 *   client ──(A answers epoch 3)──> epoch_seen 3
 *          ──(A answers epoch 2)──> deposed: on_silence (cur → B), break, dial B,
 *          ──(resent to B, epoch 3)──> the call completes with B's reply
 */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/crc.h"
#include "common/util.h"
#include "net/rpc.h"
#include "net/rpc_impl.h"
#include "proto/codec.h"

int check_failures;
const char *check_current = "";

/* ---- a fake MDS ---- */

/* What a fake puts after the prefix (error replies have the prefix alone, as an MDS's do). */
struct fake_rep {
	uint32_t server; /* the fake's id */
	uint32_t epoch;  /* the epoch its prefix carried */
	uint64_t req_id; /* the request's, echoed */
	uint32_t seq;    /* the fake's count of requests, this one included */
	uint32_t resent; /* 1: the request came with LW_F_RESENT */
};
_Static_assert(sizeof(struct fake_rep) == 24, "fake_rep");

struct fake_body {
	struct lw_mds_rep_prefix pre;
	struct fake_rep rep;
};

#define FAKE_LOG 16   /* requests a fake remembers */
#define FAKE_BATCH 4  /* requests it may gather before answering */

struct fake {
	uint32_t id;
	int lfd, cfd;     /* cfd: the connection being served (-1: none); the fake's thread only */
	uint16_t port;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stopping;
	/* How it answers, set by the test (under lock). */
	uint32_t epoch;
	int status;         /* 0, or a negative errno */
	unsigned batch;     /* gathers this many requests, then answers them all in one write */
	uint32_t bulk_len;  /* bulk bytes in each reply */
	bool hold_bulk;     /* sends header and body, then the bulk only once bulk_go is set */
	bool bulk_go;
	/* What it saw (under lock). */
	unsigned conns, reqs, resent;
	uint64_t ids[FAKE_LOG];
	uint32_t flags[FAKE_LOG];
	/* Requests gathered for a batch: the fake's thread only. */
	struct lw_hdr pending[FAKE_BATCH];
	uint32_t seq[FAKE_BATCH];
	unsigned npending;
};

/* The client may have gone meanwhile: that is for the test to see, not an error here (nor a
 * SIGPIPE: write_full of common/util.h would raise one). */
static void send_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

/* Answers the requests gathered, in one write (the bulk of a held reply in a second one). Takes
 * f->lock and gives it back. */
static void fake_answer(struct fake *f)
{
	size_t frame = sizeof(struct lw_hdr) + sizeof(struct fake_body);
	uint8_t *out, *bulk = NULL;
	uint32_t bulk_len, bulk_crc = 0;
	size_t len = 0;
	bool hold;

	pthread_mutex_lock(&f->lock);
	bulk_len = f->bulk_len;
	hold = f->hold_bulk;
	out = malloc(f->npending * (frame + bulk_len));
	if (bulk_len)
		bulk = malloc(bulk_len);
	REQUIRE(out && (bulk || !bulk_len));
	for (uint32_t i = 0; i < bulk_len; i++)
		bulk[i] = (uint8_t)(i * 7 + f->id);
	if (bulk_len)
		bulk_crc = crc32c(0, bulk, bulk_len);
	for (unsigned i = 0; i < f->npending; i++) {
		const struct lw_hdr *req = &f->pending[i];
		struct fake_body b = { 0 };
		uint32_t blen = f->status ? sizeof(b.pre) : sizeof(b);
		struct lw_hdr h;

		b.pre.epoch = f->epoch;
		b.pre.last_committed = (uint64_t)f->epoch * 1000 + f->seq[i];
		b.rep = (struct fake_rep){ .server = f->id, .epoch = f->epoch, .req_id = req->req_id,
					   .seq = f->seq[i], .resent = !!(req->flags & LW_F_RESENT) };
		lw_hdr_fill(&h, req->opcode, LW_F_REPLY, lw_errno_to_wire(f->status), req->req_id, &b, blen,
			    bulk_len, bulk_crc);
		memcpy(out + len, &h, sizeof(h));
		memcpy(out + len + sizeof(h), &b, blen);
		len += sizeof(h) + blen;
		if (bulk_len && !hold) {
			memcpy(out + len, bulk, bulk_len);
			len += bulk_len;
		}
	}
	f->npending = 0;
	pthread_mutex_unlock(&f->lock);
	send_full(f->cfd, out, len);
	if (bulk_len && hold) {
		pthread_mutex_lock(&f->lock);
		while (!f->bulk_go && !f->stopping)
			pthread_cond_wait(&f->cond, &f->lock);
		f->bulk_go = false;
		pthread_mutex_unlock(&f->lock);
		send_full(f->cfd, bulk, bulk_len);
	}
	free(bulk);
	free(out);
}

/* Reads one request, and answers once a batch is gathered. false: the client went away (or sent
 * what no client of this layer sends). */
static bool fake_serve_one(struct fake *f)
{
	uint8_t body[256];
	struct lw_hdr h;
	bool full;

	if (read_full(f->cfd, &h, sizeof(h)))
		return false;
	if (lw_hdr_check(&h) || (h.flags & LW_F_REPLY) || h.body_len > sizeof(body) || h.bulk_len) {
		CHECK_FAIL_("fake %u: a malformed request (opcode %u)", f->id, h.opcode);
		return false;
	}
	if (read_full(f->cfd, body, h.body_len))
		return false;
	CHECK_RC(lw_hdr_crc_check(&h, body), 0);
	pthread_mutex_lock(&f->lock);
	if (f->reqs < FAKE_LOG) {
		f->ids[f->reqs] = h.req_id;
		f->flags[f->reqs] = h.flags;
	}
	f->reqs++;
	f->resent += !!(h.flags & LW_F_RESENT);
	f->pending[f->npending] = h;
	f->seq[f->npending] = f->reqs;
	f->npending++;
	full = f->npending >= f->batch || f->npending == FAKE_BATCH;
	pthread_mutex_unlock(&f->lock);
	if (full)
		fake_answer(f);
	return true;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = f->lfd, .events = POLLIN }, { .fd = f->cfd, .events = POLLIN } };
		bool stop;

		pthread_mutex_lock(&f->lock);
		stop = f->stopping;
		pthread_mutex_unlock(&f->lock);
		if (stop)
			break;
		if (poll(p, 2, 20) <= 0)
			continue;
		if (p[0].revents & POLLIN) {
			/* One client at a time: a new connection replaces the old (the client dropped
			 * it before dialling again). */
			int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0) {
				if (f->cfd >= 0)
					close(f->cfd);
				f->cfd = fd;
				pthread_mutex_lock(&f->lock);
				f->conns++;
				f->npending = 0;
				pthread_mutex_unlock(&f->lock);
			}
			continue;
		}
		if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && !fake_serve_one(f)) {
			close(f->cfd);
			f->cfd = -1;
			pthread_mutex_lock(&f->lock);
			f->npending = 0;
			pthread_mutex_unlock(&f->lock);
		}
	}
	if (f->cfd >= 0)
		close(f->cfd);
	return NULL;
}

static void fake_start(struct fake *f, uint32_t id, uint32_t epoch)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);

	memset(f, 0, sizeof(*f));
	f->id = id;
	f->epoch = epoch;
	f->batch = 1;
	f->cfd = -1;
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(f->lfd >= 0);
	REQUIRE(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	REQUIRE(listen(f->lfd, 8) == 0);
	REQUIRE(getsockname(f->lfd, (struct sockaddr *)&sa, &sl) == 0);
	f->port = ntohs(sa.sin_port);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	REQUIRE(pthread_create(&f->thread, NULL, fake_main, f) == 0);
}

static void fake_stop(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->stopping = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	pthread_join(f->thread, NULL);
	close(f->lfd);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
}

/* From the next request on, f answers with epoch and status. */
static void fake_set(struct fake *f, uint32_t epoch, int status)
{
	pthread_mutex_lock(&f->lock);
	f->epoch = epoch;
	f->status = status;
	pthread_mutex_unlock(&f->lock);
}

/* What f saw: its counters, and the request id and flags of its request number `nth` (1, 2, ...). */
struct fake_seen {
	unsigned conns, reqs, resent;
	uint64_t id;
	uint32_t flags;
};

static struct fake_seen fake_seen(struct fake *f, unsigned nth)
{
	struct fake_seen s;

	pthread_mutex_lock(&f->lock);
	s = (struct fake_seen){ f->conns, f->reqs, f->resent, 0, 0 };
	if (nth >= 1 && nth <= f->reqs && nth <= FAKE_LOG) {
		s.id = f->ids[nth - 1];
		s.flags = f->flags[nth - 1];
	}
	pthread_mutex_unlock(&f->lock);
	return s;
}

/* ---- the client: a failover list of two fakes, as libloom's mds_resolve / mds_silent ---- */

struct failover {
	struct fake *to[2];
	atomic_uint cur;       /* where resolve points */
	atomic_uint silences;  /* on_silence calls */
};

static void fo_resolve(void *arg, char *host, size_t cap, uint16_t *port)
{
	struct failover *fo = arg;

	snprintf(host, cap, "127.0.0.1");
	*port = fo->to[atomic_load(&fo->cur) % 2]->port;
}

static void fo_silence(void *arg)
{
	struct failover *fo = arg;

	atomic_fetch_add(&fo->cur, 1);
	atomic_fetch_add(&fo->silences, 1);
}

static struct rpc_conn *client_open(struct failover *fo, uint32_t recovery_ms, uint32_t at_min_ms)
{
	struct rpc_conn_opts o = { .name = "MDT0000", .connect_timeout_ms = 2000,
				   .recovery_ms = recovery_ms, .at_min_ms = at_min_ms,
				   .resolve = fo_resolve, .on_silence = fo_silence, .arg = fo };
	struct rpc_conn *c = NULL;

	REQUIRE_RC(rpc_conn_open("127.0.0.1", fo->to[0]->port, &o, &c), 0);
	return c;
}

/* Waits up to ms for w's calls: false if they have not all completed by then. */
static bool wait_ms(struct rpc_wait *w, unsigned ms)
{
	uint64_t until = clock_mono_ns() + (uint64_t)ms * 1000000ull;
	bool done;

	pthread_mutex_lock(&w->lock);
	while (w->pending > 0 && clock_mono_ns() < until) {
		struct timespec ts = { .tv_sec = (time_t)(until / 1000000000ull),
				       .tv_nsec = (long)(until % 1000000000ull) };

		pthread_cond_timedwait(&w->cond, &w->lock, &ts);
	}
	done = w->pending == 0;
	pthread_mutex_unlock(&w->lock);
	return done;
}

/* Submits call on c and waits for it: a call that never completes stops the test (its memory is
 * the connection's still). */
static void call_run(struct rpc_conn *c, struct rpc_call *call)
{
	struct rpc_wait w;

	rpc_wait_init(&w);
	rpc_submit(c, call, &w);
	REQUIRE(wait_ms(&w, 10000));
	rpc_wait_destroy(&w);
}

/* One call of opcode op, with no body, on c. */
static void call_once(struct rpc_conn *c, struct rpc_call *call, uint16_t op)
{
	rpc_call_init(call, op, NULL, 0);
	call_run(c, call);
}

/* call completed with status 0 and the body fake f sent with epoch, as its request number seq,
 * resent or not; the prefix's fields are that reply's. Releases the reply. */
static void check_reply(struct rpc_call *call, const struct fake *f, uint32_t epoch, uint32_t seq,
			bool resent)
{
	struct fake_rep r;

	CHECK_RC(call->status, 0);
	CHECK_EQ(call->rbody_len, sizeof(r));
	if (call->status == 0 && call->rbody_len == sizeof(r)) {
		memcpy(&r, call->rbody, sizeof(r));
		CHECK_EQ(r.server, f->id);
		CHECK_EQ(r.epoch, epoch);
		CHECK_EQ(r.req_id, call->req_id);
		CHECK_EQ(r.seq, seq);
		CHECK_EQ(r.resent, resent);
		CHECK_EQ(call->last_committed, (uint64_t)epoch * 1000 + seq);
	}
	rpc_call_release(call);
}

/* Numbered cases; each starts fakes A (id 1) and B (id 2) of its own, and its own client on A. */

/* 1: the same epoch twice: both calls complete with their replies, nothing breaks. */
static void test_1_same_epoch(void)
{
	struct fake a, b;
	struct failover fo = { .to = { &a, &b } };
	struct rpc_conn *c;
	struct rpc_call call;
	struct fake_seen sa;

	fake_start(&a, 1, 2);
	fake_start(&b, 2, 2);
	c = client_open(&fo, 10000, 0);
	call_once(c, &call, LW_OP_MDS_STATFS);
	check_reply(&call, &a, 2, 1, false);
	call_once(c, &call, LW_OP_MDS_GETATTR);
	check_reply(&call, &a, 2, 2, false);
	CHECK_EQ(c->epoch_seen, 2);
	CHECK_EQ(atomic_load(&fo.silences), 0);
	CHECK(rpc_conn_alive(c));
	rpc_conn_close(c);
	sa = fake_seen(&a, 2);
	CHECK_EQ(sa.conns, 1);
	CHECK_EQ(sa.reqs, 2);
	CHECK_EQ(sa.resent, 0);
	CHECK_EQ(fake_seen(&b, 0).conns, 0);
	fake_stop(&a);
	fake_stop(&b);
}

/* 2: epoch 3 heard, then a reply of epoch 2: not the call's answer; on_silence once, the
 * connection goes to B, and the call, resent with the same request id, completes with B's. */
static void test_2_deposed_resent(void)
{
	struct fake a, b;
	struct failover fo = { .to = { &a, &b } };
	struct rpc_conn *c;
	struct rpc_call call;
	struct fake_seen sa, sb;

	fake_start(&a, 1, 3);
	fake_start(&b, 2, 3);
	c = client_open(&fo, 10000, 0);
	call_once(c, &call, LW_OP_MDS_STATFS);
	check_reply(&call, &a, 3, 1, false);
	fake_set(&a, 2, 0);
	call_once(c, &call, LW_OP_MDS_STATFS);
	check_reply(&call, &b, 3, 1, true);
	CHECK_EQ(atomic_load(&fo.silences), 1);
	CHECK_EQ(atomic_load(&fo.cur), 1);
	sa = fake_seen(&a, 2);
	sb = fake_seen(&b, 1);
	CHECK_EQ(sa.conns, 1);
	CHECK_EQ(sa.reqs, 2);
	CHECK_EQ(sa.resent, 0);
	CHECK_EQ(sb.conns, 1);
	CHECK_EQ(sb.reqs, 1);
	CHECK_EQ(sb.resent, 1);
	CHECK_EQ(sb.id, sa.id);       /* the same request, resent */
	CHECK_EQ(sb.id, call.req_id);
	CHECK(sb.flags & LW_F_RESENT);
	CHECK(!(sa.flags & LW_F_RESENT));
	/* B serves on: the next call is B's, first time. */
	call_once(c, &call, LW_OP_MDS_GETATTR);
	check_reply(&call, &b, 3, 2, false);
	CHECK_EQ(c->epoch_seen, 3);
	CHECK_EQ(atomic_load(&fo.silences), 1);
	CHECK(rpc_conn_alive(c));
	rpc_conn_close(c);
	CHECK_EQ(fake_seen(&b, 0).conns, 1);
	fake_stop(&a);
	fake_stop(&b);
}

/* 2b: two calls in flight answered by the deposed MDS in one write (one read of the client's):
 * on_silence once, and both go to B, in the order they were first sent. */
static void test_2b_deposed_together(void)
{
	struct fake a, b;
	struct failover fo = { .to = { &a, &b } };
	struct rpc_conn *c;
	struct rpc_call call, two[2];
	struct rpc_wait w;
	struct fake_seen sa, sb1, sb2;

	fake_start(&a, 1, 3);
	fake_start(&b, 2, 3);
	c = client_open(&fo, 10000, 0);
	call_once(c, &call, LW_OP_MDS_STATFS);
	check_reply(&call, &a, 3, 1, false);
	pthread_mutex_lock(&a.lock);
	a.epoch = 2;
	a.batch = 2;
	pthread_mutex_unlock(&a.lock);
	rpc_wait_init(&w);
	for (int i = 0; i < 2; i++) {
		rpc_call_init(&two[i], LW_OP_MDS_STATFS, NULL, 0);
		rpc_submit(c, &two[i], &w);
	}
	REQUIRE(wait_ms(&w, 10000));
	rpc_wait_destroy(&w);
	CHECK(two[0].req_id < two[1].req_id);
	check_reply(&two[0], &b, 3, 1, true);
	check_reply(&two[1], &b, 3, 2, true);
	CHECK_EQ(atomic_load(&fo.silences), 1);
	sa = fake_seen(&a, 0);
	sb1 = fake_seen(&b, 1);
	sb2 = fake_seen(&b, 2);
	CHECK_EQ(sa.reqs, 3);
	CHECK_EQ(sb1.conns, 1);
	CHECK_EQ(sb1.reqs, 2);
	CHECK_EQ(sb1.resent, 2);
	CHECK_EQ(sb1.id, two[0].req_id);
	CHECK_EQ(sb2.id, two[1].req_id);
	rpc_conn_close(c);
	fake_stop(&a);
	fake_stop(&b);
}

/* 2c: the deposed MDS's failure is no more an answer than its success: a reply of epoch 2 with
 * -ENOENT is dropped the same way, and the call completes with B's 0. */
static void test_2c_deposed_error(void)
{
	struct fake a, b;
	struct failover fo = { .to = { &a, &b } };
	struct rpc_conn *c;
	struct rpc_call call;

	fake_start(&a, 1, 3);
	fake_start(&b, 2, 3);
	c = client_open(&fo, 10000, 0);
	call_once(c, &call, LW_OP_MDS_GETATTR);
	check_reply(&call, &a, 3, 1, false);
	fake_set(&a, 2, -ENOENT);
	call_once(c, &call, LW_OP_MDS_GETATTR);
	check_reply(&call, &b, 3, 1, true);
	CHECK_EQ(atomic_load(&fo.silences), 1);
	CHECK_EQ(fake_seen(&a, 0).reqs, 2);
	CHECK_EQ(fake_seen(&b, 0).resent, 1);
	rpc_conn_close(c);
	fake_stop(&a);
	fake_stop(&b);
}

/* 3: epoch 0 (an MDS without replication) after epoch 3 is accepted, and lowers nothing: a reply
 * of epoch 2 after it is still a deposed MDS's. */
static void test_3_epoch_zero(void)
{
	struct fake a, b;
	struct failover fo = { .to = { &a, &b } };
	struct rpc_conn *c;
	struct rpc_call call;

	fake_start(&a, 1, 3);
	fake_start(&b, 2, 3);
	c = client_open(&fo, 10000, 0);
	call_once(c, &call, LW_OP_MDS_STATFS);
	check_reply(&call, &a, 3, 1, false);
	fake_set(&a, 0, 0);
	call_once(c, &call, LW_OP_MDS_STATFS);
	check_reply(&call, &a, 0, 2, false);
	fake_set(&a, 0, -ENOENT);
	call_once(c, &call, LW_OP_MDS_GETATTR);
	CHECK_RC(call.status, -ENOENT);
	CHECK_EQ(call.rbody_len, 0);
	rpc_call_release(&call);
	CHECK_EQ(c->epoch_seen, 3);
	CHECK_EQ(atomic_load(&fo.silences), 0);
	CHECK_EQ(fake_seen(&a, 0).conns, 1);
	fake_set(&a, 2, 0);
	call_once(c, &call, LW_OP_MDS_STATFS);
	check_reply(&call, &b, 3, 1, true);
	CHECK_EQ(atomic_load(&fo.silences), 1);
	rpc_conn_close(c);
	fake_stop(&a);
	fake_stop(&b);
}

/* 4: a PING's reply has no prefix: bytes that look like one with a lower epoch are its body, whole;
 * nor does a higher "epoch" there count as heard. */
static void test_4_ping_not_judged(void)
{
	struct fake a, b;
	struct failover fo = { .to = { &a, &b } };
	struct rpc_conn *c;
	struct rpc_call call;
	struct fake_body body;

	fake_start(&a, 1, 3);
	fake_start(&b, 2, 3);
	c = client_open(&fo, 10000, 0);
	call_once(c, &call, LW_OP_MDS_STATFS);
	check_reply(&call, &a, 3, 1, false);
	for (int i = 0; i < 2; i++) {
		uint32_t epoch = i == 0 ? 1 : 9;

		fake_set(&a, epoch, 0);
		call_once(c, &call, LW_OP_PING);
		CHECK_RC(call.status, 0);
		CHECK_EQ(call.rbody_len, sizeof(body));
		if (call.status == 0 && call.rbody_len == sizeof(body)) {
			memcpy(&body, call.rbody, sizeof(body));
			CHECK_EQ(body.pre.epoch, epoch);
			CHECK_EQ(body.rep.server, a.id);
			CHECK_EQ(body.rep.seq, 2 + i);
			CHECK_EQ(body.rep.resent, 0);
			CHECK_EQ(body.rep.req_id, call.req_id);
		}
		CHECK_EQ(call.last_committed, 0); /* nothing taken off as a prefix */
		rpc_call_release(&call);
		CHECK_EQ(c->epoch_seen, 3);
	}
	CHECK_EQ(atomic_load(&fo.silences), 0);
	/* Epoch 3 is still the highest heard: A's epoch 3 is no deposed MDS's. */
	fake_set(&a, 3, 0);
	call_once(c, &call, LW_OP_MDS_STATFS);
	check_reply(&call, &a, 3, 4, false);
	CHECK_EQ(atomic_load(&fo.silences), 0);
	CHECK_EQ(fake_seen(&a, 0).conns, 1);
	CHECK_EQ(fake_seen(&b, 0).conns, 0);
	rpc_conn_close(c);
	fake_stop(&a);
	fake_stop(&b);
}

/* 5: without recovery a deposed MDS's reply fails the call with -EIO (never completes it with
 * that reply), and the connection with it. */
static void test_5_deposed_no_recovery(void)
{
	struct fake a, b;
	struct failover fo = { .to = { &a, &b } };
	struct rpc_conn *c;
	struct rpc_call call;

	fake_start(&a, 1, 3);
	fake_start(&b, 2, 3);
	c = client_open(&fo, 0, 0);
	call_once(c, &call, LW_OP_MDS_STATFS);
	check_reply(&call, &a, 3, 1, false);
	fake_set(&a, 2, 0);
	call_once(c, &call, LW_OP_MDS_STATFS);
	CHECK_RC(call.status, -EIO);
	CHECK(call.rbody == NULL);
	CHECK_EQ(call.rbody_len, 0);
	rpc_call_release(&call);
	CHECK_EQ(atomic_load(&fo.silences), 1);
	CHECK(!rpc_conn_alive(c));
	call_once(c, &call, LW_OP_MDS_STATFS);
	CHECK_RC(call.status, -EIO);
	rpc_call_release(&call);
	CHECK_EQ(fake_seen(&a, 0).reqs, 2);
	CHECK_EQ(fake_seen(&b, 0).conns, 0);
	rpc_conn_close(c);
	fake_stop(&a);
	fake_stop(&b);
}

/*
 * 6: a deposed MDS's reply with bulk large enough to be received straight into the caller's
 * buffer (conn_recv's direct path: RBUF_SIZE or more left to read), as MDS_REPL_PULL's may be.
 * The fake sends header and body, and once the client has read them (rstate RS_BULK) the whole
 * bulk; SO_RCVLOWAT keeps the I/O thread from waking before all of it is there, so that one
 * recv takes it and the reply ends on that path. It must end as on the other: on_silence at
 * once, the call resent to B, and B's connection kept.
 */
static void test_6_deposed_large_bulk(void)
{
	enum { BULK = RBUF_SIZE + 8192, CAP = 2 * RBUF_SIZE };
	struct fake a, b;
	struct failover fo = { .to = { &a, &b } };
	struct rpc_conn *c;
	struct rpc_call call;
	struct rpc_wait w;
	uint8_t *buf = malloc(CAP);
	struct iovec iov = { buf, CAP };
	uint64_t t0, ms;
	int lowat = BULK, fd;
	bool reading = false;

	REQUIRE(buf);
	fake_start(&a, 1, 3);
	fake_start(&b, 2, 3);
	c = client_open(&fo, 10000, 1000);
	rpc_call_init(&call, LW_OP_MDS_REPL_PULL, NULL, 0);
	call.rbulk = &iov;
	call.rbulk_cnt = 1;
	call_run(c, &call);
	check_reply(&call, &a, 3, 1, false);

	pthread_mutex_lock(&a.lock);
	a.epoch = 2;
	a.bulk_len = BULK;
	a.hold_bulk = true;
	pthread_mutex_unlock(&a.lock);
	rpc_call_init(&call, LW_OP_MDS_REPL_PULL, NULL, 0);
	call.rbulk = &iov;
	call.rbulk_cnt = 1;
	rpc_wait_init(&w);
	rpc_submit(c, &call, &w);
	/* The I/O thread's own state, read from here: only to know when to let the bulk go. */
	for (int i = 0; i < 2000 && !reading; i++) {
		reading = __atomic_load_n(&c->rstate, __ATOMIC_ACQUIRE) == RS_BULK;
		if (!reading)
			usleep(1000);
	}
	REQUIRE(reading);
	fd = __atomic_load_n(&c->fd, __ATOMIC_ACQUIRE);
	REQUIRE(setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat)) == 0);
	pthread_mutex_lock(&a.lock);
	a.bulk_go = true;
	pthread_cond_broadcast(&a.cond);
	pthread_mutex_unlock(&a.lock);
	t0 = clock_mono_ns();
	REQUIRE(wait_ms(&w, 10000));
	rpc_wait_destroy(&w);
	ms = (clock_mono_ns() - t0) / 1000000ull;
	check_reply(&call, &b, 3, 1, true);
	CHECK_EQ(call.rbulk_len, 0); /* B's reply had none */
	if (ms >= 1000)
		CHECK_FAIL_("the call completed %llu ms after the deposed MDS's reply, not at once",
			    (unsigned long long)ms);

	/* B serves on, on the same connection: no second on_silence, no second dial. */
	pthread_mutex_lock(&a.lock);
	a.bulk_len = 0;
	a.hold_bulk = false;
	pthread_mutex_unlock(&a.lock);
	call_once(c, &call, LW_OP_MDS_STATFS);
	check_reply(&call, &b, 3, 2, false);
	CHECK_EQ(atomic_load(&fo.silences), 1);
	CHECK_EQ(fake_seen(&a, 0).conns, 1);
	CHECK_EQ(fake_seen(&b, 0).conns, 1);
	rpc_conn_close(c);
	fake_stop(&a);
	fake_stop(&b);
	free(buf);
}

int main(void)
{
	RUN(test_1_same_epoch);
	RUN(test_2_deposed_resent);
	RUN(test_2b_deposed_together);
	RUN(test_2c_deposed_error);
	RUN(test_3_epoch_zero);
	RUN(test_4_ping_not_judged);
	RUN(test_5_deposed_no_recovery);
	RUN(test_6_deposed_large_bulk);
	return check_report();
}
