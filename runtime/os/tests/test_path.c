/*
 * test_path.c - unit checks for the path seam (os/path.h) on the platform
 * it is built for: the same program checks path_posix.c natively and
 * path_windows.c under wine. What the Lua rules do with paths is
 * spec/paths_windows_spec.lua's (and the native specs').
 *
 *   make build/tests/test_path && build/tests/test_path
 *   x86_64-w64-mingw32-gcc -std=c11 -Iruntime -o build/test_path.exe \
 *     runtime/os/tests/test_path.c runtime/os/path_windows.c && wine64 build/test_path.exe
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/path.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <unistd.h>
#include <sys/stat.h>
#endif

static int passed, failed;

#define CHECK(cond, ...)                            \
  do {                                              \
    if (cond) {                                     \
      passed++;                                     \
    } else {                                        \
      failed++;                                     \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);   \
      printf(__VA_ARGS__);                          \
      printf("\n");                                 \
    }                                               \
  } while (0)

/* Checks got (malloc'd, freed here) against want. */
static void check_owned(char *got, const char *want, const char *what) {
  CHECK(got && strcmp(got, want) == 0, "%s: got %s, want %s", what, got ? got : "(null)", want);
  free(got);
}

static bool name_ok(const char *name) { return os_path_name_ok(name, strlen(name)); }

static void test_posix(void) {
  CHECK(os_path_is_separator('/') && !os_path_is_separator('\\'), "separators");
  CHECK(os_path_is_absolute("/x") && !os_path_is_absolute("x") && !os_path_is_absolute("C:\\x"), "absolute");
  check_owned(os_path_dir("/a/b.lua"), "/a", "dir");
  check_owned(os_path_dir("/b.lua"), "/", "dir at the root");
  check_owned(os_path_dir("b.lua"), ".", "dir of a bare name");
  CHECK(os_path_inside("/a", "/a/b") && os_path_inside("/", "/x"), "inside");
  CHECK(!os_path_inside("/a", "/ab") && !os_path_inside("/a", "/a") && !os_path_inside("/a", "/A/b"), "not inside");
  CHECK(name_ok("nul") && name_ok("data.") && name_ok("a\\b"), "every name is itself");
}

static void test_windows(void) {
  CHECK(os_path_is_separator('/') && os_path_is_separator('\\'), "separators");
  CHECK(os_path_is_absolute("C:\\x") && os_path_is_absolute("c:/x") && os_path_is_absolute("\\\\srv\\sh"), "absolute");
  CHECK(!os_path_is_absolute("C:x") && !os_path_is_absolute("x") && !os_path_is_absolute("\\x"), "not absolute");
  check_owned(os_path_dir("C:\\x\\t.lua"), "C:\\x", "dir");
  check_owned(os_path_dir("C:/a/b.lua"), "C:/a", "dir with slashes");
  check_owned(os_path_dir("C:\\t.lua"), "C:\\", "dir at a drive's root");
  check_owned(os_path_dir("\\\\srv\\sh\\t.lua"), "\\\\srv\\sh", "dir on a share");
  check_owned(os_path_dir("t.lua"), ".", "dir of a bare name");
  CHECK(os_path_inside("C:\\Data", "c:\\data\\x") && os_path_inside("C:\\", "C:\\x"), "inside, any case");
  CHECK(!os_path_inside("C:\\Data", "C:\\DataX\\y") && !os_path_inside("C:\\", "D:\\x") &&
            !os_path_inside("C:\\Data", "C:\\Data") && !os_path_inside("\\\\srv\\sh", "\\\\srv\\shared\\x"),
        "not inside");
  CHECK(name_ok("a.txt") && name_ok("COM10") && name_ok("console") && name_ok("..x"), "plain names");
  const char *bad[] = {"data.", "a ", "nul", "NUL.txt", "con .x", "a:b", "a\\b", "COM1", "lpt9.log", "a*b", "a|b"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK(!name_ok(bad[i]), "%s refused", bad[i]);
}

/* The real file system: a folder with a file and a link in a fresh
 * temporary folder. */
static void test_real(void) {
  char base[512], dir[600], file[700], messy[800], link[700], missing_path[700];
#ifdef _WIN32
  char tmp[MAX_PATH];
  GetTempPathA(sizeof tmp, tmp);
  snprintf(base, sizeof base, "%sluamcp-path-%lu", tmp, (unsigned long)GetCurrentProcessId());
  CreateDirectoryA(base, NULL);
  snprintf(dir, sizeof dir, "%s\\Data", base);
  CreateDirectoryA(dir, NULL);
  snprintf(file, sizeof file, "%s\\Note.txt", dir);
  snprintf(messy, sizeof messy, "%s/data/./x/../NOTE.TXT", base);
  snprintf(link, sizeof link, "%s\\link", base);
  FILE *f = fopen(file, "w");
  fclose(f);
  /* Wine says yes without making the link: look. */
  bool linked = CreateSymbolicLinkA(link, file, 0) != 0 && GetFileAttributesA(link) != INVALID_FILE_ATTRIBUTES;
#else
  snprintf(base, sizeof base, "/tmp/luamcp-path-XXXXXX");
  if (!mkdtemp(base)) return;
  snprintf(dir, sizeof dir, "%s/Data", base);
  mkdir(dir, 0700);
  snprintf(file, sizeof file, "%s/Note.txt", dir);
  snprintf(messy, sizeof messy, "%s/Data/./x/../Note.txt", base);
  snprintf(missing_path, sizeof missing_path, "%s/x", dir); /* POSIX: realpath looks into x */
  mkdir(missing_path, 0700);
  snprintf(link, sizeof link, "%s/link", base);
  FILE *f = fopen(file, "w");
  fclose(f);
  bool linked = symlink(file, link) == 0;
#endif
  char *real_dir = os_path_real(dir), *real_file = os_path_real(messy);
  CHECK(real_dir && real_file, "real paths of %s, %s", dir, messy);
  if (real_dir && real_file) {
    CHECK(os_path_is_absolute(real_file) && strncmp(real_file, "\\\\?\\", 4) != 0, "plain form: %s", real_file);
    CHECK(os_path_inside(real_dir, real_file), "%s inside %s", real_file, real_dir);
    const char *name = real_file + strlen(real_file) - strlen("Note.txt");
    CHECK(strcmp(name, "Note.txt") == 0, "the name's real case: %s", real_file);
  }
  free(real_dir);
  free(real_file);
  errno = 0;
  snprintf(missing_path, sizeof missing_path, "%s/missing.txt", dir);
  char *missing = os_path_real(missing_path);
  CHECK(!missing && errno == ENOENT, "a missing file: ENOENT (errno %d)", errno);
  free(missing);
  if (linked) {
    char *target = os_path_readlink(link);
    CHECK(target && strstr(target, "Note.txt"), "the link's target: %s", target ? target : "(null)");
    free(target);
    char *real_link = os_path_real(link), *real_note = os_path_real(file);
    CHECK(real_link && real_note && strcmp(real_link, real_note) == 0, "a link's real path is its target's");
    free(real_link);
    free(real_note);
  } else {
    printf("(no symbolic link could be made here: readlink not checked)\n");
  }
  char *not_link = os_path_readlink(file);
  CHECK(!not_link, "a plain file is no link");
  free(not_link);
#ifdef _WIN32
  errno = 0;
  char *device = os_path_real("NUL");
  CHECK(!device && errno == EINVAL, "a device has no real path (errno %d)", errno);
  free(device);
  char cleanup[1200];
  snprintf(cleanup, sizeof cleanup, "rmdir /s /q \"%s\"", base);
  system(cleanup);
#else
  char cleanup[1200];
  snprintf(cleanup, sizeof cleanup, "rm -rf '%s'", base);
  if (system(cleanup) != 0) printf("could not remove %s\n", base);
#endif
}

static bool same_ascii_case(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if ((*a | 0x20) != (*b | 0x20)) return false;
  return *a == *b;
}

/* Programs, found as the platform finds them. */
static void test_which(void) {
#ifdef _WIN32
  const char *names[] = {"cmd", "cmd.exe", "CMD", "C:\\windows\\system32\\cmd", "c:/windows/system32/cmd.exe"};
  const char *want = "cmd.exe";
#else
  const char *names[] = {"sh", "/bin/sh"};
  const char *want = NULL;
#endif
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char *found = os_path_which(names[i]);
    CHECK(found && os_path_is_absolute(found), "which %s: %s", names[i], found ? found : "(null)");
    if (found && want) {
      const char *tail = found + strlen(found) - strlen(want);
      CHECK(tail > found && same_ascii_case(tail, want), "which %s: %s", names[i], found);
    }
    free(found);
  }
  char *none = os_path_which("no-such-program-luamcp");
  CHECK(!none, "no such program");
  free(none);
}

int main(void) {
  const char *platform = os_path_platform();
  if (strcmp(platform, "windows") == 0) test_windows();
  else test_posix();
  test_real();
  test_which();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
