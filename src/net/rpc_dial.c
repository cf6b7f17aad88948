/*
 * Connecting to a server: the TCP connection (with a timeout), the authentication with the file
 * system key (AUTH_CHALLENGE, AUTH_PROVE) and the session keys it yields, and the handshake
 * calls a connection makes on a fresh socket before any other traffic (sealed, as all after).
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "common/version.h"
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

/* The server answered with a header of another protocol version: its refusal, if that is what
 * the frame is, says which versions it speaks. -EPROTONOSUPPORT (logged), or -EPROTO. */
static int hs_version_refused(struct rpc_hs *hs, const struct lw_hdr *h)
{
	struct lw_version_refusal body, got;

	if (h->body_len != sizeof(body) || hs_recv(hs->fd, &body, sizeof(body), hs->timeout_ms) ||
	    !lw_version_refusal_read(h, &body, &got)) {
		log_err("%s: the server speaks protocol %u; this client (loom %s) speaks %u to %u",
			hs->conn->peer, h->version, LOOM_RELEASE, LW_VERSION_MIN, LW_VERSION);
		return -EPROTONOSUPPORT;
	}
	log_err("%s: the server (loom %s) speaks protocol %u to %u; this client (loom %s) speaks %u to "
		"%u: refused (docs/operations.md, \"Upgrades\")", hs->conn->peer, got.release,
		got.version_min, got.version_max, LOOM_RELEASE, LW_VERSION_MIN, LW_VERSION);
	return -EPROTONOSUPPORT;
}

/* One request and its reply on the handshake's socket, sealed once the connection authenticated.
 * flags go on the request; *rflags (if not NULL) gets the reply's. */
/* A round trip: 0 with the server's answer in *status (when status is not NULL), or a transport
 * failure; without status, the server's answer is the return value. */
static int hs_call(struct rpc_hs *hs, uint16_t opcode, uint32_t flags, const void *body,
		   uint32_t len, void *reply, uint32_t cap, uint32_t *rlen, uint32_t *rflags, int *status)
{
	struct lw_hdr h;
	uint8_t *rbody = NULL, *sbody = NULL, tag[LW_TAG_LEN];
	uint64_t id;
	bool mismatch;
	int rc;

	pthread_mutex_lock(&hs->conn->lock);
	id = ++hs->conn->next_id;
	pthread_mutex_unlock(&hs->conn->lock);
	lw_hdr_fill(&h, opcode, flags, 0, id, body, len, 0, 0);
	if (seal_on(&hs->tx)) {
		/* Sealed in a copy: with encryption the body goes as ciphertext. */
		sbody = malloc(len ? len : 1);
		if (!sbody)
			return -ENOMEM;
		if (len)
			memcpy(sbody, body, len);
		rc = seal_frame(&hs->tx, &h, sbody, NULL, tag);
		body = sbody;
		if (rc)
			goto out;
	}
	rc = hs_send(hs->fd, &h, sizeof(h), hs->timeout_ms);
	if (rc == 0 && len)
		rc = hs_send(hs->fd, body, len, hs->timeout_ms);
	if (rc == 0 && sbody)
		rc = hs_send(hs->fd, tag, sizeof(tag), hs->timeout_ms);
	if (rc == 0)
		rc = hs_recv(hs->fd, &h, sizeof(h), hs->timeout_ms);
	if (rc)
		goto out;
	if (lw_hdr_version_foreign(&h) && !seal_on(&hs->rx)) {
		rc = hs_version_refused(hs, &h);
		goto out;
	}
	/* Sealed, a header that does not answer this call is judged after its tag (below): a relay's
	 * replay is then a failed tag, retried, not a broken server, given up on. */
	mismatch = !(h.flags & LW_F_REPLY) || h.req_id != id || h.opcode != opcode;
	if (lw_hdr_check(&h) || h.bulk_len != 0 || (mismatch && !seal_on(&hs->rx))) {
		rc = seal_on(&hs->rx) && lw_hdr_check(&h) == 0 ? -EBADMSG : -EPROTO;
		goto out;
	}
	atomic_store_explicit(&hs->conn->peer_version, h.version, memory_order_relaxed);
	rbody = malloc(h.body_len ? h.body_len : 1);
	if (!rbody) {
		rc = -ENOMEM;
		goto out;
	}
	rc = hs_recv(hs->fd, rbody, h.body_len, hs->timeout_ms);
	if (rc == 0 && seal_on(&hs->rx)) {
		rc = hs_recv(hs->fd, tag, sizeof(tag), hs->timeout_ms);
		if (rc == 0 && (seal_begin(&hs->rx, &h) || seal_update(&hs->rx, rbody, rbody, h.body_len) ||
				seal_check(&hs->rx, tag))) {
			log_warn("%s: the reply to %s failed authentication (altered, replayed or injected on "
				 "the way)", hs->conn->peer, lw_op_name(opcode));
			rc = -EBADMSG;
		}
	}
	if (rc == 0 && mismatch)
		rc = -EPROTO;
	if (rc == 0 && lw_hdr_crc_check(&h, rbody))
		rc = -EPROTO;
	if (rc == 0 && lw_op_mds_prefixed(opcode)) {
		struct lw_obj_version vers[LW_MAX_VERS];

		if (lw_mds_prefix_take(rbody, &h.body_len, &hs->last_pre, vers))
			rc = -EPROTO;
		/* A replicated MDT's fencing, as for every reply (rpc_recv.c): a deposed MDS's hello
		 * answers (connect, replays) count for nothing; the next address is dialled. */
		else if (hs->last_pre.epoch && hs->last_pre.epoch < hs->conn->epoch_seen) {
			log_warn("%s answered %s with epoch %u, and epoch %u was heard: a deposed MDS",
				 hs->conn->peer, lw_op_name(opcode), hs->last_pre.epoch, hs->conn->epoch_seen);
			rc = -ESTALE;
		} else if (hs->last_pre.epoch > hs->conn->epoch_seen) {
			hs->conn->epoch_seen = hs->last_pre.epoch;
		}
	}
	if (rc == 0) {
		memcpy(reply, rbody, MIN(cap, h.body_len));
		if (rlen)
			*rlen = h.body_len;
		if (rflags)
			*rflags = h.flags;
		if (status)
			*status = lw_errno_from_wire(h.status);
		else
			rc = lw_errno_from_wire(h.status);
	}
out:
	free(rbody);
	free(sbody);
	return rc;
}

void rpc_hs_set_timeout(struct rpc_hs *hs, int ms)
{
	hs->timeout_ms = ms;
}

void rpc_hs_prefix(const struct rpc_hs *hs, struct lw_mds_rep_prefix *out)
{
	*out = hs->last_pre;
}

int rpc_hs_call(struct rpc_hs *hs, uint16_t opcode, const void *body, uint32_t len, void *reply,
		uint32_t cap, uint32_t *rlen)
{
	return hs_call(hs, opcode, 0, body, len, reply, cap, rlen, NULL, NULL);
}

int rpc_hs_call_status(struct rpc_hs *hs, uint16_t opcode, const void *body, uint32_t len, void *reply,
		       uint32_t cap, uint32_t *rlen, int *status)
{
	return hs_call(hs, opcode, 0, body, len, reply, cap, rlen, NULL, status);
}

/* The session keys, and the seals of the connection's frames from now on. */
static int hs_seal(struct rpc_hs *hs, const uint8_t *client_nonce, const uint8_t *server_nonce,
		   bool encrypt)
{
	struct rpc_conn *c = hs->conn;
	uint8_t c2s[LOOM_SESSION_KEY_LEN], s2c[LOOM_SESSION_KEY_LEN];
	int rc;

	rc = loom_session_keys(c->key, c->opts.keylen, client_nonce, server_nonce, LW_AUTH_NONCE, c2s, s2c);
	if (rc == 0)
		rc = seal_init(&hs->tx, c2s, encrypt, true);
	if (rc == 0)
		rc = seal_init(&hs->rx, s2c, encrypt, false);
	OPENSSL_cleanse(c2s, sizeof(c2s));
	OPENSSL_cleanse(s2c, sizeof(s2c));
	return rc;
}

/* Proves to the server that we hold the key, and has it prove the same to us. */
static int authenticate(struct rpc_hs *hs)
{
	struct rpc_conn *c = hs->conn;
	struct lw_auth_challenge ch;
	struct {
		struct lw_auth_prove pr;
		struct lw_auth_node node; /* a node's key: whose */
	} body = { 0 };
	struct lw_auth_prove *pr = &body.pr;
	struct lw_auth_proof proof;
	uint8_t want[LOOM_MAC_LEN];
	uint32_t len = 0, rflags = 0;
	bool encrypt;
	int rc;

	rc = hs_call(hs, LW_OP_AUTH_CHALLENGE, 0, NULL, 0, &ch, sizeof(ch), &len, &rflags, NULL);
	if (rc == -EOPNOTSUPP) {
		log_err("%s does not authenticate clients, but this client has a key: refusing it", c->peer);
		return -EACCES;
	}
	if (rc)
		return rc;
	if (len != sizeof(ch))
		return -EPROTO;
	/* Encrypt if asked to, or if the server requires it. (A relay that hides the requirement
	 * only gets this client refused; one that makes it up only gets the frames encrypted.) */
	encrypt = c->opts.encrypt || (rflags & LW_F_ENCRYPT);
	rc = random_bytes(pr->nonce, sizeof(pr->nonce));
	if (rc)
		return rc;
	rc = loom_auth_mac(c->key, c->opts.keylen, loom_auth_label(false, encrypt), ch.nonce, pr->nonce,
			   LW_AUTH_NONCE, pr->mac);
	if (rc)
		return rc;
	if (c->key_id.node[0]) {
		memcpy(body.node.name, c->key_id.node, sizeof(body.node.name));
		body.node.generation = c->key_id.generation;
	}
	rc = hs_call(hs, LW_OP_AUTH_PROVE, encrypt ? LW_F_ENCRYPT : 0, &body,
		     c->key_id.node[0] ? sizeof(body) : sizeof(*pr), &proof, sizeof(proof), &len, &rflags, NULL);
	if (rc == -EACCES) {
		if (c->key_id.node[0])
			log_err("%s refused the key of node %s (generation %u): the node is not in the "
				"nodemap, or its key was revoked", c->peer, c->key_id.node,
				(unsigned)c->key_id.generation);
		else
			log_err("%s refused this client's file system key", c->peer);
		return rc;
	}
	if (rc == -EAGAIN) {
		/* An OSS that has not learned the nodemap yet: the dial is tried again. */
		log_info("%s cannot judge node keys yet; trying again", c->peer);
		return rc;
	}
	if (rc == -EUSERS) {
		/* Not fatal: a connection may leave, and the dial is tried again. */
		log_warn("%s refused this connection for now: this node has as many connections to it "
			 "as one address may (--max-conns-per-peer), or it is full and keeps its last "
			 "descriptors for nodes with few", c->peer);
		return rc;
	}
	if (rc)
		return rc;
	rc = loom_auth_mac(c->key, c->opts.keylen, loom_auth_label(true, encrypt), pr->nonce, ch.nonce,
			   LW_AUTH_NONCE, want);
	if (rc || len != sizeof(proof) || !loom_auth_equal(proof.mac, want) ||
	    !(rflags & LW_F_ENCRYPT) != !encrypt) {
		log_err("%s could not prove it holds the file system key: refusing it", c->peer);
		return -EACCES;
	}
	return hs_seal(hs, pr->nonce, ch.nonce, encrypt);
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

int rpc_dial(struct rpc_conn *c, int *fd_out, struct seal *tx, struct seal *rx)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	char portstr[8];
	int one = 1, fd, rc;
	int timeout = c->opts.connect_timeout_ms ? c->opts.connect_timeout_ms : 5000;
	struct rpc_hs hs = { .conn = c, .timeout_ms = timeout };

	/* Another socket, perhaps another server (a failover partner, an older release). */
	atomic_store_explicit(&c->peer_version, 0, memory_order_relaxed);
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
		seal_clear(&hs.tx);
		seal_clear(&hs.rx);
		close(fd);
		goto out;
	}
	*fd_out = fd;
	*tx = hs.tx; /* ownership passes to the caller */
	*rx = hs.rx;
out:
	freeaddrinfo(ai);
	return rc;
}
