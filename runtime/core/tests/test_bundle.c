/*
 * test_bundle.c - unit checks for the stored-ZIP writer and reader (zip.c)
 * and the payload format of built executables (bundle.c). The test program
 * itself is the "runtime": payloads are appended to a copy of it.
 *
 * Build and run:
 *   make build/tests/test_bundle && build/tests/test_bundle
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bundle.h"
#include "check.h"
#include "core/zip.h"

static buf read_all(const char *path) {
  buf b = BUF_INIT;
  FILE *f = fopen(path, "rb");
  if (!f) return b;
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_append(&b, chunk, n);
  fclose(f);
  return b;
}

static void write_all(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  fwrite(data, 1, len, f);
  fclose(f);
}

static void test_crc32(void) {
  CHECK(zip_crc32(0, "123456789", 9) == 0xCBF43926u, "CRC-32 check value");
  CHECK(zip_crc32(zip_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u, "CRC-32 continued");
  CHECK(zip_crc32(0, "", 0) == 0, "CRC-32 of nothing");
}

static void test_zip_round_trip(void) {
  buf out = BUF_INIT;
  buf_puts(&out, "PREFIX"); /* like an executable before the archive */
  zip_writer z;
  zip_writer_init(&z, &out, 0);
  zip_add(&z, "a.txt", "hello", 5, 0644);
  zip_add(&z, "dir/b.bin", "\0\1\2", 3, 0755);
  zip_add(&z, "empty", "", 0, 0600);
  CHECK(zip_finish(&z, 2), "finish");
  zip_writer_free(&z);
  buf_puts(&out, "hi");
  size_t count = 0;
  char err[200];
  zip_entry *e = zip_read((unsigned char *)out.data + 6, out.len - 6, 6, &count, err, sizeof err);
  CHECK(e != NULL, "read: %s", err);
  if (e) {
    CHECK(count == 3, "count %zu", count);
    CHECK(e[0].name_len == 5 && memcmp(e[0].name, "a.txt", 5) == 0 && e[0].size == 5 &&
              memcmp(e[0].data, "hello", 5) == 0 && e[0].mode == 0644,
          "first entry");
    CHECK(e[1].size == 3 && memcmp(e[1].data, "\0\1\2", 3) == 0 && e[1].mode == 0755, "binary entry");
    CHECK(e[2].size == 0 && e[2].mode == 0600, "empty entry");
  }
  free(e);
  /* Any single changed byte of a file's data fails its CRC-32. */
  out.data[6 + 30 + 5] ^= 0x20;
  e = zip_read((unsigned char *)out.data + 6, out.len - 6, 6, &count, err, sizeof err);
  CHECK(e == NULL && strstr(err, "CRC-32"), "altered data: %s", err);
  free(e);
  /* Without its end record it is not an archive. */
  e = zip_read((unsigned char *)out.data + 6, out.len - 10, 6, &count, err, sizeof err);
  CHECK(e == NULL, "cut archive");
  free(e);
  buf_free(&out);
}

static const char METADATA[] = "format 1\nruntime 9.9.9\nlua Lua 5.4.4\nname demo\nscripts source\n";

/* A copy of this test program with a payload of three files. */
static buf built_program(const buf *runtime) {
  buf out = BUF_INIT;
  buf_append(&out, runtime->data, runtime->len);
  bundle_input files[] = {
      {"lib/util.lua", "return 1\n", 9},
      {"main.lua", "local u = require 'lib.util'\n", 29},
      {"words.txt", "alpha beta\n", 11},
  };
  buf err = BUF_INIT;
  CHECK(bundle_write_payload(&out, files, 3, METADATA, &err), "write payload: %s", err.data);
  buf_free(&err);
  return out;
}

/* Open path as a bundle: the result of bundle_open, the error text in err. */
static int open_copy(const char *path, const void *data, size_t len, bundle **b, buf *err) {
  write_all(path, data, len);
  buf_clear(err);
  return bundle_open(path, b, err);
}

static void test_payload(void) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  CHECK(n > 0, "readlink /proc/self/exe");
  if (n <= 0) return;
  self[n] = '\0';
  buf runtime = read_all(self);

  int fd = open(self, O_RDONLY);
  uint64_t size = 0;
  buf err = BUF_INIT;
  CHECK(bundle_runtime_size(fd, &size, &err) && size == runtime.len,
        "a plain executable is all runtime: %llu of %zu bytes", (unsigned long long)size, runtime.len);
  close(fd);

  char path[] = "/tmp/test_bundle_XXXXXX";
  int tmp = mkstemp(path);
  close(tmp);
  bundle *b = NULL;

  CHECK(open_copy(path, runtime.data, runtime.len, &b, &err) == 0 && !b, "no payload: %s", err.data);

  buf program = built_program(&runtime);
  CHECK(open_copy(path, program.data, program.len, &b, &err) == 1, "open: %s", err.data);
  if (b) {
    CHECK(b->runtime_size == runtime.len, "runtime size");
    CHECK(b->file_count == 3, "three files, metadata apart: %zu", b->file_count);
    CHECK_STR(b->name, "demo");
    CHECK_STR(b->runtime_version, "9.9.9");
    CHECK_STR(b->scripts, "source");
    const bundle_file *f = bundle_find(b, "lib/util.lua");
    CHECK(f && f->size == 9 && memcmp(f->data, "return 1\n", 9) == 0, "lib/util.lua");
    CHECK(bundle_find(b, "words.txt") != NULL, "a data file");
    CHECK(bundle_find(b, "missing.lua") == NULL, "a missing file");
    CHECK(bundle_find(b, BUNDLE_METADATA_NAME) == NULL, "the metadata is not a file");
    bundle_free(b);
  }
  /* The trailer is the last 52 bytes, in the documented form. */
  CHECK(strncmp(program.data + program.len - BUNDLE_TRAILER_SIZE, "luamcp-bundle/1 payload=", 24) == 0 &&
            program.data[program.len - 1] == '\n',
        "trailer text");

  /* Every byte of the payload matters: flip one anywhere and it is refused. */
  size_t payload = program.len - runtime.len;
  size_t step = payload / 97 ? payload / 97 : 1;
  int refused = 0, tried = 0;
  for (size_t at = runtime.len; at < program.len; at += step) {
    program.data[at] ^= 0x01;
    tried++;
    if (open_copy(path, program.data, program.len, &b, &err) == -1 && err.len) refused++;
    else bundle_free(b);
    program.data[at] ^= 0x01;
  }
  CHECK(refused == tried, "flipped bytes refused: %d of %d", refused, tried);

  CHECK(open_copy(path, program.data, program.len - 1, &b, &err) == -1 && strstr(err.data, "truncated"),
        "one byte short: %s", err.data);
  CHECK(open_copy(path, program.data, program.len - payload / 2, &b, &err) == -1 && strstr(err.data, "truncated"),
        "half the payload: %s", err.data);
  CHECK(open_copy(path, program.data, runtime.len + 1, &b, &err) == -1, "one byte of payload");
  buf longer = BUF_INIT;
  buf_append(&longer, program.data, program.len);
  buf_puts(&longer, "x");
  CHECK(open_copy(path, longer.data, longer.len, &b, &err) == -1, "one byte too many: %s", err.data);

  unlink(path);
  buf_free(&longer);
  buf_free(&program);
  buf_free(&runtime);
  buf_free(&err);
}

int main(void) {
  test_crc32();
  test_zip_round_trip();
  test_payload();
  return check_report();
}
