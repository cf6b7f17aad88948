/* The etcd client (common/etcd.c) against a real etcd, started here as a child on free ports of
 * 127.0.0.1 with its own data directory, and against a fake server in a thread that answers what
 * etcd never would: garbage, errors, broken JSON. /usr/bin/etcd missing is a failure, not a skip:
 * `scripts/deps.sh test` installs it (etcd-server). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/etcd.h"
#include "common/util.h"

int check_failures;
const char *check_current = "";

#define ETCD_BIN "/usr/bin/etcd"
#define TIMEOUT_MS 2000

static pid_t etcd_pid;
static char etcd_dir[64];
static char etcd_url[64];     /* the real server's client URL */
static int closed_port;       /* bound, never listening: a connection there is refused */
static int closed_fd = -1;

/* ---- the real etcd ---- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

static void etcd_stop(void)
{
	if (etcd_pid > 0) {
		kill(etcd_pid, SIGKILL);
		waitpid(etcd_pid, NULL, 0);
		etcd_pid = 0;
	}
	if (etcd_dir[0]) {
		nftw(etcd_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		etcd_dir[0] = '\0';
	}
}

/* A test killed by meson's timeout (SIGTERM) or ^C leaves neither etcd nor its directory: with
 * calls safe in a signal handler only, rm -rf for nftw. */
static void on_signal(int sig)
{
	static char *const rm_argv[] = { "rm", "-rf", etcd_dir, NULL };
	static char *const no_env[] = { NULL };
	pid_t rm;

	if (etcd_pid > 0) {
		kill(etcd_pid, SIGKILL);
		waitpid(etcd_pid, NULL, 0);
	}
	if (etcd_dir[0]) {
		rm = fork();
		if (rm == 0) {
			execve("/bin/rm", rm_argv, no_env);
			_exit(127);
		}
		if (rm > 0)
			waitpid(rm, NULL, 0);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

/* A free TCP port of 127.0.0.1, and its socket still bound to it (the caller closes it when the
 * port is to be used: another program could take it between, which a test can live with). */
static int free_port(int *fd_out)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	REQUIRE(fd >= 0);
	REQUIRE(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	REQUIRE(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	*fd_out = fd;
	return ntohs(sa.sin_port);
}

static void etcd_start(void)
{
	char log_path[96], data[96], client[64], peer[64], cluster[96];
	int client_fd, peer_fd, client_port, peer_port, status;
	struct etcd *e;
	struct etcd_kv kv;
	uint64_t until;
	bool exited;
	int rc;

	if (access(ETCD_BIN, X_OK) != 0) {
		fprintf(stderr, "FAIL: %s not found: install etcd-server (scripts/deps.sh test)\n", ETCD_BIN);
		exit(1);
	}
	strcpy(etcd_dir, "/tmp/loom-test-etcd-XXXXXX");
	REQUIRE(mkdtemp(etcd_dir) != NULL);
	atexit(etcd_stop);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	client_port = free_port(&client_fd);
	peer_port = free_port(&peer_fd);
	close(client_fd);
	close(peer_fd);
	snprintf(client, sizeof(client), "http://127.0.0.1:%d", client_port);
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", peer_port);
	snprintf(cluster, sizeof(cluster), "loomtest=%s", peer);
	snprintf(data, sizeof(data), "%s/data", etcd_dir);
	snprintf(log_path, sizeof(log_path), "%s/etcd.log", etcd_dir);
	snprintf(etcd_url, sizeof(etcd_url), "%s", client);
	etcd_pid = fork();
	REQUIRE(etcd_pid >= 0);
	if (etcd_pid == 0) {
		int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);   /* no etcd left behind by a test killed hard */
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execl(ETCD_BIN, "etcd", "--name", "loomtest", "--data-dir", data, "--listen-client-urls", client,
		      "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls",
		      peer, "--initial-cluster", cluster, "--initial-cluster-state", "new", (char *)NULL);
		_exit(127);
	}
	REQUIRE_RC(etcd_open(etcd_url, 500, &e), 0);
	until = clock_mono_ns() + 30 * 1000000000ull;
	for (;;) {
		rc = etcd_get(e, "loomtest/ready", &kv, NULL);
		if (rc == 0 || rc == -ENOENT)
			break;
		exited = waitpid(etcd_pid, &status, WNOHANG) == etcd_pid;
		if (exited || clock_mono_ns() > until) {
			char cmd[128];

			if (exited)
				etcd_pid = 0;
			fprintf(stderr, "FAIL: etcd did not answer at %s (%s); its log:\n", etcd_url, check_errname(rc));
			snprintf(cmd, sizeof(cmd), "tail -n 30 %s >&2", log_path);
			if (system(cmd) != 0)
				fprintf(stderr, "(no log)\n");
			exit(1);
		}
		sleep_ms(100);
	}
	etcd_close(e);
	closed_port = free_port(&closed_fd);
}

static struct etcd *etcd_connect(void)
{
	struct etcd *e = NULL;

	REQUIRE_RC(etcd_open(etcd_url, TIMEOUT_MS, &e), 0);
	return e;
}

/* Created only if absent (mod_revision 0), attached to lease. */
static int create(struct etcd *e, const char *key, const char *value, int64_t lease, int64_t *revision)
{
	struct etcd_cmp cmp = { key, 0 };
	struct etcd_op op = { key, value, strlen(value), lease };

	return etcd_txn(e, &cmp, 1, &op, 1, revision);
}

/* ---- against the real etcd ---- */

/* The leader election an MDS will do: a lease, a key created only if absent, its epoch. */
static void test_lease_and_leader_key(void)
{
	struct etcd *e = etcd_connect();
	struct etcd_kv kv;
	int64_t lease, other, rev = 0, rev2 = 0, at = 0;
	int ttl = 0;

	REQUIRE_RC(etcd_lease_grant(e, 30, &lease), 0);
	CHECK(lease != 0);
	REQUIRE_RC(create(e, "loom/leader", "mds-a", lease, &rev), 0);
	CHECK(rev > 0);
	REQUIRE_RC(etcd_lease_grant(e, 30, &other), 0);
	CHECK(other != lease);
	CHECK_RC(create(e, "loom/leader", "mds-b", other, &rev2), -ECANCELED);
	REQUIRE_RC(etcd_get(e, "loom/leader", &kv, &at), 0);
	CHECK(kv.len == 5 && strcmp(kv.value, "mds-a") == 0);
	CHECK_EQ(kv.create_rev, rev);   /* the epoch */
	CHECK_EQ(kv.mod_rev, rev);
	CHECK_EQ(kv.lease, lease);
	CHECK(at >= rev);
	etcd_kv_free(&kv);
	CHECK(kv.value == NULL);
	CHECK_RC(etcd_lease_keepalive(e, lease, &ttl), 0);
	CHECK(ttl > 0 && ttl <= 30);
	/* The revoke deletes the key; the lease is gone for good. */
	CHECK_RC(etcd_lease_revoke(e, lease), 0);
	CHECK_RC(etcd_get(e, "loom/leader", &kv, &at), -ENOENT);
	CHECK(kv.value == NULL && at > rev);
	CHECK_RC(etcd_lease_keepalive(e, lease, &ttl), -ENOENT);
	CHECK_RC(etcd_lease_revoke(e, lease), -ENOENT);
	/* A put on a lease that is gone runs nothing. */
	CHECK_RC(create(e, "loom/leader", "mds-a", lease, NULL), -ENOENT);
	CHECK_RC(etcd_get(e, "loom/leader", &kv, NULL), -ENOENT);
	/* Now the other one gets it, at a later epoch. */
	REQUIRE_RC(create(e, "loom/leader", "mds-b", other, &rev2), 0);
	CHECK(rev2 > rev);
	CHECK_RC(etcd_lease_revoke(e, other), 0);
	etcd_close(e);
}

/* A lease not kept alive expires, and its key with it. */
static void test_lease_expires(void)
{
	struct etcd *e = etcd_connect();
	struct etcd_kv kv;
	int64_t lease;
	uint64_t until;
	int rc, ttl;

	REQUIRE_RC(etcd_lease_grant(e, 2, &lease), 0);
	REQUIRE_RC(create(e, "loom/expiring", "x", lease, NULL), 0);
	until = clock_mono_ns() + 20 * 1000000000ull;
	while ((rc = etcd_get(e, "loom/expiring", &kv, NULL)) == 0 && clock_mono_ns() < until) {
		etcd_kv_free(&kv);
		sleep_ms(200);
	}
	CHECK_RC(rc, -ENOENT);
	CHECK_RC(etcd_lease_keepalive(e, lease, &ttl), -ENOENT);
	etcd_close(e);
}

/* A compare-and-swap on mod_revision succeeds once; a stale one changes nothing. */
static void test_cas(void)
{
	struct etcd *e = etcd_connect();
	struct etcd_op put = { "loom/cas", "one", 3, 0 };
	struct etcd_cmp cmp = { "loom/cas", 0 };
	struct etcd_kv kv;
	int64_t rev1 = 0, rev2 = 0;

	REQUIRE_RC(etcd_txn(e, NULL, 0, &put, 1, &rev1), 0);
	cmp.mod_rev = rev1;
	put.value = "two";
	REQUIRE_RC(etcd_txn(e, &cmp, 1, &put, 1, &rev2), 0);
	CHECK(rev2 > rev1);
	put.value = "three";
	CHECK_RC(etcd_txn(e, &cmp, 1, &put, 1, NULL), -ECANCELED);   /* rev1 is stale */
	REQUIRE_RC(etcd_get(e, "loom/cas", &kv, NULL), 0);
	CHECK(strcmp(kv.value, "two") == 0 && kv.mod_rev == rev2 && kv.create_rev == rev1 && kv.lease == 0);
	etcd_kv_free(&kv);
	etcd_close(e);
}

/* Several ops in one transaction land at one revision; a delete in one too. */
static void test_multi_op_txn(void)
{
	struct etcd *e = etcd_connect();
	struct etcd_op both[] = { { "loom/a", "A", 1, 0 }, { "loom/b", "B", 1, 0 } };
	struct etcd_op swap[] = { { "loom/c", "C", 1, 0 }, { "loom/a", NULL, 0, 0 } };
	struct etcd_cmp absent[] = { { "loom/a", 0 }, { "loom/b", 0 } };
	struct etcd_kv a, b, c;
	int64_t rev = 0, rev2 = 0;

	REQUIRE_RC(etcd_txn(e, absent, 2, both, 2, &rev), 0);
	REQUIRE_RC(etcd_get(e, "loom/a", &a, NULL), 0);
	REQUIRE_RC(etcd_get(e, "loom/b", &b, NULL), 0);
	CHECK(a.mod_rev == rev && b.mod_rev == rev && strcmp(a.value, "A") == 0 && strcmp(b.value, "B") == 0);
	etcd_kv_free(&a);
	etcd_kv_free(&b);
	/* One compare of two failing is enough: nothing runs. */
	absent[0].mod_rev = rev;
	CHECK_RC(etcd_txn(e, absent, 2, swap, 2, NULL), -ECANCELED);
	CHECK_RC(etcd_get(e, "loom/c", &c, NULL), -ENOENT);
	absent[1].mod_rev = rev;
	REQUIRE_RC(etcd_txn(e, absent, 2, swap, 2, &rev2), 0);
	CHECK(rev2 > rev);
	CHECK_RC(etcd_get(e, "loom/a", &a, NULL), -ENOENT);
	REQUIRE_RC(etcd_get(e, "loom/c", &c, NULL), 0);
	CHECK_EQ(c.mod_rev, rev2);
	etcd_kv_free(&c);
	etcd_close(e);
}

/* Values are bytes: NULs, high bytes, every length modulo 3 (base64's padding), and empty. */
static void test_binary_values(void)
{
	static const char bytes[] = { 'a', 0, 'b', (char)0xff, (char)0x80, '\n', '"', '\\', 0 };
	struct etcd *e = etcd_connect();
	struct etcd_kv kv;

	for (size_t n = 0; n <= sizeof(bytes); n++) {
		struct etcd_op put = { "loom/bin", bytes, n, 0 };

		REQUIRE_RC(etcd_txn(e, NULL, 0, &put, 1, NULL), 0);
		REQUIRE_RC(etcd_get(e, "loom/bin", &kv, NULL), 0);
		CHECK_EQ(kv.len, n);
		CHECK(memcmp(kv.value, bytes, n) == 0 && kv.value[n] == '\0');
		etcd_kv_free(&kv);
	}
	etcd_close(e);
}

/* Nothing listening: refused at once, or timed out within the bound; the next endpoint of a list
 * answers, a transaction included (it cannot have reached the closed one). */
static void test_unreachable_and_lists(void)
{
	char url[160];
	struct etcd *e;
	struct etcd_kv kv;
	uint64_t t0;
	int rc;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", closed_port);
	REQUIRE_RC(etcd_open(url, 1000, &e), 0);
	t0 = clock_mono_ns();
	rc = etcd_get(e, "loom/x", &kv, NULL);
	CHECK(rc == -EHOSTUNREACH || rc == -ETIMEDOUT);
	CHECK(clock_mono_ns() - t0 < 3 * 1000000000ull);
	CHECK_RC(create(e, "loom/x", "x", 0, NULL), rc);
	etcd_close(e);

	snprintf(url, sizeof(url), "http://127.0.0.1:%d, %s/", closed_port, etcd_url);
	REQUIRE_RC(etcd_open(url, TIMEOUT_MS, &e), 0);
	CHECK_RC(etcd_get(e, "loom/x", &kv, NULL), -ENOENT);
	etcd_close(e);
	REQUIRE_RC(etcd_open(url, TIMEOUT_MS, &e), 0);
	CHECK_RC(create(e, "loom/x", "x", 0, NULL), 0);
	CHECK_RC(etcd_get(e, "loom/x", &kv, NULL), 0);
	etcd_kv_free(&kv);
	etcd_close(e);

	CHECK_RC(etcd_open("", TIMEOUT_MS, &e), -EINVAL);
	CHECK_RC(etcd_open("127.0.0.1:2379", TIMEOUT_MS, &e), -EINVAL);
	CHECK_RC(etcd_open("http://127.0.0.1:2379,", TIMEOUT_MS, &e), -EINVAL);
	CHECK_RC(etcd_open("ftp://127.0.0.1:2379", TIMEOUT_MS, &e), -EINVAL);
	CHECK_RC(etcd_open(etcd_url, 0, &e), -EINVAL);
}

/* ---- a fake server ---- */

/* What the fake answers the next connection: reply as is (reply_len bytes), or nothing until the
 * client gives up (silent). One connection at a time, as the client makes them. */
static const char *_Atomic fake_reply;
static _Atomic size_t fake_reply_len;
static atomic_bool fake_silent;
static atomic_int fake_requests;   /* requests read */
static int fake_fd = -1;
static int fake_port;
static pthread_t fake_thread;

/* Reads one HTTP request (headers, then Content-Length bytes of body): 0, or -1 when the client
 * closed first. */
static int fake_read_request(int fd)
{
	char buf[65536];
	size_t have = 0;
	char *end;
	long body;

	for (;;) {
		ssize_t n = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);

		if (n <= 0)
			return -1;
		have += (size_t)n;
		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end)
			break;
		if (have == sizeof(buf) - 1)
			return -1;
	}
	body = strcasestr(buf, "Content-Length:") ? atol(strcasestr(buf, "Content-Length:") + 15) : 0;
	for (size_t got = have - (size_t)(end + 4 - buf); (long)got < body;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	atomic_fetch_add(&fake_requests, 1);
	return 0;
}

static void *fake_serve(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(fake_fd, NULL, NULL);
		char byte;

		if (fd < 0)
			break;   /* fake_stop shut the socket down */
		while (fake_read_request(fd) == 0) {
			if (atomic_load(&fake_silent)) {
				struct pollfd pfd = { .fd = fd, .events = POLLIN };

				poll(&pfd, 1, 10000);   /* until the client hangs up */
				break;
			}
			if (fake_reply_len)
				send(fd, fake_reply, fake_reply_len, MSG_NOSIGNAL);
			shutdown(fd, SHUT_WR);
			/* Read what the client may still send, so that no reset cuts the reply short. */
			while (recv(fd, &byte, 1, 0) > 0)
				;
			break;
		}
		close(fd);
	}
	return NULL;
}

static void fake_start(void)
{
	fake_port = free_port(&fake_fd);
	REQUIRE(listen(fake_fd, 8) == 0);
	REQUIRE(pthread_create(&fake_thread, NULL, fake_serve, NULL) == 0);
}

static void fake_stop(void)
{
	shutdown(fake_fd, SHUT_RDWR);
	pthread_join(fake_thread, NULL);
	close(fake_fd);
}

enum fake_call { GET, KEEPALIVE, TXN, GRANT, REVOKE };

/* call on a new handle to the fake server, which answers reply. */
static int fake_call(enum fake_call call, const char *reply, size_t len)
{
	struct etcd_op op = { "key", "v", 1, 0 };
	char url[64];
	struct etcd *e;
	struct etcd_kv kv;
	int64_t lease;
	int ttl, rc = -1;

	fake_reply = reply;
	fake_reply_len = len;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", fake_port);
	REQUIRE_RC(etcd_open(url, TIMEOUT_MS, &e), 0);
	switch (call) {
	case GET:
		rc = etcd_get(e, "key", &kv, NULL);
		if (rc == 0)
			etcd_kv_free(&kv);
		break;
	case KEEPALIVE:
		rc = etcd_lease_keepalive(e, 999, &ttl);
		break;
	case TXN:
		rc = etcd_txn(e, NULL, 0, &op, 1, NULL);
		break;
	case GRANT:
		rc = etcd_lease_grant(e, 10, &lease);
		break;
	case REVOKE:
		rc = etcd_lease_revoke(e, 999);
		break;
	}
	etcd_close(e);
	return rc;
}

#define OK200 "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
#define HDR "{\"header\":{\"revision\":\"7\"}"

/* Whatever comes back, the client says what is wrong, and neither crashes nor leaks (ASan). */
static void test_fake_replies(void)
{
	static const struct {
		enum fake_call call;
		const char *reply;
		int want;
	} cases[] = {
		{ GET, "garbage\r\n\r\n", -EPROTO },
		{ GET, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\noops!", -EIO },
		{ TXN, "HTTP/1.1 503 Unavailable\r\nConnection: close\r\n\r\n"
		       "{\"error\":\"no leader\",\"message\":\"x\",\"code\":14}  ", -EIO },
		{ REVOKE, "HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n"
			  "{\"error\":\"etcdserver: requested lease not found\",\"code\":5}", -ENOENT },
		{ GET, "HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\nNot Found", -EIO },
		{ GET, OK200, -EPROTO },
		{ GET, OK200 "{\"header\":{\"revision\":\"", -EPROTO },
		{ GET, OK200 "[1,2]", -EPROTO },
		{ GET, OK200 "\"header\"", -EPROTO },
		{ GET, OK200 HDR "} trailing", -EPROTO },
		{ GET, OK200 "{\"header\":{\"revision\":\"abc\"}}", -EPROTO },
		{ GET, OK200 "{\"header\":{\"revision\":\"\"}}", -EPROTO },
		{ GET, OK200 "{\"header\":{\"revision\":\"99999999999999999999\"}}", -EPROTO },
		{ GET, OK200 "{\"header\":{\"revision\":1.5}}", -EPROTO },
		{ GET, OK200 "{\"header\":[]}", -EPROTO },
		{ GET, OK200 "{}", -EPROTO },
		{ GET, OK200 HDR ",\"kvs\":\"x\"}", -EPROTO },
		{ GET, OK200 HDR ",\"kvs\":[5]}", -EPROTO },
		{ GET, OK200 HDR ",\"kvs\":[]}", -ENOENT },
		{ GET, OK200 HDR "}", -ENOENT },
		{ GET, OK200 HDR ",\"kvs\":[{\"key\":\"a2V5\",\"value\":\"!!!!\",\"create_revision\":\"1\","
				 "\"mod_revision\":\"1\"}]}", -EPROTO },
		{ GET, OK200 HDR ",\"kvs\":[{\"key\":\"a2V5\",\"value\":\"YWJj\\n\",\"create_revision\":\"1\","
				 "\"mod_revision\":\"1\"}]}", -EPROTO },
		{ GET, OK200 HDR ",\"kvs\":[{\"key\":\"a2V5\",\"value\":\"YWJ\",\"create_revision\":\"1\","
				 "\"mod_revision\":\"1\"}]}", -EPROTO },
		{ GET, OK200 HDR ",\"kvs\":[{\"key\":\"b3RoZXI=\",\"create_revision\":\"1\","
				 "\"mod_revision\":\"1\"}]}", -EPROTO },
		{ GET, OK200 HDR ",\"kvs\":[{\"key\":\"a2V5\",\"create_revision\":{\"x\":1},"
				 "\"mod_revision\":\"1\"}]}", -EPROTO },
		{ GET, OK200 HDR ",\"kvs\":[{\"key\":\"a2V5\",\"mod_revision\":\"1\"}]}", -EPROTO },
		{ GET, OK200 HDR ",\"kvs\":[{\"key\":\"a2V5\",\"create_revision\":\"1\",\"mod_revision\":\"1\"},"
				 "{\"key\":\"a2V5\",\"create_revision\":\"1\",\"mod_revision\":\"1\"}]}", -EPROTO },
		/* Integers as JSON numbers, no value (empty): taken. */
		{ GET, OK200 HDR ",\"kvs\":[{\"key\":\"a2V5\",\"create_revision\":3,\"mod_revision\":4}]}", 0 },
		{ GET, OK200 HDR ",\"kvs\":[{\"key\":\"a2V5\",\"value\":null,\"create_revision\":\"3\","
				 "\"mod_revision\":\"4\"}]}", 0 },
		{ KEEPALIVE, OK200 "{\"result\":5}", -EPROTO },
		{ KEEPALIVE, OK200 "{\"result\":" HDR ",\"ID\":\"998\",\"TTL\":\"10\"}}", -EPROTO },
		{ KEEPALIVE, OK200 "{\"result\":" HDR ",\"ID\":\"999\",\"TTL\":\"-3\"}}", -ENOENT },
		{ KEEPALIVE, OK200 "{\"result\":" HDR ",\"ID\":\"999\",\"TTL\":\"10\"}}", 0 },
		{ KEEPALIVE, OK200 "{\"error\":{\"grpc_code\":14,\"message\":\"transport is closing\"}}", -EIO },
		{ GRANT, OK200 HDR ",\"error\":\"etcdserver: too many leases\"}", -EIO },
		{ GRANT, OK200 HDR ",\"TTL\":\"10\"}", -EPROTO },
		{ GRANT, OK200 HDR ",\"ID\":true}", -EPROTO },
		{ TXN, OK200 HDR ",\"succeeded\":\"yes\"}", -EPROTO },
		{ TXN, OK200 HDR ",\"succeeded\":false}", -ECANCELED },
		{ TXN, OK200 HDR ",\"succeeded\":true}", -EPROTO },   /* no response for its op */
		{ TXN, OK200 HDR ",\"succeeded\":true,\"responses\":[{}]}", 0 },
		/* The body cut short; the connection closed with no answer at all. */
		{ GET, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" HDR, -EPROTO },
		{ GET, "", -ECONNRESET },
	};
	static const char nul_inside[] = OK200 HDR "}\0{}";
	char *deep, *big;
	size_t n;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int rc = fake_call(cases[i].call, cases[i].reply, strlen(cases[i].reply));

		if (rc != cases[i].want) {
			char got[64];

			snprintf(got, sizeof(got), "%s", check_errname(rc));
			CHECK_FAIL_("case %zu (%.60s): got %s, want %s", i, cases[i].reply, got,
				    check_errname(cases[i].want));
		}
	}
	CHECK_RC(fake_call(GET, nul_inside, sizeof(nul_inside) - 1), -EPROTO);
	/* Nesting far deeper than json-c's limit. */
	n = 200000;
	deep = malloc(strlen(OK200) + 2 * n + 1);
	REQUIRE(deep != NULL);
	strcpy(deep, OK200);
	memset(deep + strlen(OK200), '[', n);
	memset(deep + strlen(OK200) + n, ']', n);
	deep[strlen(OK200) + 2 * n] = '\0';
	CHECK_RC(fake_call(GET, deep, strlen(deep)), -EPROTO);
	free(deep);
	/* A reply longer than any etcd sends. */
	n = 9u << 20;
	big = malloc(strlen(OK200) + n + 1);
	REQUIRE(big != NULL);
	strcpy(big, OK200);
	memset(big + strlen(OK200), ' ', n);
	CHECK_RC(fake_call(GET, big, strlen(OK200) + n), -EPROTO);
	free(big);
}

/* A server that never answers: -ETIMEDOUT within the bound. A read goes on to the next endpoint
 * of a list; a transaction, which the silent server may have run, does not (nor does one answered
 * 503). */
static void test_fake_timeouts_and_lists(void)
{
	struct etcd_op op = { "loom/fake", "v", 1, 0 };
	struct etcd *e;
	struct etcd_kv kv;
	char url[160];
	uint64_t t0;
	int before;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d,%s", fake_port, etcd_url);
	atomic_store(&fake_silent, true);
	REQUIRE_RC(etcd_open(url, 300, &e), 0);
	before = atomic_load(&fake_requests);
	t0 = clock_mono_ns();
	CHECK_RC(etcd_txn(e, NULL, 0, &op, 1, NULL), -ETIMEDOUT);
	CHECK(clock_mono_ns() - t0 < 3 * 1000000000ull);
	CHECK_EQ(atomic_load(&fake_requests), before + 1);
	CHECK_RC(etcd_get(e, "loom/fake", &kv, NULL), -ENOENT);   /* not run by etcd */
	etcd_close(e);
	atomic_store(&fake_silent, false);

	fake_reply = "HTTP/1.1 503 Unavailable\r\nConnection: close\r\n\r\n{\"error\":\"no leader\",\"code\":14}";
	fake_reply_len = strlen(fake_reply);
	REQUIRE_RC(etcd_open(url, TIMEOUT_MS, &e), 0);
	CHECK_RC(etcd_txn(e, NULL, 0, &op, 1, NULL), -EIO);
	CHECK_RC(etcd_get(e, "loom/fake", &kv, NULL), -ENOENT);   /* the 503, then etcd */
	CHECK_RC(etcd_txn(e, NULL, 0, &op, 1, NULL), 0);          /* etcd answered last */
	CHECK_RC(etcd_get(e, "loom/fake", &kv, NULL), 0);
	etcd_kv_free(&kv);
	etcd_close(e);
}

int main(void)
{
	etcd_start();
	fake_start();
	RUN(test_lease_and_leader_key);
	RUN(test_lease_expires);
	RUN(test_cas);
	RUN(test_multi_op_txn);
	RUN(test_binary_values);
	RUN(test_unreachable_and_lists);
	RUN(test_fake_replies);
	RUN(test_fake_timeouts_and_lists);
	fake_stop();
	if (closed_fd >= 0)
		close(closed_fd);
	return check_report();
}
