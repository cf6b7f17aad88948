/*
 * mdt_damage: damages a stopped MDT on purpose, for the tests of `loom fsck`
 * (tests/integration/test_fsck.py). Test-only: it writes records the way no MDS would.
 *
 *   mdt_damage MDT_DIR nlink PATH N     sets the link count of PATH's inode to N
 *   mdt_damage MDT_DIR drop-entry PATH  removes PATH's entry (both halves) and nothing else:
 *                                       its inode stays, named by no directory
 *
 * Built by the test with the build's static libraries (see test_fsck.py).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdt/internal.h"

/* The inode a path names, and (for drop-entry) its directory and last name. */
static int resolve(struct mdt_txn *t, const char *path, uint64_t *dir, const char **last,
		   uint64_t *ino)
{
	struct loom_cred root = { 0 };
	char buf[4096], *save = NULL, *name;
	struct lw_attr a;
	int rc = 0;

	snprintf(buf, sizeof(buf), "%s", path);
	*ino = LOOM_ROOT_INO;
	*dir = LOOM_ROOT_INO;
	*last = NULL;
	for (name = strtok_r(buf, "/", &save); name; name = strtok_r(NULL, "/", &save)) {
		rc = mdt_lookup(t, &root, *ino, name, strlen(name), &a);
		if (rc)
			return rc;
		*dir = *ino;
		*ino = a.ino;
		*last = path + (name - buf);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct mdt_store *s;
	struct mdt_txn *t;
	struct mdt_inode in, dir;
	struct mdt_dentry de;
	const char *last;
	uint64_t parent, ino;
	int rc;

	if (argc < 4 || (strcmp(argv[2], "nlink") == 0 && argc != 5) ||
	    (strcmp(argv[2], "drop-entry") == 0 && argc != 4)) {
		fprintf(stderr, "usage: mdt_damage MDT_DIR nlink PATH N | drop-entry PATH\n");
		return 2;
	}
	rc = mdt_store_open(argv[1], &s);
	if (rc) {
		fprintf(stderr, "mdt_damage: %s: %s\n", argv[1], strerror(-rc));
		return 1;
	}
	rc = mdt_txn_begin(s, true, &t);
	if (rc == 0)
		rc = resolve(t, argv[3], &parent, &last, &ino);
	if (rc == 0)
		rc = mdt_inode_get(t, ino, &in);
	if (rc == 0 && strcmp(argv[2], "nlink") == 0) {
		in.nlink = (uint32_t)strtoul(argv[4], NULL, 10);
		rc = mdt_inode_put(t, &in);
	} else if (rc == 0 && strcmp(argv[2], "drop-entry") == 0) {
		size_t len = last ? strlen(last) : 0;
		rc = last ? mdt_inode_get(t, parent, &dir) : -EINVAL;
		if (rc == 0)
			rc = mdt_dentry_get(t, parent, last, len, &de);
		if (rc == 0)
			rc = mdt_dentry_del(t, &dir, last, len, &de);
		if (rc == 0)
			rc = mdt_inode_put(t, &dir); /* its entry count follows: only the name is gone */
	} else if (rc == 0) {
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = mdt_txn_commit(t);
	else
		mdt_txn_abort(t);
	mdt_store_close(s);
	if (rc) {
		fprintf(stderr, "mdt_damage: %s %s: %s\n", argv[2], argv[3], strerror(-rc));
		return 1;
	}
	printf("%llu\n", (unsigned long long)ino);
	return 0;
}
