/*
 * The attributes of files this client made behind, kept after their last close (docs/
 * architecture.md, "Lookups of files made here"). While the exclusive lease under which such a
 * file was made stands, nobody else can reach it, so what the MDS answered at its create (a file
 * let go before the answer: behind_orphan_close) or at its last close is still its attributes,
 * as long as nothing changed it through this client since: loom-mount answers a lookup of its
 * name from them (an unlink loop's lookups, once the kernel's entries expired), checking its
 * own count of changes. Kept by inode, for files with no handle open here; a handle's close
 * brings them up to date.
 */
#include <errno.h>
#include <stdlib.h>

#include "client/internal.h"
#include "loom/loom_ll.h"

/* At this many (about 200 bytes each) all are forgotten and keeping starts again: records of
 * files unlinked before their create's answer came (kept after the unlink's forget) would
 * otherwise fill it for good. A lookup of a file forgotten asks the MDS. */
#define MADE_MAX (1u << 18)

void made_init(loom_fs *fs)
{
	pthread_mutex_init(&fs->made_lock, NULL);
	u64map_init(&fs->made);
}

void made_destroy(loom_fs *fs)
{
	u64map_destroy_free(&fs->made);
	pthread_mutex_destroy(&fs->made_lock);
}

void made_put(loom_fs *fs, const struct lw_attr *attr, bool made_here)
{
	struct lw_attr *kept;

	pthread_mutex_lock(&fs->made_lock);
	kept = u64map_get(&fs->made, attr->ino);
	if (!kept && made_here && fs->made.count >= MADE_MAX) {
		u64map_destroy_free(&fs->made);
		u64map_init(&fs->made);
	}
	if (!kept && made_here && (kept = malloc(sizeof(*kept))) != NULL &&
	    u64map_put(&fs->made, attr->ino, kept) < 0) {
		free(kept);
		kept = NULL;
	}
	if (kept)
		*kept = *attr;
	pthread_mutex_unlock(&fs->made_lock);
}

void loom_ll_made_forget(loom_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->made_lock);
	free(u64map_del(&fs->made, ino));
	pthread_mutex_unlock(&fs->made_lock);
}

int loom_ll_made_attr(loom_fs *fs, uint64_t ino, struct loom_ll_attr *a)
{
	struct lw_attr attr;
	struct lw_attr *kept;
	bool open;

	/* A handle open here may change the file (its writes, its reports): the MDS is asked. */
	pthread_mutex_lock(&fs->files_lock);
	open = u64map_get(&fs->files, ino) != NULL;
	pthread_mutex_unlock(&fs->files_lock);
	if (open)
		return -EBUSY;
	pthread_mutex_lock(&fs->made_lock);
	kept = u64map_get(&fs->made, ino);
	if (kept)
		attr = *kept;
	pthread_mutex_unlock(&fs->made_lock);
	if (!kept)
		return -ENOENT;
	attr_to_ll(&attr, a);
	return 0;
}
