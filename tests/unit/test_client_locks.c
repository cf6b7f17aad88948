/*
 * libloom's record of the locks it holds (src/client/locks.c), included whole: what the MDS's
 * replies make of it (grants, unlocks, merges and splits, flock apart from fcntl, one inode
 * apart from another; tests, cancels and failures change nothing), checked against a model of
 * every byte, and the replay after an MDS restart: what is sent, in what order, and what a
 * refusal or a lost connection leaves.
 *
 * Not linked with libloomclient nor the RPC layer: the hello's calls (rpc_hs_call) are answered
 * by a script here, and fs_cred / fs_conn_error are stubs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>

#include "check.h"
#include "client/locks.c"

int check_failures;
const char *check_current = "";

#define EOF_ UINT64_MAX

/* ---- stubs ---- */

void fs_cred(loom_fs *fs, struct loom_cred *out)
{
	(void)fs;
	memset(out, 0, sizeof(*out));
	out->uid = 1000;
}

bool fs_conn_error(int rc)
{
	return rc == -EIO || rc == -EPIPE || rc == -ECONNRESET || rc == -ETIMEDOUT || rc == -EPROTO;
}

/* The hello's calls: each request is kept, and answered with the next scripted status (0 when
 * the script is over). */
#define MAX_SENT 64
static struct lw_lock_req sent[MAX_SENT];
static int nsent;
static int script[MAX_SENT], nscript, at_script;

int rpc_hs_call(struct rpc_hs *hs, uint16_t opcode, const void *body, uint32_t len, void *reply,
		uint32_t cap, uint32_t *rlen)
{
	struct lw_lock_req q;
	int rc = at_script < nscript ? script[at_script++] : 0;

	(void)hs;
	REQUIRE(opcode == LW_OP_MDS_LOCK);
	REQUIRE(len >= sizeof(q) && nsent < MAX_SENT);
	memcpy(&q, (const uint8_t *)body + len - sizeof(q), sizeof(q)); /* after the cred */
	sent[nsent++] = q;
	*rlen = 0;
	if (rc == 0 && (q.flags & LW_LK_REPLAY)) {
		struct lw_lock_rep rep = { .type = F_UNLCK };
		REQUIRE(cap >= sizeof(rep));
		memcpy(reply, &rep, sizeof(rep));
		*rlen = sizeof(rep);
	}
	return rc;
}

static void hs_script(int n, const int *statuses)
{
	nsent = 0;
	nscript = n;
	at_script = 0;
	if (n)
		memcpy(script, statuses, (size_t)n * sizeof(*statuses));
}

/* ---- a client, and the MDS's answers ---- */

static loom_fs fs;

static void fs_up(void)
{
	memset(&fs, 0, sizeof(fs));
	held_locks_init(&fs);
	hs_script(0, NULL);
}

static void fs_down(void)
{
	held_locks_destroy(&fs);
}

/* The MDS answered an MDS_LOCK of owner on ino with status. */
static void answer(uint64_t ino, uint64_t owner, uint32_t type, uint64_t start, uint64_t end,
		   uint32_t flags, int status)
{
	struct held_note n = { .fs = &fs, .req = { .ino = ino, .owner = owner, .start = start,
						   .end = end, .type = type, .flags = flags,
						   .pid = (uint32_t)(100 + owner) } };
	struct rpc_call call;

	memset(&call, 0, sizeof(call));
	call.opcode = LW_OP_MDS_LOCK;
	call.status = status;
	held_locks_on_reply(&call, &n);
}

static void granted(uint64_t owner, uint32_t type, uint64_t start, uint64_t end)
{
	answer(7, owner, type, start, end, 0, 0);
}

/* An owner's ranges on an inode, sorted by start, as "R0-9 W20-EOF" (F for flock ones). */
static const char *held(uint64_t ino, uint64_t owner)
{
	static char out[512];
	const struct lock_range *v[64];
	size_t n = 0, at = 0;

	out[0] = '\0';
	for (const struct lock_range *l = u64map_get(&fs.held, ino); l; l = l->next)
		if (l->owner == owner && n < 64)
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

#define CHECK_HELD(ino, owner, want)                                                       \
	do {                                                                                \
		const char *got_ = held(ino, owner);                                        \
		if (strcmp(got_, want) != 0)                                                \
			CHECK_FAIL_("owner %d on %d holds \"%s\", want \"%s\"", (int)(owner),  \
				    (int)(ino), got_, want);                                 \
	} while (0)

/* ---- what replies make of the record ---- */

static void test_grants_merge_and_split(void)
{
	fs_up();
	granted(1, F_WRLCK, 0, 99);
	CHECK_HELD(7, 1, "W0-99");
	granted(1, F_RDLCK, 40, 59);         /* converts the middle: split around it */
	CHECK_HELD(7, 1, "W0-39 R40-59 W60-99");
	granted(1, F_WRLCK, 40, 59);         /* back: one lock again */
	CHECK_HELD(7, 1, "W0-99");
	granted(1, F_WRLCK, 100, 199);       /* touching, same type: merged */
	CHECK_HELD(7, 1, "W0-199");
	granted(1, F_UNLCK, 50, 149);        /* an unlock in the middle splits */
	CHECK_HELD(7, 1, "W0-49 W150-199");
	granted(1, F_RDLCK, 1000, EOF_);
	granted(1, F_UNLCK, 2000, 2999);
	CHECK_HELD(7, 1, "W0-49 W150-199 R1000-1999 R3000-EOF");
	CHECK_EQ(held_locks_count(&fs, 7), 4);
	/* Another owner, another inode, and flock locks are apart. */
	granted(2, F_RDLCK, 0, 9);
	answer(8, 1, F_WRLCK, 0, EOF_, 0, 0);
	answer(7, 1, F_WRLCK, 0, EOF_, LW_LK_FLOCK, 0);
	CHECK_HELD(7, 1, "W0-49 FW0-EOF W150-199 R1000-1999 R3000-EOF");
	CHECK_HELD(7, 2, "R0-9");
	CHECK_HELD(8, 1, "W0-EOF");
	answer(7, 1, F_UNLCK, 0, EOF_, 0, 0);           /* POSIX only: the flock lock stays */
	CHECK_HELD(7, 1, "FW0-EOF");
	answer(7, 1, F_UNLCK, 0, EOF_, LW_LK_FLOCK, 0);
	CHECK_HELD(7, 1, "");
	granted(2, F_UNLCK, 0, EOF_);
	answer(8, 1, F_UNLCK, 0, EOF_, 0, 0);
	CHECK_EQ(fs.held.count, 0);                     /* nothing left behind */
	fs_down();
}

static void test_what_changes_nothing(void)
{
	fs_up();
	granted(1, F_WRLCK, 0, 9);
	/* Refused, failed, tests, cancels, and the hello's own requests. */
	answer(7, 1, F_WRLCK, 10, 19, 0, -EAGAIN);
	answer(7, 1, F_WRLCK, 10, 19, LW_LK_WAIT, -EINTR);
	answer(7, 1, F_UNLCK, 0, EOF_, 0, -EIO);
	answer(7, 1, F_WRLCK, 10, 19, LW_LK_TEST, 0);
	answer(7, 1, F_UNLCK, 0, EOF_, LW_LK_CANCEL, 0);
	answer(7, 1, F_WRLCK, 20, 29, LW_LK_REPLAY, 0);
	answer(7, 1, F_UNLCK, 0, EOF_, LW_LK_REPLAY_DONE, 0);
	CHECK_HELD(7, 1, "W0-9");
	/* A waiting request that was granted counts as any grant. */
	answer(7, 1, F_WRLCK, 10, 19, LW_LK_WAIT, 0);
	CHECK_HELD(7, 1, "W0-19");
	granted(1, F_UNLCK, 0, EOF_);
	fs_down();
}

/* Bytes 0..N-2 are themselves; byte N-1 stands for [N-1, EOF]. */
#define N 40
#define NOWN 2

static uint64_t pos_of(uint64_t off)
{
	return off == EOF_ ? N - 1 : off;
}

/* The record equals the model: each owner's ranges are exactly the maximal runs of one type. */
static void compare_model(const uint8_t model[NOWN][N], int step)
{
	uint8_t seen[NOWN][N] = { { 0 } };
	int runs[NOWN] = { 0 }, ranges[NOWN] = { 0 };

	for (const struct lock_range *l = u64map_get(&fs.held, 7); l; l = l->next) {
		int o = (int)l->owner - 1;

		REQUIRE(o >= 0 && o < NOWN && !l->flock);
		ranges[o]++;
		for (uint64_t b = l->start; b <= pos_of(l->end); b++)
			seen[o][b] = seen[o][b] ? 0xff : (uint8_t)l->type + 1;
	}
	for (int o = 0; o < NOWN; o++) {
		for (int b = 0; b < N; b++) {
			if (seen[o][b] != model[o][b]) {
				CHECK_FAIL_("step %d: owner %d byte %d: record %d, model %d", step, o, b,
					    seen[o][b], model[o][b]);
				return;
			}
			if (model[o][b] && (b == 0 || model[o][b - 1] != model[o][b]))
				runs[o]++;
		}
		if (ranges[o] != runs[o])
			CHECK_FAIL_("step %d: owner %d has %d ranges for %d runs (not merged)", step, o,
				    ranges[o], runs[o]);
	}
}

static void test_against_model(void)
{
	uint8_t model[NOWN][N] = { { 0 } };
	const uint32_t types[3] = { F_RDLCK, F_WRLCK, F_UNLCK };
	int before = check_failures;

	fs_up();
	srand(15);
	for (int step = 0; step < 20000 && check_failures == before; step++) {
		int o = rand() % NOWN;
		uint32_t type = types[rand() % 3];
		uint64_t start = (uint64_t)(rand() % (N - 1));
		uint64_t end = rand() % 6 == 0 ? EOF_ : start + (uint64_t)(rand() % (int)(N - 1 - start));
		int status = rand() % 4 == 0 ? -EAGAIN : 0;

		/* Refused requests are mixed in: they change nothing. */
		answer(7, (uint64_t)o + 1, type, start, end, 0, status);
		if (status == 0)
			for (uint64_t b = start; b <= pos_of(end); b++)
				model[o][b] = type == F_UNLCK ? 0 : (uint8_t)(type + 1);
		compare_model((const uint8_t(*)[N])model, step);
	}
	fs_down();
}

/* ---- the replay ---- */

static void test_replay_sends_every_lock_then_the_end(void)
{
	int statuses[] = { 0, 0, 0, 0 };

	fs_up();
	granted(1, F_WRLCK, 0, 99);
	granted(1, F_UNLCK, 40, 59);
	granted(2, F_RDLCK, 500, EOF_);
	answer(9, 3, F_WRLCK, 0, EOF_, LW_LK_FLOCK, 0);
	hs_script(4, statuses);
	CHECK_RC(held_locks_replay(&fs, NULL), 0);
	REQUIRE(nsent == 5);
	/* Every range once, as held; the end last. */
	for (int i = 0; i < 4; i++) {
		const struct lw_lock_req *q = &sent[i];
		bool flock = q->flags & LW_LK_FLOCK;

		CHECK_EQ(q->flags & ~LW_LK_FLOCK, LW_LK_REPLAY);
		CHECK_EQ(q->pid, 100 + q->owner);
		if (q->ino == 9) {
			CHECK(flock && q->owner == 3 && q->type == F_WRLCK && q->start == 0 && q->end == EOF_);
		} else {
			CHECK(!flock && q->ino == 7);
			CHECK((q->owner == 1 && q->type == F_WRLCK && q->start == 0 && q->end == 39) ||
			      (q->owner == 1 && q->type == F_WRLCK && q->start == 60 && q->end == 99) ||
			      (q->owner == 2 && q->type == F_RDLCK && q->start == 500 && q->end == EOF_));
		}
	}
	CHECK_EQ(sent[4].flags, LW_LK_REPLAY_DONE);
	CHECK_EQ(sent[4].type, F_UNLCK);
	CHECK(sent[4].start == 0 && sent[4].end == EOF_);
	/* Nothing changed here. */
	CHECK_HELD(7, 1, "W0-39 W60-99");
	CHECK_HELD(7, 2, "R500-EOF");
	CHECK_HELD(9, 3, "FW0-EOF");
	/* With nothing held, the end is said all the same. */
	granted(1, F_UNLCK, 0, EOF_);
	granted(2, F_UNLCK, 0, EOF_);
	answer(9, 3, F_UNLCK, 0, EOF_, LW_LK_FLOCK, 0);
	hs_script(0, NULL);
	CHECK_RC(held_locks_replay(&fs, NULL), 0);
	CHECK_EQ(nsent, 1);
	CHECK_EQ(sent[0].flags, LW_LK_REPLAY_DONE);
	fs_down();
}

static void test_replay_refused_is_forgotten(void)
{
	/* The first replay sent is refused, the others granted, the end answered. */
	int statuses[] = { -ENOLCK, 0, 0 };
	uint64_t lost_ino;

	fs_up();
	granted(1, F_WRLCK, 0, 9);
	granted(1, F_WRLCK, 20, 29);
	hs_script(3, statuses);
	CHECK_RC(held_locks_replay(&fs, NULL), 0);
	REQUIRE(nsent == 3);
	lost_ino = sent[0].start;
	CHECK_HELD(7, 1, lost_ino == 0 ? "W20-29" : "W0-9");
	CHECK_EQ(sent[2].flags, LW_LK_REPLAY_DONE);
	/* An MDS that knows no replay: every lock is lost, and the end's -EINVAL is no error. */
	{
		int old[] = { -EINVAL, -EINVAL };

		hs_script(2, old);
		CHECK_RC(held_locks_replay(&fs, NULL), 0);
		CHECK_EQ(nsent, 2);
		CHECK_EQ(fs.held.count, 0);
	}
	fs_down();
}

static void test_replay_cut_by_the_connection(void)
{
	int broken[] = { 0, -ECONNRESET }, fine[] = { 0, 0, 0 };

	fs_up();
	granted(1, F_RDLCK, 0, 9);
	granted(2, F_RDLCK, 0, 9);
	/* The connection fails at the second replay: the hello fails, nothing is forgotten, the end
	 * is not said. */
	hs_script(2, broken);
	CHECK_RC(held_locks_replay(&fs, NULL), -ECONNRESET);
	CHECK_EQ(nsent, 2);
	CHECK_HELD(7, 1, "R0-9");
	CHECK_HELD(7, 2, "R0-9");
	/* The next connection's hello replays everything again. */
	hs_script(3, fine);
	CHECK_RC(held_locks_replay(&fs, NULL), 0);
	CHECK_EQ(nsent, 3);
	CHECK_EQ(sent[2].flags, LW_LK_REPLAY_DONE);
	/* A connection lost at the end: the hello fails too (the end must reach the MDS). */
	{
		int end_lost[] = { 0, 0, -EIO };

		hs_script(3, end_lost);
		CHECK_RC(held_locks_replay(&fs, NULL), -EIO);
	}
	granted(1, F_UNLCK, 0, EOF_);
	granted(2, F_UNLCK, 0, EOF_);
	fs_down();
}

int main(void)
{
	RUN(test_grants_merge_and_split);
	RUN(test_what_changes_nothing);
	RUN(test_against_model);
	RUN(test_replay_sends_every_lock_then_the_end);
	RUN(test_replay_refused_is_forgotten);
	RUN(test_replay_cut_by_the_connection);
	return check_report();
}
