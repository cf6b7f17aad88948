/* Open handles: they keep an unlinked file's inode and objects alive until the last close. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/log.h"
#include "mds/mds.h"

void mds_handles_init(struct mds *m)
{
	m->next_handle = 0;
	u64map_init(&m->handles);
	u64map_init(&m->open_counts);
	u64map_init(&m->conn_handles);
}

static void free_handle(uint64_t key, void *val, void *arg)
{
	(void)key;
	(void)arg;
	free(val);
}

void mds_handles_destroy(struct mds *m)
{
	u64map_each(&m->handles, free_handle, NULL);
	u64map_destroy(&m->handles);
	u64map_destroy(&m->open_counts);
	u64map_destroy(&m->conn_handles);
}

bool mds_ino_is_open(struct mds *m, uint64_t ino)
{
	return u64map_get(&m->open_counts, ino) != NULL;
}

int mds_handle_open(struct mds *m, uint64_t ino, uint64_t conn_id, uint64_t *handle)
{
	struct mds_handle *h = calloc(1, sizeof(*h));
	uintptr_t count = (uintptr_t)u64map_get(&m->open_counts, ino);

	if (!h)
		return -ENOMEM;
	h->handle = ++m->next_handle;
	h->ino = ino;
	h->conn_id = conn_id;
	h->next_conn = u64map_get(&m->conn_handles, conn_id);
	if (u64map_put(&m->handles, h->handle, h) < 0 ||
	    u64map_put(&m->open_counts, ino, (void *)(count + 1)) < 0 ||
	    u64map_put(&m->conn_handles, conn_id, h) < 0) {
		/* Out of memory halfway: undo what went in. */
		u64map_del(&m->handles, h->handle);
		if (count)
			u64map_put(&m->open_counts, ino, (void *)count);
		else
			u64map_del(&m->open_counts, ino);
		if (h->next_conn)
			u64map_put(&m->conn_handles, conn_id, h->next_conn);
		else
			u64map_del(&m->conn_handles, conn_id);
		free(h);
		return -ENOMEM;
	}
	if (h->next_conn)
		h->next_conn->prev_conn = h;
	*handle = h->handle;
	return 0;
}

/* Unlinks h from every table; returns whether its inode has no open handle left. */
static bool handle_forget(struct mds *m, struct mds_handle *h)
{
	uintptr_t count = (uintptr_t)u64map_get(&m->open_counts, h->ino);

	u64map_del(&m->handles, h->handle);
	if (h->prev_conn)
		h->prev_conn->next_conn = h->next_conn;
	else if (h->next_conn)
		u64map_put(&m->conn_handles, h->conn_id, h->next_conn);
	else
		u64map_del(&m->conn_handles, h->conn_id);
	if (h->next_conn)
		h->next_conn->prev_conn = h->prev_conn;
	if (count <= 1) {
		u64map_del(&m->open_counts, h->ino);
		return true;
	}
	u64map_put(&m->open_counts, h->ino, (void *)(count - 1));
	return false;
}

int mds_handle_check(struct mds *m, uint64_t handle, uint64_t ino, uint64_t conn_id)
{
	struct mds_handle *h = u64map_get(&m->handles, handle);

	if (h && (h->ino != ino || h->conn_id != conn_id))
		return -EBADF;
	return 0;
}

/* Ends a known handle. The inode is released first, and the handle forgotten only if that
 * worked, so that a failure (the request is answered with it) leaves the handle to retry. */
static int handle_end(struct mds *m, struct mdt_txn *t, struct mds_handle *h, bool *released)
{
	uintptr_t count = (uintptr_t)u64map_get(&m->open_counts, h->ino);

	if (count <= 1) {
		/* The last handle: a no-op for an inode that still has names. */
		int rc = mdt_inode_release(t, h->ino);
		if (rc)
			return rc;
		*released = true;
	}
	handle_forget(m, h);
	free(h);
	return 0;
}

int mds_handle_close(struct mds *m, struct mdt_txn *t, uint64_t handle, uint64_t ino,
		     uint64_t conn_id, bool *released)
{
	struct mds_handle *h = u64map_get(&m->handles, handle);

	if (!h)
		return 0;
	if (h->ino != ino || h->conn_id != conn_id)
		return -EBADF;
	return handle_end(m, t, h, released);
}

int mds_handles_drop_conn(struct mds *m, struct mdt_txn *t, uint64_t conn_id, bool *released)
{
	struct mds_handle *h;
	int rc = 0;

	while ((h = u64map_get(&m->conn_handles, conn_id)) != NULL) {
		int r = handle_end(m, t, h, released);
		if (r && !rc)
			rc = r;
	}
	return rc;
}
