/* The names of a directory kept under a lease (nameset.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/nameset.h"

static char tombstone[1];

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* The slot of name, or of where it goes (the first tombstone met, else the empty slot). */
static size_t ns_find(const struct nameset *ns, const char *name, bool *found)
{
	size_t mask = ns->cap - 1, i = name_hash(name) & mask, spot = SIZE_MAX;

	for (;; i = (i + 1) & mask) {
		char *s = ns->slot[i];

		if (!s) {
			*found = false;
			return spot != SIZE_MAX ? spot : i;
		}
		if (s == tombstone) {
			if (spot == SIZE_MAX)
				spot = i;
		} else if (strcmp(s, name) == 0) {
			*found = true;
			return i;
		}
	}
}

bool ns_has(const struct nameset *ns, const char *name)
{
	bool found = false;

	if (ns->cap)
		ns_find(ns, name, &found);
	return found;
}

void ns_free(struct nameset *ns)
{
	for (size_t i = 0; i < ns->cap; i++)
		if (ns->slot[i] && ns->slot[i] != tombstone)
			free(ns->slot[i]);
	free(ns->slot);
	memset(ns, 0, sizeof(*ns));
}

static int ns_grow(struct nameset *ns)
{
	struct nameset bigger = { .cap = ns->cap ? ns->cap * 2 : 64 };

	if (ns->n * 2 < ns->cap / 2 && ns->cap)
		bigger.cap = ns->cap; /* mostly tombstones: the same size, rebuilt */
	bigger.slot = calloc(bigger.cap, sizeof(char *));
	if (!bigger.slot)
		return -ENOMEM;
	for (size_t i = 0; i < ns->cap; i++) {
		char *s = ns->slot[i];
		bool found;

		if (!s || s == tombstone)
			continue;
		bigger.slot[ns_find(&bigger, s, &found)] = s;
		bigger.used++;
		bigger.n++;
	}
	free(ns->slot);
	*ns = bigger;
	return 0;
}

/* After a name's NUL: its type (DT_*, DT_UNKNOWN when not known, with LM_NAME_MADE), then the
 * count of this mount's links when it was marked (lm_lease_linked), 4 bytes; then, for a file
 * made here, its inode and the mount's count of attribute changes when it was made (ns_made), 8
 * bytes each (0 otherwise). */
#define NAME_TAIL 21

static unsigned char *type_of(char *s)
{
	return (unsigned char *)s + strlen(s) + 1;
}

static void set_tail(char *s, unsigned char type, uint32_t links)
{
	unsigned char *t = type_of(s);

	t[0] = type;
	memcpy(t + 1, &links, sizeof(links));
	memset(t + 5, 0, 16);
}

int ns_add(struct nameset *ns, const char *name, unsigned char type, uint32_t links)
{
	size_t i, len = strlen(name);
	bool found;

	if ((ns->used + 1) * 4 >= ns->cap * 3 && ns_grow(ns))
		return -ENOMEM;
	i = ns_find(ns, name, &found);
	if (found) {
		set_tail(ns->slot[i], type, links); /* renamed over: the name is another's now */
		return 0;
	}
	if (ns->slot[i] != tombstone)
		ns->used++;
	ns->slot[i] = malloc(len + 1 + NAME_TAIL);
	if (!ns->slot[i])
		return -ENOMEM;
	memcpy(ns->slot[i], name, len + 1);
	set_tail(ns->slot[i], type, links);
	ns->n++;
	return 0;
}

/* The bytes after name's NUL in ns, or NULL if name is absent. */
static unsigned char *tail_of(const struct nameset *ns, const char *name)
{
	bool found = false;
	size_t i = 0;

	if (ns->cap)
		i = ns_find(ns, name, &found);
	return found ? type_of(ns->slot[i]) : NULL;
}

/* The type of name in ns (DT_UNKNOWN if not known, -1 if absent), and the links count it was
 * marked at (links: may be NULL). */
int ns_type(const struct nameset *ns, const char *name, uint32_t *links)
{
	unsigned char *t = tail_of(ns, name);

	if (!t)
		return -1;
	if (links)
		memcpy(links, t + 1, sizeof(*links));
	return t[0];
}

void ns_del(struct nameset *ns, const char *name)
{
	bool found;
	size_t i;

	if (!ns->cap)
		return;
	i = ns_find(ns, name, &found);
	if (!found)
		return;
	free(ns->slot[i]);
	ns->slot[i] = tombstone;
	ns->n--;
}

void ns_set_made(struct nameset *ns, const char *name, uint64_t ino, uint64_t attr_gen)
{
	unsigned char *t = tail_of(ns, name);

	if (!t)
		return;
	memcpy(t + 5, &ino, sizeof(ino));
	memcpy(t + 13, &attr_gen, sizeof(attr_gen));
}

bool ns_made(const struct nameset *ns, const char *name, uint64_t *ino, uint64_t *attr_gen)
{
	unsigned char *t = tail_of(ns, name);

	if (!t)
		return false;
	memcpy(ino, t + 5, sizeof(*ino));
	memcpy(attr_gen, t + 13, sizeof(*attr_gen));
	return *ino != 0;
}
