/* bundle.c - see bundle.h for the format. */
#include "core/bundle.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/zip.h"
#include "os/self.h"

#define REBUILD_HINT "; build it again with luamcp build"

static bundle *self_bundle;

/* ---- Where the runtime ends ------------------------------------------ */

static bool read_at(int fd, void *into, size_t len, uint64_t offset) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, (char *)into + done, len - done, (off_t)(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += (size_t)n;
  }
  return true;
}

static void extend(uint64_t *end, uint64_t offset, uint64_t size) {
  if (offset + size > *end) *end = offset + size;
}

/* The ELF headers are read as 64-bit or 32-bit, in this machine's byte
 * order: the file is this runtime, or another build of it for the same
 * machine. */
#define ELF_EXTENT(Ehdr, Phdr, Shdr)                                                                  \
  do {                                                                                                \
    Ehdr eh;                                                                                          \
    if (!read_at(fd, &eh, sizeof eh, 0)) goto not_elf;                                                \
    uint64_t end = eh.e_ehsize;                                                                       \
    extend(&end, eh.e_phoff, (uint64_t)eh.e_phnum * eh.e_phentsize);                                  \
    for (unsigned i = 0; i < eh.e_phnum && eh.e_phentsize == sizeof(Phdr); i++) {                     \
      Phdr ph;                                                                                        \
      if (!read_at(fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * sizeof ph)) goto not_elf;          \
      extend(&end, ph.p_offset, ph.p_filesz);                                                         \
    }                                                                                                 \
    uint64_t sections = eh.e_shnum;                                                                   \
    if (eh.e_shoff && eh.e_shentsize == sizeof(Shdr)) {                                               \
      Shdr sh;                                                                                        \
      /* More than SHN_LORESERVE sections: the count is in section 0's size. */                      \
      if (!sections && read_at(fd, &sh, sizeof sh, eh.e_shoff)) sections = sh.sh_size;                \
      extend(&end, eh.e_shoff, sections * sizeof sh);                                                 \
      for (uint64_t i = 0; i < sections; i++) {                                                       \
        if (!read_at(fd, &sh, sizeof sh, eh.e_shoff + i * sizeof sh)) goto not_elf;                   \
        if (sh.sh_type != SHT_NOBITS) extend(&end, sh.sh_offset, sh.sh_size);                         \
      }                                                                                               \
    }                                                                                                 \
    *size = end;                                                                                      \
  } while (0)

bool bundle_runtime_size(int fd, uint64_t *size, buf *err) {
  unsigned char ident[EI_NIDENT];
  if (!read_at(fd, ident, sizeof ident, 0) || memcmp(ident, ELFMAG, SELFMAG) != 0) goto not_elf;
  const union {
    uint16_t word;
    unsigned char first;
  } probe = {1};
  if (ident[EI_DATA] != (probe.first ? ELFDATA2LSB : ELFDATA2MSB)) goto not_elf;
  if (ident[EI_CLASS] == ELFCLASS64) ELF_EXTENT(Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr);
  else if (ident[EI_CLASS] == ELFCLASS32) ELF_EXTENT(Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr);
  else goto not_elf;
  return true;
not_elf:
  buf_puts(err, "not an ELF executable for this machine");
  return false;
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
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    buf_printf(err, "%s: %s", path, strerror(errno));
    return -1;
  }
  bundle *b = calloc(1, sizeof *b);
  b->path = strdup(path);
  int result = -1;
  struct stat st;
  buf why = BUF_INIT;
  if (fstat(fd, &st) != 0 || !bundle_runtime_size(fd, &b->runtime_size, &why)) {
    buf_printf(err, "%s: %s", path, why.data ? why.data : strerror(errno));
    goto done;
  }
  if ((uint64_t)st.st_size == b->runtime_size) {
    result = 0;
    goto done;
  }
  if ((uint64_t)st.st_size < b->runtime_size || (uint64_t)st.st_size - b->runtime_size > SIZE_MAX / 2) {
    buf_printf(err, "%s: the file is shorter than its own ELF headers say: it was cut short", path);
    goto done;
  }
  b->payload_size = (size_t)((uint64_t)st.st_size - b->runtime_size);
  b->payload = malloc(b->payload_size);
  if (!b->payload || !read_at(fd, b->payload, b->payload_size, b->runtime_size)) {
    buf_printf(err, "%s: cannot read the bundle: %s", path, strerror(errno));
    goto done;
  }
  if (check_payload(b, err)) result = 1;
done:
  buf_free(&why);
  close(fd);
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
