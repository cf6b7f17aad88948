/*
 * The names of a directory loom-mount keeps under a lease (leases.c): an open-addressed hash set
 * of names, each with its file type and a mark (LM_NAME_MADE) kept in the bytes after its NUL.
 */
#ifndef LOOM_FUSE_NAMESET_H
#define LOOM_FUSE_NAMESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nameset {
	char **slot;  /* NULL: empty; a tombstone: removed */
	size_t cap;   /* a power of two */
	size_t used;  /* names and tombstones */
	size_t n;     /* names */
};

bool ns_has(const struct nameset *ns, const char *name);
/* Adds name with its type (DT_*, with LM_NAME_MADE) and the count of this mount's links when
 * it was marked; an existing name takes them (renamed over: the name is another's now).
 * -ENOMEM. */
int ns_add(struct nameset *ns, const char *name, unsigned char type, uint32_t links);
/* The type of name (DT_UNKNOWN if not known, -1 if absent), and its links count (links: may
 * be NULL). */
int ns_type(const struct nameset *ns, const char *name, uint32_t *links);
void ns_del(struct nameset *ns, const char *name);
/* A file made here under the name: its inode and the mount's count of attribute changes then
 * (any later ns_add of the name forgets them). ns_made: false if the name has none. */
void ns_set_made(struct nameset *ns, const char *name, uint64_t ino, uint64_t attr_gen);
bool ns_made(const struct nameset *ns, const char *name, uint64_t *ino, uint64_t *attr_gen);
void ns_free(struct nameset *ns);

#endif
