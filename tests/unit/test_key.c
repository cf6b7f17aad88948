/* Key files (common/auth.c): loom_key_load reads only a key file private to its owner, as ssh
 * reads a private key, and loom_key_refusal tells the user what is wrong and the fix. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/auth.h"

int check_failures;
const char *check_current = "";

#define HEX "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static char dir[] = "/tmp/loom-test-key-XXXXXX";
static char path[sizeof(dir) + 16];

static void write_key(const char *text, mode_t mode)
{
	FILE *f;

	unlink(path);
	f = fopen(path, "w");
	REQUIRE(f != NULL);
	fputs(text, f);
	REQUIRE(fclose(f) == 0);
	/* chmod, not the umask: the modes below are exact. */
	REQUIRE(chmod(path, mode) == 0);
}

static int load(size_t *len)
{
	uint8_t key[LOOM_KEY_MAX];

	return loom_key_load(path, key, len, NULL);
}

static void test_private_modes_are_read(void)
{
	static const mode_t ok[] = { 0600, 0400, 0700, 0500 };
	uint8_t key[LOOM_KEY_MAX];
	size_t len = 0;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		write_key(HEX "\n", ok[i]);
		len = 0;
		CHECK_RC(loom_key_load(path, key, &len, NULL), 0);
		CHECK_EQ(len, 32);
		CHECK_EQ(key[0], 0x00);
		CHECK_EQ(key[1], 0x11);
		CHECK_EQ(key[31], 0xff);
	}
}

static void test_shared_modes_are_refused(void)
{
	static const mode_t refused[] = { 0640, 0644, 0604, 0620, 0602, 0660, 0666, 0606, 0440, 0404 };
	size_t len = 77;

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		write_key(HEX "\n", refused[i]);
		CHECK_RC(load(&len), -EPERM);
		CHECK_EQ(len, 77); /* untouched */
	}
	/* The mode is checked before the contents: not a key, and shared, is refused as shared. */
	write_key("not a key\n", 0644);
	CHECK_RC(load(&len), -EPERM);
}

static void test_contents_are_still_checked(void)
{
	size_t len;

	write_key("not a key\n", 0600);
	CHECK_RC(load(&len), -EINVAL);
	write_key("0011\n", 0600); /* too short */
	CHECK_RC(load(&len), -EINVAL);
	write_key(HEX HEX "00\n", 0600); /* longer than LOOM_KEY_MAX */
	CHECK_RC(load(&len), -EINVAL);
	write_key(HEX HEX "\r\n", 0600); /* the longest, with a CRLF */
	CHECK_RC(load(&len), 0);
	CHECK_EQ(len, LOOM_KEY_MAX);
	write_key(HEX "\nanything after the first line\n", 0600);
	CHECK_RC(load(&len), 0);
	CHECK_EQ(len, 32);
	unlink(path);
	CHECK_RC(load(&len), -ENOENT);
}

static void test_refusal_names_the_file_its_mode_and_the_fix(void)
{
	char why[LOOM_KEY_REFUSAL_LEN], want[LOOM_KEY_REFUSAL_LEN];

	write_key(HEX "\n", 0644);
	CHECK_RC(loom_key_refusal(path, why, sizeof(why)), 0);
	snprintf(want, sizeof(want), "key file %s is readable by its group and others (mode 0644): "
		 "chmod 600 %s", path, path);
	CHECK(strcmp(why, want) == 0);
	if (strcmp(why, want))
		fprintf(stderr, "  got: %s\n", why);
	write_key(HEX "\n", 0620);
	loom_key_refusal(path, why, sizeof(why));
	CHECK(strstr(why, "is writable by its group (mode 0620)") != NULL);
	write_key(HEX "\n", 0606);
	loom_key_refusal(path, why, sizeof(why));
	CHECK(strstr(why, "is readable and writable by others (mode 0606)") != NULL);
	/* Private by now (fixed since it was refused), or gone: the caller says what it would
	 * have said of the errno. */
	write_key(HEX "\n", 0600);
	CHECK_RC(loom_key_refusal(path, why, sizeof(why)), -EAGAIN);
	unlink(path);
	CHECK_RC(loom_key_refusal(path, why, sizeof(why)), -ENOENT);
}

/* Root can give a file away; others cannot, and have no one else's files to try. */
static void test_a_file_of_another_user_is_refused(void)
{
	char why[LOOM_KEY_REFUSAL_LEN], want[64];
	size_t len;

	if (geteuid() != 0) {
		fprintf(stderr, "     (skipped: not root)\n");
		return;
	}
	write_key(HEX "\n", 0600);
	REQUIRE(chown(path, 65534, 65534) == 0);
	CHECK_RC(load(&len), -EPERM);
	CHECK_RC(loom_key_refusal(path, why, sizeof(why)), 0);
	CHECK(strstr(why, "belongs to uid 65534, not to this user (uid 0) or root") != NULL);
	snprintf(want, sizeof(want), "chown 0 %s", path);
	CHECK(strstr(why, want) != NULL);
	/* Root's own file is fine, whoever reads it. */
	REQUIRE(chown(path, 0, 0) == 0);
	CHECK_RC(load(&len), 0);
}

static void test_created_keys_are_private(void)
{
	mode_t old = umask(0);
	struct stat st;
	size_t len;

	unlink(path);
	CHECK_RC(loom_key_create(path), 0);
	umask(old);
	REQUIRE(stat(path, &st) == 0);
	CHECK_EQ(st.st_mode & 07777, 0600);
	CHECK_RC(load(&len), 0);
	CHECK_EQ(len, 32);
	CHECK_RC(loom_key_create(path), -EEXIST);
}

static void test_node_keys(void)
{
	uint8_t fskey[32], key[LOOM_KEY_MAX], want[LOOM_MAC_LEN];
	struct loom_key_id id;
	size_t len;

	memset(fskey, 0x5a, sizeof(fskey));
	unlink(path);
	CHECK_RC(loom_node_key_write(path, fskey, sizeof(fskey), "gpu-07.rack_2", 3), 0);
	CHECK_RC(loom_key_load(path, key, &len, &id), 0);
	CHECK_EQ(len, 32);
	CHECK(strcmp(id.node, "gpu-07.rack_2") == 0);
	CHECK_EQ(id.generation, 3);
	CHECK_RC(loom_node_key(fskey, sizeof(fskey), "gpu-07.rack_2", 3, want), 0);
	CHECK(memcmp(key, want, sizeof(want)) == 0);
	/* Another generation or name is another key. */
	CHECK_RC(loom_node_key(fskey, sizeof(fskey), "gpu-07.rack_2", 4, want), 0);
	CHECK(memcmp(key, want, sizeof(want)) != 0);
	/* Where only the file system key will do, a node's is not a key. */
	CHECK_RC(loom_key_load(path, key, &len, NULL), -EINVAL);
	CHECK_RC(loom_node_key_write(path, fskey, sizeof(fskey), "gpu-07.rack_2", 3), -EEXIST);
	/* The file system key has no node. */
	write_key(HEX "\n", 0600);
	CHECK_RC(loom_key_load(path, key, &len, &id), 0);
	CHECK(id.node[0] == '\0');
	/* A node line that is not one: a bad name, generation 0 or too large, words after it. */
	write_key(HEX "\nnode bad/name 1\n", 0600);
	CHECK_RC(loom_key_load(path, key, &len, &id), -EINVAL);
	write_key(HEX "\nnode gpu1 0\n", 0600);
	CHECK_RC(loom_key_load(path, key, &len, &id), -EINVAL);
	write_key(HEX "\nnode gpu1 4294967296\n", 0600);
	CHECK_RC(loom_key_load(path, key, &len, &id), -EINVAL);
	write_key(HEX "\nnode gpu1 2 extra\n", 0600);
	CHECK_RC(loom_key_load(path, key, &len, &id), -EINVAL);
	write_key(HEX "\nnode 0123456789012345678901234567890123 2\n", 0600);
	CHECK_RC(loom_key_load(path, key, &len, &id), -EINVAL);
	CHECK_RC(loom_node_name_check("0123456789012345678901234567890"), 0); /* 31 */
	CHECK_RC(loom_node_name_check("01234567890123456789012345678901"), -EINVAL);
	CHECK_RC(loom_node_name_check(""), -EINVAL);
	CHECK_RC(loom_node_key(fskey, sizeof(fskey), "has space", 1, want), -EINVAL);
	unlink(path);
}

static void test_choose(void)
{
	unsetenv("LOOM_KEY_FILE");
	CHECK(strcmp(loom_key_file_choose("/given"), "/given") == 0);
	CHECK(strcmp(loom_key_file_choose(""), "") == 0); /* "" is no key, not "look elsewhere" */
	setenv("LOOM_KEY_FILE", "/from/env", 1);
	CHECK(strcmp(loom_key_file_choose(NULL), "/from/env") == 0);
	CHECK(strcmp(loom_key_file_choose("/given"), "/given") == 0);
	unsetenv("LOOM_KEY_FILE");
	if (access(LOOM_DEFAULT_KEY_FILE, F_OK) == 0)
		CHECK(strcmp(loom_key_file_choose(NULL), LOOM_DEFAULT_KEY_FILE) == 0);
	else
		CHECK(loom_key_file_choose(NULL) == NULL);
}

int main(void)
{
	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/fs.key", dir);
	RUN(test_private_modes_are_read);
	RUN(test_shared_modes_are_refused);
	RUN(test_contents_are_still_checked);
	RUN(test_refusal_names_the_file_its_mode_and_the_fix);
	RUN(test_a_file_of_another_user_is_refused);
	RUN(test_created_keys_are_private);
	RUN(test_node_keys);
	RUN(test_choose);
	unlink(path);
	rmdir(dir);
	return check_report();
}
