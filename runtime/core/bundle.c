/* bundle.c - see bundle.h for the format. */
#include "core/bundle.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* readlink, for bundle_open_self */

#include "core/exe.h"
#include "core/zip.h"
#include "os/self.h"

#define REBUILD_HINT "; build it again with luamcp build"

static bundle *self_bundle;

/* ---- Where the runtime ends ------------------------------------------ */

/* Plain C stdio, so that the core reads a bundle the same way on every OS
 * (a long offset: an executable is far below 2 GiB). */
static bool read_at(FILE *f, void *into, size_t len, uint64_t offset) {
  return offset <= LONG_MAX && fseek(f, (long)offset, SEEK_SET) == 0 && fread(into, 1, len, f) == len;
}

/* read_at for exe_inspect. */
static bool read_file(void *file, void *into, size_t len, uint64_t offset) { return read_at(file, into, len, offset); }

bool bundle_runtime_size(FILE *f, uint64_t *size, buf *err) {
  exe_info info;
  if (!exe_inspect(read_file, f, &info, err)) return false;
  *size = info.image_size;
  return true;
}

/* ---- Reading a payload ------------------------------------------------ */

static int compare_files(const void *a, const void *b) {
  return strcmp(((const bundle_file *)a)->name, ((const bundle_file *)b)->name);
}

/* Fill the fields of .luamcp/bundle ("key value" lines). */
static void read_metadata(bundle *b, const unsigned char *data, size_t len) {
  struct {
    const char *key;
    char **field;
  } fields[] = {{"name", &b->name}, {"runtime", &b->runtime_version}, {"lua", &b->lua_version}, {"scripts", &b->scripts}};
  const char *p = data ? (const char *)data : "", *end = p + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) nl = end;
    const char *space = memchr(p, ' ', (size_t)(nl - p));
    for (size_t i = 0; space && i < sizeof fields / sizeof fields[0]; i++) {
      if ((size_t)(space - p) == strlen(fields[i].key) && memcmp(p, fields[i].key, (size_t)(space - p)) == 0) {
        free(*fields[i].field);
        *fields[i].field = strndup(space + 1, (size_t)(nl - space - 1));
      }
    }
    p = nl + 1;
  }
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (!*fields[i].field) *fields[i].field = strdup("");
}

/* Check the trailer and the archive of a payload already in b->payload. */
static bool check_payload(bundle *b, buf *err) {
  size_t size = b->payload_size;
  char trailer[BUNDLE_TRAILER_SIZE + 1] = "", again[BUNDLE_TRAILER_SIZE + 1];
  if (size >= BUNDLE_TRAILER_SIZE + ZIP_EOCD_SIZE)
    memcpy(trailer, b->payload + size - BUNDLE_TRAILER_SIZE, BUNDLE_TRAILER_SIZE);
  unsigned format;
  uint64_t stated_size;
  uint32_t stated_crc;
  /* Parsed, then printed again and compared: only the canonical form counts. */
  if (sscanf(trailer, "luamcp-bundle/%u payload=%" SCNu64 " crc32=%" SCNx32, &format, &stated_size, &stated_crc) != 3 ||
      snprintf(again, sizeof again, BUNDLE_TRAILER_FORMAT, format, stated_size, stated_crc) != BUNDLE_TRAILER_SIZE ||
      memcmp(again, trailer, BUNDLE_TRAILER_SIZE) != 0) {
    buf_printf(err, "%s: the bundle appended to this program is truncated or damaged (%zu bytes after the runtime, "
                    "without a luamcp-bundle trailer at the end)" REBUILD_HINT,
               b->path, size);
    return false;
  }
  if (format != BUNDLE_FORMAT) {
    buf_printf(err, "%s: the bundle has format %u; this runtime (format %d) cannot read it" REBUILD_HINT, b->path,
               format, BUNDLE_FORMAT);
    return false;
  }
  if (stated_size != size) {
    buf_printf(err, "%s: the bundle appended to this program is truncated or damaged (%zu bytes after the runtime, "
                    "the trailer says %" PRIu64 ")" REBUILD_HINT,
               b->path, size, stated_size);
    return false;
  }
  b->payload_crc32 = zip_crc32(0, b->payload, size - BUNDLE_TRAILER_SIZE);
  if (b->payload_crc32 != stated_crc) {
    buf_printf(err, "%s: the bundle appended to this program is damaged (its CRC-32 is %08" PRIx32 ", the trailer "
                    "says %08" PRIx32 ")" REBUILD_HINT,
               b->path, b->payload_crc32, stated_crc);
    return false;
  }
  char why[200];
  size_t count;
  zip_entry *entries = zip_read(b->payload, size, b->runtime_size, &count, why, sizeof why);
  if (!entries) {
    buf_printf(err, "%s: the bundle appended to this program is damaged (%s)" REBUILD_HINT, b->path, why);
    return false;
  }
  b->files = calloc(count ? count : 1, sizeof *b->files);
  for (size_t i = 0; i < count; i++) {
    zip_entry *e = &entries[i];
    if (e->method != ZIP_STORED) {
      /* bundle_write_payload never compresses, and files point into the payload. */
      buf_printf(err, "%s: the bundle appended to this program has a compressed entry (%.*s); luamcp writes them "
                      "stored" REBUILD_HINT,
                 b->path, (int)e->name_len, e->name);
      free(entries);
      return false;
    }
    if (e->name_len == strlen(BUNDLE_METADATA_NAME) && memcmp(e->name, BUNDLE_METADATA_NAME, e->name_len) == 0) {
      read_metadata(b, e->data, e->size);
      continue;
    }
    bundle_file *f = &b->files[b->file_count++];
    f->name = strndup(e->name, e->name_len);
    f->data = e->data;
    f->size = e->size;
    f->crc32 = e->crc32;
  }
  free(entries);
  if (!b->name) read_metadata(b, NULL, 0);
  qsort(b->files, b->file_count, sizeof *b->files, compare_files);
  return true;
}

int bundle_open(const char *path, bundle **out, buf *err) {
  *out = NULL;
  /* Closed before returning: nothing started meanwhile inherits it. */
  FILE *f = fopen(path, "rb");
  if (!f) {
    buf_printf(err, "%s: %s", path, strerror(errno));
    return -1;
  }
  bundle *b = calloc(1, sizeof *b);
  b->path = strdup(path);
  int result = -1;
  long end = -1;
  buf why = BUF_INIT;
  if (fseek(f, 0, SEEK_END) != 0 || (end = ftell(f)) < 0 || !bundle_runtime_size(f, &b->runtime_size, &why)) {
    buf_printf(err, "%s: %s", path, why.data ? why.data : strerror(errno));
    goto done;
  }
  uint64_t file_size = (uint64_t)end;
  if (file_size == b->runtime_size) {
    result = 0;
    goto done;
  }
  if (file_size < b->runtime_size || file_size - b->runtime_size > SIZE_MAX / 2) {
    buf_printf(err, "%s: the file is shorter than its own headers say: it was cut short", path);
    goto done;
  }
  b->payload_size = (size_t)(file_size - b->runtime_size);
  b->payload = malloc(b->payload_size);
  if (!b->payload || !read_at(f, b->payload, b->payload_size, b->runtime_size)) {
    buf_printf(err, "%s: cannot read the bundle: %s", path, strerror(errno));
    goto done;
  }
  if (check_payload(b, err)) result = 1;
done:
  buf_free(&why);
  fclose(f);
  if (result == 1) *out = b;
  else bundle_free(b);
  return result;
}

int bundle_open_self(const char *argv0, buf *err) {
  char self[PATH_MAX];
  if (!os_self_exe(argv0, self, sizeof self)) return 0;
  return bundle_open(self, &self_bundle, err);
}

const bundle *bundle_self(void) { return self_bundle; }

void bundle_free(bundle *b) {
  if (!b) return;
  for (size_t i = 0; i < b->file_count; i++) free(b->files[i].name);
  free(b->files);
  free(b->payload);
  free(b->path);
  free(b->name);
  free(b->runtime_version);
  free(b->lua_version);
  free(b->scripts);
  free(b);
}

const bundle_file *bundle_find(const bundle *b, const char *name) {
  bundle_file key = {.name = (char *)name};
  return bsearch(&key, b->files, b->file_count, sizeof *b->files, compare_files);
}

/* ---- Writing a payload ------------------------------------------------ */

bool bundle_write_payload(buf *out, const bundle_input *files, size_t count, const char *metadata, buf *err) {
  size_t start = out->len;
  zip_writer z;
  /* Stored: start-up then serves every file in place from the payload, with
   * nothing to inflate; deflate would save little next to the runtime. */
  zip_writer_init(&z, out, 0, ZIP_STORED); /* out's first byte is the file's first byte */
  zip_add(&z, BUNDLE_METADATA_NAME, metadata, strlen(metadata), 0644);
  for (size_t i = 0; i < count; i++) zip_add(&z, files[i].name, files[i].data, files[i].size, 0644);
  bool ok = zip_finish(&z, BUNDLE_TRAILER_SIZE);
  zip_writer_free(&z);
  if (!ok) {
    buf_printf(err, "the bundle is too large for a ZIP without ZIP64 (4 GiB, %u files)", ZIP_MAX_ENTRIES - 1);
    return false;
  }
  uint64_t payload_size = out->len - start + BUNDLE_TRAILER_SIZE;
  uint32_t crc = zip_crc32(0, out->data + start, out->len - start);
  char trailer[BUNDLE_TRAILER_SIZE + 1];
  snprintf(trailer, sizeof trailer, BUNDLE_TRAILER_FORMAT, (unsigned)BUNDLE_FORMAT, payload_size, crc);
  buf_append(out, trailer, BUNDLE_TRAILER_SIZE);
  return true;
}
