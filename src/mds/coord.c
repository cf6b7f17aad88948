/*
 * The coordinator of a replicated MDT: etcd decides which MDS serves (repl.h). Under the prefix
 * /loom/FSNAME/ it keeps:
 *
 *   leader  "EPOCH NAME": the active MDS, attached to its lease (gone when the lease expires);
 *   epoch   the last epoch handed out: each takeover adds one, so a takeover's fencing token is
 *           higher than every one before it;
 *   sync    "NAME[,NAME]": the MDSs whose MDT holds every commit that was acknowledged. Only
 *           they may take over, and a takeover leaves the new active alone in it.
 *
 * Every change is one etcd transaction whose compares make it conditional on what was read: a
 * takeover on the leader key being absent and the epoch and sync keys unchanged; the active's
 * changes of the sync set on its leader key being its own. No election of our own: etcd's lease
 * and its serializable transactions do it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/etcd.h"
#include "common/log.h"
#include "common/util.h"
#include "mds/dispatch.h"
#include "mds/repl.h"

#define COORD_CALL_MS 2000 /* one etcd request at most */
#define COORD_TICK_MS 200

struct mds_coord {
	struct etcd *etcd;
	pthread_mutex_t lock;   /* one etcd request at a time: the coordinator thread's and strikes */
	char key_leader[96];
	char key_epoch[96];
	char key_sync[96];
	char name[MDS_REPL_NAME_MAX + 1];
	uint32_t lease_s;
	int64_t lease;          /* this MDS's, while it leads (0: none) */
	int64_t leader_rev;     /* the revision of its leader key */
	uint64_t epoch;
	bool said_self;
	/* When the last keepalive etcd answered was sent: etcd renewed the lease after that, so it
	 * holds until at least lease_s later. */
	_Atomic uint64_t renewed_ns;
	bool said_wait;
	pthread_t thread;
	bool thread_on;
	_Atomic bool stop;
	struct mds *m;
};

int mds_coord_open(const struct mds_coord_opts *o, struct mds_coord **out)
{
	struct mds_coord *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	snprintf(c->key_leader, sizeof(c->key_leader), "/loom/%s/leader", o->fsname);
	snprintf(c->key_epoch, sizeof(c->key_epoch), "/loom/%s/epoch", o->fsname);
	snprintf(c->key_sync, sizeof(c->key_sync), "/loom/%s/sync", o->fsname);
	snprintf(c->name, sizeof(c->name), "%s", o->name);
	c->lease_s = o->lease_s;
	rc = etcd_open(o->endpoints, COORD_CALL_MS, &c->etcd);
	if (rc) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void mds_coord_close(struct mds_coord *c)
{
	if (!c)
		return;
	if (c->thread_on) {
		atomic_store(&c->stop, true);
		pthread_join(c->thread, NULL);
	}
	/* A clean stop hands over at once: the standby need not wait for the lease to expire. */
	if (c->lease && etcd_lease_revoke(c->etcd, c->lease) == 0)
		log_info("coordinator: gave up the leader key");
	etcd_close(c->etcd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* "EPOCH NAME" of the leader key. */
static int leader_parse(const struct etcd_kv *kv, uint64_t *epoch, char *name, size_t cap)
{
	char *end;
	unsigned long long e = strtoull(kv->value, &end, 10);

	if (end == kv->value || *end != ' ' || !end[1] || strlen(end + 1) >= cap)
		return -EPROTO;
	*epoch = e;
	snprintf(name, cap, "%s", end + 1);
	return 0;
}

static bool sync_lists(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (len == n && !memcmp(p, name, n))
			return true;
		p = comma ? comma + 1 : NULL;
	}
	return false;
}

/* Takes the leader key: an epoch above etcd's and any this MDT has seen (etcd's keys may have been
 * lost), alone in the sync set. -ECANCELED: someone was quicker. */
static int take_over(struct mds_coord *c, const struct etcd_kv *epoch_kv, int64_t sync_rev, uint64_t mdt_epoch)
{
	uint64_t epoch = epoch_kv->mod_rev ? strtoull(epoch_kv->value, NULL, 10) : 0;
	char epoch_s[24], leader_s[MDS_REPL_NAME_MAX + 24];
	int64_t lease, rev;
	uint64_t asked = clock_mono_ns();
	int rc;

	epoch = (epoch > mdt_epoch ? epoch : mdt_epoch) + 1;
	if (epoch > UINT32_MAX)
		return -EOVERFLOW; /* replies carry 32 bits of it */
	rc = etcd_lease_grant(c->etcd, (int)c->lease_s, &lease);

	if (rc)
		return rc;
	snprintf(epoch_s, sizeof(epoch_s), "%" PRIu64, epoch);
	snprintf(leader_s, sizeof(leader_s), "%" PRIu64 " %s", epoch, c->name);
	{
		const struct etcd_cmp cmps[] = {
			{ c->key_leader, 0 }, { c->key_epoch, epoch_kv->mod_rev }, { c->key_sync, sync_rev },
		};
		const struct etcd_op ops[] = {
			{ c->key_epoch, epoch_s, strlen(epoch_s), 0 },
			{ c->key_sync, c->name, strlen(c->name), 0 },
			{ c->key_leader, leader_s, strlen(leader_s), lease },
		};

		rc = etcd_txn(c->etcd, cmps, 3, ops, 3, &rev);
	}
	/* The grant was asked before the transaction: the lease runs from no earlier than that. */
	if (rc) {
		etcd_lease_revoke(c->etcd, lease);
		return rc;
	}
	atomic_store(&c->renewed_ns, asked);
	c->lease = lease;
	c->leader_rev = rev;
	c->epoch = epoch;
	return 0;
}

int mds_coord_campaign(struct mds_coord *c, const struct mds_coord_mdt *mdt, enum mds_coord_role *role,
		       uint64_t *epoch, char *leader, size_t cap)
{
	struct etcd_kv kv = { 0 }, epoch_kv = { 0 }, sync_kv = { 0 };
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = etcd_get(c->etcd, c->key_leader, &kv, NULL);
	if (rc == 0) {
		uint64_t e;

		rc = leader_parse(&kv, &e, leader, cap);
		if (rc == 0 && !strcmp(leader, c->name)) {
			/* An earlier run of this MDS that did not give the key up, or another MDS under
			 * the same name, alive: which, nobody can tell, so its lease is left to lapse. */
			if (!c->said_self)
				log_warn("coordinator: the leader key names this MDS (%s): an earlier run, or "
					 "another MDS with the same --advertise; waiting for its lease", c->name);
			c->said_self = true;
			*role = COORD_WAIT;
		} else if (rc == 0) {
			*role = COORD_FOLLOW;
			*epoch = e;
		}
		goto out;
	}
	if (rc != -ENOENT)
		goto out;
	*role = COORD_WAIT;
	c->said_self = false;
	if (!mdt->exists) {
		rc = 0;
		goto out;
	}
	rc = etcd_get(c->etcd, c->key_epoch, &epoch_kv, NULL);
	if (rc == -ENOENT)
		rc = 0;
	if (rc == 0)
		rc = etcd_get(c->etcd, c->key_sync, &sync_kv, NULL);
	if (rc == -ENOENT)
		rc = 0;
	if (rc)
		goto out;
	/* Without a sync key only an MDT that never replicated may start (a new file system):
	 * one that did, finding etcd's keys gone, cannot know it holds every commit. */
	if (sync_kv.mod_rev ? !sync_lists(sync_kv.value, c->name) : mdt->pos.seq != 0) {
		if (!c->said_wait)
			log_warn("coordinator: no MDS serves, and this one may not take over: its MDT may "
				 "lack commits that were acknowledged (the MDSs that hold them all: %s)",
				 sync_kv.mod_rev ? sync_kv.value : "unknown: etcd has no sync key");
		c->said_wait = true;
		goto out;
	}
	rc = take_over(c, &epoch_kv, sync_kv.mod_rev, mdt->pos.epoch > mdt->prev.epoch ? mdt->pos.epoch : mdt->prev.epoch);
	if (rc == -ECANCELED) {
		rc = 0; /* another MDS was quicker: the next look finds it */
	} else if (rc == 0) {
		*role = COORD_ACTIVE;
		*epoch = c->epoch;
		snprintf(leader, cap, "%s", c->name);
	}
out:
	pthread_mutex_unlock(&c->lock);
	etcd_kv_free(&kv);
	etcd_kv_free(&epoch_kv);
	etcd_kv_free(&sync_kv);
	return rc;
}

int mds_coord_leader_is(struct mds_coord *c, const char *leader, bool *same)
{
	struct etcd_kv kv = { 0 };
	char name[MDS_REPL_NAME_MAX + 1];
	uint64_t epoch;
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = etcd_get(c->etcd, c->key_leader, &kv, NULL);
	pthread_mutex_unlock(&c->lock);
	*same = false;
	if (rc == -ENOENT)
		return 0;
	if (rc == 0 && leader_parse(&kv, &epoch, name, sizeof(name)) == 0)
		*same = !strcmp(name, leader);
	etcd_kv_free(&kv);
	return rc;
}

/* The sync set, written while this MDS's leader key is its own (c->lock held). */
static int sync_put(struct mds_coord *c, const char *list)
{
	const struct etcd_cmp cmp = { c->key_leader, c->leader_rev };
	const struct etcd_op op = { c->key_sync, list, strlen(list), 0 };

	return etcd_txn(c->etcd, &cmp, 1, &op, 1, NULL);
}

/* A pending strike (c->lock held). */
static int strike_locked(struct mds_coord *c, struct mds *m, const struct mds_repl_view *v)
{
	int rc;

	if (!v->strike_pending)
		return 0;
	rc = sync_put(c, c->name);
	if (rc == 0) {
		mds_repl_struck(m, v->gen);
		log_info("coordinator: only this MDS holds every commit now (struck %s)", v->standby);
	}
	return rc;
}

int mds_coord_strike(struct mds_coord *c, struct mds *m)
{
	struct mds_repl_view v;
	int rc;

	if (!c)
		return 0;
	mds_repl_view(m, &v);
	if (!v.strike_pending)
		return 0;
	pthread_mutex_lock(&c->lock);
	mds_repl_view(m, &v); /* as it is once any listing under way has landed */
	rc = strike_locked(c, m, &v);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static _Noreturn void deposed(const char *why)
{
	log_err("coordinator: %s: another MDS may serve now; stopping (a restart follows it)", why);
	_exit(3); /* at once: no other thread answers anything more */
}

/* The lease may have lapsed at etcd a second from now: this MDS answers nothing more. */
static bool lease_running_out(struct mds_coord *c)
{
	return clock_mono_ns() + 1000000000ull >=
	       atomic_load(&c->renewed_ns) + (uint64_t)c->lease_s * 1000000000ull;
}

void mds_coord_guard(struct mds_coord *c)
{
	if (c && c->lease && lease_running_out(c))
		deposed("etcd did not renew its lease in time");
}

/* The sync set follows the standby's standing: listed once JOINING, struck once fallen. */
static void sync_follow(struct mds_coord *c)
{
	struct mds_repl_view v;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	mds_repl_view(c->m, &v);
	if (v.silent && !v.strike_pending) {
		mds_repl_fall_silent(c->m, v.gen);
		mds_repl_view(c->m, &v);
	}
	if (v.strike_pending) {
		rc = strike_locked(c, c->m, &v);
	} else if (v.state == REPL_JOINING) {
		char list[2 * MDS_REPL_NAME_MAX + 2];

		snprintf(list, sizeof(list), "%s,%s", c->name, v.standby);
		rc = sync_put(c, list);
		if (rc == 0) {
			mds_repl_listed(c->m, v.gen);
			log_info("coordinator: standby %s holds every commit: it may take over", v.standby);
		}
		/* An outcome not known (a timeout): it may be listed. It stays JOINING, and should it
		 * fall, the strike rewrites the list. */
	}
	pthread_mutex_unlock(&c->lock);
	if (rc == -ECANCELED)
		deposed("its leader key is gone");
}

static void *serve_main(void *arg)
{
	struct mds_coord *c = arg;
	uint64_t every_ns = (uint64_t)c->lease_s * 1000000000ull / 3, last_try = 0;

	while (!atomic_load(&c->stop)) {
		uint64_t now = clock_mono_ns();

		if (now - last_try >= every_ns) {
			int rc;

			pthread_mutex_lock(&c->lock);
			rc = etcd_lease_keepalive(c->etcd, c->lease, NULL);
			pthread_mutex_unlock(&c->lock);
			last_try = now;
			if (rc == 0 && now > atomic_load(&c->renewed_ns))
				atomic_store(&c->renewed_ns, now);
			else if (rc == -ENOENT)
				deposed("its lease expired");
		}
		/* etcd unreachable: the lease lapses there before this MDS hears of it. */
		mds_coord_guard(c);
		sync_follow(c);
		usleep(COORD_TICK_MS * 1000);
	}
	return NULL;
}

int mds_coord_serve(struct mds_coord *c, struct mds *m)
{
	int rc;

	c->m = m;
	rc = -pthread_create(&c->thread, NULL, serve_main, c);
	c->thread_on = rc == 0;
	return rc;
}
