/* The daemons' HTTP port (net/http.c over libmicrohttpd) on 127.0.0.1, port 0: libcurl as the
 * client for what a scraper does, raw sockets for what a stranger does (garbage, idle and half-sent
 * requests, too many connections). Every test starts a server of its own, so that connections one
 * leaves behind do not count against the limits of the next. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "common/util.h"
#include "net/http.h"

int check_failures;
const char *check_current = "";

#define PROM_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define METRICS "# TYPE loom_up gauge\nloom_up 1\n"
#define TIMEOUT_MS 5000

static struct http_srv *srv;
static uint16_t port;
static atomic_int calls;          /* handler calls */
static atomic_int slow_entered, slow_done;

/* ---- the server ---- */

static int answer(struct http_answer *ans, unsigned status, const char *body, const char *type)
{
	ans->status = status;
	ans->body = strdup(body);
	if (!ans->body)
		return -ENOMEM;
	ans->len = strlen(body);
	ans->content_type = type;
	return 0;
}

static int handler(const char *path, void *conn, struct http_answer *ans, void *arg)
{
	const char *v;

	(void)arg;
	atomic_fetch_add(&calls, 1);
	if (!strcmp(path, "/metrics"))
		return answer(ans, 200, METRICS, PROM_TYPE);
	if (!strcmp(path, "/query")) {
		v = http_query(conn, "name");
		return answer(ans, 200, v ? v : "(none)", NULL);
	}
	if (!strcmp(path, "/fail")) {
		/* A body made before failing: the module frees it (ASan would tell otherwise). */
		answer(ans, 200, "half made", NULL);
		return -EIO;
	}
	if (!strcmp(path, "/badstatus"))
		return answer(ans, 42, "no such status", NULL);
	if (!strcmp(path, "/empty")) {
		ans->status = 200;
		return 0;
	}
	if (!strcmp(path, "/slow")) {
		atomic_store(&slow_entered, 1);
		sleep_ms(200);
		atomic_store(&slow_done, 1);
		return answer(ans, 200, "slow\n", NULL);
	}
	return answer(ans, 404, "not found\n", NULL);
}

static void start(void)
{
	REQUIRE_RC(http_start("test", "127.0.0.1", 0, handler, NULL, &srv), 0);
	port = http_port(srv);
	REQUIRE(port != 0);
}

static void stop(void)
{
	http_stop(srv);
	srv = NULL;
}

/* ---- libcurl, the well-behaved client ---- */

struct reply {
	long status;
	char body[8192];
	size_t len;
	char type[128];
	char allow[64];
	long clen;                /* Content-Length, -1 when none */
};

static size_t on_body(char *p, size_t size, size_t n, void *u)
{
	struct reply *r = u;
	size_t take = MIN(size * n, sizeof(r->body) - 1 - r->len);

	memcpy(r->body + r->len, p, take);
	r->len += take;
	r->body[r->len] = '\0';
	return size * n;
}

/* "Name: value\r\n" into dst when the header is name. */
static void header_value(const char *line, size_t n, const char *name, char *dst, size_t cap)
{
	size_t nl = strlen(name), vl;

	if (n <= nl || strncasecmp(line, name, nl) || line[nl] != ':')
		return;
	line += nl + 1, n -= nl + 1;
	while (n && *line == ' ')
		line++, n--;
	while (n && (line[n - 1] == '\r' || line[n - 1] == '\n'))
		n--;
	vl = MIN(n, cap - 1);
	memcpy(dst, line, vl);
	dst[vl] = '\0';
}

static size_t on_header(char *p, size_t size, size_t n, void *u)
{
	struct reply *r = u;
	char len[32] = "";

	header_value(p, size * n, "Allow", r->allow, sizeof(r->allow));
	header_value(p, size * n, "Content-Length", len, sizeof(len));
	if (len[0])
		r->clen = atol(len);
	return size * n;
}

/* method "GET", "HEAD" or any other; body (may be NULL) sent as the request's. On handle e, kept
 * by the caller for keep-alive, or on one of its own when e is NULL. Returns the CURLcode. */
static int request_on(CURL *e, const char *method, const char *path, const char *body, struct reply *r)
{
	CURL *own = e ? NULL : curl_easy_init();
	char url[256];
	char *type = NULL;
	int rc;

	if (!e)
		e = own;
	REQUIRE(e);
	memset(r, 0, sizeof(*r));
	r->clen = -1;
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
	curl_easy_reset(e);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "GET") || body)
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	rc = (int)curl_easy_perform(e);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
	if (curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &type) == CURLE_OK && type)
		snprintf(r->type, sizeof(r->type), "%s", type);
	if (own)
		curl_easy_cleanup(own);
	return rc;
}

static int request(const char *method, const char *path, const char *body, struct reply *r)
{
	return request_on(NULL, method, path, body, r);
}

/* GET /metrics answers as it should: the check that a stranger has not hurt the server. */
static void check_metrics_served(void)
{
	struct reply r;

	CHECK_RC(request("GET", "/metrics", NULL, &r), CURLE_OK);
	CHECK_EQ(r.status, 200);
	CHECK(!strcmp(r.body, METRICS));
}

/* ---- raw sockets, the stranger ---- */

/* A connection to the server, from source address src (NULL: any), or -errno. */
static int tcp_connect_from(const char *src, const char *dst)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct sockaddr_in from = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -errno;
	inet_pton(AF_INET, dst, &sa.sin_addr);
	if (src) {
		inet_pton(AF_INET, src, &from.sin_addr);
		if (bind(fd, (struct sockaddr *)&from, sizeof(from)) < 0) {
			rc = -errno;
			close(fd);
			return rc;
		}
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

static int tcp_connect(void)
{
	return tcp_connect_from(NULL, "127.0.0.1");
}

/* Sends what it can: a server refusing garbage may close before taking it all (no SIGPIPE). */
static void send_some(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k <= 0)
			return;
		p = (const char *)p + k, n -= (size_t)k;
	}
}

/* Reads until the server closes (or resets) the connection, within timeout_ms: the bytes read,
 * NUL-terminated, and whether it closed. */
static size_t read_to_close(int fd, char *buf, size_t cap, int timeout_ms, int *closed)
{
	uint64_t end = clock_mono_ns() + (uint64_t)timeout_ms * 1000000;
	size_t n = 0;

	*closed = 0;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = clock_mono_ns();
		ssize_t k;

		if (now >= end || poll(&p, 1, (int)((end - now) / 1000000) + 1) <= 0)
			break;
		k = recv(fd, buf + n, cap - 1 - n, 0);
		if (k <= 0) {
			*closed = 1;
			break;
		}
		n += (size_t)k;
		if (n == cap - 1)
			break;
	}
	buf[n] = '\0';
	return n;
}

/* ---- the tests ---- */

static void test_addr_parse(void)
{
	static const char *const bad[] = { "x:1", "127.0.0.1", "127.0.0.1:70000", "", ":9100",
					   "127.0.0.1:", "127.0.0.1:-1", "127.0.0.1:+1", "127.0.0.1:9100x",
					   "localhost:9100", "::1:9100", "127.0.0.256:1", "1.2.3.4:1:2" };
	char host[32], tiny[8];
	uint16_t p = 1;

	CHECK_RC(http_addr_parse("127.0.0.1:9100", host, sizeof(host), &p), 0);
	CHECK(!strcmp(host, "127.0.0.1"));
	CHECK_EQ(p, 9100);
	CHECK_RC(http_addr_parse("0.0.0.0:0", host, sizeof(host), &p), 0);
	CHECK(!strcmp(host, "0.0.0.0"));
	CHECK_EQ(p, 0);
	CHECK_RC(http_addr_parse("10.1.2.3:65535", host, sizeof(host), &p), 0);
	CHECK_EQ(p, 65535);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (http_addr_parse(bad[i], host, sizeof(host), &p) != -EINVAL)
			CHECK_FAIL_("\"%s\" was accepted", bad[i]);
	}
	CHECK_RC(http_addr_parse(NULL, host, sizeof(host), &p), -EINVAL);
	CHECK_RC(http_addr_parse("10.1.2.3:1", tiny, sizeof(tiny), &p), -EINVAL);
}

static void test_get(void)
{
	struct reply r;
	CURL *e = curl_easy_init();
	long connects = -1;

	start();
	CHECK_RC(request_on(e, "GET", "/metrics", NULL, &r), CURLE_OK);
	CHECK_EQ(r.status, 200);
	CHECK_EQ(r.len, strlen(METRICS));
	CHECK(!strcmp(r.body, METRICS));
	CHECK(!strcmp(r.type, PROM_TYPE));
	CHECK_EQ(r.clen, (long)strlen(METRICS));
	/* The connection stays open for the next scrape. */
	CHECK_RC(request_on(e, "GET", "/metrics", NULL, &r), CURLE_OK);
	CHECK_EQ(r.status, 200);
	curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &connects);
	CHECK_EQ(connects, 0);
	/* No content type: text/plain. An empty body. */
	CHECK_RC(request("GET", "/empty", NULL, &r), CURLE_OK);
	CHECK_EQ(r.status, 200);
	CHECK_EQ(r.len, 0);
	CHECK_EQ(r.clen, 0);
	CHECK(!strcmp(r.type, "text/plain; charset=utf-8"));
	curl_easy_cleanup(e);
	stop();
}

static void test_query_and_404(void)
{
	struct reply r;

	start();
	CHECK_RC(request("GET", "/query?x=1&name=a%20b%26c&y", NULL, &r), CURLE_OK);
	CHECK_EQ(r.status, 200);
	CHECK(!strcmp(r.body, "a b&c"));
	CHECK(!strcmp(r.type, "text/plain; charset=utf-8"));
	CHECK_RC(request("GET", "/query", NULL, &r), CURLE_OK);
	CHECK(!strcmp(r.body, "(none)"));
	CHECK_RC(request("GET", "/query?other=1", NULL, &r), CURLE_OK);
	CHECK(!strcmp(r.body, "(none)"));
	/* The path comes without the query string: "/metrics", not "/metrics?x=1". */
	CHECK_RC(request("GET", "/metrics?x=1", NULL, &r), CURLE_OK);
	CHECK_EQ(r.status, 200);
	CHECK_RC(request("GET", "/nowhere", NULL, &r), CURLE_OK);
	CHECK_EQ(r.status, 404);
	CHECK(!strcmp(r.body, "not found\n"));
	stop();
}

static void test_methods(void)
{
	static const char *const others[] = { "PUT", "DELETE", "OPTIONS", "PATCH", "BREW" };
	struct reply r;
	int before;

	start();
	before = atomic_load(&calls);
	CHECK_RC(request("POST", "/metrics", "a=1", &r), CURLE_OK);
	CHECK_EQ(r.status, 405);
	CHECK(!strcmp(r.allow, "GET, HEAD"));
	for (size_t i = 0; i < ARRAY_SIZE(others); i++) {
		CHECK_RC(request(others[i], "/metrics", NULL, &r), CURLE_OK);
		CHECK_EQ(r.status, 405);
		CHECK(!strcmp(r.allow, "GET, HEAD"));
	}
	/* A GET with a body is refused before the handler sees it. */
	CHECK_RC(request("GET", "/metrics", "a body", &r), CURLE_OK);
	CHECK_EQ(r.status, 400);
	CHECK_EQ(atomic_load(&calls), before);
	check_metrics_served();
	stop();
}

static void test_head(void)
{
	char buf[4096], want[64];
	struct reply r;
	char *end;
	int fd, closed;

	start();
	CHECK_RC(request("HEAD", "/metrics", NULL, &r), CURLE_OK);
	CHECK_EQ(r.status, 200);
	CHECK_EQ(r.len, 0);
	CHECK_EQ(r.clen, (long)strlen(METRICS));
	CHECK(!strcmp(r.type, PROM_TYPE));
	/* On the wire: the headers, then nothing before the close (HTTP/1.0 closes). */
	fd = tcp_connect();
	REQUIRE(fd >= 0);
	send_some(fd, "HEAD /metrics HTTP/1.0\r\n\r\n", 26);
	read_to_close(fd, buf, sizeof(buf), TIMEOUT_MS, &closed);
	close(fd);
	CHECK(closed);
	CHECK(!strncmp(buf, "HTTP/1.", 7) && !strncmp(buf + 8, " 200 ", 5));
	snprintf(want, sizeof(want), "Content-Length: %zu\r\n", strlen(METRICS));
	CHECK(strcasestr(buf, want) != NULL);
	end = strstr(buf, "\r\n\r\n");
	CHECK(end && end[4] == '\0');
	stop();
}

static void test_handler_errors(void)
{
	struct reply r;

	start();
	CHECK_RC(request("GET", "/fail", NULL, &r), CURLE_OK);
	CHECK_EQ(r.status, 500);
	CHECK(strstr(r.body, "half made") == NULL);
	CHECK_RC(request("GET", "/badstatus", NULL, &r), CURLE_OK);
	CHECK_EQ(r.status, 500);
	check_metrics_served();
	stop();
}

/* Garbage of several kinds, each on a connection of its own: the server answers 4xx/5xx or
 * closes, and serves the next GET. */
static void test_garbage(void)
{
	/* Lengths by sizeof: some hold NULs. */
#define BYTES(lit) { lit, sizeof(lit) - 1 }
	static const struct { const char *p; size_t n; } texts[] = {
		BYTES("GET\r\n\r\n"),
		BYTES("GET / HTTP/9.9\r\n\r\n"),
		BYTES("GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"),
		BYTES("GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n"),
		BYTES("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"),
		BYTES("\x01\x02\xff\xfe\x80 \x00 \x7f garbage\r\n\r\n"),
	};
#undef BYTES
	size_t big_len = 2 * HTTP_CONN_MEMORY;
	char *big = malloc(big_len + 64);
	char buf[4096];
	int fd, closed;

	REQUIRE(big);
	start();
	for (size_t i = 0; i <= ARRAY_SIZE(texts); i++) {
		fd = tcp_connect();
		REQUIRE(fd >= 0);
		if (i < ARRAY_SIZE(texts)) {
			send_some(fd, texts[i].p, texts[i].n);
		} else {
			/* A header larger than a connection's memory. */
			int n = snprintf(big, 64, "GET / HTTP/1.1\r\nHost: x\r\nX: ");

			memset(big + n, 'a', big_len);
			memcpy(big + n + big_len - 4, "\r\n\r\n", 4);
			send_some(fd, big, big_len + (size_t)n);
		}
		read_to_close(fd, buf, sizeof(buf), TIMEOUT_MS, &closed);
		close(fd);
		if (!closed)
			CHECK_FAIL_("garbage %zu: connection still open", i);
		if (buf[0] && (strncmp(buf, "HTTP/1.", 7) || buf[9] < '4'))
			CHECK_FAIL_("garbage %zu answered \"%.40s\"", i, buf);
		check_metrics_served();
	}
	free(big);
	stop();
}

/* What MHD waits on (until HTTP_IDLE_TIMEOUT_S) rather than refuses: a TLS hello without a line
 * end, blank lines (tolerated before a request line, as RFC 9112 allows; a line starting with a
 * NUL counts as one), half a request. All held open at once, the others are served. */
static void test_stalled_clients(void)
{
	static const char *const stalls[] = {
		"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
		"\r\n\r\n\r\n\r\n",
		"\x00\x01\x02\xff garbage\r\n",
		"GET /metrics HTTP/1.1\r\nHost: x\r\n",
		"GET /metr",
	};
	int fds[ARRAY_SIZE(stalls)];

	start();
	for (size_t i = 0; i < ARRAY_SIZE(stalls); i++) {
		fds[i] = tcp_connect();
		REQUIRE(fds[i] >= 0);
		/* strlen would stop at the NUL of the third: its length by hand. */
		send_some(fds[i], stalls[i], i == 2 ? 14 : strlen(stalls[i]));
	}
	check_metrics_served();
	for (size_t i = 0; i < ARRAY_SIZE(stalls); i++)
		close(fds[i]);
	check_metrics_served();
	stop();
}

/*
 * Idle connections and half-sent requests hold their slots (until HTTP_IDLE_TIMEOUT_S) but stop
 * no one else while under the limits: from 127.0.0.1 up to two below its per-address limit, and
 * from other loopback addresses (127.0.0.2...; all of 127/8 is this host's) up to two below the
 * limit of all.
 */
static void test_idle_connections(void)
{
	int fds[HTTP_MAX_CONNS], nfds = 0, per_ip = HTTP_MAX_CONNS_PER_IP - 2;
	char src[16];

	start();
	for (int i = 0; i < per_ip; i++) {
		fds[nfds] = tcp_connect();
		REQUIRE(fds[nfds] >= 0);
		if (i % 2)
			send_some(fds[nfds], "GET /metrics HTTP/1.1\r\nHost: x\r\n", 32);
		nfds++;
	}
	for (int a = 2; nfds < HTTP_MAX_CONNS - 2; a++) {
		snprintf(src, sizeof(src), "127.0.0.%d", a);
		for (int i = 0; i < per_ip && nfds < HTTP_MAX_CONNS - 2; i++) {
			fds[nfds] = tcp_connect_from(src, "127.0.0.1");
			if (fds[nfds] < 0) {
				fprintf(stderr, "     (no connection from %s: %s; 127.0.0.1 only)\n", src,
					strerror(-fds[nfds]));
				goto get;
			}
			nfds++;
		}
	}
get:
	check_metrics_served();
	check_metrics_served();
	while (nfds)
		close(fds[--nfds]);
	stop();
}

/* Four too many from one address: four closed by the server at once, the rest kept. On a server
 * of its own: MHD counts a closed connection out only once it has seen the close. */
static int count_closed(const int *fds, int nfds, int *seen)
{
	int closed = 0;

	for (int i = 0; i < nfds; i++) {
		struct pollfd p = { .fd = fds[i], .events = POLLIN };
		char c;

		if (!seen[i] && poll(&p, 1, 0) == 1 && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0)
			seen[i] = 1;
		closed += seen[i];
	}
	return closed;
}

static void test_per_ip_limit(void)
{
	int fds[HTTP_MAX_CONNS_PER_IP + 4], seen[HTTP_MAX_CONNS_PER_IP + 4] = { 0 }, nfds = 0;
	uint64_t t0;

	start();
	for (int i = 0; i < HTTP_MAX_CONNS_PER_IP + 4; i++) {
		fds[nfds] = tcp_connect();
		REQUIRE(fds[nfds] >= 0);
		nfds++;
	}
	/* MHD accepts on its own thread: wait for the four (a loaded machine can be slow), then a
	 * little more for a fifth that must not come. */
	t0 = clock_mono_ns();
	while (count_closed(fds, nfds, seen) < 4 && clock_mono_ns() - t0 < TIMEOUT_MS * 1000000ull)
		sleep_ms(10);
	sleep_ms(100);
	CHECK_EQ(count_closed(fds, nfds, seen), 4);
	/* Stopped with the others still open. */
	stop();
	while (nfds)
		close(fds[--nfds]);
}

static void *slow_client(void *arg)
{
	struct reply *r = arg;

	request("GET", "/slow", NULL, r);
	return NULL;
}

/* http_stop waits for a handler running: it has finished when http_stop returns. */
static void test_stop_waits_for_handler(void)
{
	static struct reply r;
	pthread_t t;
	uint64_t t0;

	start();
	atomic_store(&slow_entered, 0);
	atomic_store(&slow_done, 0);
	REQUIRE(pthread_create(&t, NULL, slow_client, &r) == 0);
	t0 = clock_mono_ns();
	while (!atomic_load(&slow_entered) && clock_mono_ns() - t0 < TIMEOUT_MS * 1000000ull)
		sleep_ms(1);
	REQUIRE(atomic_load(&slow_entered));
	stop();
	CHECK(atomic_load(&slow_done));
	pthread_join(t, NULL);
}

static void test_start_errors(void)
{
	struct http_srv *other = NULL;
	int fd;

	start();
	/* Bound to 127.0.0.1 only: another loopback address is refused. */
	fd = tcp_connect_from(NULL, "127.0.0.2");
	CHECK_EQ(fd, -ECONNREFUSED);
	if (fd >= 0)
		close(fd);
	CHECK_RC(http_start("test", "127.0.0.1", port, handler, NULL, &other), -EADDRINUSE);
	CHECK_RC(http_start("test", "0.0.0.0", port, handler, NULL, &other), -EADDRINUSE);
	/* TEST-NET-1: no host's address. */
	CHECK_RC(http_start("test", "192.0.2.1", 0, handler, NULL, &other), -EADDRNOTAVAIL);
	CHECK_RC(http_start("test", "localhost", 0, handler, NULL, &other), -EINVAL);
	CHECK_RC(http_start("test", "127.0.0.1", 0, NULL, NULL, &other), -EINVAL);
	CHECK(other == NULL);
	check_metrics_served();
	stop();
	http_stop(NULL);
}

int main(void)
{
	REQUIRE(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK);
	RUN(test_addr_parse);
	RUN(test_get);
	RUN(test_query_and_404);
	RUN(test_methods);
	RUN(test_head);
	RUN(test_handler_errors);
	RUN(test_garbage);
	RUN(test_stalled_clients);
	RUN(test_idle_connections);
	RUN(test_per_ip_limit);
	RUN(test_stop_waits_for_handler);
	RUN(test_start_errors);
	curl_global_cleanup();
	return check_report();
}
