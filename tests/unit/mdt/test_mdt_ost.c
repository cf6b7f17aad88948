/* The OST table (register, heartbeat, expiry) and the stripe allocator. */
#include "fixture.h"

static struct loom_cred root_cr;

static const struct mdt_ost *ost(struct fx *f, uint32_t idx)
{
	uint32_t n, gen;
	const struct mdt_ost *t = mdt_ost_table(f->s, &n, &gen);

	for (uint32_t i = 0; i < n; i++)
		if (t[i].idx == idx)
			return &t[i];
	return NULL;
}

static uint32_t table_gen(struct fx *f)
{
	uint32_t n, gen;

	mdt_ost_table(f->s, &n, &gen);
	return gen;
}

static uint32_t table_count(struct fx *f)
{
	uint32_t n, gen;

	mdt_ost_table(f->s, &n, &gen);
	return n;
}

/* One allocation in its own request. */
static int alloc(struct fx *f, int32_t count, int32_t offset, struct loom_ostobj *objs, uint32_t *n)
{
	struct mdt_txn *t = fx_op_begin(f);

	return fx_op_end(f, t, mdt_alloc_stripes(t, count, offset, NULL, 1, 0, objs, n));
}

static void heartbeat(struct fx *f, uint32_t idx, uint64_t free_kib, uint32_t state, uint64_t now)
{
	struct lw_statfs sf = fx_statfs_kib(free_kib);

	sf.state = state;
	REQUIRE_RC(mdt_ost_heartbeat(f->s, idx, &sf, now), 0);
}

static void test_register(void)
{
	struct fx f;
	struct lw_ost_register_req req;
	struct mdt_txn *t;
	uint32_t idx, gen;

	fx_init(&f);
	CHECK_EQ(table_count(&f), 0);
	gen = table_gen(&f);
	REQUIRE_RC(fx_ost_register(&f, 3, "uuid-3", 1000, &idx), 0);
	CHECK_EQ(idx, 3);
	CHECK(table_gen(&f) != gen);
	/* any index: the lowest free one */
	REQUIRE_RC(fx_ost_register(&f, UINT32_MAX, "uuid-a", 1000, &idx), 0);
	CHECK_EQ(idx, 0);
	REQUIRE_RC(fx_ost_register(&f, UINT32_MAX, "uuid-b", 1000, &idx), 0);
	CHECK_EQ(idx, 1);
	REQUIRE_RC(fx_ost_register(&f, UINT32_MAX, "uuid-c", 1000, &idx), 0);
	CHECK_EQ(idx, 2);
	REQUIRE_RC(fx_ost_register(&f, UINT32_MAX, "uuid-d", 1000, &idx), 0);
	CHECK_EQ(idx, 4);
	CHECK_EQ(table_count(&f), 5);
	/* a known uuid keeps its index, with or without asking for it */
	gen = table_gen(&f);
	REQUIRE_RC(fx_ost_register(&f, UINT32_MAX, "uuid-3", 1000, &idx), 0);
	CHECK_EQ(idx, 3);
	REQUIRE_RC(fx_ost_register(&f, 3, "uuid-3", 1000, &idx), 0);
	CHECK_EQ(table_gen(&f), gen); /* nothing changed */
	CHECK_RC(fx_ost_register(&f, 4, "uuid-3", 1000, &idx), -EINVAL);
	/* another uuid on a taken index */
	CHECK_RC(fx_ost_register(&f, 3, "uuid-x", 1000, &idx), -EEXIST);
	CHECK_RC(fx_ost_register(&f, 65536, "uuid-x", 1000, &idx), -EINVAL);
	CHECK_RC(fx_ost_register(&f, 65535, "uuid-x", 1000, &idx), 0);

	/* a new address for a known OST */
	memset(&req, 0, sizeof(req));
	req.want_idx = UINT32_MAX;
	req.port = 9999;
	strcpy(req.host, "elsewhere");
	strcpy(req.uuid, "uuid-3");
	strcpy(req.fsname, FX_FSNAME);
	req.sf = fx_statfs_kib(5);
	gen = table_gen(&f);
	t = fx_op_begin(&f);
	REQUIRE_RC(mdt_ost_register(t, &req, 5, &idx), 0);
	CHECK(strcmp(ost(&f, 3)->host, "elsewhere") != 0); /* not before the commit */
	REQUIRE_RC(fx_op_end(&f, t, 0), 0);
	CHECK(strcmp(ost(&f, 3)->host, "elsewhere") == 0);
	CHECK_EQ(ost(&f, 3)->port, 9999);
	CHECK(strcmp(ost(&f, 3)->uuid, "uuid-3") == 0);
	CHECK(table_gen(&f) != gen);
	/* bad requests */
	t = fx_op_begin(&f);
	strcpy(req.fsname, "otherfs");
	CHECK_RC(mdt_ost_register(t, &req, 5, &idx), -EINVAL);
	strcpy(req.fsname, FX_FSNAME);
	req.host[0] = '\0';
	CHECK_RC(mdt_ost_register(t, &req, 5, &idx), -EINVAL);
	strcpy(req.host, "h");
	memset(req.uuid, 'u', sizeof(req.uuid));
	CHECK_RC(mdt_ost_register(t, &req, 5, &idx), -EINVAL);
	fx_op_end(&f, t, -EINVAL);

	/* an aborted registration leaves no trace, on disk or in memory */
	gen = table_gen(&f);
	{
		struct mdt_txn *top, *child;
		REQUIRE_RC(mdt_txn_begin(f.s, true, &top), 0);
		REQUIRE_RC(mdt_txn_child(top, &child), 0);
		strcpy(req.uuid, "ghost");
		req.want_idx = 100;
		REQUIRE_RC(mdt_ost_register(child, &req, 5, &idx), 0);
		mdt_txn_abort(child);
		REQUIRE_RC(mdt_txn_commit(top), 0);
	}
	CHECK(ost(&f, 100) == NULL);
	CHECK_EQ(table_gen(&f), gen);
	fx_reopen(&f);
	CHECK(ost(&f, 100) == NULL);
	CHECK_EQ(table_count(&f), 6);
	CHECK(strcmp(ost(&f, 3)->host, "elsewhere") == 0);
	fx_fini(&f);
}

static void test_heartbeat_expire(void)
{
	struct fx f;
	struct lw_statfs sf = fx_statfs_kib(1);
	uint32_t gen;

	fx_init(&f);
	fx_add_osts(&f, 3); /* heard at 1000 */
	CHECK_EQ(ost(&f, 0)->last_heard_ns, 1000);
	CHECK_EQ(ost(&f, 0)->state, 0);
	CHECK_RC(mdt_ost_heartbeat(f.s, 9, &sf, 2000), -ENOENT);

	gen = table_gen(&f);
	CHECK(!mdt_ost_expire(f.s, 500));
	CHECK_EQ(table_gen(&f), gen);
	heartbeat(&f, 1, 77, 0, 5000);
	CHECK_EQ(ost(&f, 1)->sf.bavail, 77 / 4);
	CHECK_EQ(table_gen(&f), gen); /* free space is not a table change */
	CHECK(mdt_ost_expire(f.s, 3000));
	CHECK(table_gen(&f) != gen);
	CHECK(ost(&f, 0)->state & LW_TGT_INACTIVE);
	CHECK(!(ost(&f, 1)->state & LW_TGT_INACTIVE));
	CHECK(ost(&f, 2)->state & LW_TGT_INACTIVE);
	CHECK(!mdt_ost_expire(f.s, 3000));
	/* heard again: active at once */
	gen = table_gen(&f);
	heartbeat(&f, 0, 100, 0, 6000);
	CHECK_EQ(ost(&f, 0)->state, 0);
	CHECK(table_gen(&f) != gen);
	/* and expiry would have said the same */
	heartbeat(&f, 2, 100, 0, 6000);
	CHECK(mdt_ost_expire(f.s, 5500)); /* 1 goes silent */
	CHECK(ost(&f, 1)->state & LW_TGT_INACTIVE);
	/* flags the OSS reports */
	gen = table_gen(&f);
	heartbeat(&f, 2, 100, LW_TGT_NOCREATE, 7000);
	CHECK_EQ(ost(&f, 2)->state, LW_TGT_NOCREATE);
	CHECK(table_gen(&f) != gen);
	fx_fini(&f);
}

/* Balanced free space: round robin over distinct OSTs, stripe 0 moving along. */
static void test_round_robin(void)
{
	struct fx f;
	struct loom_ostobj objs[8];
	uint32_t n, hits[4] = { 0 }, first[4] = { 0 };

	fx_init(&f);
	fx_add_osts(&f, 4);
	for (int i = 0; i < 4; i++) {
		REQUIRE_RC(alloc(&f, 1, -1, objs, &n), 0);
		REQUIRE(n == 1 && objs[0].ost_idx < 4);
		hits[objs[0].ost_idx]++;
	}
	for (int i = 0; i < 4; i++)
		CHECK_EQ(hits[i], 1);
	for (int i = 0; i < 40; i++) {
		REQUIRE_RC(alloc(&f, 3, -1, objs, &n), 0);
		REQUIRE(n == 3);
		CHECK(objs[0].ost_idx != objs[1].ost_idx && objs[1].ost_idx != objs[2].ost_idx &&
		      objs[0].ost_idx != objs[2].ost_idx);
		first[objs[0].ost_idx]++;
		for (int j = 0; j < 3; j++)
			hits[objs[j].ost_idx]++;
	}
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(first[i], 10);
		CHECK_EQ(hits[i], 31);
	}
	fx_fini(&f);
}

static void test_offset_and_count(void)
{
	struct fx f;
	struct loom_ostobj objs[8];
	uint32_t n;

	fx_init(&f);
	fx_add_osts(&f, 4);
	REQUIRE_RC(alloc(&f, 3, 2, objs, &n), 0);
	CHECK(n == 3 && objs[0].ost_idx == 2 && objs[1].ost_idx == 3 && objs[2].ost_idx == 0);
	REQUIRE_RC(alloc(&f, 4, 3, objs, &n), 0);
	CHECK(n == 4 && objs[0].ost_idx == 3 && objs[1].ost_idx == 0 && objs[3].ost_idx == 2);
	/* -1: every OST; more than there are: capped */
	REQUIRE_RC(alloc(&f, -1, -1, objs, &n), 0);
	CHECK_EQ(n, 4);
	REQUIRE_RC(alloc(&f, 7, -1, objs, &n), 0);
	CHECK_EQ(n, 4);
	REQUIRE_RC(alloc(&f, 2000, 1, objs, &n), 0);
	CHECK(n == 4 && objs[0].ost_idx == 1);
	CHECK_RC(alloc(&f, 1, 4, objs, &n), -EINVAL);
	CHECK_RC(alloc(&f, 0, -1, objs, &n), -EINVAL);
	CHECK_RC(alloc(&f, -2, -1, objs, &n), -EINVAL);
	CHECK_RC(alloc(&f, 1, -2, objs, &n), -EINVAL);

	/* unusable OSTs are skipped, also when named by the offset */
	heartbeat(&f, 0, 1u << 30, LW_TGT_NOCREATE, 2000);
	heartbeat(&f, 1, 1u << 30, LW_TGT_READONLY, 2000);
	heartbeat(&f, 2, 1u << 30, 0, 2000);
	heartbeat(&f, 3, 1u << 30, 0, 1);
	CHECK(mdt_ost_expire(f.s, 1000)); /* 3 inactive */
	REQUIRE_RC(alloc(&f, -1, -1, objs, &n), 0);
	CHECK(n == 1 && objs[0].ost_idx == 2);
	REQUIRE_RC(alloc(&f, 3, 0, objs, &n), 0);
	CHECK(n == 1 && objs[0].ost_idx == 2);
	REQUIRE_RC(alloc(&f, 1, 3, objs, &n), 0);
	CHECK(n == 1 && objs[0].ost_idx == 2);
	heartbeat(&f, 2, 1u << 30, LW_TGT_NOCREATE, 2000);
	CHECK_RC(alloc(&f, 1, -1, objs, &n), -ENOSPC);
	CHECK_RC(fx_create(&f, &root_cr, LOOM_ROOT_INO, "f", 0644, NULL), -ENOSPC);
	fx_fini(&f);
}

static int alloc_mirrored(struct fx *f, int32_t count, uint32_t mirrors, struct loom_ostobj *objs,
			  uint32_t *n)
{
	struct mdt_txn *t = fx_op_begin(f);

	return fx_op_end(f, t, mdt_alloc_stripes(t, count, -1, NULL, mirrors, 0, objs, n));
}

static bool all_distinct(const struct loom_ostobj *objs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = i + 1; j < n; j++)
			if (objs[i].ost_idx == objs[j].ost_idx)
				return false;
	return true;
}

/* Mirrors: every copy of every stripe on an OST of its own; copies the usable OSTs cannot take
 * go stale to OSTs away; more copies than OSTs are refused. */
static void test_mirrors(void)
{
	struct fx f;
	struct loom_ostobj objs[8];
	uint32_t n;

	fx_init(&f);
	fx_add_osts(&f, 4);
	REQUIRE_RC(alloc_mirrored(&f, 2, 2, objs, &n), 0);
	CHECK(n == 4 && all_distinct(objs, n));
	for (uint32_t i = 0; i < n; i++)
		CHECK_EQ(objs[i].flags, 0);
	REQUIRE_RC(alloc_mirrored(&f, -1, 2, objs, &n), 0);
	CHECK(n == 4 && all_distinct(objs, n));
	REQUIRE_RC(alloc_mirrored(&f, 3, 2, objs, &n), 0); /* capped: 2 a copy */
	CHECK(n == 4 && all_distinct(objs, n));
	REQUIRE_RC(alloc_mirrored(&f, 1, 4, objs, &n), 0);
	CHECK(n == 4 && all_distinct(objs, n));
	CHECK_RC(alloc_mirrored(&f, 1, 5, objs, &n), -EINVAL);
	CHECK_RC(alloc_mirrored(&f, 1, LOOM_MAX_MIRRORS + 1, objs, &n), -EINVAL);

	/* Two OSTs away: a 3-copy file has one copy where it can be written... */
	heartbeat(&f, 0, 1u << 30, 0, 2000);
	heartbeat(&f, 1, 1u << 30, 0, 2000);
	heartbeat(&f, 2, 1u << 30, 0, 1);
	heartbeat(&f, 3, 1u << 30, 0, 1);
	CHECK(mdt_ost_expire(f.s, 1000));
	REQUIRE_RC(alloc_mirrored(&f, 1, 3, objs, &n), 0);
	REQUIRE(n == 3 && all_distinct(objs, n));
	{
		uint32_t stale = 0;

		for (uint32_t i = 0; i < n; i++) {
			bool away = objs[i].ost_idx >= 2;

			CHECK_EQ(!!(objs[i].flags & LOOM_OBJ_STALE), away);
			stale += away;
		}
		CHECK_EQ(stale, 1);
	}
	/* ...and none usable at all: nowhere to write. */
	heartbeat(&f, 0, 1u << 30, LW_TGT_NOCREATE, 2000);
	heartbeat(&f, 1, 1u << 30, LW_TGT_NOCREATE, 2000);
	CHECK_RC(alloc_mirrored(&f, 1, 2, objs, &n), -ENOSPC);
	fx_fini(&f);
}

static int alloc_ec(struct fx *f, int32_t count, uint32_t parity, struct loom_ostobj *objs, uint32_t *n)
{
	struct mdt_txn *t = fx_op_begin(f);

	return fx_op_end(f, t, mdt_alloc_stripes(t, count, -1, NULL, 1, parity, objs, n));
}

/* The objects of objs[0..n) marked stale; each must be on an OST idx with away[idx]. */
static uint32_t stale_on_away(const struct loom_ostobj *objs, uint32_t n, const bool *away)
{
	uint32_t stale = 0;

	for (uint32_t i = 0; i < n; i++) {
		CHECK_EQ(!!(objs[i].flags & LOOM_OBJ_STALE), away[objs[i].ost_idx]);
		stale += (objs[i].flags & LOOM_OBJ_STALE) != 0;
	}
	return stale;
}

/* Erasure coding: K data and M parity objects, every one on an OST of its own; wider than the
 * OSTs allowed is refused; objects the usable OSTs cannot take go stale to OSTs away, at most M
 * of them. */
static void test_ec(void)
{
	struct fx f;
	struct loom_ostobj objs[8];
	bool away[6] = { false };
	uint32_t n;

	fx_init(&f);
	fx_add_osts(&f, 6);
	for (int i = 0; i < 6; i++) { /* every start of the round robin */
		REQUIRE_RC(alloc_ec(&f, 4, 2, objs, &n), 0);
		CHECK(n == 6 && all_distinct(objs, n));
		for (uint32_t j = 0; j < n; j++)
			CHECK_EQ(objs[j].flags, 0);
	}
	REQUIRE_RC(alloc_ec(&f, -1, 2, objs, &n), 0); /* -1: as wide as the OSTs */
	CHECK(n == 6 && all_distinct(objs, n));
	REQUIRE_RC(alloc_ec(&f, 2, 1, objs, &n), 0);
	CHECK(n == 3 && all_distinct(objs, n));
	CHECK_RC(alloc_ec(&f, 5, 2, objs, &n), -EINVAL);
	CHECK_RC(alloc_ec(&f, 1, 6, objs, &n), -EINVAL);
	CHECK_RC(alloc_ec(&f, -1, 6, objs, &n), -EINVAL); /* no room for a data object */
	CHECK_RC(alloc_ec(&f, 1, LOOM_EC_MAX_PARITY + 1, objs, &n), -EINVAL);
	{
		struct mdt_txn *t = fx_op_begin(&f);

		CHECK_RC(fx_op_end(&f, t, mdt_alloc_stripes(t, 2, -1, NULL, 2, 1, objs, &n)), -EINVAL);
	}

	/* An OST its OSS will not create on is not one to count on: 4 + 2 are too wide now. */
	heartbeat(&f, 5, 1u << 30, LW_TGT_NOCREATE, 2000);
	CHECK_RC(alloc_ec(&f, 4, 2, objs, &n), -EINVAL);
	REQUIRE_RC(alloc_ec(&f, 3, 2, objs, &n), 0);
	CHECK(n == 5 && all_distinct(objs, n));
	for (uint32_t j = 0; j < n; j++)
		CHECK(objs[j].ost_idx != 5 && objs[j].flags == 0);

	/* One OSS away: 4 + 2 still, its object stale. */
	for (uint32_t i = 0; i < 6; i++)
		heartbeat(&f, i, 1u << 30, 0, 2000);
	heartbeat(&f, 5, 1u << 30, 0, 1);
	away[5] = true;
	CHECK(mdt_ost_expire(f.s, 1000));
	REQUIRE_RC(alloc_ec(&f, 4, 2, objs, &n), 0);
	REQUIRE(n == 6 && all_distinct(objs, n));
	CHECK_EQ(stale_on_away(objs, n, away), 1);
	/* Two away: as many stale objects as there is parity. */
	heartbeat(&f, 4, 1u << 30, 0, 1);
	away[4] = true;
	CHECK(mdt_ost_expire(f.s, 1000));
	REQUIRE_RC(alloc_ec(&f, 4, 2, objs, &n), 0);
	REQUIRE(n == 6 && all_distinct(objs, n));
	CHECK_EQ(stale_on_away(objs, n, away), 2);
	/* Three away: one more than the parity could rebuild. A narrower file still fits. */
	heartbeat(&f, 3, 1u << 30, 0, 1);
	away[3] = true;
	CHECK(mdt_ost_expire(f.s, 1000));
	CHECK_RC(alloc_ec(&f, 4, 2, objs, &n), -ENOSPC);
	CHECK_RC(alloc_ec(&f, 5, 1, objs, &n), -ENOSPC);
	REQUIRE_RC(alloc_ec(&f, 3, 1, objs, &n), 0);
	REQUIRE(n == 4 && all_distinct(objs, n));
	CHECK_EQ(stale_on_away(objs, n, away), 1);
	REQUIRE_RC(alloc_ec(&f, 2, 1, objs, &n), 0);
	REQUIRE(n == 3 && all_distinct(objs, n));
	CHECK_EQ(stale_on_away(objs, n, away), 0);
	fx_fini(&f);
}

/* Registers OST idx ("ost<idx>") on host, port 7000: OSTs on one host share its OSS. */
static void add_ost_on(struct fx *f, uint32_t idx, const char *host)
{
	struct lw_ost_register_req req = { .want_idx = idx, .port = 7000 };
	struct mdt_txn *t = fx_op_begin(f);
	uint32_t got = UINT32_MAX;

	snprintf(req.host, sizeof(req.host), "%s", host);
	snprintf(req.uuid, sizeof(req.uuid), "ost%u", idx);
	strcpy(req.fsname, FX_FSNAME);
	req.sf = fx_statfs_kib(1ull << 30);
	REQUIRE_RC(fx_op_end(f, t, mdt_ost_register(t, &req, 1000, &got)), 0);
	REQUIRE(got == idx);
}

/* An erasure-coded file's objects are taken over the hosts in turn: with six OSTs two to a host,
 * a 4 + 2 file has two objects on each host, consecutive objects on different hosts, and a
 * 2 + 1 file one object on each host, wherever the round robin starts. */
static void test_ec_hosts(void)
{
	static const char *const hosts[6] = { "oss-a", "oss-a", "oss-b", "oss-b", "oss-c", "oss-c" };
	struct loom_ostobj objs[8];
	bool away[6] = { false };
	struct fx f;
	uint32_t n;

	fx_init(&f);
	for (uint32_t i = 0; i < 6; i++)
		add_ost_on(&f, i, hosts[i]);
	for (int round = 0; round < 6; round++) { /* every start of the round robin */
		REQUIRE_RC(alloc_ec(&f, 4, 2, objs, &n), 0);
		REQUIRE(n == 6 && all_distinct(objs, n));
		for (uint32_t i = 0; i < n; i++) {
			/* x, y, z, x, y, z: each host once in each three */
			CHECK(strcmp(ost(&f, objs[i].ost_idx)->host, hosts[objs[i].ost_idx]) == 0);
			if (i + 1 < n)
				CHECK(strcmp(hosts[objs[i].ost_idx], hosts[objs[i + 1].ost_idx]) != 0);
			if (i >= 3)
				CHECK_EQ(hosts[objs[i].ost_idx][4], hosts[objs[i - 3].ost_idx][4]);
		}
		REQUIRE_RC(alloc_ec(&f, 2, 1, objs, &n), 0);
		REQUIRE(n == 3);
		CHECK(hosts[objs[0].ost_idx][4] != hosts[objs[1].ost_idx][4] &&
		      hosts[objs[1].ost_idx][4] != hosts[objs[2].ost_idx][4] &&
		      hosts[objs[0].ost_idx][4] != hosts[objs[2].ost_idx][4]);
	}
	/* Host c away: its two OSTs' objects are the stale ones, as much as the parity takes. */
	heartbeat(&f, 0, 1u << 30, 0, 2000);
	heartbeat(&f, 1, 1u << 30, 0, 2000);
	heartbeat(&f, 2, 1u << 30, 0, 2000);
	heartbeat(&f, 3, 1u << 30, 0, 2000);
	heartbeat(&f, 4, 1u << 30, 0, 1);
	heartbeat(&f, 5, 1u << 30, 0, 1);
	away[4] = away[5] = true;
	CHECK(mdt_ost_expire(f.s, 1000));
	REQUIRE_RC(alloc_ec(&f, 4, 2, objs, &n), 0);
	REQUIRE(n == 6 && all_distinct(objs, n));
	CHECK_EQ(stale_on_away(objs, n, away), 2);
	for (uint32_t i = 0; i < n; i++)
		CHECK_EQ(hosts[objs[i].ost_idx][4] == 'c', i >= 4); /* the usable first, a and b */
	fx_fini(&f);
}

/* Unbalanced free space: chosen at random in proportion to free space. */
static void test_weighted(void)
{
	struct fx f;
	struct loom_ostobj objs[4];
	uint32_t idx, n, hits[4] = { 0 };

	fx_init(&f);
	REQUIRE_RC(fx_ost_register(&f, 0, "small0", 1ull << 30, &idx), 0);
	REQUIRE_RC(fx_ost_register(&f, 1, "big", 10ull << 30, &idx), 0);
	REQUIRE_RC(fx_ost_register(&f, 2, "small2", 1ull << 30, &idx), 0);
	REQUIRE_RC(fx_ost_register(&f, 3, "empty", 0, &idx), 0); /* full: never chosen */
	fx_batch_begin(&f);
	for (int i = 0; i < 3000; i++) {
		REQUIRE_RC(alloc(&f, 1, -1, objs, &n), 0);
		hits[objs[0].ost_idx]++;
	}
	fx_batch_commit(&f);
	/* expected 10/12 for the big one */
	CHECK(hits[1] > 2200 && hits[1] < 2800);
	CHECK(hits[0] > 100 && hits[2] > 100);
	CHECK_EQ(hits[3], 0);
	/* stripes of one file stay distinct */
	for (int i = 0; i < 100; i++) {
		REQUIRE_RC(alloc(&f, 3, -1, objs, &n), 0);
		REQUIRE(n == 3);
		CHECK(objs[0].ost_idx != objs[1].ost_idx && objs[1].ost_idx != objs[2].ost_idx &&
		      objs[0].ost_idx != objs[2].ost_idx);
	}
	/* once balanced (within 17%), round robin again: each OST in turn */
	heartbeat(&f, 0, 10ull << 30, 0, 2000);
	heartbeat(&f, 2, 9ull << 30, 0, 2000);
	heartbeat(&f, 3, 9ull << 30, 0, 2000);
	memset(hits, 0, sizeof(hits));
	for (int i = 0; i < 8; i++) {
		REQUIRE_RC(alloc(&f, 1, -1, objs, &n), 0);
		hits[objs[0].ost_idx]++;
	}
	for (int i = 0; i < 4; i++)
		CHECK_EQ(hits[i], 2);
	fx_fini(&f);
}

/* Object ids: per OST from 1, never handed out twice once committed, across restarts. */
static void test_objids(void)
{
	struct fx f;
	struct loom_ostobj objs[4];
	uint64_t last[2] = { 0, 0 };
	uint32_t n;

	fx_init(&f);
	fx_add_osts(&f, 2);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 10; i++) {
			REQUIRE_RC(alloc(&f, 2, 0, objs, &n), 0);
			REQUIRE(n == 2);
			for (int j = 0; j < 2; j++) {
				uint32_t o = objs[j].ost_idx;
				CHECK_EQ(objs[j].objid, last[o] + 1);
				last[o] = objs[j].objid;
			}
		}
		fx_reopen(&f);
	}
	CHECK_EQ(last[0], 30);
	/* ids taken by an aborted request come back (no client ever saw them)... */
	{
		struct mdt_txn *t = fx_op_begin(&f);
		REQUIRE_RC(mdt_alloc_stripes(t, 1, 0, NULL, 1, 0, objs, &n), 0);
		CHECK_EQ(objs[0].objid, 31);
		fx_op_end(&f, t, -EIO);
	}
	REQUIRE_RC(alloc(&f, 1, 0, objs, &n), 0);
	CHECK_EQ(objs[0].objid, 31);
	/* ...and a re-registration does not reset the counter */
	REQUIRE_RC(fx_ost_register(&f, 0, "ost0", 5, NULL), 0);
	REQUIRE_RC(alloc(&f, 1, 0, objs, &n), 0);
	CHECK_EQ(objs[0].objid, 32);
	fx_fini(&f);
}

/* After a restart the OSTs are usable at once, with what they last registered. */
static void test_reopen(void)
{
	struct fx f;
	struct loom_ostobj objs[4];
	uint32_t n;

	fx_init(&f);
	fx_add_osts(&f, 2);
	heartbeat(&f, 1, 1, LW_TGT_NOCREATE, 2000); /* memory only: gone after the restart */
	fx_reopen(&f);
	CHECK_EQ(table_count(&f), 2);
	CHECK_EQ(ost(&f, 1)->state, 0);
	CHECK_EQ(ost(&f, 0)->state, 0);
	CHECK_EQ(ost(&f, 0)->sf.bavail, (1ull << 30) / 4);
	CHECK(ost(&f, 0)->last_heard_ns > 2000);
	CHECK(strcmp(ost(&f, 1)->host, "oss-ost1") == 0);
	CHECK_EQ(ost(&f, 1)->port, 7000);
	REQUIRE_RC(alloc(&f, -1, -1, objs, &n), 0);
	CHECK_EQ(n, 2);
	fx_fini(&f);
}

static int pool_op(struct fx *f, int (*fn)(struct mdt_txn *, const char *, uint32_t), const char *name,
		   uint32_t idx)
{
	struct mdt_txn *t = fx_op_begin(f);

	return fx_op_end(f, t, fn(t, name, idx));
}

static int pool_new(struct mdt_txn *t, const char *name, uint32_t idx)
{
	(void)idx;
	return mdt_pool_new(t, name);
}

static int pool_destroy(struct mdt_txn *t, const char *name, uint32_t idx)
{
	(void)idx;
	return mdt_pool_destroy(t, name);
}

static int alloc_pool(struct fx *f, int32_t count, int32_t offset, const char *pool, struct loom_ostobj *objs,
		      uint32_t *n)
{
	struct mdt_txn *t = fx_op_begin(f);

	return fx_op_end(f, t, mdt_alloc_stripes(t, count, offset, pool, 1, 0, objs, n));
}

static void test_pools(void)
{
	struct fx f;
	struct loom_ostobj objs[8];
	struct mdt_txn *t;
	uint32_t *osts, n;

	fx_init(&f);
	fx_add_osts(&f, 6);
	CHECK_RC(pool_op(&f, pool_new, "", 0), -EINVAL);
	CHECK_RC(pool_op(&f, pool_new, "a.b", 0), -EINVAL);
	CHECK_RC(pool_op(&f, pool_new, "sixteen-chars-xx", 0), -EINVAL);
	REQUIRE_RC(pool_op(&f, pool_new, "fast", 0), 0);
	CHECK_RC(pool_op(&f, pool_new, "fast", 0), -EEXIST);
	REQUIRE_RC(pool_op(&f, mdt_pool_add, "fast", 4), 0);
	REQUIRE_RC(pool_op(&f, mdt_pool_add, "fast", 1), 0);
	REQUIRE_RC(pool_op(&f, mdt_pool_add, "fast", 3), 0);
	CHECK_RC(pool_op(&f, mdt_pool_add, "fast", 3), -EEXIST);
	CHECK_RC(pool_op(&f, mdt_pool_add, "fast", 9), -ENODEV);
	CHECK_RC(pool_op(&f, mdt_pool_add, "slow", 1), -ENOENT);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_pool_members(t, "fast", &osts, &n), 0);
	mdt_txn_abort(t);
	CHECK_EQ(n, 3);
	CHECK(osts[0] == 1 && osts[1] == 3 && osts[2] == 4); /* kept in order */
	free(osts);

	/* Files in the pool use only its OSTs: all of them with -1, in turn with fewer. */
	REQUIRE_RC(alloc_pool(&f, -1, -1, "fast", objs, &n), 0);
	CHECK_EQ(n, 3);
	for (int k = 0; k < 12; k++) {
		REQUIRE_RC(alloc_pool(&f, 2, -1, "fast", objs, &n), 0);
		CHECK_EQ(n, 2);
		for (uint32_t i = 0; i < n; i++)
			CHECK(objs[i].ost_idx == 1 || objs[i].ost_idx == 3 || objs[i].ost_idx == 4);
	}
	/* An offset outside the pool starts at the next member up. */
	REQUIRE_RC(alloc_pool(&f, 1, 2, "fast", objs, &n), 0);
	CHECK_EQ(objs[0].ost_idx, 3);
	/* Removing an OST takes it out of new files; an empty pool has no room. */
	REQUIRE_RC(pool_op(&f, mdt_pool_remove, "fast", 4), 0);
	CHECK_RC(pool_op(&f, mdt_pool_remove, "fast", 4), -ENOENT);
	REQUIRE_RC(alloc_pool(&f, -1, -1, "fast", objs, &n), 0);
	CHECK_EQ(n, 2);
	CHECK_RC(pool_op(&f, pool_destroy, "fast", 0), -ENOTEMPTY);
	REQUIRE_RC(pool_op(&f, mdt_pool_remove, "fast", 1), 0);
	REQUIRE_RC(pool_op(&f, mdt_pool_remove, "fast", 3), 0);
	CHECK_RC(alloc_pool(&f, 1, -1, "fast", objs, &n), -ENOSPC);
	REQUIRE_RC(pool_op(&f, pool_destroy, "fast", 0), 0);
	CHECK_RC(pool_op(&f, pool_destroy, "fast", 0), -ENOENT);
	/* A layout naming a pool that is gone is striped over every OST. */
	REQUIRE_RC(alloc_pool(&f, -1, -1, "fast", objs, &n), 0);
	CHECK_EQ(n, 6);
	fx_fini(&f);
}

static int replace(struct fx *f, uint32_t idx, const char *uuid, struct mdt_ost_replaced *out)
{
	struct lw_ost_register_req req = { .want_idx = idx, .port = 7100 };
	struct mdt_txn *t = fx_op_begin(f);

	strcpy(req.host, "oss-new");
	snprintf(req.uuid, sizeof(req.uuid), "%s", uuid);
	strcpy(req.fsname, FX_FSNAME);
	req.sf = fx_statfs_kib(1000);
	return fx_op_end(f, t, mdt_ost_replace(t, &req, 10, out));
}

static int ost_remove(struct fx *f, uint32_t idx, bool force, bool dryrun, uint64_t *files, uint64_t *objects)
{
	struct mdt_txn *t = fx_op_begin(f);

	return fx_op_end(f, t, mdt_ost_remove(t, idx, force, dryrun, files, objects));
}

static void test_replace_and_remove(void)
{
	struct lw_layout all = fx_layout_req(65536, -1, -1, "");
	struct mdt_ost_replaced r;
	struct loom_ostobj objs[4];
	uint64_t files, objects;
	struct mdt_txn *t;
	uint32_t n, idx;

	struct fx f;

	fx_init(&f);
	fx_add_osts(&f, 3);
	REQUIRE_RC(fx_create_full(&f, &root_cr, LOOM_ROOT_INO, "a", 0644, 0, true, &all, NULL, NULL, NULL), 0);
	REQUIRE_RC(fx_create_full(&f, &root_cr, LOOM_ROOT_INO, "b", 0644, 0, true, &all, NULL, NULL, NULL), 0);

	/* A living OST is not replaced; a lost one is, and its objects so far are lost. */
	CHECK_RC(replace(&f, 1, "new-1", &r), -EBUSY);
	REQUIRE_RC(mdt_ost_lost(f.s, 1), 0);
	REQUIRE_RC(replace(&f, 1, "new-1", &r), 0);
	CHECK(r.replaced);
	CHECK_EQ(r.idx, 1);
	CHECK_EQ(r.lost_below, 3); /* objects 1 and 2 were made there */
	CHECK(strcmp(r.old_uuid, "ost1") == 0);
	CHECK(strcmp(ost(&f, 1)->uuid, "new-1") == 0);
	CHECK(!(ost(&f, 1)->state & LW_TGT_INACTIVE));
	/* Again (a resend): the same answer, nothing more lost. */
	REQUIRE_RC(replace(&f, 1, "new-1", &r), 0);
	CHECK(!r.replaced);
	CHECK_EQ(r.lost_below, 3);
	/* The old uuid is a stranger now; the new one keeps the index; another index is refused. */
	CHECK_RC(fx_ost_register(&f, 1, "ost1", 1000, &idx), -EEXIST);
	CHECK_RC(replace(&f, 2, "new-1", &r), -EINVAL);
	CHECK_RC(replace(&f, UINT32_MAX, "new-2", &r), -EINVAL);
	t = fx_read_begin(&f);
	CHECK_RC(mdt_ost_lost_below(t, 1, &objects), 0);
	CHECK_EQ(objects, 3);
	CHECK_RC(mdt_ost_lost_below(t, 0, &objects), 0);
	CHECK_EQ(objects, 0);
	mdt_txn_abort(t);

	/* Removal: refused while layouts name it, with the count. */
	CHECK_RC(ost_remove(&f, 2, false, false, &files, &objects), -EBUSY);
	CHECK_EQ(files, 2);
	CHECK_EQ(objects, 2);
	REQUIRE_RC(ost_remove(&f, 2, false, true, &files, &objects), 0);
	CHECK_EQ(table_count(&f), 3);
	for (const char *const *name = (const char *const[]){ "a", "b", NULL }; *name; name++) {
		uint64_t ino = fx_ino(&f, LOOM_ROOT_INO, *name);

		REQUIRE_RC(fx_unlink(&f, &root_cr, LOOM_ROOT_INO, *name, NULL), 0);
		REQUIRE_RC(fx_release(&f, ino), 0);
	}
	REQUIRE_RC(ost_remove(&f, 2, false, false, &files, &objects), 0);
	CHECK_EQ(files, 0);
	CHECK(ost(&f, 2) == NULL);
	CHECK_EQ(table_count(&f), 2);
	CHECK_RC(ost_remove(&f, 2, false, false, &files, &objects), -ENOENT);
	REQUIRE_RC(alloc(&f, -1, -1, objs, &n), 0);
	CHECK_EQ(n, 2);
	/* Its uuid is refused, its index given to nobody new, until a replacement takes it. */
	CHECK_RC(fx_ost_register(&f, UINT32_MAX, "ost2", 1000, &idx), -ENODEV);
	REQUIRE_RC(fx_ost_register(&f, UINT32_MAX, "fresh", 1000, &idx), 0);
	CHECK_EQ(idx, 3);
	fx_reopen(&f);
	CHECK(ost(&f, 2) == NULL);
	CHECK_RC(fx_ost_register(&f, 2, "ost2", 1000, &idx), -ENODEV);
	REQUIRE_RC(replace(&f, 2, "new-2", &r), 0);
	CHECK(r.replaced && r.was_removed);
	CHECK(strcmp(ost(&f, 2)->uuid, "new-2") == 0);
	fx_fini(&f);
}

/* A replaced OST's objects of an erasure-coded file become stale, to rebuild, while the parity
 * can rebuild them: the third of a 4 + 2 file's is left as it was (its reads fail, fsck says). */
static void test_ec_replaced(void)
{
	struct lw_layout req = fx_layout_req(1u << 20, 4, -1, "");
	struct mdt_ost_replaced r;
	struct loom_layout *l, *l2;
	struct fx f;
	uint64_t ino;
	static const uint32_t order[3] = { 0, 4, 1 }; /* a data object, a parity one, a data one */
	char uuid[16];

	fx_init(&f);
	fx_add_osts(&f, 6);
	req.version = LW_LAYOUT_V3;
	req.ec_parity = 2;
	REQUIRE_RC(fx_create_full(&f, &root_cr, LOOM_ROOT_INO, "ec", 0644, 0, true, &req, NULL, &l, NULL), 0);
	REQUIRE(l && l->ec_parity == 2 && l->nobjs == 6);
	ino = fx_ino(&f, LOOM_ROOT_INO, "ec");
	for (uint32_t step = 0; step < 3; step++) {
		uint32_t idx = l->objs[order[step]].ost_idx;

		snprintf(uuid, sizeof(uuid), "new-%u", idx);
		REQUIRE_RC(mdt_ost_lost(f.s, idx), 0);
		REQUIRE_RC(replace(&f, idx, uuid, &r), 0);
		CHECK(r.replaced);
		CHECK_EQ(r.mirrored, step < 2 ? 1 : 0);
		REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
		CHECK_EQ(l2->layout_gen, step < 2 ? step + 1 : 2);
		for (uint32_t i = 0; i < l2->nobjs; i++)
			CHECK_EQ(l2->objs[i].flags, i == 0 || (i == 4 && step >= 1) ? LOOM_OBJ_STALE : 0);
		free(l2);
	}
	free(l);
	fx_fini(&f);
}

/* After a restart only OSTs heard from get stripes, once there is one. */
static void test_heard_after_reopen(void)
{
	struct loom_ostobj objs[4];
	struct fx f;
	uint32_t n;

	fx_init(&f);
	fx_add_osts(&f, 3);
	fx_reopen(&f);
	REQUIRE_RC(alloc(&f, -1, -1, objs, &n), 0);
	CHECK_EQ(n, 3); /* nobody heard yet: every OST the MDT knows */
	heartbeat(&f, 0, 1000, 0, 1);
	heartbeat(&f, 2, 1000, 0, 1);
	REQUIRE_RC(alloc(&f, -1, -1, objs, &n), 0);
	CHECK_EQ(n, 2);
	CHECK(objs[0].ost_idx != 1 && objs[1].ost_idx != 1);
	REQUIRE_RC(alloc(&f, 1, 1, objs, &n), 0);
	CHECK_EQ(objs[0].ost_idx, 2); /* asked for it: the next one heard from */
	fx_fini(&f);
}

/* Just after a start an OST not heard from yet may come back: its replacement waits (-EAGAIN),
 * unless an administrator deactivated it; one heard from is in service (-EBUSY) either way. */
static void test_replace_after_reopen(void)
{
	struct mdt_ost_replaced r;
	struct mdt_txn *t;
	struct fx f;

	fx_init(&f);
	fx_add_osts(&f, 3);
	fx_reopen(&f);
	heartbeat(&f, 2, 1000, 0, 1);
	CHECK_RC(replace(&f, 1, "new-1", &r), -EAGAIN);
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_ost_admin(t, 1, LW_TGT_DEACTIVATED, 0)), 0);
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_ost_admin(t, 2, LW_TGT_DEACTIVATED, 0)), 0);
	CHECK_RC(replace(&f, 2, "new-2", &r), -EBUSY);
	REQUIRE_RC(replace(&f, 1, "new-1", &r), 0);
	CHECK(r.replaced);
	CHECK(strcmp(ost(&f, 1)->uuid, "new-1") == 0);
	CHECK(ost(&f, 1)->state & LW_TGT_DEACTIVATED); /* until activated */
	fx_fini(&f);
}

int main(void)
{
	root_cr = fx_root();
	RUN(test_pools);
	RUN(test_register);
	RUN(test_heartbeat_expire);
	RUN(test_round_robin);
	RUN(test_offset_and_count);
	RUN(test_mirrors);
	RUN(test_ec);
	RUN(test_ec_hosts);
	RUN(test_weighted);
	RUN(test_objids);
	RUN(test_reopen);
	RUN(test_replace_and_remove);
	RUN(test_ec_replaced);
	RUN(test_heard_after_reopen);
	RUN(test_replace_after_reopen);
	return check_report();
}
