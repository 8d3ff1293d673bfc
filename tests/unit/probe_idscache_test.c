/* lib/probe/idscache.c: pci.ids answers are kept while the file is the same
 * (device, inode, size, mtime, path), "not listed" among them, and forgotten when
 * the file changes or the cache is full. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../../lib/probe/probe_int.h"

static struct stat st_of(ino_t ino, off_t size, time_t mtime)
{
	struct stat st;
	memset(&st, 0, sizeof st);
	st.st_dev = 1;
	st.st_ino = ino;
	st.st_size = size;
	st.st_mtim.tv_sec = mtime;
	return st;
}

static void fini(void) { gkp_ids_forget(); }
TestSuite(probe_idscache, .init = fini, .fini = fini);

Test(probe_idscache, a_listed_and_a_not_listed_device_are_answered_while_the_file_is_the_same)
{
	struct stat st = st_of(7, 1300000, 1000);
	char name[64] = "";
	cr_assert_eq(gkp_ids_cached("/ids", &st, 0x8086, 0x56a0, name, sizeof name), -1, "nothing cached yet");
	gkp_ids_remember("/ids", &st, 0x8086, 0x56a0, "DG2 [Arc A770]");
	gkp_ids_remember("/ids", &st, 0x8086, 0xe20b, NULL);
	cr_assert_eq(gkp_ids_cached("/ids", &st, 0x8086, 0x56a0, name, sizeof name), 1);
	cr_assert_str_eq(name, "DG2 [Arc A770]");
	cr_assert_eq(gkp_ids_cached("/ids", &st, 0x8086, 0xe20b, name, sizeof name), 0, "known not to be listed");
	cr_assert_eq(gkp_ids_cached("/ids", &st, 0x8086, 0x0bd5, name, sizeof name), -1, "never asked");
}

Test(probe_idscache, another_file_or_a_changed_one_is_read_again)
{
	struct stat st = st_of(7, 1300000, 1000);
	char name[64];
	gkp_ids_remember("/ids", &st, 0x8086, 0x56a0, "A");
	struct stat other[] = { st_of(8, 1300000, 1000), st_of(7, 1300001, 1000), st_of(7, 1300000, 1001) };
	for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
		cr_assert_eq(gkp_ids_cached("/ids", &other[i], 0x8086, 0x56a0, name, sizeof name), -1, "change %zu", i);
	cr_assert_eq(gkp_ids_cached("/other-ids", &st, 0x8086, 0x56a0, name, sizeof name), -1, "another path");
	struct stat ns = st;
	ns.st_mtim.tv_nsec = 5;
	cr_assert_eq(gkp_ids_cached("/ids", &ns, 0x8086, 0x56a0, name, sizeof name), -1, "mtime in ns");
	/* a new file's answer replaces the old file's */
	gkp_ids_remember("/ids", &other[0], 0x8086, 0x56a0, "B");
	cr_assert_eq(gkp_ids_cached("/ids", &st, 0x8086, 0x56a0, name, sizeof name), -1);
	cr_assert_eq(gkp_ids_cached("/ids", &other[0], 0x8086, 0x56a0, name, sizeof name), 1);
	cr_assert_str_eq(name, "B");
}

Test(probe_idscache, the_cache_is_bounded_and_a_full_one_starts_over)
{
	struct stat st = st_of(7, 1300000, 1000);
	char name[64];
	for (int d = 0; d < GKP_IDS_CACHE_MAX; d++)
		gkp_ids_remember("/ids", &st, 0x8086, (uint16_t)d, "x");
	cr_assert_eq(gkp_ids_cached("/ids", &st, 0x8086, 0, name, sizeof name), 1);
	/* a device asked again is updated in place, not added */
	gkp_ids_remember("/ids", &st, 0x8086, 0, "y");
	cr_assert_eq(gkp_ids_cached("/ids", &st, 0x8086, GKP_IDS_CACHE_MAX - 1, name, sizeof name), 1);
	cr_assert_eq(gkp_ids_cached("/ids", &st, 0x8086, 0, name, sizeof name), 1);
	cr_assert_str_eq(name, "y");
	gkp_ids_remember("/ids", &st, 0x8086, 0x7777, "z"); /* one more: starts over */
	cr_assert_eq(gkp_ids_cached("/ids", &st, 0x8086, 0, name, sizeof name), -1);
	cr_assert_eq(gkp_ids_cached("/ids", &st, 0x8086, 0x7777, name, sizeof name), 1);
}

Test(probe_idscache, a_long_name_is_cut_to_the_caller_buffer)
{
	struct stat st = st_of(7, 1, 1);
	char name[8];
	gkp_ids_remember("/ids", &st, 0x8086, 1, "a very long product name");
	cr_assert_eq(gkp_ids_cached("/ids", &st, 0x8086, 1, name, sizeof name), 1);
	cr_assert_str_eq(name, "a very ");
}
