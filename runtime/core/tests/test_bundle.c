/*
 * test_bundle.c - unit checks for the ZIP writer and reader (zip.c)
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
#include "core/ignore.h"
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
  zip_writer_init(&z, &out, 0, ZIP_STORED);
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

/* What a deflating writer writes, zip_read and zip_extract give back: a
 * text that shrinks is deflated, bytes that do not are stored. */
static void test_zip_deflate(void) {
  buf text = BUF_INIT, noise = BUF_INIT, out = BUF_INIT;
  for (int i = 0; i < 2000; i++) buf_printf(&text, "line %d of a text that deflate shrinks\n", i % 7);
  uint32_t x = 2463534242u; /* xorshift32: bytes deflate cannot shrink */
  for (int i = 0; i < 4096; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    buf_putc(&noise, (char)(x & 0xFF));
  }
  zip_writer z;
  zip_writer_init(&z, &out, 0, ZIP_DEFLATED);
  zip_add(&z, "text.txt", text.data, text.len, 0644);
  zip_add(&z, "noise.bin", noise.data, noise.len, 0755);
  zip_add(&z, "empty", "", 0, 0644);
  CHECK(zip_finish(&z, 0), "finish");
  zip_writer_free(&z);
  CHECK(out.len < text.len / 4 + noise.len + 400, "the text was deflated: %zu bytes in all", out.len);

  size_t count = 0;
  char err[200];
  zip_entry *e = zip_read((unsigned char *)out.data, out.len, 0, &count, err, sizeof err);
  CHECK(e != NULL && count == 3, "read: %s", e ? "" : err);
  if (e && count == 3) {
    CHECK(e[0].method == ZIP_DEFLATED && e[0].size == text.len && e[0].stored_size < text.len / 4, "text deflated");
    CHECK(e[1].method == ZIP_STORED && e[1].stored_size == noise.len && e[1].mode == 0755, "noise stored");
    CHECK(e[2].method == ZIP_STORED && e[2].size == 0, "empty stored");
    const buf *want[] = {&text, &noise};
    for (int i = 0; i < 2; i++) {
      buf got = BUF_INIT;
      CHECK(zip_extract(&e[i], &got, err, sizeof err) && got.len == want[i]->len &&
                memcmp(got.data, want[i]->data, got.len) == 0,
            "entry %d round-trips: %s", i, err);
      buf_free(&got);
    }
    /* A changed byte inside the deflated stream is refused by zip_read. */
    size_t at = (size_t)(e[0].data - (unsigned char *)out.data) + e[0].stored_size / 2;
    out.data[at] ^= 0x10;
    free(e);
    e = zip_read((unsigned char *)out.data, out.len, 0, &count, err, sizeof err);
    CHECK(e == NULL && strstr(err, "text.txt"), "altered deflated data: %s", err);
  }
  free(e);
  buf_free(&text);
  buf_free(&noise);
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

  FILE *f = fopen(self, "rb");
  uint64_t size = 0;
  buf err = BUF_INIT;
  CHECK(f && bundle_runtime_size(f, &size, &err) && size == runtime.len,
        "a plain executable is all runtime: %llu of %zu bytes", (unsigned long long)size, runtime.len);
  if (f) fclose(f);

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

  /* A payload with a deflated entry (not what bundle_write_payload writes)
   * is refused, with a sound trailer and CRC-32s: files are read in place. */
  buf deflated = BUF_INIT;
  buf_append(&deflated, runtime.data, runtime.len);
  zip_writer z;
  zip_writer_init(&z, &deflated, 0, ZIP_DEFLATED);
  zip_add(&z, BUNDLE_METADATA_NAME, METADATA, strlen(METADATA), 0644);
  const char *repeated = "return 1 return 1 return 1 return 1 return 1 return 1 return 1\n";
  zip_add(&z, "main.lua", repeated, strlen(repeated), 0644);
  CHECK(zip_finish(&z, BUNDLE_TRAILER_SIZE), "finish deflated");
  zip_writer_free(&z);
  char trailer[BUNDLE_TRAILER_SIZE + 1];
  snprintf(trailer, sizeof trailer, BUNDLE_TRAILER_FORMAT, (unsigned)BUNDLE_FORMAT,
           (uint64_t)(deflated.len - runtime.len + BUNDLE_TRAILER_SIZE),
           zip_crc32(0, deflated.data + runtime.len, deflated.len - runtime.len));
  buf_append(&deflated, trailer, BUNDLE_TRAILER_SIZE);
  CHECK(open_copy(path, deflated.data, deflated.len, &b, &err) == -1 && strstr(err.data, "compressed entry"),
        "a deflated entry: %s", err.data);
  buf_free(&deflated);

  unlink(path);
  buf_free(&longer);
  buf_free(&program);
  buf_free(&runtime);
  buf_free(&err);
}

/* Little-endian fields into a header under construction. */
static void put16(unsigned char *at, unsigned v) { at[0] = (unsigned char)v, at[1] = (unsigned char)(v >> 8); }
static void put32(unsigned char *at, uint32_t v) {
  for (int i = 0; i < 4; i++) at[i] = (unsigned char)(v >> (8 * i));
}

/* A PE32+ x86-64 file, as `luamcp build --target windows-x64` reads one
 * on Linux and luamcp.exe reads itself: headers, one section of raw data,
 * and a COFF symbol and string table after it (an unstripped MinGW build). */
static buf pe_runtime(void) {
  unsigned char f[0x400 + 2 * 18 + 8] = {0};
  memcpy(f, "MZ", 2);
  put32(f + 0x3c, 0x40);
  memcpy(f + 0x40, "PE\0\0", 4);
  unsigned char *coff = f + 0x44, *optional = coff + 20, *section = optional + 240;
  put16(coff, 0x8664);
  put16(coff + 2, 1);
  put32(coff + 8, 0x400);  /* the symbol table, after the section */
  put32(coff + 12, 2);     /* two symbols, then the string table */
  put16(coff + 16, 240);
  put16(optional, 0x20b);
  put32(optional + 60, 0x200);
  put32(optional + 108, 16);
  memcpy(section, ".rdata", 6);
  put32(section + 16, 0x200);
  put32(section + 20, 0x200);
  put32(f + 0x400 + 2 * 18, 8); /* the string table's size, its own 4 bytes included */
  memcpy(f + 0x200, "luamcp-bundle/%u payload=", 25);
  buf b = BUF_INIT;
  buf_append(&b, f, sizeof f);
  return b;
}

/* An ELF64 aarch64 file: the header and one program header covering it. */
static buf aarch64_runtime(void) {
  unsigned char f[64 + 56 + 32] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  put16(f + 16, 2);
  put16(f + 18, 183);
  put32(f + 32, 64); /* e_phoff */
  put16(f + 52, 64);
  put16(f + 54, 56);
  put16(f + 56, 1);
  put32(f + 64, 1);                 /* PT_LOAD */
  put32(f + 64 + 32, sizeof f);     /* p_filesz */
  buf b = BUF_INIT;
  buf_append(&b, f, sizeof f);
  return b;
}

/* Another platform's runtime carries a payload the same way: the bundle
 * starts where its own headers say the image ends. */
static void test_foreign_runtimes(void) {
  struct {
    const char *what;
    buf runtime;
  } cases[] = {{"PE x86-64", pe_runtime()}, {"ELF aarch64", aarch64_runtime()}};
  char path[] = "/tmp/test_bundle_XXXXXX";
  close(mkstemp(path));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    buf program = built_program(&cases[i].runtime), err = BUF_INIT;
    bundle *b = NULL;
    CHECK(open_copy(path, cases[i].runtime.data, cases[i].runtime.len, &b, &err) == 0 && !b,
          "%s alone carries no payload: %s", cases[i].what, err.data);
    CHECK(open_copy(path, program.data, program.len, &b, &err) == 1, "%s with a payload: %s", cases[i].what,
          err.data);
    if (b) {
      CHECK(b->runtime_size == cases[i].runtime.len, "%s: runtime size %llu of %zu", cases[i].what,
            (unsigned long long)b->runtime_size, cases[i].runtime.len);
      CHECK(bundle_find(b, "main.lua") != NULL, "%s: main.lua", cases[i].what);
      bundle_free(b);
    }
    buf_free(&program);
    buf_free(&err);
    buf_free(&cases[i].runtime);
  }
  unlink(path);
}

/* .luamcpignore: what each kind of line leaves out. */
static void test_ignore(void) {
  const char *text = "# notes\n\nspec/\nREADME.md\n/top.txt\ndocs/*.png\n**/cache/**\n*.tmp\n!keep.tmp\r\n"
                     "data/?.csv\n  \n";
  ignore_list l = {0};
  ignore_list_parse(&l, text, strlen(text));
  CHECK(l.count == 8, "%zu rules", l.count);
  struct {
    const char *path;
    bool is_dir, ignored;
  } cases[] = {
      {"spec", true, true},           {"spec", false, false},       {"lib/spec", true, true},
      {"README.md", false, true},     {"lib/README.md", false, true}, {"README.mdx", false, false},
      {"top.txt", false, true},       {"lib/top.txt", false, false}, {"docs/a.png", false, true},
      {"docs/x/a.png", false, false}, {"lib/docs/a.png", false, false}, {"cache/x", false, true},
      {"a/b/cache/c/d", false, true}, {"a/cache", true, false},      {"x.tmp", false, true},
      {"a/keep.tmp", false, false},   {"data/1.csv", false, true},   {"data/12.csv", false, false},
      {"server.lua", false, false},   {"# notes", false, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    CHECK(ignore_list_match(&l, cases[i].path, cases[i].is_dir) == cases[i].ignored, "%s%s: %s", cases[i].path,
          cases[i].is_dir ? "/" : "", cases[i].ignored ? "should be left out" : "should be kept");
  ignore_list_free(&l);
  CHECK(l.count == 0 && !ignore_list_match(&l, "x", false), "an empty list leaves nothing out");
}

int main(void) {
  test_ignore();
  test_crc32();
  test_zip_round_trip();
  test_zip_deflate();
  test_payload();
  test_foreign_runtimes();
  return check_report();
}
