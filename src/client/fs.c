/* Connecting to a file system, the caller's identity, and the table of OSTs. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/internal.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/util.h"

void fs_cred(loom_fs *fs, struct loom_cred *out)
{
	pthread_mutex_lock(&fs->cred_lock);
	*out = fs->cred;
	pthread_mutex_unlock(&fs->cred_lock);
}

static void cred_of_process(struct loom_cred *c)
{
	gid_t groups[LOOM_MAX_GROUPS];
	int n = getgroups(LOOM_MAX_GROUPS, groups);

	memset(c, 0, sizeof(*c));
	c->uid = getuid();
	c->gid = getgid();
	if (n < 0) /* more groups than the wire carries: take the first ones */
		n = 0;
	for (int i = 0; i < n; i++)
		c->groups[i] = groups[i];
	c->ngroups = (uint32_t)n;
}

int loom_set_cred(loom_fs *fs, const struct loom_cred *cred)
{
	struct loom_cred own;

	if (cred->ngroups > LOOM_MAX_GROUPS)
		return -EINVAL;
	cred_of_process(&own);
	/* Only root speaks for others; the MDS trusts the identity it is given (see docs). */
	if (own.uid != 0 && (cred->uid != own.uid || cred->gid != own.gid))
		return -EPERM;
	pthread_mutex_lock(&fs->cred_lock);
	fs->cred = *cred;
	pthread_mutex_unlock(&fs->cred_lock);
	return 0;
}

int loom_set_umask(loom_fs *fs, mode_t mask)
{
	if (mask & ~(mode_t)0777)
		return -EINVAL;
	fs->umask = mask;
	return 0;
}

/* The umask, read without changing it (umask(2) can only read by setting). */
static mode_t process_umask(void)
{
	char line[128];
	unsigned int m = 022;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 022;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Umask: %o", &m) == 1)
			break;
	fclose(f);
	return (mode_t)(m & 0777);
}

#define BARE_NS 1000000000ull /* how long "no extended attributes" is trusted */
#define BARE_MAX 65536        /* inodes remembered; past that the memory starts afresh */

/* fs->bare's values: the monotonic time of the news, its low bit telling which news. A change
 * made here leaves a mark (bit set) for BARE_NS, so that an older reply still on its way cannot
 * say "none" again. */
#define BARE_CHANGED 1u

void fs_note_attr(loom_fs *fs, const struct lw_attr *attr)
{
	uint64_t now = clock_mono_ns() & ~(uint64_t)BARE_CHANGED, was;

	pthread_mutex_lock(&fs->bare_lock);
	was = (uint64_t)(uintptr_t)u64map_get(&fs->bare, attr->ino);
	if ((was & BARE_CHANGED) && now - (was & ~(uint64_t)BARE_CHANGED) < BARE_NS) {
		; /* changed here a moment ago: this reply may predate the change */
	} else if (attr->flags & LW_ATTR_F_NO_XATTRS) {
		if (fs->bare.count >= BARE_MAX) {
			u64map_destroy(&fs->bare);
			u64map_init(&fs->bare);
		}
		u64map_put(&fs->bare, attr->ino, (void *)(uintptr_t)now);
	} else {
		u64map_del(&fs->bare, attr->ino);
	}
	pthread_mutex_unlock(&fs->bare_lock);
}

void fs_forget_bare(loom_fs *fs, uint64_t ino)
{
	uint64_t now = clock_mono_ns() | BARE_CHANGED;

	pthread_mutex_lock(&fs->bare_lock);
	if (u64map_put(&fs->bare, ino, (void *)(uintptr_t)now) < 0)
		u64map_del(&fs->bare, ino);
	pthread_mutex_unlock(&fs->bare_lock);
}

bool fs_known_bare(loom_fs *fs, uint64_t ino)
{
	uint64_t when;

	pthread_mutex_lock(&fs->bare_lock);
	when = (uint64_t)(uintptr_t)u64map_get(&fs->bare, ino);
	pthread_mutex_unlock(&fs->bare_lock);
	return when && !(when & BARE_CHANGED) && clock_mono_ns() - when < BARE_NS;
}

const char *loom_fsname(const loom_fs *fs)
{
	return fs->fsname;
}

/*
 * Every (re)connection to the MDS says who this client is (its sessions and reply cache are
 * keyed by it). When the MDS restarted since the last time, it has forgotten the files this
 * client holds open and the locks it holds (both live in its memory), so the files are opened
 * again and then the locks replayed, on the spot, before anything in flight is resent. Runs on
 * the connection's own thread.
 */
bool fs_conn_error(int rc)
{
	return rc == -EIO || rc == -EPIPE || rc == -ECONNRESET || rc == -ECONNREFUSED ||
	       rc == -ETIMEDOUT || rc == -ENOTCONN || rc == -EPROTO;
}

/*
 * The MDS refused our fsname (-ENODEV): which file system it serves, for the message, asked
 * with a connect of no fsname and no uuid (an anonymous session, which goes with this socket).
 * In a failover list that is not the end (another address may serve ours): -EAGAIN, so that a
 * reconnection goes on to the next address.
 */
static int mds_of_another_fs(loom_fs *fs, struct rpc_hs *hs)
{
	struct lw_connect_req req = { .proto_version = LW_VERSION, .client_kind = LW_CLIENT_CLIENT };
	struct lw_connect_rep rep;
	uint32_t len = 0;
	char other[sizeof(rep.fsname)] = "?", at[96];
	bool more;

	if (rpc_hs_call(hs, LW_OP_MDS_CONNECT, &req, sizeof(req), &rep, sizeof(rep), &len) == 0 &&
	    len == sizeof(rep) && rep.fsname[0]) {
		memcpy(other, rep.fsname, sizeof(other));
		other[sizeof(other) - 1] = '\0';
	}
	pthread_mutex_lock(&fs->addr_lock);
	memcpy(fs->mds_other_fs, other, sizeof(fs->mds_other_fs));
	mds_addr_str(&fs->mds_addrs.addr[fs->mds_cur], at, sizeof(at));
	more = fs->mds_addrs.count > 1;
	pthread_mutex_unlock(&fs->addr_lock);
	if (fs->mds_boot) /* a reconnection: the first connect's caller reports its own */
		log_warn("the MDS at %s serves file system %s, not %s%s", at, other, fs->fsname,
			 more ? "; trying the next address" : "");
	return more ? -EAGAIN : -ENODEV;
}

static int mds_hello(struct rpc_hs *hs, void *arg)
{
	loom_fs *fs = arg;
	struct lw_connect_req req = { .proto_version = LW_VERSION, .client_kind = LW_CLIENT_CLIENT };
	struct lw_connect_rep rep;
	struct loom_cred cr;
	uint32_t len = 0;
	int rc, reopened = 0;

	memcpy(req.fsname, fs->fsname, sizeof(req.fsname));
	memcpy(req.client_uuid, fs->uuid, sizeof(req.client_uuid));
	rc = rpc_hs_call(hs, LW_OP_MDS_CONNECT, &req, sizeof(req), &rep, sizeof(rep), &len);
	if (rc == -ENODEV)
		return mds_of_another_fs(fs, hs);
	if (rc)
		return rc;
	if (len != sizeof(rep))
		return -EPROTO;
	{
		struct lw_mds_rep_prefix pre;

		/* A session new or found again on this connection: whatever it held is gone, also a
		 * grant numbered past what the MDS says (its clock may have stepped back). */
		rpc_hs_prefix(hs, &pre);
		if (pre.flags & LW_RPF_LEASES_LOST)
			leases_lost(fs, UINT64_MAX);
	}
	if (!fs->fsname[0]) {
		memcpy(fs->fsname, rep.fsname, sizeof(fs->fsname));
		fs->fsname[sizeof(fs->fsname) - 1] = '\0';
	}
	if (fs->mds_boot && fs->mds_boot != rep.session_id) {
		/* A session that ended there took its inode numbers with it. */
		atomic_store(&fs->inos_stale, true);
		/* The MDS holds replays, and the opens after them, until every client that may
		 * have some sent them: up to twice its recovery window, which is ours too. */
		rpc_hs_set_timeout(hs, (int)MIN(2 * fs->recovery_ms + 30000u, (uint32_t)INT32_MAX));
		rc = kept_changes_replay(fs, hs);
		if (rc)
			return rc;
		fs_cred(fs, &cr);
		pthread_mutex_lock(&fs->open_lock);
		for (loom_file *f = fs->open_list; f && rc == 0; f = f->next_open) {
			uint8_t body[sizeof(struct lw_cred) + LOOM_MAX_GROUPS * 4 + sizeof(struct lw_open_req)];
			struct lw_open_req o = { .ino = f->ino, .open_flags = (uint32_t)(f->flags & O_ACCMODE) };
			uint8_t reply[sizeof(struct lw_open_rep)];
			struct lw_open_rep orep;
			struct lw_wr w;

			lw_wr_init(&w, body, sizeof(body));
			lw_put_cred(&w, &f->cred);
			lw_wr_put(&w, &o, sizeof(o));
			rc = rpc_hs_call(hs, LW_OP_MDS_OPEN, body, (uint32_t)w.len, reply, sizeof(reply), &len);
			if (rc == 0 && len < sizeof(orep))
				rc = -EPROTO;
			if (rc && !fs_conn_error(rc)) {
				/* The MDS's answer for this one file (gone meanwhile, or no longer open to
				 * its opener): its own I/O will say so; the others go on. */
				if (rc != -ENOENT && rc != -ESTALE)
					log_warn("the MDS restarted and inode %llu could not be opened again: %s",
						 (unsigned long long)f->ino, strerror(-rc));
				else
					ileases_gone(f); /* opened under a lease: its reads fail */
				rc = 0;
				continue;
			}
			if (rc)
				break;
			memcpy(&orep, reply, sizeof(orep));
			pthread_mutex_lock(&f->lock);
			f->handle = orep.handle;
			bool was_local = f->local;
			f->local = false; /* one opened under a lease is real now */
			pthread_mutex_unlock(&f->lock);
			if (was_local)
				ileases_local_ended(fs);
			reopened++;
		}
		fs->mds_gen++;
		pthread_mutex_unlock(&fs->open_lock);
		if (rc)
			return rc;
		log_info("the MDS restarted (or ended this client's session); opened %d files again",
			 reopened);
		/* Then the locks, on the files just opened again, before anything is resent: waiting
		 * lock requests resent after this wait behind them. */
		rc = held_locks_replay(fs, hs);
		if (rc)
			return rc;
	}
	fs->mds_boot = rep.session_id;
	pthread_mutex_lock(&fs->addr_lock);
	fs->mds_stay = true; /* after a loss, this address is tried again first */
	pthread_mutex_unlock(&fs->addr_lock);
	return 0;
}

/* Before every dial of the MDS connection: the address that answered last, else the next one of
 * the failover list. Runs on the connection's thread (and in rpc_conn_open). */
static void mds_resolve(void *arg, char *host, size_t cap, uint16_t *port)
{
	loom_fs *fs = arg;
	const struct mds_addr *a;

	pthread_mutex_lock(&fs->addr_lock);
	if (!fs->mds_stay)
		fs->mds_cur = (fs->mds_cur + 1) % fs->mds_addrs.count;
	fs->mds_stay = false;
	a = &fs->mds_addrs.addr[fs->mds_cur];
	snprintf(host, cap, "%s", a->host);
	*port = a->port;
	pthread_mutex_unlock(&fs->addr_lock);
}

/* The MDS stopped answering with its socket up (its host died with its link, or it hangs): the
 * next address of the failover list is dialled first, not the silent one again (which costs a
 * connect timeout when its host is gone). */
static void mds_silent(void *arg)
{
	loom_fs *fs = arg;

	pthread_mutex_lock(&fs->addr_lock);
	fs->mds_stay = false;
	pthread_mutex_unlock(&fs->addr_lock);
}

static unsigned recovery_seconds_default(void)
{
	const char *env = getenv("LOOM_RECOVERY_SECONDS");
	long v = env ? atol(env) : 0;

	return v > 0 && v <= 86400 ? (unsigned)v : 100; /* as Lustre's obd_timeout */
}

/* Lustre's at_min is 0 with a 100 s obd_timeout behind it; 20 s here detects a stopped server
 * within a training step's patience while a loaded server's slowest replies stay far below. */
static unsigned at_min_seconds_default(void)
{
	const char *env = getenv("LOOM_AT_MIN_SECONDS");
	long v = env ? atol(env) : 0;

	return v > 0 && v <= 86400 ? (unsigned)v : 20;
}

void fs_conn_opts(const loom_fs *fs, struct rpc_conn_opts *o)
{
	o->key = fs->keylen ? fs->key : NULL;
	o->keylen = fs->keylen;
	o->key_id = fs->key_id.node[0] ? &fs->key_id : NULL;
	o->encrypt = fs->encrypt;
	o->recovery_ms = fs->recovery_ms;
	o->soft_ms = fs->soft_ms;
	o->at_min_ms = fs->at_min_ms;
}

/* Why this thread's last loom_connect_with failed (loom_connect_error). */
static _Thread_local char connect_why[LOOM_CONNECT_ERROR_LEN];

const char *loom_connect_error(void)
{
	return connect_why;
}

static void why_add(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* What loom_connect_error says next: a connect that is not loom_connect_with's (the door's). */
void fs_connect_why(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(connect_why, sizeof(connect_why), fmt, ap);
	va_end(ap);
}

/* Appends one sentence to why, "; " between two. */
static void why_add(char *why, size_t cap, const char *fmt, ...)
{
	size_t used = strlen(why);
	va_list ap;

	if (used && used + 2 < cap) {
		memcpy(why + used, "; ", 3);
		used += 2;
	}
	if (used + 1 >= cap)
		return;
	va_start(ap, fmt);
	vsnprintf(why + used, cap - used, fmt, ap);
	va_end(ap);
}

/* What one address of the list answered (rc, from rpc_conn_open), as a sentence naming it. */
static void why_addr(const loom_fs *fs, const struct mds_addr *a, const char *other_fs, int rc,
		     char *why, size_t cap)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	char at[96];
	int gai;

	mds_addr_str(a, at, sizeof(at));
	if (other_fs[0]) {
		why_add(why, cap, "the MDS at %s serves file system %s, not %s", at, other_fs, fs->fsname);
		return;
	}
	switch (rc) {
	case -EACCES:
		why_add(why, cap, "the MDS at %s refused this client's key (or it has none)", at);
		return;
	case -EPROTONOSUPPORT:
		why_add(why, cap, "the MDS at %s speaks another protocol version", at);
		return;
	case -EPERM: case -ENOKEY: case -EKEYREJECTED: case -ENOMEM:
		why_add(why, cap, "%s", strerror(-rc));
		return;
	}
	/* A failed dial: a name that does not resolve says so (rpc_dial has no word for it). */
	gai = getaddrinfo(a->host, NULL, &hints, &ai);
	if (gai)
		why_add(why, cap, "cannot resolve %s: %s", a->host,
			gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
	else
		why_add(why, cap, "%s: %s", at, strerror(-rc));
	freeaddrinfo(ai);
}

/* Of two failures, the one to return: what a server answered before what did not answer. */
static int worse(int a, int b)
{
	static const int rank[] = { -EACCES, -EPROTONOSUPPORT, -ENODEV };

	for (size_t i = 0; i < ARRAY_SIZE(rank); i++)
		if (a == rank[i] || b == rank[i])
			return a == rank[i] ? a : b;
	return a ? a : b;
}

/*
 * A connection to the MDS at the first address of the list, from the current one on, that
 * answers with our file system. why (if not NULL) gets what each address said, for a failure.
 */
static int mds_open(loom_fs *fs, struct rpc_conn_opts *o, struct rpc_conn **out, char *why, size_t cap)
{
	unsigned n = fs->mds_addrs.count;
	char other[sizeof(fs->mds_other_fs)];
	int rc, ret = 0;

	o->resolve = mds_resolve;
	o->on_silence = mds_silent;
	o->arg = fs;
	for (unsigned k = 0; k < n; k++) {
		struct mds_addr a;

		pthread_mutex_lock(&fs->addr_lock);
		if (k > 0)
			fs->mds_cur = (fs->mds_cur + 1) % n;
		fs->mds_stay = true; /* mds_resolve gives this one */
		fs->mds_other_fs[0] = '\0';
		a = fs->mds_addrs.addr[fs->mds_cur];
		pthread_mutex_unlock(&fs->addr_lock);
		rc = rpc_conn_open(a.host, a.port, o, out);
		if (rc == 0)
			return 0;
		pthread_mutex_lock(&fs->addr_lock);
		memcpy(other, fs->mds_other_fs, sizeof(other));
		pthread_mutex_unlock(&fs->addr_lock);
		if (other[0])
			rc = -ENODEV;
		if (why)
			why_addr(fs, &a, other, rc, why, cap);
		ret = worse(ret, rc);
	}
	return ret;
}

/* A loom_fs with its locks and tables, connected to nothing yet. */
loom_fs *fs_new(void)
{
	loom_fs *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return NULL;
	pthread_mutex_init(&fs->cred_lock, NULL);
	pthread_mutex_init(&fs->ost_lock, NULL);
	pthread_mutex_init(&fs->mds_lock, NULL);
	pthread_mutex_init(&fs->addr_lock, NULL);
	pthread_mutex_init(&fs->files_lock, NULL);
	pthread_mutex_init(&fs->open_lock, NULL);
	pthread_mutex_init(&fs->bare_lock, NULL);
	pthread_mutex_init(&fs->shared_lock, NULL);
	u64map_init(&fs->shared);
	pthread_mutex_init(&fs->stale_lock, NULL);
	u64map_init(&fs->stale);
	held_locks_init(fs);
	kept_changes_init(fs);
	behind_init(fs);
	made_init(fs);
	jobtag_init(fs);
	u64map_init(&fs->files);
	u64map_init(&fs->bare);
	cred_of_process(&fs->cred);
	fs->umask = process_umask();
	return fs;
}

int loom_connect_with(const char *mds_addr, const struct loom_connect_opts *opts, loom_fs **out)
{
	struct rpc_conn_opts o = { .name = "MDS", .hello = mds_hello,
				   .on_reply = kept_changes_on_reply, .on_notify = leases_on_notify,
				   .on_prefix = leases_on_prefix };
	const char *key_file = loom_key_file_choose(opts ? opts->key_file : NULL);
	const char *fsname = opts ? opts->fsname : NULL;
	char list[512], src_fsname[LOOM_FSNAME_MAX + 1];
	unsigned recovery_s = opts && opts->recovery_seconds ? opts->recovery_seconds
							    : recovery_seconds_default();
	loom_fs *fs;
	int rc;

	connect_why[0] = '\0';
	if (recovery_s > 86400 || (opts && (opts->soft_seconds > 86400 || opts->at_min_seconds > 86400))) {
		why_add(connect_why, sizeof(connect_why), "recovery, soft and at_min seconds are at most 86400");
		return -EINVAL;
	}
	/* A mount's source (LIST:/FSNAME) names the file system too. */
	if (mds_addr && strstr(mds_addr, ":/")) {
		if (mount_source_split(mds_addr, list, sizeof(list), src_fsname, sizeof(src_fsname),
				       connect_why, sizeof(connect_why)))
			return -EINVAL;
		if (fsname && strcmp(fsname, src_fsname)) {
			why_add(connect_why, sizeof(connect_why), "'%s' names file system %s, not %s",
				mds_addr, src_fsname, fsname);
			return -EINVAL;
		}
		fsname = src_fsname;
		mds_addr = list;
	}

	fs = fs_new();
	if (!fs)
		return -ENOMEM;
	fs->recovery_ms = 1000u * recovery_s;
	fs->soft_ms = opts ? 1000u * opts->soft_seconds : 0;
	fs->at_min_ms = 1000u * (opts && opts->at_min_seconds ? opts->at_min_seconds : at_min_seconds_default());
	rc = random_bytes(fs->uuid, sizeof(fs->uuid));
	if (rc)
		goto fail;
	rc = mds_addrs_parse(mds_addr, LW_DEFAULT_MDS_PORT, &fs->mds_addrs, connect_why, sizeof(connect_why));
	if (rc)
		goto fail;
	if (fsname && (strlen(fsname) > LOOM_FSNAME_MAX || !*fsname)) {
		why_add(connect_why, sizeof(connect_why), "no file system is named '%s' (1 to %d characters)",
			fsname, LOOM_FSNAME_MAX);
		rc = -ENODEV;
		goto fail;
	}
	if (fsname)
		snprintf(fs->fsname, sizeof(fs->fsname), "%s", fsname);
	if (key_file && *key_file) {
		rc = loom_key_load(key_file, fs->key, &fs->keylen, &fs->key_id);
		if (rc) {
			/* Not the servers' -EACCES: this user may not read the file. */
			rc = rc == -EINVAL ? -EKEYREJECTED : rc == -EACCES ? -ENOKEY : rc;
			goto fail;
		}
	}
	fs->encrypt = opts && opts->encrypt;
	if (fs->encrypt && !fs->keylen) {
		/* frames are encrypted with keys derived from the file system's */
		why_add(connect_why, sizeof(connect_why), "encrypt needs the file system key");
		rc = -EINVAL;
		goto fail;
	}
	fs_conn_opts(fs, &o);
	/* The first connection must work (else the caller learns at once that nothing is there);
	 * later losses are recovered. */
	rc = mds_open(fs, &o, &fs->mds, connect_why, sizeof(connect_why));
	if (rc)
		goto fail;
	rc = fs_refresh_osts(fs);
	if (rc)
		goto fail;
	*out = fs;
	return 0;
fail:
	if (!connect_why[0])
		why_add(connect_why, sizeof(connect_why), "%s", strerror(-rc));
	loom_disconnect(fs);
	return rc;
}

int loom_connect(const char *mds_addr, const char *fsname, loom_fs **out)
{
	struct loom_connect_opts o = { .fsname = fsname };

	return loom_connect_with(mds_addr, &o, out);
}

static void disconnect(loom_fs *fs, bool wait)
{
	if (!fs)
		return;
	door_close(fs);
	/* The creates sent behind are answered, and the closes they are owed sent, while the lease
	 * thread runs; then its MDS_LEASE goes out while the connection still takes calls. */
	(void)behind_barrier(fs);
	leases_stop(fs);
	if (fs->mds)
		kept_changes_goodbye(fs, wait);
	/* First every connection's thread stops (calls still in flight fail), while all of them
	 * are still valid memory: an OST connection's thread may be asking the MDS where its OSS
	 * went, and fs_mds_conn must not open a new connection meanwhile. */
	pthread_mutex_lock(&fs->mds_lock);
	pthread_mutex_lock(&fs->ost_lock);
	fs->stopping = true;
	pthread_mutex_unlock(&fs->ost_lock);
	pthread_mutex_unlock(&fs->mds_lock);
	rpc_conn_stop(fs->mds);
	pthread_mutex_lock(&fs->ost_lock);
	for (uint32_t i = 0; i < fs->nosts; i++) {
		struct ost_slot *sl = fs->osts[i];
		struct rpc_conn *c;

		if (!sl)
			continue;
		pthread_mutex_lock(&sl->lock);
		c = sl->conn;
		pthread_mutex_unlock(&sl->lock);
		/* Not under ost_lock: a recovering thread may want it to refresh the OST table. */
		pthread_mutex_unlock(&fs->ost_lock);
		rpc_conn_stop(c);
		pthread_mutex_lock(&fs->ost_lock);
	}
	pthread_mutex_unlock(&fs->ost_lock);
	for (uint32_t i = 0; i < fs->ngraveyard; i++)
		rpc_conn_stop(fs->graveyard[i]);

	rpc_conn_close(fs->mds);
	for (uint32_t i = 0; i < fs->nosts; i++) {
		struct ost_slot *sl = fs->osts[i];
		if (!sl)
			continue;
		rpc_conn_close(sl->conn);
		pthread_mutex_destroy(&sl->lock);
		free(sl);
	}
	for (uint32_t i = 0; i < fs->ngraveyard; i++)
		rpc_conn_close(fs->graveyard[i]);
	free(fs->graveyard);
	free(fs->osts);
	u64map_destroy(&fs->files);
	u64map_destroy(&fs->bare);
	ino_shared_destroy(fs);
	held_locks_destroy(fs);
	kept_changes_destroy(fs);
	behind_destroy(fs);
	made_destroy(fs);
	leases_destroy(fs);
	jobtag_destroy(fs);
	pthread_mutex_destroy(&fs->shared_lock);
	u64map_destroy(&fs->stale);
	pthread_mutex_destroy(&fs->stale_lock);
	pthread_mutex_destroy(&fs->bare_lock);
	pthread_mutex_destroy(&fs->cred_lock);
	pthread_mutex_destroy(&fs->ost_lock);
	pthread_mutex_destroy(&fs->mds_lock);
	pthread_mutex_destroy(&fs->addr_lock);
	pthread_mutex_destroy(&fs->files_lock);
	pthread_mutex_destroy(&fs->open_lock);
	free(fs);
}

void loom_disconnect(loom_fs *fs)
{
	disconnect(fs, true);
}

void loom_disconnect_nowait(loom_fs *fs)
{
	disconnect(fs, false);
}

int fs_mds_conn(loom_fs *fs, struct rpc_conn **out)
{
	struct rpc_conn_opts o = { .name = "MDS", .hello = mds_hello,
				   .on_reply = kept_changes_on_reply, .on_notify = leases_on_notify,
				   .on_prefix = leases_on_prefix,
				   .arg = fs };
	struct rpc_conn *c, *old = NULL;
	int rc = 0;

	if (fs->door)
		return -EOPNOTSUPP; /* what the door does not carry needs the key */
	fs_conn_opts(fs, &o);
	pthread_mutex_lock(&fs->mds_lock);
	c = fs->mds;
	if (!rpc_conn_alive(c) && !fs->stopping) {
		/* The MDS stayed away past the recovery window (its calls failed with EIO): try
		 * afresh, so that the client works again once it is back. */
		old = c;
		o.first_req_id = rpc_conn_last_id(old);
		rc = mds_open(fs, &o, &c, NULL, 0);
		if (rc == 0) {
			fs->mds = c;
		} else {
			c = old;
			old = NULL;
			rc = -EIO;
		}
	}
	pthread_mutex_unlock(&fs->mds_lock);
	if (old) {
		pthread_mutex_lock(&fs->ost_lock);
		fs_bury(fs, old);
		pthread_mutex_unlock(&fs->ost_lock);
	}
	*out = c;
	return rc;
}
