/* The RPC layer end to end in one process: an echo server on the real event loop, clients with
 * many requests in flight, bulk both ways, replies out of order, garbage from a raw socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "common/util.h"
#include "net/bulk.h"
#include "net/reqq.h"
#include "proto/codec.h"
#include "net/rpc.h"
#include "net/rpc_impl.h"
#include "net/server.h"

int check_failures;
const char *check_current = "";

#define NWORKERS 4

static struct srv *server;
static struct reqq queue;
static pthread_t loop_thread, workers[NWORKERS];
static int disconnects;

/* PING echoes: reply body = request body reversed, reply bulk = request bulk. Other opcodes get
 * -EOPNOTSUPP. Workers take requests in any order, so replies come back out of order. */
static void *worker(void *arg)
{
	struct srv_req *req;

	(void)arg;
	while ((req = srv_req_of(reqq_pop(&queue)))) {
		uint8_t rev[512];
		uint32_t n = req->hdr.body_len;
		void *bulk;

		if (req->hdr.opcode != LW_OP_PING || n > sizeof(rev)) {
			srv_reply(req, -EOPNOTSUPP, NULL, 0, NULL, 0, NULL);
			continue;
		}
		for (uint32_t i = 0; i < n; i++)
			rev[i] = req->body[n - 1 - i];
		n = req->hdr.body_len;
		bulk = srv_req_take_bulk(req);
		srv_reply(req, 0, rev, n, bulk, req->hdr.bulk_len, bulk_free);
	}
	return NULL;
}

static void deliver(struct srv_req *req, void *arg)
{
	(void)arg;
	reqq_push(&queue, &req->qitem);
}

static void on_disconnect(uint64_t id, void *arg)
{
	(void)id;
	(void)arg;
	__atomic_add_fetch(&disconnects, 1, __ATOMIC_SEQ_CST);
}

static void *loop_main(void *arg)
{
	srv_run(arg);
	return NULL;
}

static void start_server(void)
{
	struct srv_opts o = { .name = "test", .listen_host = "127.0.0.1", .deliver = deliver,
			      .disconnect = on_disconnect, .max_inflight = 16 };

	reqq_init(&queue);
	REQUIRE_RC(srv_create(&o, &server), 0);
	for (int i = 0; i < NWORKERS; i++)
		pthread_create(&workers[i], NULL, worker, NULL);
	pthread_create(&loop_thread, NULL, loop_main, server);
}

static void stop_server(void)
{
	srv_stop(server);
	pthread_join(loop_thread, NULL);
	reqq_close(&queue);
	for (int i = 0; i < NWORKERS; i++)
		pthread_join(workers[i], NULL);
	srv_destroy(server);
	reqq_destroy(&queue);
}

struct echo {
	struct rpc_call call;
	uint8_t body[200];
	uint8_t *bulk, *rbulk;
	struct iovec out[2], in[3];
	uint32_t body_len, bulk_len;
};

static void echo_prepare(struct echo *e, unsigned seed)
{
	e->body_len = 1 + seed % 200;
	e->bulk_len = (seed % 3 == 0) ? 0 : (uint32_t)(seed * 2654435761u % (300u << 10));
	for (uint32_t i = 0; i < e->body_len; i++)
		e->body[i] = (uint8_t)(seed + i * 7);
	e->bulk = malloc(e->bulk_len + 1);
	e->rbulk = malloc(e->bulk_len + 1);
	for (uint32_t i = 0; i < e->bulk_len; i++)
		e->bulk[i] = (uint8_t)(seed ^ (i * 13));
	rpc_call_init(&e->call, LW_OP_PING, e->body, e->body_len);
	/* Bulk out in two iovecs and in three, to exercise the scatter-gather paths. */
	e->out[0] = (struct iovec){ e->bulk, e->bulk_len / 2 };
	e->out[1] = (struct iovec){ e->bulk + e->bulk_len / 2, e->bulk_len - e->bulk_len / 2 };
	e->in[0] = (struct iovec){ e->rbulk, e->bulk_len / 3 };
	e->in[1] = (struct iovec){ e->rbulk + e->bulk_len / 3, e->bulk_len / 3 };
	e->in[2] = (struct iovec){ e->rbulk + 2 * (e->bulk_len / 3), e->bulk_len - 2 * (e->bulk_len / 3) };
	e->call.bulk = e->out;
	e->call.bulk_cnt = 2;
	e->call.bulk_len = e->bulk_len;
	e->call.rbulk = e->in;
	e->call.rbulk_cnt = 3;
}

static void echo_check(struct echo *e)
{
	CHECK_RC(e->call.status, 0);
	CHECK_EQ(e->call.rbody_len, e->body_len);
	CHECK_EQ(e->call.rbulk_len, e->bulk_len);
	if (e->call.status == 0 && e->call.rbody_len == e->body_len) {
		for (uint32_t i = 0; i < e->body_len; i++)
			if (((uint8_t *)e->call.rbody)[i] != e->body[e->body_len - 1 - i]) {
				CHECK_FAIL_("reply body differs at %u", i);
				break;
			}
		CHECK(memcmp(e->rbulk, e->bulk, e->bulk_len) == 0);
	}
	rpc_call_release(&e->call);
	free(e->bulk);
	free(e->rbulk);
}

/* n echoes (seeds first, first + 1, ...) all in flight on c at once, then each checked. */
static void echo_round(struct rpc_conn *c, struct echo *e, unsigned n, unsigned first)
{
	struct rpc_wait w;

	rpc_wait_init(&w);
	for (unsigned i = 0; i < n; i++) {
		echo_prepare(&e[i], first + i);
		rpc_submit(c, &e[i].call, &w);
	}
	rpc_wait_all(&w);
	rpc_wait_destroy(&w);
	for (unsigned i = 0; i < n; i++)
		echo_check(&e[i]);
}

static void test_many_in_flight(void)
{
	enum { N = 600 };
	struct echo *e = calloc(N, sizeof(*e));
	struct rpc_conn *c;

	REQUIRE(e);
	REQUIRE_RC(rpc_conn_open("127.0.0.1", srv_port(server), NULL, &c), 0);
	echo_round(c, e, N, 1);
	CHECK(rpc_conn_alive(c));
	rpc_conn_close(c);
	free(e);
}

struct client_arg {
	unsigned seed;
};

static void *client_thread(void *arg)
{
	struct client_arg *a = arg;
	struct rpc_conn *c;

	if (rpc_conn_open("127.0.0.1", srv_port(server), NULL, &c) != 0) {
		CHECK_FAIL_("client %u cannot connect", a->seed);
		return NULL;
	}
	for (unsigned i = 0; i < 50; i++) {
		struct echo e;
		echo_prepare(&e, a->seed * 1000 + i);
		rpc_call_sync(c, &e.call);
		echo_check(&e);
	}
	rpc_conn_close(c);
	return NULL;
}

static void test_many_clients(void)
{
	enum { T = 16 };
	pthread_t th[T];
	struct client_arg args[T];

	for (unsigned i = 0; i < T; i++) {
		args[i].seed = i + 1;
		pthread_create(&th[i], NULL, client_thread, &args[i]);
	}
	for (unsigned i = 0; i < T; i++)
		pthread_join(th[i], NULL);
}

static void test_error_reply(void)
{
	struct rpc_conn *c;
	struct rpc_call call;
	uint8_t body[8] = { 0 };

	REQUIRE_RC(rpc_conn_open("127.0.0.1", srv_port(server), NULL, &c), 0);
	rpc_call_init(&call, LW_OP_MDS_GETATTR, body, sizeof(body));
	CHECK_RC(rpc_call_sync(c, &call), -EOPNOTSUPP);
	rpc_call_release(&call);
	/* A reply bulk bigger than the buffer offered is a protocol error, not an overflow. */
	{
		struct echo e;
		echo_prepare(&e, 2); /* seed 2: bulk present */
		REQUIRE(e.bulk_len > 10);
		e.in[2].iov_len -= 10;
		rpc_call_sync(c, &e.call);
		CHECK_RC(e.call.status, -EIO);
		rpc_call_release(&e.call);
		free(e.bulk);
		free(e.rbulk);
	}
	/* The connection is gone now; later calls fail at once. */
	CHECK(!rpc_conn_alive(c));
	rpc_call_init(&call, LW_OP_PING, body, sizeof(body));
	CHECK_RC(rpc_call_sync(c, &call), -EIO);
	rpc_conn_close(c);
}

static int raw_connect_to(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int raw_connect(void)
{
	return raw_connect_to(srv_port(server));
}

/* Garbage, a header with a bad crc, a header announcing a huge body: each closes only that
 * connection; a well-behaved client keeps working throughout. */
static void test_garbage(void)
{
	struct rpc_conn *good;
	int before = __atomic_load_n(&disconnects, __ATOMIC_SEQ_CST);
	char buf[64];

	REQUIRE_RC(rpc_conn_open("127.0.0.1", srv_port(server), NULL, &good), 0);
	for (int kind = 0; kind < 4; kind++) {
		int fd = raw_connect();
		struct lw_hdr h;
		ssize_t n;

		REQUIRE(fd >= 0);
		lw_hdr_fill(&h, LW_OP_PING, 0, 0, 1, NULL, 0, 0, 0);
		switch (kind) {
		case 0: memset(&h, 0xAB, sizeof(h)); break;
		case 1: h.hdr_crc ^= 1; break;
		case 2: h.body_len = LW_MAX_BODY + 1; break;
		case 3: h.flags = LW_F_REPLY; lw_hdr_fill(&h, LW_OP_PING, LW_F_REPLY, 0, 1, NULL, 0, 0, 0); break;
		}
		if (write(fd, &h, sizeof(h)) != (ssize_t)sizeof(h))
			CHECK_FAIL_("short write");
		n = read(fd, buf, sizeof(buf)); /* the server closes: EOF, no reply */
		CHECK_EQ(n, 0);
		close(fd);

		struct echo e;
		echo_prepare(&e, 100 + (unsigned)kind);
		rpc_call_sync(good, &e.call);
		echo_check(&e);
	}
	/* A half-open connection that sent half a header does not disturb anyone. */
	{
		int fd = raw_connect();
		struct lw_hdr h;
		struct echo e;

		lw_hdr_fill(&h, LW_OP_PING, 0, 0, 1, NULL, 0, 0, 0);
		CHECK_EQ(write(fd, &h, 20), 20);
		echo_prepare(&e, 77);
		rpc_call_sync(good, &e.call);
		echo_check(&e);
		close(fd);
	}
	rpc_conn_close(good);
	for (int i = 0; i < 100 && __atomic_load_n(&disconnects, __ATOMIC_SEQ_CST) < before + 6; i++)
		usleep(10000);
	CHECK(__atomic_load_n(&disconnects, __ATOMIC_SEQ_CST) >= before + 6);
}

/* 1 when the peer closed fd (EOF or reset) within ms, 0 when it is still open then; what it
 * sends before closing is read and dropped. */
static int wait_closed(int fd, int ms)
{
	uint64_t end = clock_mono_ns() + (uint64_t)ms * 1000000u;
	char buf[256];

	for (;;) {
		uint64_t now = clock_mono_ns();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, now >= end ? 0 : (int)((end - now) / 1000000u) + 1) == 0)
			return 0;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 1;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return 1;
		if (clock_mono_ns() >= end)
			return 0;
	}
}

/*
 * A server with a key: connections that do not authenticate are closed after the handshake
 * limit (whether they sent nothing, half a header or a challenge and no proof), no more than
 * max_unauthenticated wait at once (the oldest goes first), and an authenticated client is
 * served throughout and stays connected past the limit.
 */
static void test_preauth(void)
{
	enum { LIMIT_MS = 2000, MAX_WAITING = 4, N = 10 };
	static const uint8_t key[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	struct srv_opts o = { .name = "keyed", .listen_host = "127.0.0.1", .deliver = deliver,
			      .key = key, .keylen = sizeof(key), .handshake_timeout_ms = LIMIT_MS,
			      .max_unauthenticated = MAX_WAITING };
	struct rpc_conn_opts co = { .key = key, .keylen = sizeof(key) };
	struct srv *keyed;
	pthread_t loop;
	struct rpc_conn *good;
	int idle[N], half, chal;
	struct lw_hdr h;
	struct echo e;
	uint16_t port;

	REQUIRE_RC(srv_create(&o, &keyed), 0);
	port = srv_port(keyed);
	pthread_create(&loop, NULL, loop_main, keyed);
	REQUIRE_RC(rpc_conn_open("127.0.0.1", port, &co, &good), 0);

	/* Ten strangers that say nothing, with room for four: the six oldest are closed at once,
	 * long before the limit, and the four newest are still there. */
	for (int i = 0; i < N; i++)
		REQUIRE((idle[i] = raw_connect_to(port)) >= 0);
	for (int i = 0; i < N - MAX_WAITING; i++)
		CHECK(wait_closed(idle[i], 10000));
	for (int i = N - MAX_WAITING; i < N; i++)
		CHECK(!wait_closed(idle[i], 0));

	/* Half a header; a challenge taken and no proof. */
	REQUIRE((half = raw_connect_to(port)) >= 0);
	lw_hdr_fill(&h, LW_OP_PING, 0, 0, 1, NULL, 0, 0, 0);
	CHECK_EQ(write(half, &h, 20), 20);
	REQUIRE((chal = raw_connect_to(port)) >= 0);
	lw_hdr_fill(&h, LW_OP_AUTH_CHALLENGE, 0, 0, 1, NULL, 0, 0, 0);
	CHECK_EQ(write(chal, &h, sizeof(h)), (ssize_t)sizeof(h));

	/* The client is served meanwhile, and after every stranger is gone. */
	echo_prepare(&e, 5);
	rpc_call_sync(good, &e.call);
	echo_check(&e);
	for (int i = N - MAX_WAITING; i < N; i++)
		CHECK(wait_closed(idle[i], 30000));
	CHECK(wait_closed(half, 30000));
	CHECK(wait_closed(chal, 30000)); /* after the challenge's reply, read and dropped */
	echo_prepare(&e, 6);
	rpc_call_sync(good, &e.call);
	echo_check(&e);
	CHECK(rpc_conn_alive(good));

	for (int i = 0; i < N; i++)
		close(idle[i]);
	close(half);
	close(chal);
	rpc_conn_close(good);
	srv_stop(keyed);
	pthread_join(loop, NULL);
	srv_destroy(keyed);
}

/*
 * Sealed frames end to end: servers with a key, one requiring encryption, and clients that
 * encrypt or not, with many calls in flight carrying bulk both ways (so that replies come back
 * out of order, sealed in the order they are queued). A client that does not ask for encryption
 * gets it from a server that requires it.
 */
static void test_sealed(void)
{
	enum { N = 200 };
	static const uint8_t key[32] = { 9, 8, 7 };
	struct echo *e = calloc(N, sizeof(*e));

	REQUIRE(e);
	for (int server_encrypts = 0; server_encrypts < 2; server_encrypts++) {
		struct srv_opts o = { .name = "sealed", .listen_host = "127.0.0.1", .deliver = deliver,
				      .key = key, .keylen = sizeof(key), .encrypt = server_encrypts };
		struct srv *keyed;
		pthread_t loop;

		REQUIRE_RC(srv_create(&o, &keyed), 0);
		pthread_create(&loop, NULL, loop_main, keyed);
		for (int client_encrypts = 0; client_encrypts < 2; client_encrypts++) {
			struct rpc_conn_opts co = { .key = key, .keylen = sizeof(key),
						    .encrypt = client_encrypts };
			struct rpc_conn *c;

			REQUIRE_RC(rpc_conn_open("127.0.0.1", srv_port(keyed), &co, &c), 0);
			CHECK(seal_on(&c->tx) && seal_on(&c->rx));
			CHECK_EQ(c->tx.encrypt, server_encrypts || client_encrypts);
			echo_round(c, e, N, 7);
			/* The caller's buffers are never written: a resend sends the plain bytes. */
			CHECK(rpc_conn_alive(c));
			rpc_conn_close(c);
		}
		srv_stop(keyed);
		pthread_join(loop, NULL);
		srv_destroy(keyed);
	}
	free(e);
}

static void test_handshake_timeout_parse(void)
{
	uint32_t ms = 7;

	CHECK_RC(srv_seconds_parse("5", &ms), 0);
	CHECK_EQ(ms, 5000);
	CHECK_RC(srv_seconds_parse("3600", &ms), 0);
	CHECK_EQ(ms, 3600000);
	CHECK_RC(srv_seconds_parse("0", &ms), -EINVAL);
	CHECK_RC(srv_seconds_parse("3601", &ms), -EINVAL);
	CHECK_RC(srv_seconds_parse("", &ms), -EINVAL);
	CHECK_RC(srv_seconds_parse("2s", &ms), -EINVAL);
	CHECK_RC(srv_seconds_parse("-1", &ms), -EINVAL);
	CHECK_EQ(ms, 3600000); /* untouched by a refusal */
}

/* A program's own work items keep their place in line among the requests, and each comes out as
 * what it went in as. */
static void test_queue_mixed_items(void)
{
	struct reqq q;
	struct srv_req reqs[2];
	struct reqq_item work[2] = { { .kind = 7 }, { .kind = 9 } };
	struct reqq_item *list, *it;
	uint32_t n = 0;

	memset(reqs, 0, sizeof(reqs));
	reqq_init(&q);
	reqq_push(&q, &reqs[0].qitem);
	reqq_push(&q, &work[0]);
	reqq_push(&q, &reqs[1].qitem);
	reqq_push(&q, &work[1]);
	list = reqq_pop_batch(&q, 3, 0, &n);
	CHECK_EQ(n, 3);
	REQUIRE(list != NULL);
	CHECK_EQ(list->kind, REQQ_SRV_REQ);
	CHECK(srv_req_of(list) == &reqs[0]);
	it = list->next;
	REQUIRE(it != NULL);
	CHECK(it == &work[0]);
	REQUIRE(it->next != NULL);
	CHECK(srv_req_of(it->next) == &reqs[1]);
	CHECK(it->next->next == NULL);
	reqq_close(&q);
	CHECK(reqq_pop(&q) == &work[1]); /* closed: what is left still drains */
	CHECK(reqq_pop(&q) == NULL);
	CHECK(srv_req_of(NULL) == NULL);
	reqq_destroy(&q);
}

static void test_refused(void)
{
	struct rpc_conn *c = NULL;
	/* Port 1 on loopback: nothing listens there. */
	CHECK_RC(rpc_conn_open("127.0.0.1", 1, NULL, &c), -ECONNREFUSED);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	start_server();
	RUN(test_many_in_flight);
	RUN(test_many_clients);
	RUN(test_error_reply);
	RUN(test_garbage);
	RUN(test_preauth);
	RUN(test_sealed);
	RUN(test_handshake_timeout_parse);
	RUN(test_queue_mixed_items);
	RUN(test_refused);
	stop_server();
	return check_report();
}
