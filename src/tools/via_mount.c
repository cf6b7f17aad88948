/*
 * Asking a Loom mount instead of the MDS, for users without the file system key: loom-mount's
 * ioctls (src/common/mount_ioctl.h, served by src/fuse/ops_ioctl.c) give what `loom df` and
 * `loom pool list` show, in the structs libloom's calls fill, so the printing is the keyed
 * path's own. The key stays in loom-mount; the kernel lets the caller in only with a file it
 * could open there.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/mount_ioctl.h"
#include "tools/tool.h"

/* A list that keeps changing between its pages is read again this many times at most. */
#define PAGE_TRIES 5

/* The descriptor to ask on: path itself, else the mount point (any file of the mount will do;
 * a path the caller cannot open, a fifo, leaves the mount point). */
static int open_on_mount(const char *path, const struct tool_mount *mnt)
{
	int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
	int fd = path ? open(path, flags) : -1;
	struct tool_mount there;

	if (fd >= 0 && (tool_mount_of(path, &there) != 0 || strcmp(there.mountpoint, mnt->mountpoint))) {
		close(fd); /* a symlink out of the mount, or a mount on top: not this mount's file */
		fd = -1;
	}
	if (fd < 0)
		fd = open(mnt->mountpoint, flags | O_DIRECTORY);
	return fd < 0 ? -errno : fd;
}

static int ask(int fd, unsigned long cmd, void *arg)
{
	if (ioctl(fd, cmd, arg) == 0)
		return 0;
	/* A loom-mount that predates these ioctls (or is not Loom's) answers ENOTTY or ENOSYS. */
	return errno == ENOSYS ? -ENOTTY : -errno;
}

static void statfs_in(const struct loom_ioc_statfs *s, struct statvfs *st)
{
	memset(st, 0, sizeof(*st));
	st->f_blocks = s->blocks;
	st->f_bfree = s->bfree;
	st->f_bavail = s->bavail;
	st->f_files = s->files;
	st->f_ffree = s->ffree;
	st->f_favail = s->favail;
	st->f_bsize = s->bsize;
	st->f_frsize = s->frsize;
	st->f_namemax = s->namemax;
	st->f_flag = s->flag;
}

int tool_mount_targets(const char *path, const struct tool_mount *mnt, struct loom_target **out,
		       uint32_t *count, char *fsname, size_t cap)
{
	struct loom_ioc_targets *page = malloc(sizeof(*page));
	struct loom_target *t = NULL;
	int fd = open_on_mount(path, mnt), rc = 0, tries = 0;
	uint32_t total = 0, got = 0;

	if (fd < 0 || !page) {
		free(page);
		if (fd >= 0)
			close(fd);
		return fd < 0 ? fd : -ENOMEM;
	}
	do {
		memset(page, 0, sizeof(*page));
		page->start = got;
		rc = ask(fd, LOOM_IOC_TARGETS, page);
		if (rc)
			break;
		if (got == 0 || page->total != total) {
			/* The first page, or the list changed under us: begin again. */
			if (got && ++tries == PAGE_TRIES) {
				rc = -EAGAIN;
				break;
			}
			if (got) {
				got = 0;
				continue;
			}
			total = page->total;
			free(t);
			t = calloc(total ? total : 1, sizeof(*t));
			if (!t) {
				rc = -ENOMEM;
				break;
			}
			snprintf(fsname, cap, "%.*s", (int)sizeof(page->fsname), page->fsname);
		}
		if (page->count == 0 && got < total) {
			rc = -EIO; /* no progress: a confused server */
			break;
		}
		for (uint32_t i = 0; i < page->count && got < total; i++, got++) {
			const struct loom_ioc_target *o = &page->t[i];

			t[got].kind = (int)o->kind;
			t[got].idx = o->idx;
			t[got].flags = o->flags;
			if (!(o->flags & LOOM_TGTF_INACTIVE))
				statfs_in(&o->st, &t[got].st);
		}
	} while (got < total);
	close(fd);
	free(page);
	if (rc == 0 && total == 0)
		rc = -EIO; /* the MDT is always listed */
	if (rc) {
		free(t);
		return rc;
	}
	*out = t;
	*count = total;
	return 0;
}

/* Every pool's name (name NULL), or the OSTs of one; *out as loom_pool_list gives it. */
int tool_mount_pools(const struct tool_mount *mnt, const char *name, struct loom_pool **out,
		     uint32_t *count, char *fsname, size_t cap)
{
	int fd = open_on_mount(NULL, mnt), rc = 0, tries = 0;
	uint32_t total = 0, got = 0;
	struct loom_pool *pools = NULL;
	void *page;

	if (fd < 0)
		return fd;
	if (name && strlen(name) > LOOM_POOL_NAME_MAX) {
		close(fd);
		return -ENOENT; /* no pool has such a name */
	}
	page = calloc(1, name ? sizeof(struct loom_ioc_pool) : sizeof(struct loom_ioc_pools));
	if (!page) {
		close(fd);
		return -ENOMEM;
	}
	do {
		uint32_t ptotal, pcount;

		if (name) {
			struct loom_ioc_pool *p = page;

			memset(p, 0, sizeof(*p));
			snprintf(p->name, sizeof(p->name), "%s", name);
			p->start = got;
			rc = ask(fd, LOOM_IOC_POOL, p);
			ptotal = p->total;
			pcount = p->count;
			if (rc == 0)
				snprintf(fsname, cap, "%.*s", (int)sizeof(p->fsname), p->fsname);
		} else {
			struct loom_ioc_pools *p = page;

			memset(p, 0, sizeof(*p));
			p->start = got;
			rc = ask(fd, LOOM_IOC_POOLS, p);
			ptotal = p->total;
			pcount = p->count;
			if (rc == 0)
				snprintf(fsname, cap, "%.*s", (int)sizeof(p->fsname), p->fsname);
		}
		if (rc)
			break;
		if (got == 0 || ptotal != total) {
			if (got && ++tries == PAGE_TRIES) {
				rc = -EAGAIN;
				break;
			}
			if (got) {
				got = 0;
				continue;
			}
			total = ptotal;
			free(pools);
			/* One allocation, as loom_pool_list_free takes: one pool and its OSTs, or the
			 * names. */
			pools = name ? calloc(1, sizeof(*pools) + (size_t)total * sizeof(uint32_t))
				     : calloc(total ? total : 1, sizeof(*pools));
			if (!pools) {
				rc = -ENOMEM;
				break;
			}
			if (name) {
				snprintf(pools[0].name, sizeof(pools[0].name), "%s", name);
				pools[0].nosts = total;
				pools[0].osts = (uint32_t *)(pools + 1);
			}
		}
		if (pcount == 0 && got < total) {
			rc = -EIO;
			break;
		}
		for (uint32_t i = 0; i < pcount && got < total; i++, got++) {
			if (name)
				pools[0].osts[got] = ((struct loom_ioc_pool *)page)->osts[i];
			else
				snprintf(pools[got].name, sizeof(pools[got].name), "%.*s",
					 (int)sizeof(((struct loom_ioc_pools *)page)->names[i]),
					 ((struct loom_ioc_pools *)page)->names[i]);
		}
	} while (got < total);
	close(fd);
	free(page);
	if (rc) {
		free(pools);
		return rc;
	}
	*out = pools;
	*count = name ? 1 : total;
	return 0;
}
