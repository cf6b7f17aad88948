/*
 * Accepting connections, and the strangers among them: the list of those that have not
 * authenticated (oldest first), the authentication exchange and the gate before it, their
 * deadline, and closing the oldest to make room when they are too many or descriptors run out.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/util.h"
#include "net/nodemap.h"
#include "net/server_impl.h"
#include "proto/codec.h"

#define ACCEPT_RETRY_NS 100000000ull /* accepts paused for lack of memory or descriptors: retry */

static void preauth_append(struct srv *s, struct srv_conn *c)
{
	c->prev_preauth = s->preauth_tail;
	c->next_preauth = NULL;
	if (s->preauth_tail)
		s->preauth_tail->next_preauth = c;
	else
		s->preauth_head = c;
	s->preauth_tail = c;
	s->npreauth++;
}

void preauth_remove(struct srv *s, struct srv_conn *c)
{
	if (c->prev_preauth)
		c->prev_preauth->next_preauth = c->next_preauth;
	else
		s->preauth_head = c->next_preauth;
	if (c->next_preauth)
		c->next_preauth->prev_preauth = c->prev_preauth;
	else
		s->preauth_tail = c->prev_preauth;
	c->prev_preauth = c->next_preauth = NULL;
	s->npreauth--;
}

/* What a connection that did not authenticate got as far as, for the line that closes it. */
static const char *preauth_progress(const struct srv_conn *c, char *buf, size_t cap)
{
	if (c->close_when_flushed)
		return "it was refused and has not taken the answer";
	if (c->challenged)
		return "it took a challenge and sent no proof";
	if (c->rstate != RS_HDR || c->rlen > c->rpos)
		return "it sent part of a frame";
	if (c->hgot) {
		snprintf(buf, cap, "it sent %u of a header's %zu bytes", c->hgot, sizeof(c->hdr));
		return buf;
	}
	return "it sent nothing";
}

/* Loop thread: the session keys of a connection that proved it holds the key. Its requests are
 * sealed from the next frame the loop parses on (the client sends none before it has the
 * proof's reply); its replies once the proof's reply is queued (conn_seal_tx). */
static int conn_seal_rx(struct srv_conn *c, const uint8_t *key, size_t keylen,
			const uint8_t *client_nonce, bool encrypt, uint8_t s2c[LOOM_SESSION_KEY_LEN])
{
	uint8_t c2s[LOOM_SESSION_KEY_LEN];
	int rc;

	rc = loom_session_keys(key, keylen, client_nonce, c->nonce, LW_AUTH_NONCE, c2s, s2c);
	if (rc == 0)
		rc = seal_init(&c->rx, c2s, encrypt, false);
	OPENSSL_cleanse(c2s, sizeof(c2s));
	return rc;
}

static int conn_seal_tx(struct srv_conn *c, const uint8_t s2c[LOOM_SESSION_KEY_LEN], bool encrypt)
{
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = seal_init(&c->tx, s2c, encrypt, true);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Tells the client why (status), then hangs up. */
static void conn_refuse(struct srv_conn *c, struct srv_req *req, int status)
{
	pthread_mutex_lock(&c->lock);
	c->close_when_flushed = true;
	atomic_store(&c->paused, true); /* read nothing more from it */
	conn_set_events(c);
	pthread_mutex_unlock(&c->lock);
	srv_reply(req, status, NULL, 0, NULL, 0, NULL);
}

/*
 * The key an AUTH_PROVE of len bytes claims to prove: the file system's (a bare lw_auth_prove),
 * or that of the node it names after it, derived. 0, or -EINVAL (malformed). Whether such a node
 * key is good now is asked of the nodemap only once the proof holds (node_admitted), so that
 * nobody without a key learns what the nodemap lists, or makes a server ask its MDS.
 */
static int prove_key(struct srv_conn *c, const uint8_t *body, uint32_t len, uint8_t *key, size_t *keylen)
{
	struct srv *s = c->srv;
	struct lw_auth_node node;

	c->is_node = false;
	if (len == sizeof(struct lw_auth_prove)) {
		memcpy(key, s->key, s->opts.keylen);
		*keylen = s->opts.keylen;
		return 0;
	}
	if (len != sizeof(struct lw_auth_prove) + sizeof(node))
		return -EINVAL;
	memcpy(&node, body + sizeof(struct lw_auth_prove), sizeof(node));
	if (!memchr(node.name, '\0', sizeof(node.name)) || loom_node_name_check(node.name) || node.pad)
		return -EINVAL;
	for (size_t i = strlen(node.name); i < sizeof(node.name); i++)
		if (node.name[i])
			return -EINVAL; /* one name, one spelling */
	c->node = node; /* whose key it claims, for the log line if it is refused */
	c->is_node = true;
	if (loom_node_key(s->key, s->opts.keylen, node.name, node.generation, key))
		return -EINVAL;
	*keylen = LOOM_MAC_LEN;
	return 0;
}

/* A proven node key: 0 if the nodemap admits it, -EACCES, or -EAGAIN (ask again shortly). */
static int node_admitted(struct srv_conn *c)
{
	struct srv *s = c->srv;

	if (!c->is_node)
		return 0;
	return s->opts.nodemap ? nodemap_admit(s->opts.nodemap, c->node.name, c->node.generation) : -EACCES;
}

/* Loop thread: the authentication exchange (wire.h), and the gate before it is done. */
void conn_authenticate(struct srv_conn *c, struct srv_req *req)
{
	struct srv *s = c->srv;
	uint16_t op = req->hdr.opcode;
	bool encrypt = req->hdr.flags & LW_F_ENCRYPT;

	if (!s->opts.keylen) {
		/* A server without a key answers the exchange with "not supported"; a client that
		 * wants one then refuses the server. */
		c->authed = true;
		if (op == LW_OP_AUTH_CHALLENGE || op == LW_OP_AUTH_PROVE)
			srv_reply(req, -EOPNOTSUPP, NULL, 0, NULL, 0, NULL);
		else
			s->opts.deliver(req, s->opts.arg);
		return;
	}
	if (c->authed) {
		/* The session is keyed once: AUTH_* again (a sealed frame) changes nothing. */
		srv_reply(req, -EINVAL, NULL, 0, NULL, 0, NULL);
		return;
	}
	if (op == LW_OP_AUTH_CHALLENGE && req->hdr.body_len == 0 && random_bytes(c->nonce, sizeof(c->nonce)) == 0) {
		struct lw_auth_challenge ch;

		memcpy(ch.nonce, c->nonce, sizeof(ch.nonce));
		c->challenged = true;
		srv_reply_flags(req, 0, s->opts.encrypt ? LW_F_ENCRYPT : 0, &ch, sizeof(ch));
		return;
	}
	if (op == LW_OP_AUTH_PROVE && c->challenged && req->hdr.body_len >= sizeof(struct lw_auth_prove) &&
	    (encrypt || !s->opts.encrypt)) {
		struct lw_auth_prove pr;
		struct lw_auth_proof proof;
		uint8_t want[LOOM_MAC_LEN], s2c[LOOM_SESSION_KEY_LEN], key[LOOM_KEY_MAX];
		size_t keylen = 0;
		int known;

		memcpy(&pr, req->body, sizeof(pr));
		c->challenged = false; /* one proof per challenge */
		known = prove_key(c, req->body, req->hdr.body_len, key, &keylen);
		if (known == 0 &&
		    (loom_auth_mac(key, keylen, loom_auth_label(false, encrypt), c->nonce, pr.nonce,
				   LW_AUTH_NONCE, want) != 0 || !loom_auth_equal(pr.mac, want)))
			known = -EKEYREJECTED; /* the proof does not hold */
		if (known == 0)
			known = node_admitted(c);
		if (known == -EAGAIN) {
			/* Not a wrong key: this server cannot judge it yet. Told in clear. */
			OPENSSL_cleanse(key, sizeof(key));
			c->is_node = false;
			conn_refuse(c, req, -EAGAIN);
			return;
		}
		if (known == 0 &&
		    loom_auth_mac(key, keylen, loom_auth_label(true, encrypt), pr.nonce, c->nonce,
				  LW_AUTH_NONCE, proof.mac) == 0 &&
		    conn_seal_rx(c, key, keylen, pr.nonce, encrypt, s2c) == 0) {
			OPENSSL_cleanse(key, sizeof(key));
			if (conn_admit(c)) {
				/* A key holder past a cap on connections: told so in clear (the
				 * refusal is no session), as a wrong key is. */
				seal_clear(&c->rx);
				OPENSSL_cleanse(s2c, sizeof(s2c));
				conn_refuse(c, req, -EUSERS);
				return;
			}
			c->authed = true;
			preauth_remove(s, c);
			srv_reply_flags(req, 0, encrypt ? LW_F_ENCRYPT : 0, &proof, sizeof(proof));
			if (conn_seal_tx(c, s2c, encrypt)) {
				/* Nothing unsealed may follow the proof: hang up. */
				pthread_mutex_lock(&c->lock);
				if (!c->closed)
					shutdown(c->fd, SHUT_RDWR);
				pthread_mutex_unlock(&c->lock);
			}
			OPENSSL_cleanse(s2c, sizeof(s2c));
			return;
		}
		OPENSSL_cleanse(key, sizeof(key));
		seal_clear(&c->rx);
		if (known == -EINVAL)
			log_limited(&s->lim[LIM_BAD_AUTH], clock_mono_ns(),
				    "%s: connection %llu from %s: malformed authentication; refusing it",
				    s->name, (unsigned long long)c->id, c->peer);
		else if (c->is_node)
			log_limited(&s->lim[LIM_WRONG_KEY], clock_mono_ns(),
				    "%s: connection %llu from %s: %s node %s (generation %u)%s; refusing it",
				    s->name, (unsigned long long)c->id, c->peer,
				    known == -EACCES ? "a key of" : "a wrong key for", c->node.name,
				    (unsigned)c->node.generation,
				    known == -EACCES ? " that the nodemap does not hold (removed, or revoked)" : "");
		else
			log_limited(&s->lim[LIM_WRONG_KEY], clock_mono_ns(),
				    "%s: connection %llu from %s: wrong file system key; refusing it", s->name,
				    (unsigned long long)c->id, c->peer);
		c->is_node = false;
	} else if (op == LW_OP_AUTH_PROVE && c->challenged && !encrypt) {
		log_limited(&s->lim[LIM_NO_ENCRYPT], clock_mono_ns(),
			    "%s: connection %llu from %s: a client that does not encrypt, and this server "
			    "requires it (--encrypt); refusing it", s->name, (unsigned long long)c->id,
			    c->peer);
	} else if (op == LW_OP_AUTH_CHALLENGE || op == LW_OP_AUTH_PROVE) {
		log_limited(&s->lim[LIM_BAD_AUTH], clock_mono_ns(),
			    "%s: connection %llu from %s: malformed authentication; refusing it", s->name,
			    (unsigned long long)c->id, c->peer);
	} else {
		log_limited(&s->lim[LIM_NO_AUTH], clock_mono_ns(),
			    "%s: connection %llu from %s: %s before authenticating (the client has no key "
			    "or the wrong one); refusing it", s->name, (unsigned long long)c->id, c->peer,
			    lw_op_name(op));
	}
	conn_refuse(c, req, -EACCES);
}

/* At most half the descriptors for strangers, so that the other half stays for the clients
 * that hold the key and for the program's own files. */
uint32_t preauth_cap(const struct srv *s)
{
	struct rlimit rl;

	if (s->opts.max_unauthenticated)
		return s->opts.max_unauthenticated;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 2 > UINT32_MAX)
		return UINT32_MAX;
	return rl.rlim_cur / 2 > 0 ? (uint32_t)(rl.rlim_cur / 2) : 1;
}

/* Does a connection wait in the listen backlog? */
static bool listen_backlogged(const struct srv *s)
{
	struct pollfd p = { .fd = s->listen_fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* Closes the oldest connection that has not authenticated, to make room for a new one. */
static void preauth_evict(struct srv *s, const char *why)
{
	struct srv_conn *c = s->preauth_head;
	uint64_t now = clock_mono_ns();
	char buf[64];

	log_limited(&s->lim[LIM_EVICTED], now,
		    "%s: closing connection %llu from %s to make room (%s): not authenticated after "
		    "%llu ms, %s", s->name, (unsigned long long)c->id, c->peer, why,
		    (unsigned long long)((now - (c->deadline_ns - s->handshake_ns)) / 1000000),
		    preauth_progress(c, buf, sizeof(buf)));
	conn_close(c, NULL);
}

/*
 * Accepts what the listen backlog holds, 64 at a time (the listen fd is level-triggered: the
 * rest comes on the next turn).
 *
 * Out of descriptors (EMFILE, or ENFILE for the whole system), the server must neither spin on
 * the listen fd nor leave a client waiting in the backlog while strangers hold every
 * descriptor. The classic answers are to close an idle connection, or to keep a spare
 * descriptor to accept the newcomer with and close it at once. Here the server knows who the
 * strangers are, so it closes the oldest connection that has not authenticated (a real client
 * authenticates within milliseconds of connecting, so the oldest unauthenticated one is the
 * likeliest to be idle on purpose) and accepts again at once with the descriptor that freed. The
 * spare-descriptor trick would refuse the newcomer instead, who is as likely to be the client
 * the server is there for. When every descriptor serves an authenticated peer (or the program's
 * own files), the server is full, not attacked: it stops accepting until a connection closes
 * (conn_close re-arms the listen fd) or ACCEPT_RETRY_NS pass (for descriptors the program frees),
 * and the newcomers wait in the backlog. The same cap applies before descriptors run out:
 * strangers may hold at most preauth_cap(), so that they never hold them all.
 */
void srv_accept(struct srv *s)
{
	for (int i = 0; i < 64; i++) {
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		struct srv_conn *c;
		struct epoll_event e;
		int one = 1, fd, err;

		fd = accept4(s->listen_fd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			err = errno;
			/* Linux's accept takes a descriptor before it looks at the queue: EMFILE says
			 * nothing about whether anyone waits. Nobody: nothing to make room for (the
			 * next arrival wakes the loop again). */
			if ((err == EMFILE || err == ENFILE) && !listen_backlogged(s))
				return;
			if ((err == EMFILE || err == ENFILE) && s->preauth_head) {
				/* The limit may have been lowered since (prlimit): strangers get half of
				 * what it is now. */
				s->max_preauth = preauth_cap(s);
				preauth_evict(s, strerror(err));
				continue;
			}
			if (err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS) {
				log_limited(&s->lim[LIM_ACCEPT], clock_mono_ns(),
					    "%s: cannot accept: %s%s; new connections wait until one closes",
					    s->name, strerror(err),
					    err == EMFILE || err == ENFILE ?
					    " (no connection waits to authenticate)" : "");
				accept_pause(s, clock_mono_ns() + ACCEPT_RETRY_NS);
			}
			return;
		}
		c = calloc(1, sizeof(*c));
		if (c && !(c->from = peer_get(s, sa.sin_addr.s_addr))) {
			free(c);
			c = NULL;
		}
		if (!c) {
			close(fd);
			accept_pause(s, clock_mono_ns() + ACCEPT_RETRY_NS);
			return;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->srv = s;
		c->fd = fd;
		c->id = ++s->next_conn_id;
		c->refs = 1;
		c->authed = s->opts.keylen == 0;
		atomic_init(&c->paused, false);
		pthread_mutex_init(&c->lock, NULL);
		inet_ntop(AF_INET, &sa.sin_addr, c->peer, sizeof(c->peer));
		snprintf(c->peer + strlen(c->peer), sizeof(c->peer) - strlen(c->peer), ":%u",
			 ntohs(sa.sin_port));
		c->events = EPOLLIN | EPOLLRDHUP;
		e.events = c->events;
		e.data.ptr = c;
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
			close(fd);
			pthread_mutex_destroy(&c->lock);
			peer_put(s, c->from);
			free(c);
			continue;
		}
		c->rx_ns = clock_mono_ns();
		c->next_open = s->open_conns;
		if (s->open_conns)
			s->open_conns->prev_open = c;
		s->open_conns = c;
		if (!c->authed) {
			c->deadline_ns = clock_mono_ns() + s->handshake_ns;
			preauth_append(s, c);
			while (s->npreauth > s->max_preauth) /* more than one when the cap fell */
				preauth_evict(s, "too many connections waiting to authenticate");
		} else if (conn_admit(c)) {
			/* No key, so no handshake to refuse it in: it is closed at once. */
			conn_close(c, NULL);
			continue;
		}
		log_debug("%s: connection %llu from %s", s->name, (unsigned long long)c->id, c->peer);
	}
}

/* Closes the connections whose time to authenticate is over. */
void preauth_expire(struct srv *s, uint64_t now)
{
	struct srv_conn *c;
	char buf[64];

	while ((c = s->preauth_head) && c->deadline_ns <= now) {
		uint64_t ms = s->handshake_ns / 1000000;

		log_limited(&s->lim[LIM_TIMEOUT], now,
			    "%s: closing connection %llu from %s: no authentication within %llu %s (%s)",
			    s->name, (unsigned long long)c->id, c->peer,
			    (unsigned long long)(ms % 1000 ? ms : ms / 1000), ms % 1000 ? "ms" : "s",
			    preauth_progress(c, buf, sizeof(buf)));
		conn_close(c, NULL);
	}
}
