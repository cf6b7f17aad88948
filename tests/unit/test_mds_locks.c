/*
 * The MDS's file locks (src/mds/locks.c), included whole to reach its tables: fcntl(2) ranges of
 * one owner merging and splitting, conflicts between owners, read against write, flock(2) locks
 * apart from POSIX ones, LW_LK_TEST's answers, waiters parked, granted, cancelled and dropped,
 * and the recovery after a start: replays granted at once, everything else held until the
 * clients awaited have replayed.
 *
 * The network layer is replaced by three stubs (srv_reply, srv_req_park, srv_req_drop) that
 * record what the lock manager did with each request, so that no server runs, and the MDT's
 * mdt_client_del by one that counts. Every request is followed by the end of its batch
 * (mds_locks_wake), as batch.c does.
 */
#include <fcntl.h>
#include <stddef.h>

#include "check.h"
#include "mds/locks.c"

int check_failures;
const char *check_current = "";

#define EOF_ UINT64_MAX /* "to the end of the file" */

/* ---- the network layer, recorded ---- */

struct fake_req {
	struct srv_req req;
	int replies;          /* srv_reply calls */
	int status;
	uint32_t body_len;
	struct lw_lock_rep rep;
	bool parked, dropped;
};

#define FAKE_OF(r) ((struct fake_req *)((char *)(r) - offsetof(struct fake_req, req)))

void srv_reply(struct srv_req *req, int status, const void *body, uint32_t body_len, void *bulk,
	       uint32_t bulk_len, void (*release)(void *))
{
	struct fake_req *f = FAKE_OF(req);

	(void)bulk;
	(void)bulk_len;
	(void)release;
	f->replies++;
	f->status = status;
	f->body_len = body_len;
	if (body && body_len == sizeof(f->rep))
		memcpy(&f->rep, body, sizeof(f->rep));
}

/* The MDS's replies without their transaction prefix (src/mds/commit.c is not linked). */
void mds_reply(struct mds *m, struct srv_req *req, int status, const void *body, uint32_t len,
	       uint64_t transno, const struct mdt_vers *vers)
{
	(void)m;
	(void)transno;
	(void)vers;
	srv_reply(req, status, body, status ? 0 : len, NULL, 0, NULL);
}

void srv_req_park(struct srv_req *req)
{
	FAKE_OF(req)->parked = true;
}

void srv_req_drop(struct srv_req *req)
{
	FAKE_OF(req)->dropped = true;
}

static int clients_deleted;

int mdt_client_del(struct mdt_txn *t, const uint64_t uuid[2])
{
	(void)t;
	(void)uuid;
	clients_deleted++;
	return 0;
}

/* ---- a lock manager, and requests to it ---- */

static bool same_owner(const struct lock_range *l, uint64_t sid, uint64_t owner)
{
	return l->sid == sid && l->owner == owner;
}


static struct mds m;
static struct fake_req fakes[64];
static int nfakes;


static void mds_up(void)
{
	memset(&m, 0, sizeof(m));
	u64map_init(&m.locks);
	u64map_init(&m.lock_wakes);
	m.recovery_s = 100;
	nfakes = 0;
	clients_deleted = 0;
}

/* Every lock and waiter gone: the manager keeps nothing (no inode entry, no waiter count). */
static void mds_down_empty(void)
{
	CHECK_EQ(m.locks.count, 0);
	CHECK_EQ(m.lock_waiters, 0);
	CHECK_EQ(m.lock_wakes.count, 0);
	mds_locks_destroy(&m);
}

static struct fake_req *fake_new(uint64_t conn_id)
{
	struct fake_req *f;

	REQUIRE(nfakes < (int)(sizeof(fakes) / sizeof(fakes[0])));
	f = &fakes[nfakes++];
	memset(f, 0, sizeof(*f));
	f->req.conn_id = conn_id;
	return f;
}

/* One MDS_LOCK of session sid; *out (may be NULL) gets the reply of a test. */
static int lock_req(uint64_t sid, uint64_t owner, uint64_t ino, uint32_t type, uint64_t start,
		    uint64_t end, uint32_t flags, struct fake_req **fake, struct lw_lock_rep *out)
{
	struct lw_lock_req q = { .ino = ino, .owner = owner, .start = start, .end = end,
				 .type = type, .flags = flags, .pid = (uint32_t)(1000 + owner) };
	/* Only a request that may be parked, or that the caller looks at, lives on. */
	struct fake_req scratch = { .req.conn_id = sid };
	struct fake_req *f = (flags & LW_LK_WAIT) || fake ? fake_new(sid) : &scratch;
	void *reply = NULL;
	uint32_t len = 0;
	int rc = mds_lock(&m, &f->req, sid, &q, &reply, &len);

	mds_locks_wake(&m); /* the end of its batch */

	/* A reply with every answer but a cancel's and a wait's (on an error the dispatcher
	 * frees what is there). */
	if (rc == 0 && !(flags & LW_LK_CANCEL)) {
		CHECK(reply != NULL);
		CHECK_EQ(len, sizeof(struct lw_lock_rep));
		if (reply && out)
			memcpy(out, reply, sizeof(*out));
	} else if (rc == 0 || rc == MDS_PARKED) {
		CHECK(reply == NULL);
	}
	free(reply);
	if (fake)
		*fake = f;
	return rc;
}

/* The common case: session 1, inode 7, no flags. */
static int lk(uint64_t owner, uint32_t type, uint64_t start, uint64_t end)
{
	return lock_req(1, owner, 7, type, start, end, 0, NULL, NULL);
}

/* An owner's locks on an inode, sorted by start, as "R0-9 W20-EOF" (F for flock ones). */
static const char *held(uint64_t sid, uint64_t owner, uint64_t ino)
{
	static char out[512];
	const struct lk_inode *li = u64map_get(&m.locks, ino);
	const struct lock_range *v[64];
	size_t n = 0, at = 0;

	out[0] = '\0';
	for (const struct lock_range *l = li ? li->locks : NULL; l; l = l->next)
		if (same_owner(l, sid, owner) && n < 64)
			v[n++] = l;
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && (v[j]->start < v[j - 1]->start ||
					     (v[j]->start == v[j - 1]->start && v[j - 1]->flock)); j--) {
			const struct lock_range *t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	for (size_t i = 0; i < n; i++) {
		char end[24];

		if (v[i]->end == EOF_)
			snprintf(end, sizeof(end), "EOF");
		else
			snprintf(end, sizeof(end), "%llu", (unsigned long long)v[i]->end);
		at += (size_t)snprintf(out + at, sizeof(out) - at, "%s%s%c%llu-%s", i ? " " : "",
				       v[i]->flock ? "F" : "", v[i]->type == F_WRLCK ? 'W' : 'R',
				       (unsigned long long)v[i]->start, end);
	}
	return out;
}

#define CHECK_HELD(owner, want)                                                            \
	do {                                                                                \
		const char *got_ = held(1, owner, 7);                                       \
		if (strcmp(got_, want) != 0)                                                \
			CHECK_FAIL_("owner %d holds \"%s\", want \"%s\"", (int)(owner), got_, want); \
	} while (0)

/* ---- one owner: merging and splitting ---- */

static void test_merge_same_type(void)
{
	mds_up();
	/* Overlapping, touching, and bridging ranges of one type become one lock. */
	CHECK_RC(lk(1, F_RDLCK, 10, 19), 0);
	CHECK_RC(lk(1, F_RDLCK, 20, 29), 0); /* touching: 19 + 1 */
	CHECK_HELD(1, "R10-29");
	CHECK_RC(lk(1, F_RDLCK, 40, 49), 0); /* a gap of 10 bytes: apart */
	CHECK_HELD(1, "R10-29 R40-49");
	CHECK_RC(lk(1, F_RDLCK, 30, 39), 0); /* fills the gap exactly */
	CHECK_HELD(1, "R10-49");
	CHECK_RC(lk(1, F_RDLCK, 5, 60), 0);  /* covers it all */
	CHECK_HELD(1, "R5-60");
	CHECK_RC(lk(1, F_RDLCK, 62, 70), 0); /* one byte short of touching */
	CHECK_HELD(1, "R5-60 R62-70");
	CHECK_RC(lk(1, F_RDLCK, 0, 4), 0);   /* touching from below */
	CHECK_HELD(1, "R0-60 R62-70");
	/* To the end of the file, and merged into from below. */
	CHECK_RC(lk(1, F_RDLCK, 100, EOF_), 0);
	CHECK_HELD(1, "R0-60 R62-70 R100-EOF");
	CHECK_RC(lk(1, F_RDLCK, 71, 99), 0);
	CHECK_HELD(1, "R0-60 R62-EOF");
	CHECK_RC(lk(1, F_RDLCK, 61, 61), 0);
	CHECK_HELD(1, "R0-EOF");
	CHECK_EQ(m.locks.count, 1);
	CHECK_RC(lk(1, F_UNLCK, 0, EOF_), 0);
	CHECK_HELD(1, "");
	mds_down_empty();
}

static void test_other_type_replaces(void)
{
	mds_up();
	/* A read lock inside a write lock: the write lock splits around it (fcntl(2) converts). */
	CHECK_RC(lk(1, F_WRLCK, 0, 99), 0);
	CHECK_RC(lk(1, F_RDLCK, 10, 19), 0);
	CHECK_HELD(1, "W0-9 R10-19 W20-99");
	/* Over one end of each: both cut, the new one between. */
	CHECK_RC(lk(1, F_WRLCK, 15, 24), 0);
	CHECK_HELD(1, "W0-9 R10-14 W15-99");
	/* A write lock over the read part merges with the write locks on both sides. */
	CHECK_RC(lk(1, F_WRLCK, 10, 14), 0);
	CHECK_HELD(1, "W0-99");
	/* Types differ: touching locks stay apart. */
	CHECK_RC(lk(1, F_RDLCK, 100, 109), 0);
	CHECK_HELD(1, "W0-99 R100-109");
	/* A whole-range change of type keeps nothing of the old. */
	CHECK_RC(lk(1, F_RDLCK, 0, 109), 0);
	CHECK_HELD(1, "R0-109");
	/* Downgrade at one end of a lock to EOF. */
	CHECK_RC(lk(1, F_WRLCK, 200, EOF_), 0);
	CHECK_RC(lk(1, F_RDLCK, 500, EOF_), 0);
	CHECK_HELD(1, "R0-109 W200-499 R500-EOF");
	CHECK_RC(lk(1, F_UNLCK, 0, EOF_), 0);
	mds_down_empty();
}

static void test_unlock_splits(void)
{
	mds_up();
	CHECK_RC(lk(1, F_WRLCK, 0, 99), 0);
	CHECK_RC(lk(1, F_UNLCK, 40, 59), 0);     /* the middle: split in two */
	CHECK_HELD(1, "W0-39 W60-99");
	CHECK_RC(lk(1, F_UNLCK, 0, 0), 0);       /* the first byte */
	CHECK_RC(lk(1, F_UNLCK, 99, 99), 0);     /* the last byte */
	CHECK_HELD(1, "W1-39 W60-98");
	CHECK_RC(lk(1, F_UNLCK, 30, 69), 0);     /* the ends of two locks */
	CHECK_HELD(1, "W1-29 W70-98");
	CHECK_RC(lk(1, F_UNLCK, 200, 300), 0);   /* nothing there */
	CHECK_HELD(1, "W1-29 W70-98");
	CHECK_RC(lk(2, F_UNLCK, 0, EOF_), 0);    /* another owner's unlock: nothing of owner 1 */
	CHECK_HELD(1, "W1-29 W70-98");
	/* A lock to EOF split by an unlock in its middle keeps its tail to EOF. */
	CHECK_RC(lk(1, F_RDLCK, 1000, EOF_), 0);
	CHECK_RC(lk(1, F_UNLCK, 2000, 2999), 0);
	CHECK_HELD(1, "W1-29 W70-98 R1000-1999 R3000-EOF");
	CHECK_RC(lk(1, F_UNLCK, 0, EOF_), 0);
	CHECK_HELD(1, "");
	/* Unlocking where nothing was ever locked leaves no inode behind. */
	CHECK_RC(lock_req(1, 1, 99, F_UNLCK, 0, EOF_, 0, NULL, NULL), 0);
	mds_down_empty();
}

/* ---- owners ---- */

static void test_conflicts_between_owners(void)
{
	mds_up();
	CHECK_RC(lk(1, F_RDLCK, 0, 99), 0);
	CHECK_RC(lk(2, F_RDLCK, 50, 149), 0);   /* read and read: shared */
	CHECK_RC(lk(3, F_WRLCK, 99, 99), -EAGAIN); /* one byte of a read lock */
	CHECK_RC(lk(3, F_WRLCK, 150, 199), 0);  /* just past it */
	CHECK_RC(lk(1, F_RDLCK, 199, 199), -EAGAIN); /* read against write */
	CHECK_RC(lk(1, F_WRLCK, 0, 9), 0);      /* its own part alone: converts */
	CHECK_HELD(1, "W0-9 R10-99");
	/* An upgrade that overlaps another's read lock fails and changes nothing. */
	CHECK_RC(lk(1, F_WRLCK, 40, 60), -EAGAIN);
	CHECK_HELD(1, "W0-9 R10-99");
	CHECK_HELD(2, "R50-149");
	CHECK_HELD(3, "W150-199");
	/* The same owner id in another session is another owner. */
	CHECK_RC(lock_req(2, 1, 7, F_RDLCK, 5, 5, 0, NULL, NULL), -EAGAIN);
	CHECK_RC(lock_req(2, 1, 7, F_RDLCK, 10, 10, 0, NULL, NULL), 0);
	CHECK_HELD(1, "W0-9 R10-99");
	CHECK_EQ(strcmp(held(2, 1, 7), "R10-10"), 0);
	/* Other inodes are other files. */
	CHECK_RC(lock_req(1, 2, 8, F_WRLCK, 0, EOF_, 0, NULL, NULL), 0);
	CHECK_EQ(m.locks.count, 2);
	/* A session's end takes its locks, of every owner and inode, and no other's. */
	mds_locks_drop_session(&m, 1);
	mds_locks_wake(&m);
	CHECK_EQ(m.locks.count, 1);
	CHECK_HELD(1, "");
	CHECK_EQ(strcmp(held(2, 1, 7), "R10-10"), 0);
	CHECK_RC(lk(4, F_WRLCK, 0, 9), 0); /* what owner 1 held is free */
	CHECK_RC(lk(4, F_UNLCK, 0, EOF_), 0);
	mds_locks_drop_session(&m, 2);
	mds_locks_wake(&m);
	mds_down_empty();
}

static void test_getlk(void)
{
	struct lw_lock_rep rep;

	mds_up();
	/* Nothing held: F_UNLCK, and a test leaves no inode behind. */
	memset(&rep, 0xff, sizeof(rep));
	CHECK_RC(lock_req(1, 1, 7, F_WRLCK, 0, EOF_, LW_LK_TEST, NULL, &rep), 0);
	CHECK_EQ(rep.type, F_UNLCK);
	CHECK_EQ(m.locks.count, 0);
	CHECK_RC(lk(2, F_WRLCK, 100, 199), 0);
	CHECK_RC(lk(3, F_RDLCK, 300, 399), 0);
	/* A conflict is described as it is held, with its owner's pid. */
	CHECK_RC(lock_req(1, 1, 7, F_RDLCK, 150, 150, LW_LK_TEST, NULL, &rep), 0);
	CHECK_EQ(rep.type, F_WRLCK);
	CHECK_EQ(rep.start, 100);
	CHECK_EQ(rep.end, 199);
	CHECK_EQ(rep.pid, 1002);
	CHECK_RC(lock_req(1, 1, 7, F_WRLCK, 350, EOF_, LW_LK_TEST, NULL, &rep), 0);
	CHECK_EQ(rep.type, F_RDLCK);
	CHECK_EQ(rep.start, 300);
	CHECK_EQ(rep.end, 399);
	CHECK_EQ(rep.pid, 1003);
	/* A read test against a read lock, a range between locks, and one's own lock: no conflict. */
	CHECK_RC(lock_req(1, 1, 7, F_RDLCK, 0, 99, LW_LK_TEST, NULL, &rep), 0);
	CHECK_EQ(rep.type, F_UNLCK);
	CHECK_RC(lock_req(1, 1, 7, F_RDLCK, 300, 399, LW_LK_TEST, NULL, &rep), 0);
	CHECK_EQ(rep.type, F_UNLCK);
	CHECK_RC(lock_req(1, 1, 7, F_WRLCK, 200, 299, LW_LK_TEST, NULL, &rep), 0);
	CHECK_EQ(rep.type, F_UNLCK);
	CHECK_RC(lock_req(1, 2, 7, F_WRLCK, 0, EOF_, LW_LK_TEST, NULL, &rep), 0);
	CHECK_EQ(rep.type, F_RDLCK); /* owner 2 sees owner 3's read lock only */
	CHECK_EQ(rep.start, 300);
	/* A test takes nothing. */
	CHECK_HELD(1, "");
	/* POSIX tests do not see flock locks. */
	CHECK_RC(lock_req(1, 2, 7, F_UNLCK, 0, EOF_, 0, NULL, NULL), 0);
	CHECK_RC(lock_req(1, 3, 7, F_UNLCK, 0, EOF_, 0, NULL, NULL), 0);
	CHECK_RC(lock_req(1, 5, 7, F_WRLCK, 0, EOF_, LW_LK_FLOCK, NULL, NULL), 0);
	CHECK_RC(lock_req(1, 1, 7, F_WRLCK, 0, EOF_, LW_LK_TEST, NULL, &rep), 0);
	CHECK_EQ(rep.type, F_UNLCK);
	CHECK_RC(lock_req(1, 5, 7, F_UNLCK, 0, EOF_, LW_LK_FLOCK, NULL, NULL), 0);
	mds_down_empty();
}

static void test_flock_apart_from_posix(void)
{
	const uint32_t FL = LW_LK_FLOCK;

	mds_up();
	/* A POSIX write lock and another owner's flock write lock on one file: no conflict. */
	CHECK_RC(lk(1, F_WRLCK, 0, EOF_), 0);
	CHECK_RC(lock_req(1, 2, 7, F_WRLCK, 0, EOF_, FL, NULL, NULL), 0);
	/* flock against flock: shared and exclusive as flock(2) says. */
	CHECK_RC(lock_req(1, 3, 7, F_RDLCK, 0, EOF_, FL, NULL, NULL), -EAGAIN);
	CHECK_RC(lock_req(1, 2, 7, F_RDLCK, 0, EOF_, FL, NULL, NULL), 0); /* converts */
	CHECK_RC(lock_req(1, 3, 7, F_RDLCK, 0, EOF_, FL, NULL, NULL), 0);
	CHECK_RC(lock_req(1, 3, 7, F_WRLCK, 0, EOF_, FL, NULL, NULL), -EAGAIN);
	CHECK_HELD(2, "FR0-EOF");
	CHECK_HELD(3, "FR0-EOF");
	/* One owner's flock and POSIX locks are apart: unlocking one leaves the other. */
	CHECK_RC(lock_req(1, 1, 7, F_RDLCK, 0, EOF_, FL, NULL, NULL), 0);
	CHECK_HELD(1, "W0-EOF FR0-EOF");
	CHECK_RC(lk(1, F_UNLCK, 0, EOF_), 0);
	CHECK_HELD(1, "FR0-EOF");
	CHECK_RC(lk(1, F_WRLCK, 0, 9), 0);
	CHECK_RC(lock_req(1, 1, 7, F_UNLCK, 0, EOF_, FL, NULL, NULL), 0);
	CHECK_HELD(1, "W0-9");
	/* A flock conversion never merges with a POSIX lock of the same type. */
	CHECK_RC(lock_req(1, 1, 7, F_WRLCK, 0, EOF_, FL, NULL, NULL), -EAGAIN); /* 2, 3 read */
	CHECK_RC(lock_req(1, 2, 7, F_UNLCK, 0, EOF_, FL, NULL, NULL), 0);
	CHECK_RC(lock_req(1, 3, 7, F_UNLCK, 0, EOF_, FL, NULL, NULL), 0);
	CHECK_RC(lock_req(1, 1, 7, F_WRLCK, 0, EOF_, FL, NULL, NULL), 0);
	CHECK_HELD(1, "W0-9 FW0-EOF");
	CHECK_RC(lock_req(1, 1, 7, F_UNLCK, 0, EOF_, FL, NULL, NULL), 0);
	CHECK_RC(lk(1, F_UNLCK, 0, EOF_), 0);
	mds_down_empty();
}

/* ---- waiting ---- */

static void test_waiters_granted_in_order(void)
{
	struct fake_req *b, *c, *d;

	mds_up();
	CHECK_RC(lk(1, F_WRLCK, 0, 99), 0);
	/* Without WAIT a conflict fails; with it the request is parked, unanswered. */
	CHECK_RC(lock_req(1, 2, 7, F_WRLCK, 50, 59, 0, NULL, NULL), -EAGAIN);
	CHECK_RC(lock_req(1, 2, 7, F_WRLCK, 50, 59, LW_LK_WAIT, &b, NULL), MDS_PARKED);
	CHECK_RC(lock_req(1, 3, 7, F_RDLCK, 0, 9, LW_LK_WAIT, &c, NULL), MDS_PARKED);
	CHECK_RC(lock_req(1, 4, 7, F_RDLCK, 55, 55, LW_LK_WAIT, &d, NULL), MDS_PARKED);
	CHECK(b->parked && c->parked && d->parked);
	CHECK_EQ(m.lock_waiters, 3);
	CHECK_EQ(b->replies + c->replies + d->replies, 0);
	CHECK_HELD(2, "");
	/* A partial unlock that leaves every conflict wakes nobody. */
	CHECK_RC(lk(1, F_UNLCK, 20, 49), 0);
	CHECK_EQ(b->replies + c->replies + d->replies, 0);
	/* A downgrade lets the readers in (c, and d although b, waiting for a write lock over
	 * its byte, came first: waiters are granted when they can be), not the writer. */
	CHECK_RC(lk(1, F_RDLCK, 0, 99), 0);
	CHECK_EQ(c->replies, 1);
	CHECK_RC(c->status, 0);
	CHECK_EQ(c->body_len, sizeof(struct lw_lock_rep));
	CHECK_EQ(d->replies, 1);
	CHECK_RC(d->status, 0);
	CHECK_EQ(b->replies, 0);
	CHECK_EQ(m.lock_waiters, 1);
	CHECK_HELD(3, "R0-9");
	CHECK_HELD(4, "R55-55");
	/* b needs every reader of 50-59 gone. */
	CHECK_RC(lk(1, F_UNLCK, 0, EOF_), 0);
	CHECK_EQ(b->replies, 0);
	CHECK_RC(lk(4, F_UNLCK, 55, 55), 0);
	CHECK_EQ(b->replies, 1);
	CHECK_RC(b->status, 0);
	CHECK_HELD(2, "W50-59");
	CHECK_EQ(m.lock_waiters, 0);
	CHECK_RC(lk(2, F_UNLCK, 0, EOF_), 0);
	CHECK_RC(lk(3, F_UNLCK, 0, EOF_), 0);
	mds_down_empty();
}

static void test_waiter_cancel_and_drop(void)
{
	struct fake_req *b, *c, *cancel;

	mds_up();
	CHECK_RC(lk(1, F_WRLCK, 0, EOF_), 0);
	CHECK_RC(lock_req(1, 2, 7, F_WRLCK, 0, 0, LW_LK_WAIT, &b, NULL), MDS_PARKED);
	CHECK_RC(lock_req(2, 2, 7, F_WRLCK, 0, 0, LW_LK_WAIT, &c, NULL), MDS_PARKED);
	/* A cancel ends that owner's wait on that inode only: -EINTR. Another inode, or the same
	 * owner id of another session, cancels nothing. */
	CHECK_RC(lock_req(1, 2, 8, F_UNLCK, 0, 0, LW_LK_CANCEL, NULL, NULL), 0);
	CHECK_RC(lock_req(3, 2, 7, F_UNLCK, 0, 0, LW_LK_CANCEL, NULL, NULL), 0);
	CHECK_EQ(b->replies + c->replies, 0);
	CHECK_RC(lock_req(1, 2, 7, F_UNLCK, 0, 0, LW_LK_CANCEL, &cancel, NULL), 0);
	CHECK_EQ(cancel->replies, 0); /* answered by the caller */
	CHECK_EQ(b->replies, 1);
	CHECK_RC(b->status, -EINTR);
	CHECK_EQ(b->body_len, 0);
	CHECK_EQ(m.lock_waiters, 1);
	/* A connection that goes drops its waits unanswered (its client resends them). */
	c->req.conn_id = 55;
	mds_locks_drop_waiters(&m, 54);
	mds_locks_wake(&m);
	CHECK(!c->dropped);
	mds_locks_drop_waiters(&m, 55);
	mds_locks_wake(&m);
	CHECK(c->dropped);
	CHECK_EQ(c->replies, 0);
	CHECK_EQ(m.lock_waiters, 0);
	/* Owner 1's unlock now grants nothing (nobody waits) and frees the inode. */
	CHECK_RC(lk(1, F_UNLCK, 0, EOF_), 0);
	CHECK_EQ(b->replies, 1);
	mds_down_empty();
}

static void test_session_end_grants_waiters(void)
{
	struct fake_req *b;

	mds_up();
	CHECK_RC(lock_req(5, 1, 7, F_WRLCK, 10, 20, 0, NULL, NULL), 0);
	CHECK_RC(lock_req(6, 1, 7, F_RDLCK, 15, 15, LW_LK_WAIT, &b, NULL), MDS_PARKED);
	mds_locks_drop_session(&m, 5);
	mds_locks_wake(&m);
	CHECK_EQ(b->replies, 1);
	CHECK_RC(b->status, 0);
	CHECK_EQ(strcmp(held(6, 1, 7), "R15-15"), 0);
	/* The waiters of a session that ends go with it, unanswered. */
	CHECK_RC(lock_req(7, 1, 7, F_WRLCK, 0, 0, LW_LK_WAIT, NULL, NULL), 0);
	CHECK_RC(lock_req(7, 2, 7, F_WRLCK, 15, 15, LW_LK_WAIT, &b, NULL), MDS_PARKED);
	mds_locks_drop_session(&m, 7);
	mds_locks_wake(&m);
	CHECK(b->dropped);
	CHECK_EQ(b->replies, 0);
	CHECK_EQ(strcmp(held(7, 1, 7), ""), 0);
	mds_locks_drop_session(&m, 6);
	mds_locks_wake(&m);
	mds_down_empty();
}

static void test_waiter_limit(void)
{
	mds_up();
	CHECK_RC(lk(1, F_WRLCK, 0, 0), 0);
	m.lock_waiters = MDS_MAX_LOCK_WAITERS; /* as if that many waited elsewhere */
	CHECK_RC(lock_req(1, 2, 7, F_WRLCK, 0, 0, LW_LK_WAIT, NULL, NULL), -ENOLCK);
	CHECK_EQ(m.lock_waiters, MDS_MAX_LOCK_WAITERS);
	CHECK(((struct lk_inode *)u64map_get(&m.locks, 7))->waiters == NULL);
	/* A conflict without a lock of its own on another inode leaves no entry for it. */
	CHECK_RC(lock_req(1, 2, 8, F_WRLCK, 0, 0, LW_LK_WAIT, NULL, NULL), 0);
	CHECK_RC(lock_req(1, 3, 8, F_WRLCK, 0, 0, LW_LK_WAIT, NULL, NULL), -ENOLCK);
	CHECK_RC(lock_req(1, 3, 8, F_RDLCK, 0, 0, 0, NULL, NULL), -EAGAIN);
	CHECK_EQ(strcmp(held(1, 3, 8), ""), 0);
	CHECK_RC(lock_req(1, 2, 8, F_UNLCK, 0, 0, 0, NULL, NULL), 0);
	CHECK_EQ(m.locks.count, 1);
	m.lock_waiters = 0;
	CHECK_RC(lk(1, F_UNLCK, 0, 0), 0);
	mds_down_empty();
}

/* ---- against a model: every byte of a small file, per owner ---- */

/*
 * Bytes 0..N-2 are themselves; byte N-1 stands for [N-1, EOF]: requests end before it or at
 * EOF, so it is never split. Owners 0-2 are (sid 1, owner 1), (sid 1, owner 2), (sid 2, owner 1).
 */
#define N 40
#define NOWN 3
static const uint64_t own_sid[NOWN] = { 1, 1, 2 }, own_id[NOWN] = { 1, 2, 1 };

static uint64_t pos_of(uint64_t off)
{
	return off == EOF_ ? N - 1 : off;
}

/* The table equals the model: each owner's locks are exactly the maximal runs of one type. */
static void compare_model(const uint8_t model[NOWN][N], int step)
{
	const struct lk_inode *li = u64map_get(&m.locks, 7);
	uint8_t seen[NOWN][N] = { { 0 } };
	int runs[NOWN] = { 0 }, locks[NOWN] = { 0 };

	for (const struct lock_range *l = li ? li->locks : NULL; l; l = l->next) {
		int o;

		for (o = 0; o < NOWN && !same_owner(l, own_sid[o], own_id[o]); o++)
			;
		REQUIRE(o < NOWN && !l->flock);
		if (l->start > pos_of(l->end) || (l->end != EOF_ && l->end >= N - 1)) {
			CHECK_FAIL_("step %d: lock %llu-%llu out of the model", step,
				    (unsigned long long)l->start, (unsigned long long)l->end);
			continue;
		}
		locks[o]++;
		for (uint64_t b = l->start; b <= pos_of(l->end); b++)
			seen[o][b] = seen[o][b] ? 0xff : (uint8_t)l->type + 1;
	}
	for (int o = 0; o < NOWN; o++) {
		for (int b = 0; b < N; b++) {
			if (seen[o][b] != model[o][b]) {
				CHECK_FAIL_("step %d: owner %d byte %d: table %d, model %d", step, o, b,
					    seen[o][b], model[o][b]);
				return;
			}
			if (model[o][b] && (b == 0 || model[o][b - 1] != model[o][b]))
				runs[o]++;
		}
		if (locks[o] != runs[o])
			CHECK_FAIL_("step %d: owner %d holds %d locks for %d runs (not merged)", step, o,
				    locks[o], runs[o]);
	}
}

static void test_against_model(void)
{
	uint8_t model[NOWN][N] = { { 0 } }; /* 0 none, else type + 1 */
	const uint32_t types[3] = { F_RDLCK, F_WRLCK, F_UNLCK };
	int before = check_failures;

	mds_up();
	srand(15);
	for (int step = 0; step < 20000; step++) {
		int o = rand() % NOWN;
		uint32_t type = types[rand() % 3];
		uint64_t start = (uint64_t)(rand() % (N - 1)), end;
		bool test = rand() % 5 == 0 && type != F_UNLCK, conflict = false;
		struct lw_lock_rep rep;
		int rc;

		end = rand() % 6 == 0 ? EOF_ : start + (uint64_t)(rand() % (int)(N - 1 - start));
		for (int p = 0; p < NOWN; p++)
			for (uint64_t b = start; p != o && b <= pos_of(end); b++)
				if (model[p][b] == F_WRLCK + 1 || (model[p][b] && type == F_WRLCK))
					conflict = true;
		rc = lock_req(own_sid[o], own_id[o], 7, type, start, end, test ? LW_LK_TEST : 0, NULL,
			      &rep);
		if (test) {
			/* The answer is a lock that is there, of another owner, that conflicts. */
			CHECK_RC(rc, 0);
			CHECK_EQ(rep.type == F_UNLCK, !conflict);
			if (conflict && rep.type != F_UNLCK) {
				uint64_t hit = rep.start > start ? rep.start : start;
				int p;
				for (p = 0; p < NOWN; p++)
					if (p != o && model[p][pos_of(hit)] == rep.type + 1 &&
					    (rep.type == F_WRLCK || type == F_WRLCK))
						break;
				CHECK(p < NOWN);
				CHECK(rep.start <= pos_of(end) && pos_of(rep.end) >= start);
			}
		} else if (type != F_UNLCK && conflict) {
			CHECK_RC(rc, -EAGAIN);
		} else {
			CHECK_RC(rc, 0);
			for (uint64_t b = start; b <= pos_of(end); b++)
				model[o][b] = type == F_UNLCK ? 0 : (uint8_t)(type + 1);
		}
		compare_model((const uint8_t(*)[N])model, step);
		if (check_failures != before)
			break; /* the first divergence says it all */
	}
	for (int o = 0; o < NOWN; o++)
		CHECK_RC(lock_req(own_sid[o], own_id[o], 7, F_UNLCK, 0, EOF_, 0, NULL, NULL), 0);
	mds_down_empty();
}

/* ---- recovery after a start ---- */

static const uint64_t uuid_a[2] = { 0xa, 1 }, uuid_b[2] = { 0xb, 2 }, uuid_c[2] = { 0xc, 3 };

/* Recovery waiting for the clients a and b (sessions 1 and 2 of this run). */
static void recovery_up(void)
{
	uint64_t(*uuids)[2] = malloc(2 * sizeof(*uuids));

	REQUIRE(uuids != NULL);
	memcpy(uuids[0], uuid_a, sizeof(uuid_a));
	memcpy(uuids[1], uuid_b, sizeof(uuid_b));
	mds_locks_recovery_begin(&m, uuids, 2);
}

/* LW_LK_REPLAY of session sid (client uuid) on inode 7. */
static int replay(uint64_t sid, const uint64_t uuid[2], bool before, uint64_t owner, uint32_t type,
		  uint64_t start, uint64_t end, uint32_t flags)
{
	struct lw_lock_req q = { .ino = 7, .owner = owner, .start = start, .end = end, .type = type,
				 .flags = LW_LK_REPLAY | flags, .pid = (uint32_t)(1000 + owner) };
	void *reply = NULL;
	uint32_t len = 0;
	int rc = mds_lock_replay(&m, sid, uuid, before, &q, &reply, &len);

	if (rc == 0)
		CHECK_EQ(len, sizeof(struct lw_lock_rep));
	else
		CHECK(reply == NULL);
	free(reply);
	mds_locks_wake(&m);
	return rc;
}

static void replay_done(const uint64_t uuid[2])
{
	mds_lock_replay_done(&m, uuid);
	mds_locks_wake(&m);
}

static void test_recovery_grants_replays_and_holds_the_rest(void)
{
	struct fake_req *nb, *test, *wait, *free_range, *gone;
	struct lw_lock_rep rep;

	mds_up();
	recovery_up();
	CHECK(mds_locks_awaiting(&m, uuid_a) && mds_locks_awaiting(&m, uuid_b));
	CHECK(!mds_locks_awaiting(&m, uuid_c));
	/* Replays are granted at once, as they were held. */
	CHECK_RC(replay(1, uuid_a, false, 1, F_WRLCK, 0, 99, 0), 0);
	CHECK_RC(replay(2, uuid_b, false, 5, F_RDLCK, 200, 299, 0), 0);
	CHECK_RC(replay(2, uuid_b, false, 5, F_WRLCK, 0, EOF_, LW_LK_FLOCK), 0);
	CHECK_HELD(1, "W0-99");
	CHECK_EQ(strcmp(held(2, 5, 7), "FW0-EOF R200-299"), 0);
	/* One that conflicts with another client's replay: refused, nothing taken. */
	CHECK_RC(replay(2, uuid_b, false, 6, F_RDLCK, 50, 60, 0), -EAGAIN);
	CHECK_EQ(strcmp(held(2, 6, 7), ""), 0);
	/* A client this start does not wait for has nothing kept for it. */
	CHECK_RC(replay(3, uuid_c, false, 1, F_RDLCK, 1000, 1000, 0), -ENOLCK);
	CHECK_RC(replay(3, NULL, false, 1, F_RDLCK, 1000, 1000, 0), -ENOLCK);

	/* Everything else that takes or tests a lock waits for the end of recovery, with or
	 * without LW_LK_WAIT, and whether it conflicts or not. */
	CHECK_RC(lock_req(3, 1, 7, F_WRLCK, 0, 9, 0, &nb, NULL), MDS_PARKED);
	CHECK_RC(lock_req(3, 1, 7, F_WRLCK, 250, 250, LW_LK_TEST, &test, NULL), MDS_PARKED);
	CHECK_RC(lock_req(3, 2, 7, F_WRLCK, 300, 310, LW_LK_WAIT, &wait, NULL), MDS_PARKED);
	CHECK_RC(lock_req(3, 3, 7, F_RDLCK, 500, 510, 0, &free_range, NULL), MDS_PARKED);
	CHECK_RC(lock_req(3, 4, 7, F_RDLCK, 600, 610, LW_LK_WAIT, &gone, NULL), MDS_PARKED);
	CHECK(nb->parked && test->parked && wait->parked && free_range->parked && gone->parked);
	CHECK_EQ(m.lock_waiters, 5);
	/* Unlocks and cancels go through; the cancel answers its waiter at once. */
	CHECK_RC(lock_req(2, 5, 7, F_UNLCK, 290, 299, 0, NULL, NULL), 0);
	CHECK_EQ(strcmp(held(2, 5, 7), "FW0-EOF R200-289"), 0);
	CHECK_RC(lock_req(3, 4, 7, F_UNLCK, 0, EOF_, LW_LK_CANCEL, NULL, NULL), 0);
	CHECK_EQ(gone->replies, 1);
	CHECK_RC(gone->status, -EINTR);
	CHECK_EQ(nb->replies + test->replies + wait->replies + free_range->replies, 0);

	/* a is done; b is still awaited. */
	replay_done(uuid_a);
	CHECK(!mds_locks_awaiting(&m, uuid_a) && mds_locks_awaiting(&m, uuid_b));
	CHECK_EQ(nb->replies + test->replies + wait->replies + free_range->replies, 0);
	replay_done(uuid_c); /* not awaited: changes nothing */
	CHECK(m.lock_recovery.active);
	/* b done: recovery ends, and what waited is decided as if it came now. */
	replay_done(uuid_b);
	CHECK(!m.lock_recovery.active);
	CHECK_EQ(m.lock_recovery.replayed, 3);
	CHECK_EQ(nb->replies, 1);
	CHECK_RC(nb->status, -EAGAIN);                   /* a's replayed write lock */
	CHECK_EQ(test->replies, 1);
	CHECK_RC(test->status, 0);
	CHECK_EQ(test->body_len, sizeof(rep));
	CHECK_EQ(test->rep.type, F_RDLCK);               /* b's replayed read lock */
	CHECK_EQ(test->rep.start, 200);
	CHECK_EQ(test->rep.end, 289);
	CHECK_EQ(test->rep.pid, 1005);
	CHECK_EQ(wait->replies, 1);                      /* nothing in its way */
	CHECK_RC(wait->status, 0);
	CHECK_EQ(free_range->replies, 1);
	CHECK_RC(free_range->status, 0);
	CHECK_EQ(m.lock_waiters, 0);
	CHECK_EQ(strcmp(held(3, 2, 7), "W300-310"), 0);
	CHECK_EQ(strcmp(held(3, 3, 7), "R500-510"), 0);
	/* After recovery a test is answered at once again. */
	CHECK_RC(lock_req(3, 1, 7, F_RDLCK, 50, 50, LW_LK_TEST, NULL, &rep), 0);
	CHECK_EQ(rep.type, F_WRLCK);
	CHECK_EQ(rep.pid, 1001);
	CHECK_EQ(clients_deleted, 0);
	mds_locks_drop_session(&m, 1);
	mds_locks_drop_session(&m, 2);
	mds_locks_drop_session(&m, 3);
	mds_locks_wake(&m);
	mds_down_empty();
}

static void test_replay_repeated_after_done(void)
{
	mds_up();
	recovery_up();
	CHECK_RC(replay(1, uuid_a, false, 1, F_WRLCK, 10, 19, 0), 0);
	replay_done(uuid_a);
	/* Its connection broke before it heard that it was done: it replays again. What it holds
	 * is confirmed; anything else was not kept for it. */
	CHECK_RC(replay(1, uuid_a, true, 1, F_WRLCK, 10, 19, 0), 0);
	CHECK_RC(replay(1, uuid_a, true, 1, F_WRLCK, 12, 15, 0), 0);
	CHECK_RC(replay(1, uuid_a, true, 1, F_RDLCK, 10, 19, 0), -ENOLCK);
	CHECK_RC(replay(1, uuid_a, true, 1, F_WRLCK, 10, 20, 0), -ENOLCK);
	CHECK_RC(replay(1, uuid_a, true, 2, F_WRLCK, 10, 19, 0), -ENOLCK);
	CHECK_RC(replay(1, uuid_a, false, 1, F_WRLCK, 10, 19, 0), -ENOLCK); /* not said done */
	CHECK_HELD(1, "W10-19");
	CHECK(mds_locks_held_by(&m, 1));
	CHECK(!mds_locks_held_by(&m, 2));
	/* Replays again while b is still awaited go through as the first ones did. */
	CHECK_RC(replay(2, uuid_b, false, 1, F_RDLCK, 30, 39, 0), 0);
	CHECK_RC(replay(2, uuid_b, false, 1, F_RDLCK, 30, 39, 0), 0);
	CHECK_EQ(strcmp(held(2, 1, 7), "R30-39"), 0);
	replay_done(uuid_b);
	CHECK_RC(replay(2, uuid_b, false, 1, F_RDLCK, 40, 49, 0), -ENOLCK); /* too late */
	mds_locks_drop_session(&m, 1);
	mds_locks_drop_session(&m, 2);
	mds_locks_wake(&m);
	mds_down_empty();
}

static void test_recovery_window_expires(void)
{
	struct fake_req *w;
	uint64_t window = 100ull * 1000000000ull;

	mds_up();
	m.started_ns = 5;
	recovery_up();
	CHECK_RC(replay(1, uuid_a, false, 1, F_WRLCK, 0, 9, 0), 0);
	replay_done(uuid_a);
	CHECK_RC(lock_req(3, 1, 7, F_WRLCK, 5, 5, LW_LK_WAIT, &w, NULL), MDS_PARKED);
	/* Not yet: within the window b may still come. */
	CHECK_RC(mds_locks_recovery_expire(&m, NULL, 5 + window - 1), 0);
	CHECK(m.lock_recovery.active);
	CHECK_EQ(clients_deleted, 0);
	/* The window passed: b is given up (and forgotten in the MDT), the waiter is decided. */
	CHECK_RC(mds_locks_recovery_expire(&m, NULL, 5 + window), 0);
	CHECK(!m.lock_recovery.active);
	CHECK(!mds_locks_awaiting(&m, uuid_b));
	CHECK_EQ(clients_deleted, 1);
	mds_locks_wake(&m);
	CHECK_EQ(w->replies, 0); /* a's lock is in its way: it waits on */
	CHECK_RC(replay(2, uuid_b, false, 1, F_RDLCK, 100, 100, 0), -ENOLCK);
	CHECK_RC(lock_req(1, 1, 7, F_UNLCK, 0, EOF_, 0, NULL, NULL), 0);
	CHECK_EQ(w->replies, 1);
	CHECK_RC(w->status, 0);
	mds_locks_drop_session(&m, 3);
	mds_locks_wake(&m);
	mds_down_empty();
}

/* Grants let in by a request are decided after its batch: the replies leave in decision order. */
static void test_waiters_decided_after_the_batch(void)
{
	struct fake_req *w;
	struct lw_lock_req q = { .ino = 7, .owner = 1, .start = 0, .end = EOF_, .type = F_UNLCK };
	struct fake_req *u;
	void *reply = NULL;
	uint32_t len = 0;

	mds_up();
	CHECK_RC(lk(1, F_WRLCK, 0, 9), 0);
	CHECK_RC(lock_req(1, 2, 7, F_WRLCK, 0, 0, LW_LK_WAIT, &w, NULL), MDS_PARKED);
	u = fake_new(1);
	CHECK_RC(mds_lock(&m, &u->req, 1, &q, &reply, &len), 0);
	free(reply);
	CHECK_EQ(w->replies, 0);       /* the unlock's batch has not been answered yet */
	CHECK_EQ(m.lock_wakes.count, 1);
	mds_locks_wake(&m);
	CHECK_EQ(w->replies, 1);
	CHECK_RC(w->status, 0);
	CHECK_HELD(2, "W0-0");
	CHECK_RC(lk(2, F_UNLCK, 0, EOF_), 0);
	mds_down_empty();
}

int main(void)
{
	RUN(test_merge_same_type);
	RUN(test_other_type_replaces);
	RUN(test_unlock_splits);
	RUN(test_conflicts_between_owners);
	RUN(test_getlk);
	RUN(test_flock_apart_from_posix);
	RUN(test_waiters_granted_in_order);
	RUN(test_waiter_cancel_and_drop);
	RUN(test_session_end_grants_waiters);
	RUN(test_waiter_limit);
	RUN(test_against_model);
	RUN(test_recovery_grants_replays_and_holds_the_rest);
	RUN(test_replay_repeated_after_done);
	RUN(test_recovery_window_expires);
	RUN(test_waiters_decided_after_the_batch);
	return check_report();
}
