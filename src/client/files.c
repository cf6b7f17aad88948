/*
 * The open files of a client, by inode (fs->files): what their handles wrote and did not report
 * yet, which every answer about the inode must show (stat after write), and what a truncation
 * changes for them. Their write errors and truncation epochs are per inode (inode.c).
 */
#include <stdlib.h>

#include "client/internal.h"

void files_add(loom_fs *fs, loom_file *f)
{
	pthread_mutex_lock(&fs->files_lock);
	f->next_same_ino = u64map_get(&fs->files, f->ino);
	/* One cache of Data-on-MDT bytes per inode: what one handle writes, the others read. */
	for (loom_file *o = f->next_same_ino; o && f->dom; o = o->next_same_ino) {
		if (o->dom) {
			dom_share(o->dom, f->dom);
			f->dom = o->dom;
			break;
		}
	}
	if (u64map_put(&fs->files, f->ino, f) < 0)
		f->next_same_ino = NULL; /* out of memory: only the stat-after-write nicety is lost */
	pthread_mutex_unlock(&fs->files_lock);
	pthread_mutex_lock(&fs->open_lock);
	f->prev_open = NULL;
	f->next_open = fs->open_list;
	if (fs->open_list)
		fs->open_list->prev_open = f;
	fs->open_list = f;
	pthread_mutex_unlock(&fs->open_lock);
}

uint64_t fs_mds_gen(loom_fs *fs)
{
	uint64_t gen;

	pthread_mutex_lock(&fs->open_lock);
	gen = fs->mds_gen;
	pthread_mutex_unlock(&fs->open_lock);
	return gen;
}

void files_remove(loom_fs *fs, loom_file *f)
{
	loom_file *head, **pp;

	pthread_mutex_lock(&fs->files_lock);
	head = u64map_get(&fs->files, f->ino);
	for (pp = &head; *pp; pp = &(*pp)->next_same_ino) {
		if (*pp == f) {
			*pp = f->next_same_ino;
			break;
		}
	}
	if (head) {
		u64map_put(&fs->files, f->ino, head);
	} else {
		u64map_del(&fs->files, f->ino);
		ino_forget(fs, f->ino);
	}
	dom_put(f->dom);
	f->dom = NULL;
	pthread_mutex_unlock(&fs->files_lock);
	pthread_mutex_lock(&fs->open_lock);
	if (f->prev_open)
		f->prev_open->next_open = f->next_open;
	else if (fs->open_list == f)
		fs->open_list = f->next_open;
	if (f->next_open)
		f->next_open->prev_open = f->prev_open;
	f->prev_open = f->next_open = NULL;
	pthread_mutex_unlock(&fs->open_lock);
}

void files_pending_attr(loom_fs *fs, struct lw_attr *attr)
{
	loom_file *head;

	pthread_mutex_lock(&fs->files_lock);
	head = u64map_get(&fs->files, attr->ino);
	/* First what the handles with unreported writes add to the MDS's figures... */
	for (loom_file *f = head; f; f = f->next_same_ino) {
		pthread_mutex_lock(&f->lock);
		if (f->dirty && f->size > attr->size)
			attr->size = f->size;
		if (f->dirty && f->obj_blocks) {
			/* What the objects it wrote said they occupy (holes count for nothing). */
			uint64_t blocks = f->dom ? dom_blocks(f->dom) : 0;
			for (uint32_t k = 0; k < f->layout->nobjs; k++)
				blocks += f->obj_blocks[k] > 0 ? (uint64_t)f->obj_blocks[k] : 0;
			if (blocks > attr->blocks)
				attr->blocks = blocks;
		}
		if (f->mtime_dirty && (f->mtime.tv_sec > attr->mtime ||
				       (f->mtime.tv_sec == attr->mtime && (uint32_t)f->mtime.tv_nsec > attr->mtime_ns))) {
			attr->mtime = attr->ctime = f->mtime.tv_sec;
			attr->mtime_ns = attr->ctime_ns = (uint32_t)f->mtime.tv_nsec;
		}
		pthread_mutex_unlock(&f->lock);
	}
	/* ...then the handles with nothing to report learn the size: another client may have grown
	 * the file, another handle of ours may have, and reads are clipped at f->size. A size that
	 * moved means bytes written elsewhere: the Data-on-MDT bytes cached at the open are read
	 * again (else the bytes up to the new size would read as the zeros past the old end). */
	for (loom_file *f = head; f; f = f->next_same_ino) {
		bool moved = false;

		pthread_mutex_lock(&f->lock);
		if (!f->dirty) {
			moved = f->size != attr->size;
			f->size = attr->size;
		}
		pthread_mutex_unlock(&f->lock);
		if (moved && f->dom)
			dom_forget(f->dom); /* what is dirty here stays */
	}
	pthread_mutex_unlock(&fs->files_lock);
}

/* The file's size as this client knows it: another handle of ours may have written past what
 * this one saw at its open (a reader that bypasses the page cache must see it, as locally). */
uint64_t files_written_size(loom_fs *fs, uint64_t ino, uint64_t size)
{
	pthread_mutex_lock(&fs->files_lock);
	for (loom_file *f = u64map_get(&fs->files, ino); f; f = f->next_same_ino) {
		pthread_mutex_lock(&f->lock);
		if (f->dirty && f->size > size)
			size = f->size;
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&fs->files_lock);
	return size;
}

void files_forget_mtime(loom_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->files_lock);
	for (loom_file *f = u64map_get(&fs->files, ino); f; f = f->next_same_ino) {
		pthread_mutex_lock(&f->lock);
		f->mtime_dirty = false;
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&fs->files_lock);
}

void files_truncated(loom_fs *fs, const struct lw_attr *attr)
{
	uint64_t size = attr->size;

	/* A truncation that cut the objects is a new epoch: what was written before is not ours to
	 * report any more (the handles forget it when they see the epoch). */
	ino_epoch(fs, attr->ino, attr->trunc_epoch);
	pthread_mutex_lock(&fs->files_lock);
	for (loom_file *f = u64map_get(&fs->files, attr->ino); f; f = f->next_same_ino) {
		pthread_mutex_lock(&f->lock);
		f->size = size;
		if (f->written_end > size)
			f->written_end = size;
		/* The objects were cut: what they occupy is asked again at the next report. */
		for (uint32_t k = 0; f->obj_blocks && k < f->layout->nobjs; k++)
			f->obj_blocks[k] = -1;
		pthread_mutex_unlock(&f->lock);
		if (f->dom)
			dom_truncate(f->dom, size); /* shared: cut once per handle, which is harmless */
	}
	pthread_mutex_unlock(&fs->files_lock);
}

void files_mode_set(loom_fs *fs, const struct lw_attr *attr)
{
	pthread_mutex_lock(&fs->files_lock);
	for (loom_file *f = u64map_get(&fs->files, attr->ino); f; f = f->next_same_ino) {
		pthread_mutex_lock(&f->lock);
		f->attr.mode = attr->mode;
		f->attr.uid = attr->uid;
		f->attr.gid = attr->gid;
		file_privs_follow(f, attr->mode);
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&fs->files_lock);
}

void files_dom_forget(loom_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->files_lock);
	for (loom_file *f = u64map_get(&fs->files, ino); f; f = f->next_same_ino)
		if (f->dom)
			dom_forget(f->dom);
	pthread_mutex_unlock(&fs->files_lock);
}

