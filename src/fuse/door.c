/*
 * loom-mount's door (src/common/door.h): a unix socket through which a process without the file
 * system key uses Loom natively, as itself.
 *
 * One thread per channel, blocking on its socket: a channel is one request at a time, and a
 * caller that wants more in flight opens more channels (up to DOOR_MAX_CHANNELS a session).
 * The caller's identity comes from the kernel when the channel connects (SO_PEERCRED and
 * SO_PEERGROUPS); a session's connection to the servers acts as it, so the MDS checks each
 * request as it checks the mount's own. What a stranger can take is bounded, and no user can
 * take it all: channels per uid (DOOR_MAX_CONNS_PER_UID) and in all (DOOR_MAX_CONNS), sessions
 * per uid (DOOR_MAX_SESSIONS_PER_UID), handles per session.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/mountinfo.h"
#include "common/util.h"
#include "fuse/door_srv.h"
#include "fuse/lmount.h"

#define DOOR_MAX_CONNS           4096u
#define DOOR_MAX_CONNS_PER_UID   256u  /* 8 DataLoader workers and their parent, 16 channels each */
#define DOOR_MAX_SESSIONS_PER_UID 64u
/* Each session is a client of the servers, with a connection to each: well below what a server
 * takes from one address (loom-mds --max-conns-per-peer, 256), so that the mount and the jobs
 * that hold the key keep room. */
#define DOOR_MAX_SESSIONS        192u
#define DOOR_WAIT_S              10   /* for the rest of a request begun, and for a HELLO */
#define DOOR_SEND_TIMEOUT_S      30   /* a caller that stops reading its replies is dropped */
#define DOOR_STOP_WAIT_S         10   /* at unmount, for requests under way */

static const unsigned char paths_of[DOOR_OP_COUNT] = {
#define DOOR_PATHS(name, paths, fh, change) [DOOR_OP_##name] = paths,
	DOOR_OPS(DOOR_PATHS)
#undef DOOR_PATHS
};

struct door_chan {
	struct lm_door *d;
	int fd;
	void *slot;
	struct ucred peer;
	struct door_session *s;
	struct door_chan *prev, *next;
};

struct lm_door {
	struct lmount *m;
	int listen_fd;
	char path[108];
	pthread_t acceptor;
	pthread_mutex_t lock;         /* everything below */
	pthread_cond_t drained;
	bool stopping;
	unsigned nchans;
	struct door_chan *chans;
	struct door_session *sessions;
	uint64_t next_session;
	struct log_limit full;        /* the acceptor's */
	_Atomic uint64_t ro_checked_ns; /* when the mount's read-only flag was read, and what it was */
	_Atomic bool ro;
};

/*
 * len bytes. An idle channel may wait for its next request as long as it likes (idle: the first
 * byte of a header); once a request has begun, the rest must come within DOOR_WAIT_S, so that a
 * caller cannot hold a thread with half a request.
 */
static int recv_full(int fd, void *buf, size_t len, bool idle)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(fd, (char *)buf + got, len - got, idle && got == 0 ? 0 : MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			int r = poll(&p, 1, DOOR_WAIT_S * 1000);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return r == 0 ? -ETIMEDOUT : -errno;
			continue;
		}
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		got += (size_t)n;
	}
	return 0;
}

static int send_rep(int fd, const struct door_rep *rep)
{
	ssize_t n;

	do
		n = send(fd, rep, sizeof(*rep), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(*rep) ? 0 : -EIO;
}

/* The first request, with the channel's memfd: mapped once it is known to be a sealed one of
 * the slot's size, so that no caller can make our accesses fault. */
static int recv_hello(struct door_chan *c, struct door_req *rq)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { rq, sizeof(*rq) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm;
	struct timeval wait = { .tv_sec = DOOR_WAIT_S }, forever = { 0 };
	int memfd = -1, rc = 0, seals;
	struct stat st;
	ssize_t n;

	/* A caller that connects and says nothing has DOOR_WAIT_S to say HELLO. */
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
	do
		n = recvmsg(c->fd, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof(forever));
	if (n != (ssize_t)sizeof(*rq))
		rc = -EPROTO;
	for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
			if (memfd < 0)
				memfd = fd;
			else
				close(fd), rc = -EPROTO; /* one memfd, no more */
		}
	}
	if (rc == 0 && (msg.msg_flags & MSG_CTRUNC))
		rc = -EPROTO;
	if (rc == 0 && ((rq->op != DOOR_OP_HELLO && rq->op != DOOR_OP_ATTACH) || rq->body_len))
		rc = -EPROTO;
	if (rc == 0 && memfd < 0)
		rc = -EINVAL;
	if (rc == 0) {
		seals = fcntl(memfd, F_GET_SEALS);
		if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(memfd, &st) || !S_ISREG(st.st_mode) ||
		    st.st_size < (off_t)DOOR_SLOT_BYTES)
			rc = -EINVAL;
	}
	if (rc == 0) {
		c->slot = mmap(NULL, DOOR_SLOT_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
		if (c->slot == MAP_FAILED) {
			c->slot = NULL;
			rc = -EINVAL;
		}
	}
	if (memfd >= 0)
		close(memfd);
	return rc;
}

/* Who the caller is, from the kernel: its uid, gid and groups at connect. */
static int peer_cred(struct door_chan *c, struct loom_cred *cr)
{
	struct lmount *m = c->d->m;
	gid_t groups[LOOM_MAX_GROUPS * 4];
	socklen_t len = sizeof(groups);
	int n;

	memset(cr, 0, sizeof(*cr));
	cr->uid = c->peer.uid;
	cr->gid = c->peer.gid;
	/* A mount that only its owner may use keeps its door for the owner too. */
	if ((m->opts.owner_only || getuid() != 0) && c->peer.uid != getuid())
		return -EACCES;
	if (cr->uid == 0 && m->opts.root_squash) {
		cr->uid = LOOM_SQUASH_ID;
		cr->gid = LOOM_SQUASH_ID;
		return 0;
	}
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0) {
		n = (int)(len / sizeof(gid_t));
		if (n > LOOM_MAX_GROUPS)
			n = LOOM_MAX_GROUPS; /* the first ones: more than the wire carries, as a mount */
		for (int i = 0; i < n; i++)
			cr->groups[i] = groups[i];
		cr->ngroups = (uint32_t)n;
	} else if (errno != ERANGE) {
		return -errno;
	}
	return 0;
}

static void session_free(struct door_session *s)
{
	door_handles_close(s);
	u64map_destroy(&s->handles);
	if (s->fs)
		loom_disconnect(s->fs);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Takes a session's place (under the caps) before it connects, so that HELLOs at once cannot
 * pass them. */
static int session_enter(struct lm_door *d, struct door_session *s)
{
	unsigned same_uid = 0, all = 0;
	int rc = 0;

	pthread_mutex_lock(&d->lock);
	for (struct door_session *it = d->sessions; it; it = it->next) {
		same_uid += it->peer_uid == s->peer_uid;
		all++;
	}
	if (same_uid >= DOOR_MAX_SESSIONS_PER_UID || all >= DOOR_MAX_SESSIONS) {
		rc = -EUSERS;
	} else {
		s->id = ++d->next_session;
		s->channels = 1;
		s->next = d->sessions;
		d->sessions = s;
	}
	pthread_mutex_unlock(&d->lock);
	return rc;
}

static void session_leave(struct lm_door *d, struct door_session *s)
{
	struct door_session **pp;

	pthread_mutex_lock(&d->lock);
	for (pp = &d->sessions; *pp != s; pp = &(*pp)->next)
		;
	*pp = s->next;
	pthread_mutex_unlock(&d->lock);
}

static int hello(struct door_chan *c, const struct door_req *rq, struct door_hello *out)
{
	struct lm_door *d = c->d;
	struct door_session *s;
	int rc;

	if (rq->arg != DOOR_VERSION)
		return -EPROTONOSUPPORT;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	u64map_init(&s->handles);
	s->door = d;
	s->next_fh = 1;
	s->peer_uid = c->peer.uid;
	s->peer_gid = c->peer.gid;
	rc = peer_cred(c, &s->cred);
	if (rc == 0)
		rc = random_bytes(s->token, sizeof(s->token));
	if (rc == 0)
		rc = session_enter(d, s);
	if (rc) {
		session_free(s);
		return rc;
	}
	/* Nobody knows the token yet: nothing attaches while it connects. */
	rc = loom_connect_with(d->m->mds_addr, &d->m->copts, &s->fs);
	if (rc == 0)
		rc = loom_set_cred(s->fs, &s->cred);
	if (rc == 0) /* the job id of its threads that act for nobody: the mount's, as the mount's */
		rc = loom_jobid_conf(s->fs, d->m->jobid.var, d->m->jobid.name);
	if (rc == 0)
		rc = loom_set_umask(s->fs, 0); /* the caller's libloom applied its own */
	if (rc) {
		session_leave(d, s);
		session_free(s);
		return rc;
	}
	c->s = s;
	out->session = s->id;
	memcpy(out->token, s->token, sizeof(out->token));
	return 0;
}

static bool token_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t diff = 0;

	for (int i = 0; i < 16; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

/* Another channel of a session: the same uid and gid, and the session's token. */
static int attach(struct door_chan *c, const struct door_attach *in, struct door_hello *out)
{
	struct lm_door *d = c->d;
	struct door_session *s;
	int rc = -ENOENT;

	pthread_mutex_lock(&d->lock);
	for (s = d->sessions; s && s->id != in->session; s = s->next)
		;
	if (s && (!s->fs || !token_equal(s->token, in->token) || s->peer_uid != c->peer.uid ||
		  s->peer_gid != c->peer.gid))
		rc = -EACCES;
	else if (s && s->channels >= DOOR_MAX_CHANNELS)
		rc = -EMFILE;
	else if (s) {
		s->channels++;
		c->s = s;
		out->session = s->id;
		memcpy(out->token, s->token, sizeof(out->token));
		rc = 0;
	}
	pthread_mutex_unlock(&d->lock);
	return rc;
}

/* The body's strings: exactly as many NUL-terminated paths as the op takes. */
static int body_paths(char *body, uint32_t len, unsigned want, const char *paths[2])
{
	uint32_t at = 0;

	paths[0] = paths[1] = NULL;
	for (unsigned i = 0; i < want; i++) {
		size_t n = at < len ? strnlen(body + at, len - at) : 0;

		if (at >= len || at + n >= len || n >= DOOR_PATH_MAX)
			return -EINVAL;
		paths[i] = body + at;
		at += (uint32_t)n + 1;
	}
	return at == len ? 0 : -EINVAL;
}

static void serve(struct door_chan *c)
{
	struct door_req rq;
	struct door_rep rep = { 0 };
	struct door_attach at;
	struct door_hello h = { .version = DOOR_VERSION, .slot_bytes = DOOR_SLOT_BYTES };
	char body[DOOR_BODY_MAX];
	const char *paths[2];
	int rc = recv_hello(c, &rq);

	if (rc == 0 && rq.op == DOOR_OP_HELLO) {
		rc = hello(c, &rq, &h);
	} else if (rc == 0) {
		memcpy(&at, c->slot, sizeof(at));
		rc = rq.arg == DOOR_VERSION ? attach(c, &at, &h) : -EPROTONOSUPPORT;
	}
	if (rc == 0) {
		snprintf(h.fsname, sizeof(h.fsname), "%s", loom_fsname(c->s->fs));
		memcpy(c->slot, &h, sizeof(h));
		rep.len = sizeof(h);
	}
	rep.rc = rc;
	if (rc)
		log_info("door: refused a caller (pid %d, uid %u): %s", (int)c->peer.pid, c->peer.uid, strerror(-rc));
	if (send_rep(c->fd, &rep) || rc)
		return;
	for (;;) {
		if (recv_full(c->fd, &rq, sizeof(rq), true))
			return;
		if (rq.op >= DOOR_OP_COUNT || rq.op <= DOOR_OP_ATTACH || rq.body_len > sizeof(body)) {
			log_info("door: dropped pid %d (uid %u): a malformed request", (int)c->peer.pid, c->peer.uid);
			return;
		}
		if (recv_full(c->fd, body, rq.body_len, false))
			return;
		if (body_paths(body, rq.body_len, paths_of[rq.op], paths)) {
			rep = (struct door_rep){ .rc = -EINVAL };
		} else {
			/* The caller's job id, as for a FUSE request (read per request: a process that
			 * execs keeps its channel), also for the prefetchers it starts (door_pf.c). */
			lm_job_enter(c->d->m, c->peer.pid, c->peer.uid, c->peer.gid);
			door_do(c->s, c->slot, &rq, paths, &rep);
			lm_job_leave();
		}
		if (send_rep(c->fd, &rep))
			return;
	}
}

static void chan_end(struct door_chan *c)
{
	struct lm_door *d = c->d;
	struct door_session *s = c->s;
	bool last = false;

	pthread_mutex_lock(&d->lock);
	if (s)
		last = --s->channels == 0;
	pthread_mutex_unlock(&d->lock);
	if (last) {
		session_leave(d, s);
		session_free(s);
	}
	if (c->slot)
		munmap(c->slot, DOOR_SLOT_BYTES);
	pthread_mutex_lock(&d->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		d->chans = c->next;
	if (c->next)
		c->next->prev = c->prev;
	close(c->fd);
	if (--d->nchans == 0)
		pthread_cond_broadcast(&d->drained);
	pthread_mutex_unlock(&d->lock);
	free(c);
}

static void *chan_main(void *arg)
{
	struct door_chan *c = arg;

	serve(c);
	chan_end(c);
	return NULL;
}

/* Under d->lock. */
static unsigned chans_of_uid(const struct lm_door *d, uid_t uid)
{
	unsigned n = 0;

	for (const struct door_chan *c = d->chans; c; c = c->next)
		n += c->peer.uid == uid;
	return n;
}

static void *acceptor_main(void *arg)
{
	struct lm_door *d = arg;
	struct timeval tv = { .tv_sec = DOOR_SEND_TIMEOUT_S };

	for (;;) {
		int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		socklen_t len;
		struct door_chan *c;
		pthread_attr_t attr;
		pthread_t t;
		bool ok = false;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
				if (errno == EMFILE || errno == ENFILE)
					sleep(1);
				continue;
			}
			return NULL; /* shut down */
		}
		c = calloc(1, sizeof(*c));
		len = sizeof(c ? c->peer : (struct ucred){ 0 });
		if (c && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->peer, &len) == 0) {
			c->d = d;
			c->fd = fd;
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			pthread_mutex_lock(&d->lock);
			if (!d->stopping && d->nchans < DOOR_MAX_CONNS && chans_of_uid(d, c->peer.uid) < DOOR_MAX_CONNS_PER_UID) {
				pthread_attr_init(&attr);
				pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
				c->next = d->chans;
				if (d->chans)
					d->chans->prev = c;
				d->chans = c;
				d->nchans++;
				ok = pthread_create(&t, &attr, chan_main, c) == 0;
				if (!ok) {
					d->chans = c->next;
					if (c->next)
						c->next->prev = NULL;
					d->nchans--;
				}
				pthread_attr_destroy(&attr);
			}
			pthread_mutex_unlock(&d->lock);
		}
		if (!ok) {
			log_limited(&d->full, clock_mono_ns(), "door: refused a connection (%u channels open)",
				    d->nchans);
			free(c);
			close(fd);
		}
	}
}

/* The flags of our mount as the kernel has them now (`mount -o remount,ro` changes them without
 * telling the daemon): read at most once a second. */
bool lm_door_read_only(struct lm_door *d)
{
	uint64_t now = clock_mono_ns();

	if (d->m->opts.readonly)
		return true;
	if (now - d->ro_checked_ns > 1000000000ull) {
		d->ro = mountinfo_read_only(d->m->opts.mountpoint);
		d->ro_checked_ns = now;
	}
	return d->ro;
}

size_t lm_door_pf_charge(struct lm_door *d, struct door_session *s, size_t bytes)
{
	uint64_t uid_bytes = 0, all = 0, left;

	pthread_mutex_lock(&d->lock);
	for (struct door_session *it = d->sessions; it; it = it->next) {
		all += it->pf_bytes;
		if (it->peer_uid == s->peer_uid)
			uid_bytes += it->pf_bytes;
	}
	left = DOOR_PF_BYTES_UID - uid_bytes;
	if (DOOR_PF_BYTES_ALL - all < left)
		left = DOOR_PF_BYTES_ALL - all;
	if (bytes > left) /* what is left of the share: the prefetcher holds less, or nothing */
		bytes = left < DOOR_PF_BYTES_LEAST ? 0 : (size_t)left;
	s->pf_bytes += bytes;
	pthread_mutex_unlock(&d->lock);
	return bytes;
}

void lm_door_pf_uncharge(struct lm_door *d, struct door_session *s, size_t bytes)
{
	pthread_mutex_lock(&d->lock);
	s->pf_bytes -= bytes;
	pthread_mutex_unlock(&d->lock);
}

/* Sockets of daemons that died without removing theirs (door.PID.sock, PID gone). */
static void sweep_stale(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *e;
	char path[512];
	int pid;

	while (dp && (e = readdir(dp))) {
		if (sscanf(e->d_name, "door.%d.sock", &pid) == 1 && pid > 0 && kill(pid, 0) && errno == ESRCH) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
	}
	if (dp)
		closedir(dp);
}

int lm_door_start(struct lmount *m, const char *path, struct lm_door **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct lm_door *d;
	int rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->m = m;
	pthread_mutex_init(&d->lock, NULL);
	log_limit_init(&d->full, LOG_WARN, "door: connections refused");
	cond_init_monotonic(&d->drained);
	snprintf(d->path, sizeof(d->path), "%s", path);
	memcpy(sa.sun_path, path, strlen(path));
	d->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (d->listen_fd < 0) {
		rc = -errno;
		free(d);
		return rc;
	}
	if (strncmp(path, "/run/loom/", 10) == 0)
		sweep_stale("/run/loom");
	unlink(path); /* a socket left by a daemon of the same pid that died: ours now */
	if (bind(d->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(d->listen_fd, 128) ||
	    /* Anyone may knock where anyone may use the mount; the MDS checks each one's rights. */
	    chmod(path, (m->opts.owner_only || getuid() != 0) ? 0600 : 0666)) {
		rc = -errno;
		goto fail;
	}
	rc = -pthread_create(&d->acceptor, NULL, acceptor_main, d);
	if (rc)
		goto fail;
	*out = d;
	return 0;
fail:
	unlink(path);
	close(d->listen_fd);
	free(d);
	return rc;
}

const char *lm_door_path(const struct lm_door *d)
{
	return d ? d->path : "";
}

void lm_door_stop(struct lm_door *d)
{
	struct timespec until;

	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	d->stopping = true;
	pthread_mutex_unlock(&d->lock);
	shutdown(d->listen_fd, SHUT_RDWR);
	pthread_join(d->acceptor, NULL);
	unlink(d->path);
	close(d->listen_fd);
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += DOOR_STOP_WAIT_S;
	pthread_mutex_lock(&d->lock);
	for (struct door_chan *c = d->chans; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR); /* each thread ends after the request it is doing */
	while (d->nchans && pthread_cond_timedwait(&d->drained, &d->lock, &until) == 0)
		;
	if (d->nchans) {
		/* A request stuck on a server that hangs: its thread is left to the exit. */
		log_warn("door: %u requests still under way at unmount", d->nchans);
		pthread_mutex_unlock(&d->lock);
		return;
	}
	pthread_mutex_unlock(&d->lock);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->drained);
	free(d);
}
