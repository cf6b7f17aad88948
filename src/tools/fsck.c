/* loom fsck: check the namespace against the OST objects (placeholder until implemented). */
#include <stdio.h>

#include "tools/tool.h"

int cmd_fsck(struct tool_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	fprintf(stderr, "loom fsck: not implemented yet\n");
	return 1;
}
