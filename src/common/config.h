/*
 * Settings files for the servers (docs/operations.md, "Configuration files"): `loom-mds --config
 * /etc/loom/mds.conf` reads one `NAME = VALUE` per line, NAME being any of the program's long
 * options without its "--". The file's settings go before the command line's, so that a flag
 * given overrides the file (getopt keeps the last value); for a repeatable option (`ost`), flags
 * naming it replace the file's list. An option without a value is written `NAME = yes` (or no).
 */
#ifndef LOOM_COMMON_CONFIG_H
#define LOOM_COMMON_CONFIG_H

#include <getopt.h>

/*
 * When argv holds `--config FILE` (or `--config=FILE`): *argc_out and *argv_out become argv[0], the
 * file's settings as `--NAME=VALUE` / `--NAME`, then argv[1..] (whose --config getopt must accept
 * and ignore). Without --config they are argc/argv. `repeatable` lists the options that may
 * appear more than once (NULL-terminated, or NULL). 0, or -EINVAL after printing what is wrong
 * ("PROG: FILE:LINE: ..."), or -errno when the file cannot be read (printed too).
 * The new vector lives until the program exits.
 */
int config_argv(const char *prog, const struct option *opts, const char *const *repeatable, int argc,
		char **argv, int *argc_out, char ***argv_out);

#endif
