/*
 * Connecting to a server: the TCP connection (with a timeout), the authentication with the file
 * system key (AUTH_CHALLENGE, AUTH_PROVE), and the handshake calls a connection makes on a fresh
 * socket before any other traffic.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "net/rpc_impl.h"
#include "proto/codec.h"

/* ---- connecting, the handshake, authentication ---- */

static int wait_fd(int fd, short ev, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = ev };

	for (;;) {
		int rc = poll(&pfd, 1, timeout_ms);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -errno;
		return rc == 0 ? -ETIMEDOUT : 0;
	}
}

static int hs_send(int fd, const void *buf, size_t len, int timeout_ms)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				int rc = wait_fd(fd, POLLOUT, timeout_ms);
				if (rc)
					return rc;
				continue;
			}
			return -EIO;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int hs_recv(int fd, void *buf, size_t len, int timeout_ms)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = recv(fd, p, len, 0);
		if (n == 0)
			return -EIO;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				int rc = wait_fd(fd, POLLIN, timeout_ms);
				if (rc)
					return rc;
				continue;
			}
			return -EIO;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int rpc_hs_call(struct rpc_hs *hs, uint16_t opcode, const void *body, uint32_t len, void *reply,
		uint32_t cap, uint32_t *rlen)
{
	struct lw_hdr h;
	uint8_t *rbody = NULL;
	uint64_t id;
	int rc;

	pthread_mutex_lock(&hs->conn->lock);
	id = ++hs->conn->next_id;
	pthread_mutex_unlock(&hs->conn->lock);
	lw_hdr_fill(&h, opcode, 0, 0, id, body, len, 0, 0);
	rc = hs_send(hs->fd, &h, sizeof(h), hs->timeout_ms);
	if (rc == 0 && len)
		rc = hs_send(hs->fd, body, len, hs->timeout_ms);
	if (rc == 0)
		rc = hs_recv(hs->fd, &h, sizeof(h), hs->timeout_ms);
	if (rc)
		return rc;
	if (lw_hdr_check(&h) || !(h.flags & LW_F_REPLY) || h.req_id != id || h.opcode != opcode ||
	    h.bulk_len != 0)
		return -EPROTO;
	rbody = malloc(h.body_len ? h.body_len : 1);
	if (!rbody)
		return -ENOMEM;
	rc = hs_recv(hs->fd, rbody, h.body_len, hs->timeout_ms);
	if (rc == 0 && lw_hdr_crc_check(&h, rbody))
		rc = -EPROTO;
	if (rc == 0) {
		memcpy(reply, rbody, MIN(cap, h.body_len));
		if (rlen)
			*rlen = h.body_len;
		rc = lw_errno_from_wire(h.status);
	}
	free(rbody);
	return rc;
}

/* Proves to the server that we hold the key, and has it prove the same to us. */
static int authenticate(struct rpc_hs *hs)
{
	struct rpc_conn *c = hs->conn;
	struct lw_auth_challenge ch;
	struct lw_auth_prove pr;
	struct lw_auth_proof proof;
	uint8_t want[LOOM_MAC_LEN];
	uint32_t len = 0;
	int rc;

	rc = rpc_hs_call(hs, LW_OP_AUTH_CHALLENGE, NULL, 0, &ch, sizeof(ch), &len);
	if (rc == -EOPNOTSUPP) {
		log_err("%s does not authenticate clients, but this client has a key: refusing it", c->peer);
		return -EACCES;
	}
	if (rc)
		return rc;
	if (len != sizeof(ch))
		return -EPROTO;
	rc = random_bytes(pr.nonce, sizeof(pr.nonce));
	if (rc)
		return rc;
	rc = loom_auth_mac(c->key, c->opts.keylen, "loom-auth-client", ch.nonce, pr.nonce,
			   LW_AUTH_NONCE, pr.mac);
	if (rc)
		return rc;
	rc = rpc_hs_call(hs, LW_OP_AUTH_PROVE, &pr, sizeof(pr), &proof, sizeof(proof), &len);
	if (rc == -EACCES) {
		log_err("%s refused this client's file system key", c->peer);
		return rc;
	}
	if (rc)
		return rc;
	rc = loom_auth_mac(c->key, c->opts.keylen, "loom-auth-server", pr.nonce, ch.nonce,
			   LW_AUTH_NONCE, want);
	if (rc || len != sizeof(proof) || !loom_auth_equal(proof.mac, want)) {
		log_err("%s could not prove it holds the file system key: refusing it", c->peer);
		return -EACCES;
	}
	return 0;
}

static int connect_timeout(int fd, const struct sockaddr *sa, socklen_t len, int timeout_ms)
{
	int err = 0, rc;
	socklen_t el = sizeof(err);

	if (connect(fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -errno;
	rc = wait_fd(fd, POLLOUT, timeout_ms);
	if (rc)
		return rc;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		return -errno;
	return -err;
}

bool rpc_fatal_hello_error(int rc)
{
	return rc == -EACCES || rc == -ENODEV || rc == -EPROTONOSUPPORT || rc == -EPROTO;
}

int rpc_dial(struct rpc_conn *c, int *fd_out)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	char portstr[8];
	int one = 1, fd, rc;
	int timeout = c->opts.connect_timeout_ms ? c->opts.connect_timeout_ms : 5000;
	struct rpc_hs hs = { .conn = c, .timeout_ms = timeout };

	if (c->opts.resolve)
		c->opts.resolve(c->opts.arg, c->host, sizeof(c->host), &c->port);
	snprintf(portstr, sizeof(portstr), "%u", c->port);
	rc = getaddrinfo(c->host, portstr, &hints, &ai);
	if (rc != 0)
		return rc == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	rc = connect_timeout(fd, ai->ai_addr, ai->ai_addrlen, timeout);
	hs.fd = fd;
	if (rc == 0 && c->opts.keylen)
		rc = authenticate(&hs);
	if (rc == 0 && c->opts.hello)
		rc = c->opts.hello(&hs, c->opts.arg);
	if (rc) {
		close(fd);
		goto out;
	}
	*fd_out = fd;
out:
	freeaddrinfo(ai);
	return rc;
}
