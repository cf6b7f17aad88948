/*
 * The client's connections to the OSTs: the table of OSTs (where each is served, and its
 * failover partner's address) learnt from the MDS, and one connection per OST, made at first use
 * and dialled again, wherever the OST is served now, after a loss.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "common/log.h"
#include "common/util.h"

/* Under ost_lock: keeps a failed connection until disconnect, since another thread may still be
 * submitting to it (which fails such calls at once). */
void fs_bury(loom_fs *fs, struct rpc_conn *c)
{
	struct rpc_conn **g = realloc(fs->graveyard, (fs->ngraveyard + 1) * sizeof(*g));

	if (g) {
		fs->graveyard = g;
		fs->graveyard[fs->ngraveyard++] = c;
	}
}

/* Under ost_lock: the slot for an index, made when first seen. */
static struct ost_slot *slot_for(loom_fs *fs, uint32_t idx)
{
	if (idx >= fs->nosts) {
		uint32_t n = idx + 1;
		struct ost_slot **osts = realloc(fs->osts, n * sizeof(*osts));

		if (!osts)
			return NULL;
		memset(osts + fs->nosts, 0, (n - fs->nosts) * sizeof(*osts));
		fs->osts = osts;
		fs->nosts = n;
	}
	if (!fs->osts[idx]) {
		struct ost_slot *sl = calloc(1, sizeof(*sl));
		if (!sl)
			return NULL;
		sl->fs = fs;
		sl->idx = idx;
		pthread_mutex_init(&sl->lock, NULL);
		fs->osts[idx] = sl;
	}
	return fs->osts[idx];
}

/* Where else each OST may be served (its failover pair's other server), as the MDS heard from
 * their OSSs. An MDS that does not say (an older one, or one that restarted and has not heard
 * yet) leaves what was known: it is a hint to dial, never trusted more than the server's own
 * handshake. */
static void learn_failovers(loom_fs *fs)
{
	void *body = NULL;
	uint32_t count;

	if (mdc_ost_failovers(fs, &body, &count) != 0)
		return;
	pthread_mutex_lock(&fs->ost_lock);
	/* An OST the MDS names no partner for has none (its OSS said so, or a replacement took
	 * the index): entries are set again below. */
	for (uint32_t i = 0; i < fs->nosts; i++) {
		if (!fs->osts[i])
			continue;
		pthread_mutex_lock(&fs->osts[i]->lock);
		fs->osts[i]->fo_host[0] = '\0';
		fs->osts[i]->fo_port = 0;
		pthread_mutex_unlock(&fs->osts[i]->lock);
	}
	for (uint32_t i = 0; i < count; i++) {
		struct lw_ost_addr a;
		struct ost_slot *sl;

		memcpy(&a, (uint8_t *)body + sizeof(struct lw_ost_table_rep) + i * sizeof(a), sizeof(a));
		sl = a.idx < fs->nosts ? fs->osts[a.idx] : NULL;
		if (!sl)
			continue;
		pthread_mutex_lock(&sl->lock);
		snprintf(sl->fo_host, sizeof(sl->fo_host), "%s", a.host);
		sl->fo_port = a.port;
		pthread_mutex_unlock(&sl->lock);
	}
	pthread_mutex_unlock(&fs->ost_lock);
	free(body);
}

int fs_refresh_osts(loom_fs *fs)
{
	const struct lw_ost_entry *ents;
	void *body = NULL;
	uint32_t count, gen;
	int rc;

	rc = mdc_ost_table(fs, &body, &count, &gen);
	if (rc)
		return rc;
	ents = (const struct lw_ost_entry *)((uint8_t *)body + sizeof(struct lw_ost_table_rep));
	pthread_mutex_lock(&fs->ost_lock);
	for (uint32_t i = 0; i < count && rc == 0; i++) {
		struct lw_ost_entry e;
		struct ost_slot *sl;

		memcpy(&e, &ents[i], sizeof(e));
		sl = slot_for(fs, e.idx);
		if (!sl) {
			rc = -ENOMEM;
			break;
		}
		pthread_mutex_lock(&sl->lock);
		sl->known = true;
		sl->state = e.state;
		memcpy(sl->uuid, e.uuid, sizeof(sl->uuid));
		snprintf(sl->host, sizeof(sl->host), "%s", e.host);
		sl->port = e.port;
		pthread_mutex_unlock(&sl->lock);
	}
	fs->ost_gen = gen;
	fs->last_refresh_ns = clock_mono_ns();
	pthread_mutex_unlock(&fs->ost_lock);
	free(body);
	if (rc == 0)
		learn_failovers(fs);
	return rc;
}

#define REFRESH_INTERVAL_NS 1000000000ull /* 1 s */

/* Before each connection attempt: where the OST is served now (an OSS that restarted may listen
 * on another port, or its failover partner may have taken over), from the MDS's table, asked at
 * most once a second, and not while the MDS is away itself (an OSS pair fails over without it).
 * An OST with a failover partner is dialled at its two addresses in turn. Runs on the OST
 * connection's thread. */
static void ost_resolve(void *arg, char *host, size_t cap, uint16_t *port)
{
	struct ost_slot *sl = arg;
	loom_fs *fs = sl->fs;
	bool refresh;

	pthread_mutex_lock(&fs->ost_lock);
	refresh = clock_mono_ns() - fs->last_refresh_ns >= REFRESH_INTERVAL_NS && !fs->stopping;
	pthread_mutex_unlock(&fs->ost_lock);
	if (refresh) {
		bool was = rpc_nowait_swap(true); /* an MDS away: dial without its news */

		fs_refresh_osts(fs);
		rpc_nowait_swap(was);
	}
	pthread_mutex_lock(&sl->lock);
	if (sl->dial_fo && sl->fo_host[0] &&
	    (strcmp(sl->fo_host, sl->host) != 0 || sl->fo_port != sl->port)) {
		snprintf(host, cap, "%s", sl->fo_host);
		*port = sl->fo_port;
	} else {
		snprintf(host, cap, "%s", sl->host);
		*port = sl->port;
	}
	sl->dial_fo = !sl->dial_fo && sl->fo_host[0];
	pthread_mutex_unlock(&sl->lock);
}

/* On every connection to an OST, before anything is resent: which instance of it answers. One
 * that differs from the last means a server that may have lost writes the last one acknowledged
 * (ost_instance.c): fsyncs of files written there since their last fsync report EIO. */
static int ost_hello(struct rpc_hs *hs, void *arg)
{
	struct ost_slot *sl = arg;
	struct lw_ost_io io = { .ost_idx = sl->idx };
	struct lw_ost_connect_rep rep;
	uint32_t len = 0;
	int rc;

	/* Its answer may queue behind the writes other clients resend after a failover. */
	rpc_hs_set_timeout(hs, 60000);
	rc = rpc_hs_call(hs, LW_OP_OST_CONNECT, &io, sizeof(io), &rep, sizeof(rep), &len);
	if (rc == -EOPNOTSUPP)
		return 0; /* an older OSS: nothing to compare */
	if (rc == -EPROTONOSUPPORT)
		return rc;
	/* Not served at this address (yet), a node key not known there yet, a frame that came
	 * damaged: dial again (perhaps the partner). */
	if (rc)
		return -EAGAIN;
	if (len < sizeof(rep) || rep.instance == 0 || !memchr(rep.uuid, '\0', sizeof(rep.uuid)))
		return -EAGAIN;
	pthread_mutex_lock(&sl->lock);
	if (sl->uuid[0] && strncmp(rep.uuid, sl->uuid, sizeof(rep.uuid)) != 0) {
		/* Another OST with this index: a stale or mistyped failover address, another file
		 * system's OSS. Nothing may be sent there. */
		log_warn("OST%04x: the address dialled serves OST %s (file system %.16s), not %s: not "
			 "this file system's OST%04x; dialling again", sl->idx, rep.uuid, rep.fsname, sl->uuid,
			 sl->idx);
		pthread_mutex_unlock(&sl->lock);
		return -EAGAIN;
	}
	if (sl->instance && sl->instance != rep.instance) {
		atomic_fetch_add(&sl->loss_gen, 1);
		log_warn("OST%04x is served by another instance (%016llx, was %016llx): writes the one "
			 "before acknowledged and nobody fsynced may be lost; files written there since "
			 "their last fsync report EIO at their next fsync", sl->idx,
			 (unsigned long long)rep.instance, (unsigned long long)sl->instance);
	}
	sl->instance = rep.instance;
	pthread_mutex_unlock(&sl->lock);
	return 0;
}

_Atomic uint32_t *fs_ost_loss_ref(loom_fs *fs, uint32_t idx)
{
	_Atomic uint32_t *ref = NULL;

	pthread_mutex_lock(&fs->ost_lock);
	if (idx < fs->nosts && fs->osts[idx])
		ref = &fs->osts[idx]->loss_gen;
	pthread_mutex_unlock(&fs->ost_lock);
	return ref;
}

uint32_t fs_ost_loss_gen(loom_fs *fs, uint32_t idx)
{
	_Atomic uint32_t *ref = fs_ost_loss_ref(fs, idx);

	return ref ? atomic_load(ref) : 0;
}

int fs_ost_conn(loom_fs *fs, uint32_t ost_idx, struct rpc_conn **out)
{
	struct ost_slot *sl = NULL;
	struct rpc_conn *stale = NULL, *extra = NULL;
	int rc = 0;

	for (int attempt = 0; attempt < 2 && !sl; attempt++) {
		pthread_mutex_lock(&fs->ost_lock);
		if (ost_idx < fs->nosts && fs->osts[ost_idx] && fs->osts[ost_idx]->known)
			sl = fs->osts[ost_idx];
		pthread_mutex_unlock(&fs->ost_lock);
		/* A layout names an OST we have not heard of: it joined after we connected. */
		if (!sl && attempt == 0 && (rc = fs_refresh_osts(fs)) != 0)
			return rc;
	}
	if (!sl)
		return -ENODEV;

	pthread_mutex_lock(&sl->lock);
	if (sl->conn && !rpc_conn_alive(sl->conn)) {
		stale = sl->conn; /* away past the recovery window: start a new one */
		sl->conn = NULL;
	}
	if (!sl->conn) {
		char name[16], host[64];
		uint16_t port = sl->port;
		struct rpc_conn_opts o = { .name = name, .lazy = true, .resolve = ost_resolve,
					   .hello = ost_hello, .arg = sl };

		fs_conn_opts(fs, &o);
		snprintf(name, sizeof(name), "OST%04x", ost_idx);
		snprintf(host, sizeof(host), "%s", sl->host);
		/* lazy: an OSS that is down now is waited for, as one that goes away later is. The
		 * resolve callback takes sl->lock itself: release it while connecting. */
		pthread_mutex_unlock(&sl->lock);
		rc = rpc_conn_open(host, port, &o, out);
		pthread_mutex_lock(&sl->lock);
		if (rc == 0 && sl->conn) {
			/* Another thread connected meanwhile: use theirs (ours is closed below, without
			 * sl->lock, which its thread may want). */
			extra = *out;
		} else if (rc == 0) {
			sl->conn = *out;
		} else {
			rc = rc == -EACCES ? -EACCES : -EIO;
		}
	}
	*out = sl->conn;
	pthread_mutex_unlock(&sl->lock);
	rpc_conn_close(extra);
	if (stale) {
		pthread_mutex_lock(&fs->ost_lock);
		fs_bury(fs, stale);
		pthread_mutex_unlock(&fs->ost_lock);
	}
	return sl->conn ? 0 : rc;
}
