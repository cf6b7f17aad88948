#include "common/u64map.h"

#include <errno.h>
#include <stdlib.h>

static size_t bucket_of(const struct u64map *m, uint64_t key)
{
	/* Fibonacci hashing: spreads sequential keys (inode numbers, handles) over the table. */
	return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (m->nbuckets - 1);
}

void u64map_init(struct u64map *m)
{
	m->buckets = NULL;
	m->nbuckets = 0;
	m->count = 0;
}

void u64map_destroy(struct u64map *m)
{
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct u64map_ent *e = m->buckets[i];
		while (e) {
			struct u64map_ent *next = e->next;
			free(e);
			e = next;
		}
	}
	free(m->buckets);
	u64map_init(m);
}

static struct u64map_ent *find(const struct u64map *m, uint64_t key)
{
	if (!m->nbuckets)
		return NULL;
	for (struct u64map_ent *e = m->buckets[bucket_of(m, key)]; e; e = e->next)
		if (e->key == key)
			return e;
	return NULL;
}

void *u64map_get(const struct u64map *m, uint64_t key)
{
	struct u64map_ent *e = find(m, key);
	return e ? e->val : NULL;
}

static int grow(struct u64map *m)
{
	size_t n = m->nbuckets ? m->nbuckets * 2 : 64;
	struct u64map_ent **b = calloc(n, sizeof(*b));
	struct u64map old = *m;

	if (!b)
		return -ENOMEM;
	m->buckets = b;
	m->nbuckets = n;
	for (size_t i = 0; i < old.nbuckets; i++) {
		struct u64map_ent *e = old.buckets[i];
		while (e) {
			struct u64map_ent *next = e->next;
			size_t k = bucket_of(m, e->key);
			e->next = m->buckets[k];
			m->buckets[k] = e;
			e = next;
		}
	}
	free(old.buckets);
	return 0;
}

int u64map_put(struct u64map *m, uint64_t key, void *val)
{
	struct u64map_ent *e = find(m, key);
	size_t k;

	if (e) {
		e->val = val;
		return 0;
	}
	if (m->count >= m->nbuckets && grow(m) < 0)
		return -ENOMEM;
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	k = bucket_of(m, key);
	e->key = key;
	e->val = val;
	e->next = m->buckets[k];
	m->buckets[k] = e;
	m->count++;
	return 0;
}

void *u64map_del(struct u64map *m, uint64_t key)
{
	struct u64map_ent **pp;

	if (!m->nbuckets)
		return NULL;
	for (pp = &m->buckets[bucket_of(m, key)]; *pp; pp = &(*pp)->next) {
		struct u64map_ent *e = *pp;
		if (e->key == key) {
			void *val = e->val;
			*pp = e->next;
			free(e);
			m->count--;
			return val;
		}
	}
	return NULL;
}

void u64map_each(const struct u64map *m, void (*fn)(uint64_t key, void *val, void *arg), void *arg)
{
	for (size_t i = 0; i < m->nbuckets; i++)
		for (struct u64map_ent *e = m->buckets[i]; e; e = e->next)
			fn(e->key, e->val, arg);
}

void u64map_destroy_free(struct u64map *m)
{
	for (size_t i = 0; i < m->nbuckets; i++)
		for (struct u64map_ent *e = m->buckets[i]; e; e = e->next)
			free(e->val);
	u64map_destroy(m);
}
