/*
 * The client's reply parser (src/net/rpc_recv.c): arbitrary byte streams from a "server" read by
 * the real receive path (conn_recv -> conn_parse) of a connection with calls in flight.
 *
 * rpc.c and the files split from it are included so that their statics are reachable. The
 * connection is made by hand over a socketpair, without its I/O thread: the driver submits the
 * calls (rpc_submit), sends them (conn_send), then writes the stream in pieces and lets conn_recv
 * read each, as the thread would on POLLIN. At the end the "server" hangs up.
 *
 * Input: 1 byte (call count and modes), 2 bytes per call (its opcode and reply buffers), then the
 * stream (see fuzz_frames() in fuzz.c: checksums are fixed up unless bit 3 is set).
 *
 * Properties:
 *  - the requests on the wire are well-formed frames with the ids and opcodes submitted;
 *  - every call completes exactly once; its status, reply body and reply bulk are what a
 *    reference parser written from wire.h and rpc.h predicts: a reply completes the call it
 *    names with the server's status (EIO for one Linux does not define, EBADMSG for a bad bulk
 *    checksum); a malformed frame, a reply to no call in flight, a wrong opcode or a bulk larger
 *    than the call's buffers fails the connection, and every call not completed gets -EIO;
 *  - reply bulk lands in the caller's buffers and nowhere else (they are exact-size
 *    allocations), and nothing leaks.
 */
#include "../../src/net/rpc.c"
#include "../../src/net/rpc_recover.c"
#include "../../src/net/rpc_recv.c"
#include "../../src/net/rpc_timeout.c"

#include "fuzz.h"

#define MAX_CALLS 8
#define SYNTH_CAP (600u << 10)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

struct fcall {
	struct rpc_call call;
	struct rpc_wait wait;
	struct iovec iov[3];
	uint32_t cap;
	uint8_t req_body[24];
	/* The reference's prediction. */
	bool done;
	int status;
	const uint8_t *body;
	uint32_t body_len;
	const uint8_t *bulk;
	uint32_t bulk_len;
};

static const uint16_t opcodes[4] = { LW_OP_PING, LW_OP_MDS_GETATTR, LW_OP_OST_READ, LW_OP_MDS_READDIR };
static const uint32_t iov_sizes[8] = { 0, 1, 100, 4096, 65535, 70000, 200000, 8 };

static struct fcall *find_pending(struct fcall *calls, int n, uint64_t id)
{
	for (int i = 0; i < n; i++)
		if (!calls[i].done && calls[i].call.req_id == id)
			return &calls[i];
	return NULL;
}

static uint64_t le_at(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int k = n - 1; k >= 0; k--)
		v = v << 8 | p[k];
	return v;
}

/* An MDS reply's body starts with the reply prefix (wire.h, lw_mds_rep_prefix: transno u64,
 * last_committed u64, nvers u32, flags u32, lease_ino u64, lease_gen u64, lease_trust_ms u32,
 * pad u32, then nvers (ino, version) pairs of 16 bytes): the caller gets the body after it; a
 * malformed one is -EPROTO, the body left whole. A lease granted names both an inode and a grant
 * (and is not a loss); a loss (flag 0x2) names no inode. */
static void ref_mds_prefix(struct fcall *fc)
{
	uint64_t transno, lease_ino, lease_gen;
	uint32_t nvers, flags;
	size_t need;
	bool lost;

	if (fc->body_len < 48) {
		fc->status = -EPROTO;
		return;
	}
	transno = le_at(fc->body, 8);
	nvers = (uint32_t)le_at(fc->body + 16, 4);
	flags = (uint32_t)le_at(fc->body + 20, 4);
	lease_ino = le_at(fc->body + 24, 8);
	lease_gen = le_at(fc->body + 32, 8);
	lost = (flags & 2u) != 0;
	need = 48 + (size_t)nvers * 16;
	if (nvers > 8 || (nvers && !transno) || fc->body_len < need ||
	    (lease_ino && (!lease_gen || lost)) || (!lease_ino && lease_gen && !lost)) {
		fc->status = -EPROTO;
		return;
	}
	fc->body += need;
	fc->body_len -= (uint32_t)need;
}

/* What rpc_recv.c must make of the stream. */
static void ref_replies(struct fcall *calls, int n, const uint8_t *s, size_t len)
{
	size_t pos = 0;

	while (len - pos >= REF_HDR_LEN) {
		struct ref_hdr h;
		struct fcall *fc;
		const uint8_t *body;

		ref_hdr_parse(s + pos, &h);
		if (ref_hdr_check(&h))
			return;
		if (h.flags & LW_F_NOTIFY) {
			/* Unasked (MDS_RECALL, the one opcode a server sends so): read and handed on. */
			if (h.opcode != LW_OP_MDS_RECALL || h.bulk_len ||
			    len - pos - REF_HDR_LEN < h.body_len ||
			    fast_hdr_crc(s + pos, s + pos + REF_HDR_LEN, h.body_len) != h.hdr_crc)
				return;
			pos += REF_HDR_LEN + (size_t)h.body_len;
			continue;
		}
		if (!(h.flags & LW_F_REPLY))
			return;
		fc = find_pending(calls, n, h.req_id);
		if (!fc)
			return;
		fc->done = true;
		fc->status = -EIO; /* unless the reply is whole and right */
		if (h.opcode != fc->call.opcode || h.bulk_len > fc->cap)
			return;
		if (len - pos - REF_HDR_LEN < h.body_len)
			return;
		body = s + pos + REF_HDR_LEN;
		if (fast_hdr_crc(s + pos, body, h.body_len) != h.hdr_crc)
			return;
		if (len - pos - REF_HDR_LEN - h.body_len < h.bulk_len)
			return;
		fc->status = ref_errno_from_wire(h.status);
		if (h.bulk_len && fast_crc32c(0, body + h.body_len, h.bulk_len) != h.bulk_crc)
			fc->status = -EBADMSG;
		fc->body = body;
		fc->body_len = h.body_len;
		fc->bulk = body + h.body_len;
		fc->bulk_len = h.bulk_len;
		if ((h.opcode >> 8) == 1 && h.body_len)
			ref_mds_prefix(fc);
		pos += REF_HDR_LEN + (size_t)h.body_len + h.bulk_len;
	}
}

/* The requests as the server would read them. */
static void check_requests(int peer, struct fcall *calls, int n)
{
	uint8_t buf[MAX_CALLS * (REF_HDR_LEN + sizeof(calls[0].req_body))];
	size_t got = 0, pos = 0;
	ssize_t k;

	while ((k = recv(peer, buf + got, sizeof(buf) - got, MSG_DONTWAIT)) > 0)
		got += (size_t)k;
	for (int i = 0; i < n; i++) {
		struct ref_hdr h;

		FUZZ_CHECK(got - pos >= REF_HDR_LEN);
		ref_hdr_parse(buf + pos, &h);
		FUZZ_CHECK(ref_hdr_check(&h) == 0 && h.flags == 0 && h.status == 0);
		FUZZ_CHECK(h.req_id == calls[i].call.req_id && h.opcode == calls[i].call.opcode);
		FUZZ_CHECK(h.body_len == calls[i].call.body_len && h.bulk_len == 0);
		FUZZ_CHECK(got - pos - REF_HDR_LEN >= h.body_len);
		FUZZ_CHECK(fast_hdr_crc(buf + pos, buf + pos + REF_HDR_LEN, h.body_len) == h.hdr_crc);
		FUZZ_CHECK(!memcmp(buf + pos + REF_HDR_LEN, calls[i].req_body, h.body_len));
		pos += REF_HDR_LEN + h.body_len;
	}
	FUZZ_CHECK(pos == got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct fcall calls[MAX_CALLS];
	struct fbuf stream = { 0 };
	struct rpc_conn *c;
	uint64_t rng;
	size_t pos = 0;
	uint8_t b0;
	int n, sv[2];
	bool failed = false;

	if (size < 1)
		return 0;
	b0 = fin_u8(&in);
	n = 1 + (b0 & 7);
	rng = b0;

	c = calloc(1, sizeof(*c));
	FUZZ_CHECK(c != NULL);
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	c->fd = sv[0];
	c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	FUZZ_CHECK(c->wake_fd >= 0);
	c->rbuf = malloc(RBUF_SIZE);
	FUZZ_CHECK(c->rbuf != NULL);
	snprintf(c->peer, sizeof(c->peer), "fuzz");
	pthread_mutex_init(&c->lock, NULL);

	memset(calls, 0, sizeof(calls));
	for (int i = 0; i < n; i++) {
		struct fcall *fc = &calls[i];
		uint8_t a = fin_u8(&in), b = fin_u8(&in);
		int niov = (a >> 2) % 4;

		for (size_t k = 0; k < sizeof(fc->req_body); k++)
			fc->req_body[k] = (uint8_t)(i * 16 + k);
		rpc_call_init(&fc->call, opcodes[a & 3], fc->req_body, (uint32_t)(a >> 4) % sizeof(fc->req_body));
		for (int k = 0; k < niov; k++) {
			uint32_t len = iov_sizes[(b >> (3 * k)) & 7];

			fc->iov[k].iov_base = malloc(len ? len : 1);
			FUZZ_CHECK(fc->iov[k].iov_base != NULL);
			fc->iov[k].iov_len = len;
			fc->cap += len;
		}
		fc->call.rbulk = fc->iov;
		fc->call.rbulk_cnt = niov;
		rpc_wait_init(&fc->wait);
		rpc_submit(c, &fc->call, &fc->wait);
	}
	FUZZ_CHECK(conn_send(c) == 0);
	FUZZ_CHECK(c->sendq_head == NULL);
	check_requests(sv[1], calls, n);

	fuzz_frames(in.p, in.n, ((b0 & 8) ? 0 : FUZZ_FIX_CRC) | ((b0 & 16) ? FUZZ_SYNTH_BULK : 0),
		    SYNTH_CAP, &stream);
	ref_replies(calls, n, stream.p, stream.len);

	while (pos < stream.len && !failed) {
		uint64_t x = fuzz_rand(&rng);
		size_t chunk = x % 3 == 0 ? 1 + (x >> 8) % 40 : x % 3 == 1 ? 1 + (x >> 8) % 4096 :
										       1 + (x >> 8) % 200000;
		ssize_t k = send(sv[1], stream.p + pos, MIN(chunk, stream.len - pos),
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (k > 0)
			pos += (size_t)k;
		failed = conn_recv(c) < 0;
	}
	if (!failed) {
		shutdown(sv[1], SHUT_WR); /* the server goes away */
		FUZZ_CHECK(conn_recv(c) < 0);
	}
	FUZZ_CHECK(c->rbody == NULL);

	for (int i = 0; i < n; i++) {
		struct fcall *fc = &calls[i];
		struct rpc_call *call = &fc->call;

		FUZZ_CHECK(fc->wait.pending == 0); /* completed, and only once */
		if (!fc->done)
			fc->status = -EIO;
		FUZZ_CHECK(call->status == fc->status);
		if (fc->done && fc->body) {
			FUZZ_CHECK(call->rbody != NULL && call->rbody_len == fc->body_len);
			FUZZ_CHECK(!memcmp(call->rbody, fc->body, fc->body_len));
			FUZZ_CHECK(call->rbulk_len == fc->bulk_len && fc->bulk_len <= fc->cap);
			for (int k = 0, off = 0; k < call->rbulk_cnt && (uint32_t)off < fc->bulk_len; k++) {
				size_t m = MIN(fc->iov[k].iov_len, fc->bulk_len - (size_t)off);

				FUZZ_CHECK(!memcmp(fc->iov[k].iov_base, fc->bulk + off, m));
				off += (int)m;
			}
		} else {
			FUZZ_CHECK(call->rbody == NULL);
		}
		rpc_call_release(call);
		rpc_wait_destroy(&fc->wait);
		for (int k = 0; k < call->rbulk_cnt; k++)
			free(fc->iov[k].iov_base);
	}

	if (c->fd >= 0)
		close(c->fd);
	close(sv[1]);
	close(c->wake_fd);
	pthread_mutex_destroy(&c->lock);
	free(c->rbuf);
	free(c);
	fbuf_free(&stream);
	return 0;
}
