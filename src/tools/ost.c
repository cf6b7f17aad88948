/*
 * loom ost deactivate|activate IDX...: takes OSTs out of (or back into) the placement of new
 * stripes, as Lustre's `lctl --device ... deactivate` on the MDS. Files already on them stay
 * readable and writable, so an OST can be drained (`loom migrate`) before it is retired. The MDS
 * keeps the state across restarts; `loom df` marks such an OST with N.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tool.h"

/* An OST named by its index (2) or as Lustre prints it (OST0002, hex). */
static int parse_ost(const char *arg, uint32_t *idx)
{
	const char *p = arg;
	int base = 10;
	char *end;
	unsigned long v;

	if (!strncmp(p, "OST", 3)) {
		p += 3;
		base = 16;
	}
	if (!*p || *p == '-' || *p == '+')
		return -EINVAL;
	v = strtoul(p, &end, base);
	if (*end || v > 0xFFFF)
		return -EINVAL;
	*idx = (uint32_t)v;
	return 0;
}

int cmd_ost(struct tool_ctx *ctx, int argc, char **argv)
{
	bool active;
	loom_fs *fs;
	int ret = 0;

	if (argc < 3 || (strcmp(argv[1], "deactivate") && strcmp(argv[1], "activate"))) {
		fprintf(stderr, "usage: loom ost deactivate|activate IDX...   (IDX: 2 or OST0002)\n");
		return 2;
	}
	active = !strcmp(argv[1], "activate");
	for (int i = 2; i < argc; i++) {
		uint32_t idx;
		if (parse_ost(argv[i], &idx)) {
			fprintf(stderr, "loom ost: '%s' is not an OST index\n", argv[i]);
			return 2;
		}
	}
	fs = tool_connect(ctx);
	if (!fs)
		return 1;
	for (int i = 2; i < argc; i++) {
		uint32_t idx;
		int rc;

		parse_ost(argv[i], &idx);
		rc = loom_ost_set_active(fs, idx, active);
		if (rc == -ENOENT)
			fprintf(stderr, "loom ost: no OST has index %u\n", idx);
		else if (rc == -EPERM)
			fprintf(stderr, "loom ost: OST%04x: only root may %s an OST\n", idx, argv[1]);
		else if (rc)
			tool_fail("ost", argv[i], rc);
		else
			printf("OST%04x %s\n", idx, active ? "activated" : "deactivated: no new stripes go there");
		if (rc)
			ret = 1;
	}
	loom_disconnect(fs);
	return ret;
}
