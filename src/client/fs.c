/* Connecting to a file system, the caller's identity, and the table of OSTs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/internal.h"
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

const char *loom_fsname(const loom_fs *fs)
{
	return fs->fsname;
}

int loom_connect(const char *mds_addr, const char *fsname, loom_fs **out)
{
	struct lw_connect_rep rep;
	struct rpc_conn_opts o = { .name = "MDS" };
	loom_fs *fs;
	int rc;

	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	pthread_mutex_init(&fs->cred_lock, NULL);
	pthread_mutex_init(&fs->ost_lock, NULL);
	pthread_mutex_init(&fs->mds_lock, NULL);
	pthread_mutex_init(&fs->files_lock, NULL);
	u64map_init(&fs->files);
	cred_of_process(&fs->cred);
	fs->umask = process_umask();
	rc = addr_parse(mds_addr, fs->mds_host, sizeof(fs->mds_host), &fs->mds_port, LW_DEFAULT_MDS_PORT);
	if (rc)
		goto fail;
	if (fsname && strlen(fsname) > LOOM_FSNAME_MAX) {
		rc = -ENODEV;
		goto fail;
	}
	rc = rpc_conn_open(fs->mds_host, fs->mds_port, &o, &fs->mds);
	if (rc)
		goto fail;
	rc = mdc_connect(fs->mds, fsname, &rep);
	if (rc)
		goto fail;
	memcpy(fs->fsname, rep.fsname, sizeof(fs->fsname));
	fs->fsname[sizeof(fs->fsname) - 1] = '\0';
	rc = fs_refresh_osts(fs);
	if (rc)
		goto fail;
	*out = fs;
	return 0;
fail:
	loom_disconnect(fs);
	return rc;
}

void loom_disconnect(loom_fs *fs)
{
	if (!fs)
		return;
	rpc_conn_close(fs->mds);
	for (uint32_t i = 0; i < fs->nlinks; i++) {
		rpc_conn_close(fs->links[i]->conn);
		pthread_mutex_destroy(&fs->links[i]->lock);
		free(fs->links[i]);
	}
	free(fs->links);
	for (uint32_t i = 0; i < fs->ngraveyard; i++)
		rpc_conn_close(fs->graveyard[i]);
	free(fs->graveyard);
	free(fs->osts);
	pthread_mutex_destroy(&fs->cred_lock);
	pthread_mutex_destroy(&fs->ost_lock);
	pthread_mutex_destroy(&fs->mds_lock);
	pthread_mutex_destroy(&fs->files_lock);
	u64map_destroy(&fs->files);
	free(fs);
}

/* Under ost_lock: keeps a failed connection until disconnect, since another thread may still be
 * submitting to it (which fails such calls at once). */
static void bury(loom_fs *fs, struct rpc_conn *c)
{
	struct rpc_conn **g = realloc(fs->graveyard, (fs->ngraveyard + 1) * sizeof(*g));

	if (g) {
		fs->graveyard = g;
		fs->graveyard[fs->ngraveyard++] = c;
	}
}

int fs_mds_conn(loom_fs *fs, struct rpc_conn **out)
{
	struct rpc_conn_opts o = { .name = "MDS" };
	struct rpc_conn *c, *old = NULL;
	int rc = 0;

	pthread_mutex_lock(&fs->mds_lock);
	c = fs->mds;
	if (!rpc_conn_alive(c)) {
		/* The MDS restarted (or the link broke): connect again. The new session has no
		 * handles from the old one; replaying them is recovery's job. */
		old = c;
		rc = rpc_conn_open(fs->mds_host, fs->mds_port, &o, &c);
		if (rc == 0) {
			fs->mds = c;
			rc = mdc_connect(c, fs->fsname, NULL);
		} else {
			c = old;
			old = NULL;
			rc = -EIO;
		}
	}
	pthread_mutex_unlock(&fs->mds_lock);
	if (old) {
		pthread_mutex_lock(&fs->ost_lock);
		bury(fs, old);
		pthread_mutex_unlock(&fs->ost_lock);
	}
	*out = c;
	return rc;
}

/* Under ost_lock. The link for an address, created on first sight. */
static struct oss_link *link_for(loom_fs *fs, const char *host, uint16_t port)
{
	struct oss_link *l, **links;

	for (uint32_t i = 0; i < fs->nlinks; i++)
		if (fs->links[i]->port == port && !strcmp(fs->links[i]->host, host))
			return fs->links[i];
	l = calloc(1, sizeof(*l));
	links = realloc(fs->links, (fs->nlinks + 1) * sizeof(*links));
	if (!l || !links) {
		free(l);
		if (links)
			fs->links = links;
		return NULL;
	}
	snprintf(l->host, sizeof(l->host), "%s", host);
	l->port = port;
	pthread_mutex_init(&l->lock, NULL);
	fs->links = links;
	fs->links[fs->nlinks++] = l;
	return l;
}

int fs_refresh_osts(loom_fs *fs)
{
	const struct lw_ost_entry *ents;
	void *body = NULL;
	uint32_t count, gen, max_idx = 0;
	struct ost_slot *slots;
	int rc;

	rc = mdc_ost_table(fs, &body, &count, &gen);
	if (rc)
		return rc;
	ents = (const struct lw_ost_entry *)((uint8_t *)body + sizeof(struct lw_ost_table_rep));
	for (uint32_t i = 0; i < count; i++) {
		struct lw_ost_entry e;
		memcpy(&e, &ents[i], sizeof(e));
		if (e.idx + 1 > max_idx)
			max_idx = e.idx + 1;
	}
	pthread_mutex_lock(&fs->ost_lock);
	if (max_idx > fs->nosts) {
		slots = realloc(fs->osts, max_idx * sizeof(*slots));
		if (!slots) {
			pthread_mutex_unlock(&fs->ost_lock);
			free(body);
			return -ENOMEM;
		}
		memset(slots + fs->nosts, 0, (max_idx - fs->nosts) * sizeof(*slots));
		fs->osts = slots;
		fs->nosts = max_idx;
	}
	for (uint32_t i = 0; i < count; i++) {
		struct lw_ost_entry e;
		struct ost_slot *s;

		memcpy(&e, &ents[i], sizeof(e));
		s = &fs->osts[e.idx];
		s->known = true;
		s->state = e.state;
		memcpy(s->uuid, e.uuid, sizeof(s->uuid));
		s->link = link_for(fs, e.host, e.port);
		if (!s->link)
			rc = -ENOMEM;
	}
	fs->ost_gen = gen;
	pthread_mutex_unlock(&fs->ost_lock);
	free(body);
	return rc;
}

#define RECONNECT_BACKOFF_NS 1000000000ull /* 1 s */

static struct oss_link *slot_link(loom_fs *fs, uint32_t ost_idx)
{
	struct oss_link *l = NULL;

	pthread_mutex_lock(&fs->ost_lock);
	if (ost_idx < fs->nosts && fs->osts[ost_idx].known)
		l = fs->osts[ost_idx].link;
	pthread_mutex_unlock(&fs->ost_lock);
	return l;
}

/* The live connection of a link, connecting if needed. NULL when the OSS cannot be reached. */
static struct rpc_conn *link_conn(loom_fs *fs, struct oss_link *l, uint32_t ost_idx)
{
	struct rpc_conn *c, *stale = NULL;
	uint64_t now = clock_mono_ns();

	pthread_mutex_lock(&l->lock);
	if (l->conn && !rpc_conn_alive(l->conn)) {
		stale = l->conn;
		l->conn = NULL;
	}
	if (!l->conn && now - l->last_fail_ns >= RECONNECT_BACKOFF_NS) {
		char name[16];
		struct rpc_conn_opts o = { .name = name };

		snprintf(name, sizeof(name), "OST%04x", ost_idx);
		/* Under the link's own lock: two threads never race to connect to one OSS, and
		 * a slow connect stalls only the users of this OSS. */
		if (rpc_conn_open(l->host, l->port, &o, &l->conn) != 0) {
			l->conn = NULL;
			l->last_fail_ns = now;
		}
	}
	c = l->conn;
	pthread_mutex_unlock(&l->lock);
	if (stale) {
		pthread_mutex_lock(&fs->ost_lock);
		bury(fs, stale);
		pthread_mutex_unlock(&fs->ost_lock);
	}
	return c;
}

int fs_ost_conn(loom_fs *fs, uint32_t ost_idx, struct rpc_conn **out)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		struct oss_link *l = slot_link(fs, ost_idx);
		uint64_t now = clock_mono_ns();
		bool refresh;
		int rc;

		if (l) {
			*out = link_conn(fs, l, ost_idx);
			if (*out)
				return 0;
		}
		if (attempt)
			break;
		/* An OST we have not heard of joined after we connected; one we cannot reach may
		 * have come back elsewhere (an OSS restarted on another port): ask the MDS, at most
		 * once a second. */
		pthread_mutex_lock(&fs->ost_lock);
		refresh = !l || now - fs->last_refresh_ns >= RECONNECT_BACKOFF_NS;
		if (refresh)
			fs->last_refresh_ns = now;
		pthread_mutex_unlock(&fs->ost_lock);
		if (!refresh)
			break;
		rc = fs_refresh_osts(fs);
		if (rc)
			return l ? -EIO : rc;
		if (l && slot_link(fs, ost_idx) == l)
			break; /* same address: it is down */
	}
	return slot_link(fs, ost_idx) ? -EIO : -ENODEV;
}
