/* fuzz_bundle.c - libFuzzer target: the bundle reader (ELF or PE extent, trailer,
 * metadata) and the ZIP reader and inflater under it. The first byte picks
 * the mode:
 *
 *   0  the input is the whole executable file, read with bundle_open, and
 *      a ZIP archive, read with zip_read and every entry zip_extract'ed
 *   1  the rest is files ("name\0data\0" ...), then "\xff\xff" and
 *      corruptions (2-byte offset, 1-byte xor): a payload is written, the
 *      corruptions applied, and the trailer fixed up so the damage reaches
 *      the ZIP reader behind the trailer's checks
 *   2  the same files, undamaged: what bundle_open reads back must be
 *      exactly what was written
 *   3  the same files and corruptions, written as a deflated archive (what
 *      a .mcpb is): undamaged, zip_extract gives back exactly the files;
 *      damaged, every entry zip_read accepts extracts to its size
 *
 * In modes 1 and 2 the file is a 64-byte ELF header (the "runtime") and
 * the payload. */
#define _GNU_SOURCE
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/bundle.h"
#include "core/zip.h"

enum { MAX_FILES = 8 };

static bundle *open_file(const void *bytes, size_t len, int *rc) {
  int fd = memfd_create("bundle", MFD_CLOEXEC);
  if (fd < 0) __builtin_trap();
  if (len && write(fd, bytes, len) != (ssize_t)len) __builtin_trap();
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  bundle *b = NULL;
  buf err = BUF_INIT;
  *rc = bundle_open(path, &b, &err);
  if (*rc < 0 && err.len == 0) __builtin_trap(); /* a failure always says why */
  buf_free(&err);
  close(fd);
  return b;
}

/* Every entry lies inside the archive, and one zip_read accepted extracts
 * to its stated size: zip_read has inflated it once already. */
static void check_entries(const uint8_t *data, size_t size, const zip_entry *entries, size_t count) {
  for (size_t i = 0; entries && i < count; i++) {
    const zip_entry *e = &entries[i];
    if (e->data < data || e->stored_size > size || e->data + e->stored_size > data + size) __builtin_trap();
    buf out = BUF_INIT;
    char why[200];
    if (!zip_extract(e, &out, why, sizeof why) || out.len != e->size) __builtin_trap();
    buf_free(&out);
  }
}

static void check_files(const bundle *b) {
  for (size_t i = 0; i < b->file_count; i++) {
    const bundle_file *f = &b->files[i];
    /* Every file lies inside the payload, and is found by its name. */
    if (f->data < b->payload || f->size > b->payload_size || f->data + f->size > b->payload + b->payload_size)
      __builtin_trap();
    if (bundle_find(b, f->name) == NULL) __builtin_trap();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int mode = data[0] % 4;
  data++;
  size--;
  int rc;
  if (mode == 0) {
    bundle *b = open_file(data, size, &rc);
    if (b) check_files(b);
    bundle_free(b);
    /* The ZIP reader alone, on the same bytes. */
    size_t count;
    char why[200];
    zip_entry *entries = zip_read(data, size, 0, &count, why, sizeof why);
    check_entries(data, size, entries, count);
    free(entries);
    return 0;
  }

  /* Files, then corruptions. */
  bundle_input files[MAX_FILES];
  size_t n = 0;
  const char *p = (const char *)data, *end = p + size;
  const uint8_t *damage = NULL;
  size_t damage_len = 0;
  char names[MAX_FILES][64];
  while (p < end && n < MAX_FILES) {
    if (end - p >= 2 && (uint8_t)p[0] == 0xff && (uint8_t)p[1] == 0xff) {
      damage = (const uint8_t *)p + 2;
      damage_len = (size_t)(end - p - 2);
      break;
    }
    const char *z = memchr(p, 0, (size_t)(end - p));
    if (!z) break;
    snprintf(names[n], sizeof names[n], "%.*s", (int)(z - p), p);
    p = z + 1;
    const char *z2 = memchr(p, 0, (size_t)(end - p));
    size_t len = z2 ? (size_t)(z2 - p) : (size_t)(end - p);
    /* Distinct, non-empty names: bundle_write_payload's callers see to that. */
    bool dup = names[n][0] == 0 || strcmp(names[n], BUNDLE_METADATA_NAME) == 0;
    for (size_t i = 0; i < n && !dup; i++) dup = strcmp(names[i], names[n]) == 0;
    if (!dup) {
      files[n] = (bundle_input){.name = names[n], .data = p, .size = len};
      n++;
    }
    p += len + (z2 != NULL);
  }
  if (mode == 3) {
    buf archive = BUF_INIT;
    zip_writer z;
    zip_writer_init(&z, &archive, 0, ZIP_DEFLATED);
    for (size_t i = 0; i < n; i++) zip_add(&z, files[i].name, files[i].data, files[i].size, 0644);
    if (!zip_finish(&z, 0)) __builtin_trap();
    zip_writer_free(&z);
    for (size_t i = 0; i + 3 <= damage_len && archive.len; i += 3)
      archive.data[(size_t)(damage[i] | damage[i + 1] << 8) % archive.len] ^= (char)damage[i + 2];
    size_t count;
    char why[200];
    const uint8_t *bytes = (const uint8_t *)archive.data;
    zip_entry *entries = zip_read(bytes, archive.len, 0, &count, why, sizeof why);
    check_entries(bytes, archive.len, entries, count);
    if (damage_len < 3) {
      /* Undamaged: read back exactly, in the order written. */
      if (!entries || count != n) __builtin_trap();
      for (size_t i = 0; i < n; i++) {
        buf out = BUF_INIT;
        if (!zip_extract(&entries[i], &out, why, sizeof why) || out.len != files[i].size ||
            memcmp(out.data ? out.data : "", files[i].data, out.len) != 0 || entries[i].name_len != strlen(files[i].name))
          __builtin_trap();
        buf_free(&out);
      }
    }
    free(entries);
    buf_free(&archive);
    return 0;
  }

  /* The file: an ELF header (the "runtime"), then the payload, whose ZIP
   * offsets count from the file's first byte. */
  Elf64_Ehdr eh = {0};
  memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ehsize = sizeof eh;
  buf file = BUF_INIT, err = BUF_INIT;
  buf_append(&file, &eh, sizeof eh);
  if (!bundle_write_payload(&file, files, n, "format 1\nname fuzz\nscripts main.lua\n", &err)) __builtin_trap();
  size_t body = file.len - BUNDLE_TRAILER_SIZE; /* where the trailer starts */
  if (mode == 1) {
    for (size_t i = 0; i + 3 <= damage_len; i += 3) {
      size_t at = sizeof eh + (size_t)(damage[i] | damage[i + 1] << 8) % (body - sizeof eh);
      file.data[at] ^= (char)damage[i + 2];
    }
    /* A trailer that matches the damaged payload, so the damage gets past
     * the trailer's checks to the ZIP reader. */
    char trailer[BUNDLE_TRAILER_SIZE + 1];
    snprintf(trailer, sizeof trailer, BUNDLE_TRAILER_FORMAT, (unsigned)BUNDLE_FORMAT, (uint64_t)(file.len - sizeof eh),
             zip_crc32(0, file.data + sizeof eh, body - sizeof eh));
    memcpy(file.data + body, trailer, BUNDLE_TRAILER_SIZE);
  }
  bundle *b = open_file(file.data, file.len, &rc);
  if (b) check_files(b);
  if (mode == 2) {
    /* Undamaged: read back exactly. */
    if (rc != 1 || !b || b->file_count != n) __builtin_trap();
    for (size_t i = 0; i < n; i++) {
      const bundle_file *f = bundle_find(b, files[i].name);
      if (!f || f->size != files[i].size || memcmp(f->data, files[i].data, f->size) != 0) __builtin_trap();
    }
    if (strcmp(b->name, "fuzz") != 0) __builtin_trap();
  }
  bundle_free(b);
  buf_free(&file);
  buf_free(&err);
  return 0;
}
