/*
 * The server's frame state machine (src/net/server*.c), driven by arbitrary byte streams.
 *
 * server.c and the files split from it are included so that their statics are reachable (as
 * h2o's unit tests do), and so that no object of libloomnet's server is linked. One
 * connection is made by hand over a socketpair (no listening socket), and the loop is run the way
 * srv_run() runs it, one epoll_wait(0) at a time, so that reading, pausing, starving for memory,
 * resuming and closing all go through the real code, including its wake-ups: a connection that
 * would wait forever in the real loop waits forever here too, and is caught.
 *
 * Input: 5 configuration bytes, then the stream (see fuzz_frames() in fuzz.c: checksums are
 * fixed up unless the first byte's bit 0 is set).
 *
 * Properties:
 *  - the server delivers exactly the frames a reference parser written from wire.h accepts, in
 *    order, byte for byte (header, body, bulk); it answers the others itself (EBADMSG for a bad
 *    bulk checksum, EOPNOTSUPP for authentication on a server without a key) and closes the
 *    connection exactly when the reference finds a frame it must not accept;
 *  - every reply on the wire is a well-formed frame, in the order srv_reply() was called, and
 *    dropped requests get none; a frame of another protocol version may get the version refusal,
 *    as the last bytes before the connection closes;
 *  - a connection never stalls: once its requests are answered it reads again;
 *  - when everything is answered the counters are back to zero (in-flight count and bytes, the
 *    server's memory charge), and nothing leaks.
 */
#include "../../src/net/server.c"
#include "../../src/net/server_accept.c"
#include "../../src/net/server_read.c"
#include "../../src/net/server_reply.c"

#include "fuzz.h"

#define MAX_HELD 4096
#define SYNTH_CAP (600u << 10)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

/* ---- what the driver was told to do ---- */

struct cfg {
	unsigned mode;       /* FUZZ_FIX_CRC, FUZZ_SYNTH_BULK */
	bool any_bulk;       /* else only OST_WRITE carries bulk, as loom-oss */
	bool lifo;           /* held requests are answered newest first */
	unsigned reply_body; /* 0: none, 1: up to 16 bytes of the request's, 2: all of it */
	bool echo_bulk;      /* replies carry the request's bulk back */
	bool copy_bulk;      /* ... in a malloc'd copy (released with free) rather than taken */
	unsigned hold_pct, drop_pct, park_pct;
	uint64_t rng;
};

/* ---- the reference parser ---- */

enum ref_kind { REF_OK, REF_BADBULK };

struct ref_frame {
	size_t off; /* of its header in the stream */
	struct ref_hdr h;
	enum ref_kind kind;
};

struct ref {
	struct ref_frame *f;
	size_t n;
	bool bad;       /* stops at a frame the server must close the connection for */
	bool boundary;  /* the stream ends between frames */
	bool foreign;   /* that frame is Loom's of another protocol version: it may be refused */
	struct ref_hdr foreign_hdr;
};

static bool ref_bulk_ok(const struct cfg *cfg, uint16_t op)
{
	return cfg->any_bulk || op == LW_OP_OST_WRITE;
}

static void ref_parse(const struct cfg *cfg, const uint8_t *s, size_t len, struct ref *ref)
{
	size_t pos = 0;

	memset(ref, 0, sizeof(*ref));
	ref->f = malloc(sizeof(*ref->f) * (len / REF_HDR_LEN + 1));
	FUZZ_CHECK(ref->f != NULL);
	for (;;) {
		struct ref_frame *fr = &ref->f[ref->n];
		const uint8_t *body;

		if (pos == len) {
			ref->boundary = true;
			return;
		}
		if (len - pos < REF_HDR_LEN)
			return;
		fr->off = pos;
		ref_hdr_parse(s + pos, &fr->h);
		if (ref_hdr_check(&fr->h) || (fr->h.flags & (LW_F_REPLY | LW_F_NOTIFY)) ||
		    (fr->h.bulk_len && !ref_bulk_ok(cfg, fr->h.opcode))) {
			ref->bad = true;
			/* A version outside 9..10 with Loom's magic: the server answers with its version
			 * refusal before it closes (wire.h, struct lw_version_refusal). */
			ref->foreign = fr->h.magic == 0x4D4F4F4Cu && (fr->h.version < 9 || fr->h.version > 10);
			ref->foreign_hdr = fr->h;
			return;
		}
		if (len - pos - REF_HDR_LEN < fr->h.body_len)
			return;
		body = s + pos + REF_HDR_LEN;
		if (fast_hdr_crc(s + pos, body, fr->h.body_len) != fr->h.hdr_crc) {
			ref->bad = true;
			return;
		}
		if (len - pos - REF_HDR_LEN - fr->h.body_len < fr->h.bulk_len)
			return;
		/* (wire.h wants bulk_crc 0 without bulk, but no receiver checks it: neither here) */
		fr->kind = fr->h.bulk_len == 0 ||
				   fast_crc32c(0, body + fr->h.body_len, fr->h.bulk_len) == fr->h.bulk_crc ?
				   REF_OK : REF_BADBULK;
		pos += REF_HDR_LEN + (size_t)fr->h.body_len + fr->h.bulk_len;
		ref->n++;
	}
}

/* ---- expected replies ---- */

struct expect {
	uint64_t req_id;
	uint16_t opcode;
	int32_t status;
	uint8_t *body; /* malloc'd */
	uint32_t body_len;
	uint8_t *bulk; /* malloc'd */
	uint32_t bulk_len;
};

struct fifo {
	struct expect *e;
	size_t n, cap, head;
};

static void fifo_push(struct fifo *q, const struct expect *e)
{
	if (q->n == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 16;
		q->e = realloc(q->e, q->cap * sizeof(*q->e));
		FUZZ_CHECK(q->e != NULL);
	}
	q->e[q->n++] = *e;
}

static void fifo_free(struct fifo *q)
{
	for (size_t i = 0; i < q->n; i++) {
		free(q->e[i].body);
		free(q->e[i].bulk);
	}
	free(q->e);
}

static uint8_t *dup_bytes(const void *p, size_t n)
{
	uint8_t *d = malloc(n ? n : 1);

	FUZZ_CHECK(d != NULL);
	if (n)
		memcpy(d, p, n);
	return d;
}

/* ---- one run ---- */

struct run {
	struct cfg cfg;
	const uint8_t *stream;
	size_t len;
	struct ref ref;
	size_t ref_next;        /* the next reference frame the server has not handled */
	struct fifo mine;       /* replies this driver made, in srv_reply order */
	struct fifo theirs;     /* replies the server makes itself, in stream order */
	struct srv *s;
	struct srv_conn *c;     /* until it closes */
	int peer;               /* the client's end of the socketpair */
	bool closed;            /* the disconnect callback ran */
	int disconnects;
	uint64_t conn_id;
	struct srv_req *held[MAX_HELD];
	size_t nheld;
	struct fbuf replies;    /* everything read on the client's end */
	size_t delivered;
};

static bool is_auth(uint16_t op)
{
#ifdef LW_AUTH_NONCE
	return op == LW_OP_AUTH_CHALLENGE || op == LW_OP_AUTH_PROVE;
#else
	(void)op;
	return false;
#endif
}

/* A frame the server answers itself instead of delivering it: recorded with its reply. */
static void server_answers(struct run *r, const struct ref_frame *fr)
{
	struct expect e = { .req_id = fr->h.req_id, .opcode = fr->h.opcode };

	if (fr->kind == REF_BADBULK)
		e.status = -EBADMSG;
	else if (is_auth(fr->h.opcode))
		e.status = -EOPNOTSUPP; /* a server without a key */
	else
		fuzz_fail(__FILE__, __LINE__, "a well-formed frame was not delivered");
	e.body = dup_bytes(NULL, 0);
	e.bulk = dup_bytes(NULL, 0);
	fifo_push(&r->theirs, &e);
}

static void answer(struct run *r, struct srv_req *req)
{
	uint64_t x = fuzz_rand(&r->cfg.rng);
	static const int statuses[] = { 0, 0, 0, -ENOENT, -EIO, -EACCES, -99999, 7 };
	int status = statuses[x % 8];
	uint32_t blen = r->cfg.reply_body == 0 ? 0 :
			r->cfg.reply_body == 1 ? MIN(req->hdr.body_len, 16u) : req->hdr.body_len;
	struct expect e = { .req_id = req->hdr.req_id, .opcode = req->hdr.opcode,
			    .status = ref_errno_to_wire(status), .body_len = blen };
	void *bulk = NULL;
	uint32_t bulk_len = 0;
	void (*release)(void *) = NULL;

	if (x & 0x100) {
		/* Some replies are dropped instead (a client that went away). */
		if ((x >> 9) % 100 < r->cfg.drop_pct) {
			srv_req_drop(req);
			return;
		}
	}
	e.body = dup_bytes(req->body, blen);
	if (r->cfg.echo_bulk && req->hdr.bulk_len) {
		bulk_len = req->hdr.bulk_len;
		if (r->cfg.copy_bulk) {
			bulk = dup_bytes(req->bulk, bulk_len);
		} else {
			bulk = srv_req_take_bulk(req);
			release = bulk_free;
			FUZZ_CHECK(req->bulk == NULL);
		}
	}
	e.bulk = dup_bytes(bulk, bulk ? bulk_len : 0);
	e.bulk_len = bulk ? bulk_len : 0;
	fifo_push(&r->mine, &e);
	srv_reply(req, status, req->body, blen, bulk, bulk_len, release);
}

static void answer_held(struct run *r, size_t count)
{
	while (count-- > 0 && r->nheld > 0) {
		struct srv_req *req;

		if (r->cfg.lifo) {
			req = r->held[--r->nheld];
		} else {
			req = r->held[0];
			memmove(r->held, r->held + 1, --r->nheld * sizeof(r->held[0]));
		}
		answer(r, req);
	}
}

/* The header a request is delivered with: as sent, but a job id (LW_F_JOBID) taken off the
 * body and the flag cleared. */
static bool delivered_as(const struct srv_req *req, const uint8_t *raw, const struct ref_frame *fr)
{
	struct lw_hdr h;

	memcpy(&h, raw, sizeof(h));
	if (fr->h.flags & LW_F_JOBID) {
		h.flags &= ~LW_F_JOBID;
		h.body_len -= LW_JOBID_LEN;
	}
	return !memcmp(&req->hdr, &h, sizeof(h));
}

static void on_deliver(struct srv_req *req, void *arg)
{
	struct run *r = arg;
	const struct ref_frame *fr;
	uint32_t skip;
	uint64_t x;

	/* The next frame the reference accepts, past those the server answers itself. */
	for (;;) {
		FUZZ_CHECK(r->ref_next < r->ref.n);
		fr = &r->ref.f[r->ref_next++];
		if (fr->kind == REF_OK && delivered_as(req, r->stream + fr->off, fr))
			break;
		server_answers(r, fr);
	}
	FUZZ_CHECK(!r->closed && req->conn == r->c && req->conn_id == r->conn_id);
	skip = (fr->h.flags & LW_F_JOBID) ? LW_JOBID_LEN : 0;
	FUZZ_CHECK(!memcmp(req->body, r->stream + fr->off + REF_HDR_LEN + skip, fr->h.body_len - skip));
	/* The job id kept: printable, no space, NUL-terminated within its 32 bytes. */
	FUZZ_CHECK(memchr(req->job, '\0', sizeof(req->job)) != NULL);
	for (const char *j = req->job; *j; j++)
		FUZZ_CHECK(*j > ' ' && *j < 0x7f);
	if (fr->h.bulk_len)
		FUZZ_CHECK(req->bulk && !memcmp(req->bulk, r->stream + fr->off + REF_HDR_LEN + fr->h.body_len,
						fr->h.bulk_len));
	else
		FUZZ_CHECK(req->bulk == NULL);
	FUZZ_CHECK(strcmp(srv_req_peer(req), "fuzz") == 0);
	r->delivered++;

	/* What a program does first with a body: decode it (for the sanitizers' sake). */
	if ((req->hdr.opcode >> 8) == 0x01 || req->hdr.opcode == LW_OP_PING) {
		struct lw_mds_req q;
		(void)lw_mds_req_decode(req->hdr.opcode, req->body, req->hdr.body_len, &q);
	} else if ((req->hdr.opcode >> 8) == 0x02) {
		struct lw_ost_io io;
		(void)lw_ost_req_decode(req->hdr.opcode, req->body, req->hdr.body_len, &io);
	}

	x = fuzz_rand(&r->cfg.rng) % 100;
	if (x < r->cfg.hold_pct && r->nheld < MAX_HELD) {
		if (fuzz_rand(&r->cfg.rng) % 100 < r->cfg.park_pct)
			srv_req_park(req); /* a lock wait: answered much later */
		r->held[r->nheld++] = req;
		return;
	}
	answer(r, req);
}

static void on_disconnect(uint64_t id, void *arg)
{
	struct run *r = arg;

	FUZZ_CHECK(id == r->conn_id);
	r->disconnects++;
	r->closed = true;
	r->c = NULL; /* freed by srv_bury once its requests are answered */
}

static bool bulk_ok_any(uint16_t op)
{
	(void)op;
	return true;
}

static bool bulk_ok_write(uint16_t op)
{
	return op == LW_OP_OST_WRITE;
}

/* srv_create() without the listening socket, and srv_accept() for one socketpair. */
static void setup(struct run *r, uint8_t limits, uint8_t mem)
{
	static const uint64_t inflight_bytes[4] = { 0, 1024, 64u << 10, 1u << 20 };
	static const uint64_t memory[4] = { 0, 4096, 100u << 10, 8u << 20 };
	struct srv_opts o = { .name = "fuzz", .deliver = on_deliver, .disconnect = on_disconnect,
			      .arg = r, .max_inflight = 1 + (limits & 15),
			      .max_inflight_bytes = inflight_bytes[(limits >> 4) & 3],
			      .max_memory = memory[mem & 3],
			      .bulk_ok = r->cfg.any_bulk ? bulk_ok_any : bulk_ok_write };
	struct epoll_event e = { .events = EPOLLIN };
	struct srv *s;
	struct srv_conn *c;
	int sv[2];

	s = calloc(1, sizeof(*s));
	FUZZ_CHECK(s != NULL);
	s->opts = o;
	if (!s->opts.max_inflight_bytes)
		s->opts.max_inflight_bytes = 64ull << 20;
	if (!s->opts.max_memory)
		s->opts.max_memory = 1ull << 30;
	/* One peer: its share is the whole budget, so the budget's own rules are what is fuzzed. */
	s->opts.max_peer_memory = s->opts.max_memory;
	s->opts.max_conns_per_peer = 1;
	s->frame_ns = UINT64_MAX;
	s->next_stall_scan = UINT64_MAX;
	snprintf(s->name, sizeof(s->name), "fuzz");
	s->listen_fd = -1;
	atomic_init(&s->mem, 0);
	atomic_init(&s->starving, false);
	atomic_init(&s->stopping, 0);
	pthread_mutex_init(&s->resume_lock, NULL);
	pthread_mutex_init(&s->peers_lock, NULL);
	u64map_init(&s->peers);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	FUZZ_CHECK(s->epfd >= 0 && s->wake_fd >= 0);
	e.data.ptr = &tag_wake;
	FUZZ_CHECK(epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wake_fd, &e) == 0);

	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	c = calloc(1, sizeof(*c));
	FUZZ_CHECK(c != NULL);
	c->srv = s;
	c->from = peer_get(s, 0);
	FUZZ_CHECK(c->from != NULL);
	c->fd = sv[0];
	c->id = ++s->next_conn_id;
	c->refs = 1;
	atomic_init(&c->paused, false);
	pthread_mutex_init(&c->lock, NULL);
	snprintf(c->peer, sizeof(c->peer), "fuzz");
	c->events = EPOLLIN | EPOLLRDHUP;
	e.events = c->events;
	e.data.ptr = c;
	FUZZ_CHECK(epoll_ctl(s->epfd, EPOLL_CTL_ADD, c->fd, &e) == 0);
	s->open_conns = c;

	r->s = s;
	r->c = c;
	r->conn_id = c->id;
	r->peer = sv[1];
}

/* One turn of srv_run()'s loop, without blocking. Returns the number of events handled. */
static int loop_once(struct srv *s)
{
	struct epoll_event evs[8];
	int n = epoll_wait(s->epfd, evs, (int)ARRAY_SIZE(evs), 0);

	for (int i = 0; i < n; i++) {
		void *p = evs[i].data.ptr;
		uint32_t ev = evs[i].events;
		struct srv_conn *c;

		if (p == &tag_wake) {
			srv_resume(s);
			continue;
		}
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
			conn_close(c, NULL);
	}
	srv_bury(s);
	return n < 0 ? 0 : n;
}

/* The client reads whatever replies are there. */
static void drain(struct run *r)
{
	uint8_t buf[65536];
	ssize_t n;

	while ((n = recv(r->peer, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		fbuf_put(&r->replies, buf, (size_t)n);
}

/* Everything answered and written: the counters must be back to rest. */
static void check_rest(struct run *r)
{
	struct srv_conn *c = r->c;
	uint64_t partial;

	if (r->closed || r->nheld || c->out_head)
		return;
	partial = c->req ? req_charge(&c->req->hdr) : 0;
	FUZZ_CHECK(c->inflight == 0 && c->inflight_bytes == 0);
	FUZZ_CHECK(atomic_load(&r->s->mem) == partial);
}

/*
 * Runs the loop until nothing happens, answering held requests whenever it idles. A connection
 * left unable to read with nothing held and nothing to write would wait forever: caught here.
 */
static void settle(struct run *r, bool all)
{
	for (int spins = 0; spins < 100000; spins++) {
		int events;

		drain(r);
		events = loop_once(r->s);
		drain(r);
		if (events > 0)
			continue;
		if (r->nheld > 0) {
			answer_held(r, all ? r->nheld : 1 + fuzz_rand(&r->cfg.rng) % r->nheld);
			continue;
		}
		if (!r->closed) {
			struct srv_conn *c = r->c;

			FUZZ_CHECK(c->out_head == NULL); /* else EPOLLOUT would have fired */
			FUZZ_CHECK(conn_reading(c));     /* a stall */
			FUZZ_CHECK(c->rpos == c->rlen);  /* buffered frames nobody will parse */
			check_rest(r);
		}
		return;
	}
	fuzz_fail(__FILE__, __LINE__, "the loop never settles");
}

static bool reply_matches(const struct expect *e, const struct ref_hdr *h, const uint8_t *body,
			  const uint8_t *bulk)
{
	return e->req_id == h->req_id && e->opcode == h->opcode && e->status == h->status &&
	       e->body_len == h->body_len && e->bulk_len == h->bulk_len &&
	       !memcmp(e->body, body, h->body_len) && !memcmp(e->bulk, bulk, h->bulk_len);
}

/* The version refusal of wire.h, answering the foreign frame h: the last thing on the wire. */
static bool is_version_refusal(const struct ref *ref, const struct ref_hdr *h, const uint8_t *body, size_t left)
{
	static const uint8_t want[8] = { 9, 0, 10, 0, 0, 0, 0, 0 }; /* version_min, version_max, pad */

	return ref->foreign && h->req_id == ref->foreign_hdr.req_id && h->opcode == ref->foreign_hdr.opcode &&
	       h->status == ref_errno_to_wire(-EPROTONOSUPPORT) && h->body_len == 32 && h->bulk_len == 0 &&
	       left == REF_HDR_LEN + 32 && !memcmp(body, want, sizeof(want)) && body[8] != 0 && body[31] == 0;
}

/* The replies read on the client's end against what was answered, in order. */
static void check_replies(struct run *r)
{
	const uint8_t *p = r->replies.p;
	size_t left = r->replies.len;
	bool truncated_ok = r->ref.bad;

	while (left > 0) {
		struct ref_hdr h;
		const uint8_t *body, *bulk;

		if (left < REF_HDR_LEN) {
			FUZZ_CHECK(truncated_ok);
			break;
		}
		ref_hdr_parse(p, &h);
		FUZZ_CHECK(ref_hdr_check(&h) == 0 && h.flags == LW_F_REPLY);
		if (left - REF_HDR_LEN < (size_t)h.body_len + h.bulk_len) {
			FUZZ_CHECK(truncated_ok);
			break;
		}
		body = p + REF_HDR_LEN;
		bulk = body + h.body_len;
		FUZZ_CHECK(fast_hdr_crc(p, body, h.body_len) == h.hdr_crc);
		FUZZ_CHECK(h.bulk_crc == (h.bulk_len ? fast_crc32c(0, bulk, h.bulk_len) : 0));
		if (r->mine.head < r->mine.n && reply_matches(&r->mine.e[r->mine.head], &h, body, bulk))
			r->mine.head++;
		else if (r->theirs.head < r->theirs.n &&
			 reply_matches(&r->theirs.e[r->theirs.head], &h, body, bulk))
			r->theirs.head++;
		else if (!is_version_refusal(&r->ref, &h, body, left))
			fuzz_fail(__FILE__, __LINE__, "a reply nobody asked for, or out of order");
		p += REF_HDR_LEN + (size_t)h.body_len + h.bulk_len;
		left -= REF_HDR_LEN + (size_t)h.body_len + h.bulk_len;
	}
	if (!r->ref.bad)
		FUZZ_CHECK(r->mine.head == r->mine.n && r->theirs.head == r->theirs.n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct fbuf stream = { 0 };
	struct run *r;
	uint8_t b0, limits, mem, pct;
	size_t pos = 0;

	if (size < 5)
		return 0;
	r = calloc(1, sizeof(*r));
	FUZZ_CHECK(r != NULL);
	b0 = fin_u8(&in);
	limits = fin_u8(&in);
	mem = fin_u8(&in);
	pct = fin_u8(&in);
	r->cfg.mode = ((b0 & 1) ? 0 : FUZZ_FIX_CRC) | ((b0 & 2) ? FUZZ_SYNTH_BULK : 0);
	r->cfg.any_bulk = b0 & 4;
	r->cfg.lifo = b0 & 8;
	r->cfg.reply_body = (b0 >> 4) % 3;
	r->cfg.echo_bulk = b0 & 0x40;
	r->cfg.copy_bulk = b0 & 0x80;
	r->cfg.hold_pct = (mem >> 2) * 100 / 63;
	r->cfg.drop_pct = (pct & 15) * 100 / 15;
	r->cfg.park_pct = (pct >> 4) * 100 / 15;
	r->cfg.rng = fin_u8(&in);

	fuzz_frames(in.p, in.n, r->cfg.mode, SYNTH_CAP, &stream);
	r->stream = stream.p;
	r->len = stream.len;
	ref_parse(&r->cfg, stream.p, stream.len, &r->ref);
	setup(r, limits, mem);

	/* The client writes the stream in pieces of every size, the loop reading as it goes. */
	while (pos < r->len && !r->closed) {
		uint64_t x = fuzz_rand(&r->cfg.rng);
		size_t chunk = x % 4 == 0 ? 1 + (x >> 8) % 40 : x % 4 == 1 ? 1 + (x >> 8) % 4096 :
										       1 + (x >> 8) % 200000;
		ssize_t n = send(r->peer, r->stream + pos, MIN(chunk, r->len - pos),
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0)
			pos += (size_t)n;
		settle(r, false);
	}
	settle(r, true);
	/* The server closed the connection exactly when the stream held a frame it must refuse. */
	FUZZ_CHECK(r->closed == r->ref.bad);
	if (!r->closed) {
		struct srv_conn *c = r->c;

		/* All of the stream was parsed, up to a frame boundary or into the partial last frame. */
		FUZZ_CHECK((c->rstate == RS_HDR && c->hgot == 0 && !c->req) == r->ref.boundary);
		shutdown(r->peer, SHUT_WR);
		settle(r, true);
		FUZZ_CHECK(r->closed);
	}
	answer_held(r, r->nheld);
	settle(r, true);
	/* Frames the reference accepted and the server did not deliver: it answered them. */
	while (r->ref_next < r->ref.n)
		server_answers(r, &r->ref.f[r->ref_next++]);
	FUZZ_CHECK(r->disconnects == 1);
	FUZZ_CHECK(atomic_load(&r->s->mem) == 0);
	drain(r);
	check_replies(r);

	srv_destroy(r->s);
	close(r->peer);
	fifo_free(&r->mine);
	fifo_free(&r->theirs);
	fbuf_free(&r->replies);
	free(r->ref.f);
	fbuf_free(&stream);
	free(r);
	return 0;
}
