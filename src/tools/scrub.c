/* loom scrub: verify an OST's objects against their checksums (placeholder until implemented). */
#include <stdio.h>

#include "tools/tool.h"

int cmd_scrub(struct tool_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	fprintf(stderr, "loom scrub: not implemented yet\n");
	return 1;
}
