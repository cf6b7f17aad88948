/* A hash map from uint64_t keys to pointers. Not thread-safe: its owner serializes access. */
#ifndef LOOM_COMMON_U64MAP_H
#define LOOM_COMMON_U64MAP_H

#include <stddef.h>
#include <stdint.h>

struct u64map_ent {
	uint64_t key;
	void *val;
	struct u64map_ent *next;
};

struct u64map {
	struct u64map_ent **buckets;
	size_t nbuckets; /* a power of two, or 0 before the first insert */
	size_t count;
};

void u64map_init(struct u64map *m);
/* Frees the map's own memory; the values are the caller's. */
void u64map_destroy(struct u64map *m);
/* As u64map_destroy, after free() of every value (each one malloc'd block). */
void u64map_destroy_free(struct u64map *m);
void *u64map_get(const struct u64map *m, uint64_t key);
/* Inserts or replaces. 0 or -ENOMEM. */
int u64map_put(struct u64map *m, uint64_t key, void *val);
/* Removes and returns the value, or NULL. */
void *u64map_del(struct u64map *m, uint64_t key);

/* Calls fn for each entry; fn may not change the map. */
void u64map_each(const struct u64map *m, void (*fn)(uint64_t key, void *val, void *arg), void *arg);

#endif
