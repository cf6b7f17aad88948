/*
 * Connecting through a mount's door (src/common/door.h): for a process without the file system
 * key, the loom-mount of its node does the requests, as this process's user.
 *
 * A channel is a unix socket with a sealed memfd of DOOR_SLOT_BYTES that both sides map; one
 * request at a time goes on it. A thread takes an idle channel, or opens one more (up to
 * DOOR_MAX_CHANNELS), so that the prefetcher's threads and parallel reads each have one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/door.h"

struct door_chan {
	int fd;
	void *slot;
	struct door_chan *next;
};

struct door {
	char path[108];
	pid_t pid;               /* loom-mount's, as its ioctl said: the peer every channel must be */
	uint64_t session;
	uint8_t token[16];
	pthread_mutex_t lock;    /* everything below */
	pthread_cond_t idle_cond;
	struct door_chan *idle;
	unsigned nchans;         /* open, idle or not */
	unsigned most;           /* what the daemon allows: lowered when an ATTACH is refused */
	bool broken;             /* the daemon went away: every call fails with -EIO */
};

static void chan_free(struct door_chan *c)
{
	if (!c)
		return;
	if (c->slot)
		munmap(c->slot, DOOR_SLOT_BYTES);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

static int send_all(int fd, struct iovec *iov, int n)
{
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)n };

	while (msg.msg_iovlen) {
		ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EIO;
		while (msg.msg_iovlen && (size_t)w >= msg.msg_iov->iov_len) {
			w -= (ssize_t)msg.msg_iov->iov_len;
			msg.msg_iov++;
			msg.msg_iovlen--;
		}
		if (msg.msg_iovlen) {
			msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + w;
			msg.msg_iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

static int recv_rep(int fd, struct door_rep *rep)
{
	size_t got = 0;

	while (got < sizeof(*rep)) {
		ssize_t n = recv(fd, (char *)rep + got, sizeof(*rep) - got, MSG_WAITALL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		got += (size_t)n;
	}
	return rep->len > DOOR_SLOT_BYTES ? -EPROTO : 0;
}

/* A new channel, said HELLO (attach false) or ATTACH on: its answer in *h. */
static int chan_open(struct door *d, bool attach, struct door_chan **out, struct door_hello *h)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct door_req rq = { .op = attach ? DOOR_OP_ATTACH : DOOR_OP_HELLO, .arg = DOOR_VERSION };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { &rq, sizeof(rq) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	struct door_chan *c = calloc(1, sizeof(*c));
	struct door_rep rep;
	struct ucred peer;
	socklen_t len = sizeof(peer);
	int memfd = -1, rc = 0;

	if (!c)
		return -ENOMEM;
	memcpy(sa.sun_path, d->path, strlen(d->path));
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)))
		rc = -errno;
	/* Only the daemon that the mount named may hear our requests. */
	if (rc == 0 && (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) || peer.pid != d->pid))
		rc = -EACCES;
	if (rc == 0) {
		memfd = memfd_create("loom-door", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (memfd < 0 || ftruncate(memfd, DOOR_SLOT_BYTES) ||
		    fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
			rc = -errno;
	}
	if (rc == 0) {
		c->slot = mmap(NULL, DOOR_SLOT_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
		if (c->slot == MAP_FAILED) {
			c->slot = NULL;
			rc = -errno;
		}
	}
	if (rc == 0 && attach) {
		struct door_attach at = { .session = d->session };

		memcpy(at.token, d->token, sizeof(at.token));
		memcpy(c->slot, &at, sizeof(at));
	}
	if (rc == 0) {
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &memfd, sizeof(int));
		while ((rc = (int)sendmsg(c->fd, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR)
			;
		rc = rc == (int)sizeof(rq) ? recv_rep(c->fd, &rep) : -EIO;
	}
	if (memfd >= 0)
		close(memfd);
	if (rc == 0 && rep.rc < 0)
		rc = (int)rep.rc;
	else if (rc == 0 && rep.len < sizeof(*h))
		rc = -EPROTO;
	if (rc == 0) {
		memcpy(h, c->slot, sizeof(*h));
		if (h->version != DOOR_VERSION || h->slot_bytes != DOOR_SLOT_BYTES)
			rc = -EPROTONOSUPPORT;
	}
	if (rc) {
		chan_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* An idle channel, or a new one; NULL with *err when there is none to have. */
static struct door_chan *chan_take(struct door *d, int *err)
{
	struct door_chan *c;
	struct door_hello h;
	int rc;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		if (d->broken) {
			pthread_mutex_unlock(&d->lock);
			*err = -EIO;
			return NULL;
		}
		if (d->idle) {
			c = d->idle;
			d->idle = c->next;
			pthread_mutex_unlock(&d->lock);
			return c;
		}
		if (d->nchans < d->most)
			break;
		pthread_cond_wait(&d->idle_cond, &d->lock);
	}
	d->nchans++;
	pthread_mutex_unlock(&d->lock);
	rc = chan_open(d, true, &c, &h);
	if (rc == 0)
		return c;
	pthread_mutex_lock(&d->lock);
	d->nchans--;
	if (d->nchans > 0) {
		/* The daemon allows no more (or cannot open more now): share the ones there are. */
		d->most = d->nchans;
		while (!d->idle && !d->broken)
			pthread_cond_wait(&d->idle_cond, &d->lock);
		c = d->broken ? NULL : d->idle;
		if (c)
			d->idle = c->next;
		rc = c ? 0 : -EIO;
	}
	pthread_mutex_unlock(&d->lock);
	*err = rc;
	return c;
}

static void chan_give(struct door *d, struct door_chan *c, bool failed)
{
	pthread_mutex_lock(&d->lock);
	if (failed) {
		/* The daemon dropped us (it died, or is unmounting): the session and its handles are
		 * gone, so nothing may go on as if they were there. */
		d->broken = true;
		d->nchans--;
	} else {
		c->next = d->idle;
		d->idle = c;
	}
	pthread_cond_broadcast(&d->idle_cond);
	pthread_mutex_unlock(&d->lock);
	if (failed)
		chan_free(c);
}

int door_call(loom_fs *fs, struct door_req *rq, const char *p0, const char *p1, const void *in, size_t in_len,
	      void *out, size_t out_cap, struct door_rep *rep)
{
	struct door *d = fs->door;
	struct iovec iov[3];
	size_t l0 = p0 ? strlen(p0) + 1 : 0, l1 = p1 ? strlen(p1) + 1 : 0;
	struct door_chan *c;
	int rc = 0, n = 1;

	if (l0 > DOOR_PATH_MAX || l1 > DOOR_PATH_MAX)
		return -ENAMETOOLONG;
	if (in_len > DOOR_SLOT_BYTES || rq->len > DOOR_SLOT_BYTES)
		return -EINVAL;
	c = chan_take(d, &rc);
	if (!c)
		return rc;
	if (in_len)
		memcpy(c->slot, in, in_len);
	rq->body_len = (uint32_t)(l0 + l1);
	iov[0] = (struct iovec){ rq, sizeof(*rq) };
	if (l0)
		iov[n++] = (struct iovec){ (void *)p0, l0 };
	if (l1)
		iov[n++] = (struct iovec){ (void *)p1, l1 };
	rc = send_all(c->fd, iov, n);
	if (rc == 0)
		rc = recv_rep(c->fd, rep);
	if (rc == 0 && out)
		memcpy(out, c->slot, rep->len < out_cap ? rep->len : out_cap);
	chan_give(d, c, rc != 0);
	return rc ? -EIO : 0;
}

/* Where the mount that holds path has its door, from loom-mount itself. */
static int door_locate(const char *path, struct loom_ioc_door *ioc)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), rc = 0;

	if (fd < 0) {
		rc = -errno;
		fs_connect_why("cannot open %s: %s", path, strerror(-rc));
		return rc;
	}
	memset(ioc, 0, sizeof(*ioc));
	if (ioctl(fd, LOOM_IOC_DOOR, ioc)) {
		rc = errno == ENOTTY || errno == EINVAL || errno == ENOSYS ? -ENOTTY : -errno;
		fs_connect_why("%s is not on a Loom mount that has a door (%s)", path, strerror(errno));
	} else if (ioc->version != DOOR_VERSION) {
		rc = -EPROTONOSUPPORT;
		fs_connect_why("the mount's door speaks version %u, this libloom %u", ioc->version, DOOR_VERSION);
	} else if (!ioc->path[0] || memchr(ioc->path, '\0', sizeof(ioc->path)) == NULL) {
		rc = -ENOENT;
		fs_connect_why("the Loom mount holding %s serves no door (mounted with nodoor, or not by root)", path);
	}
	close(fd);
	return rc;
}

int loom_connect_mount(const char *path, loom_fs **out)
{
	struct loom_ioc_door ioc;
	struct door_chan *c = NULL;
	struct door_hello h;
	struct door *d;
	loom_fs *fs;
	int rc;

	fs_connect_why("%s", "");
	if (!path || !out)
		return -EINVAL;
	rc = door_locate(path, &ioc);
	if (rc)
		return rc;
	d = calloc(1, sizeof(*d));
	fs = d ? fs_new() : NULL;
	if (!fs) {
		free(d);
		return -ENOMEM;
	}
	memcpy(d->path, ioc.path, sizeof(d->path));
	d->pid = (pid_t)ioc.pid;
	d->most = DOOR_MAX_CHANNELS;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->idle_cond, NULL);
	fs->door = d;
	rc = chan_open(d, false, &c, &h);
	if (rc) {
		fs_connect_why("the door of the mount holding %s (%s) refused: %s", path, d->path, strerror(-rc));
		loom_disconnect(fs);
		return rc;
	}
	d->session = h.session;
	memcpy(d->token, h.token, sizeof(d->token));
	h.fsname[sizeof(h.fsname) - 1] = '\0';
	snprintf(fs->fsname, sizeof(fs->fsname), "%s", h.fsname);
	d->nchans = 1;
	d->idle = c;
	*out = fs;
	return 0;
}

void door_close(loom_fs *fs)
{
	struct door *d = fs->door;
	struct door_chan *c;

	if (!d)
		return;
	/* Every call has returned (the caller's promise, as for any loom_fs): all channels are
	 * idle. Closing the last ends the session, whose files the daemon closes. */
	while ((c = d->idle)) {
		d->idle = c->next;
		chan_free(c);
	}
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->idle_cond);
	free(d);
	fs->door = NULL;
}
