/* zip.c - see zip.h. Field layouts follow APPNOTE.TXT sections 4.3.7
 * (local file header), 4.3.12 (central directory header) and 4.3.16 (end of
 * central directory record); every number is little-endian. Deflate is
 * zlib's, as raw deflate (RFC 1951, no zlib header), which is what method 8
 * holds (APPNOTE 4.4.5). */
#include "core/zip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum {
  LOCAL_HEADER_SIG = 0x04034b50,
  CENTRAL_HEADER_SIG = 0x02014b50,
  END_RECORD_SIG = 0x06054b50,
  LOCAL_HEADER_SIZE = 30,
  CENTRAL_HEADER_SIZE = 46,
  VERSION_NEEDED = 20,             /* 2.0: deflate (APPNOTE 4.4.3.2), and what unzip expects of stored files */
  VERSION_MADE_BY = (3 << 8) | 20, /* host 3 = Unix, so the external attributes carry the mode */
  FLAG_UTF8_NAMES = 1 << 11,
  FLAG_ENCRYPTED = 1 << 0,
  DOS_DATE_1980_01_01 = (0 << 9) | (1 << 5) | 1,
  DOS_TIME_MIDNIGHT = 0,
  UNIX_REGULAR_FILE = 0100000,
};

/* zlib's default, level 6: on a built program level 9 saves 0.3% more and
 * takes three times as long. */
#define DEFLATE_LEVEL Z_DEFAULT_COMPRESSION
/* Raw deflate: negative window bits leave out the zlib header and trailer. */
#define RAW_DEFLATE_WINDOW (-MAX_WBITS)
/* zlib counts in uInt; larger inputs are fed in pieces of this size. */
#define ZLIB_CHUNK ((size_t)1 << 20)

uint32_t zip_crc32(uint32_t crc, const void *data, size_t len) {
  return (uint32_t)crc32_z(crc, data, len);
}

static void put16(buf *b, unsigned v) {
  unsigned char bytes[2] = {v & 0xFF, (v >> 8) & 0xFF};
  buf_append(b, bytes, 2);
}

static void put32(buf *b, uint32_t v) {
  unsigned char bytes[4] = {v & 0xFF, (v >> 8) & 0xFF, (v >> 16) & 0xFF, (v >> 24) & 0xFF};
  buf_append(b, bytes, 4);
}

static unsigned get16(const unsigned char *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }

static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void zip_writer_init(zip_writer *z, buf *out, uint64_t base, zip_method method) {
  memset(z, 0, sizeof *z);
  z->out = out;
  z->base = base;
  z->method = method;
}

/* Deflate data into packed; false when zlib fails (out of memory). */
static bool deflate_bytes(const void *data, size_t len, buf *packed) {
  z_stream s = {0};
  if (deflateInit2(&s, DEFLATE_LEVEL, Z_DEFLATED, RAW_DEFLATE_WINDOW, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  const unsigned char *in = data;
  size_t left = len;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (s.avail_in == 0 && left > 0) {
      size_t piece = left < ZLIB_CHUNK ? left : ZLIB_CHUNK;
      s.next_in = (unsigned char *)in;
      s.avail_in = (uInt)piece;
      in += piece;
      left -= piece;
    }
    buf_reserve(packed, ZLIB_CHUNK);
    s.next_out = (unsigned char *)packed->data + packed->len;
    s.avail_out = (uInt)ZLIB_CHUNK;
    rc = deflate(&s, left == 0 ? Z_FINISH : Z_NO_FLUSH);
    packed->len = (size_t)((char *)s.next_out - packed->data);
    packed->data[packed->len] = '\0';
  }
  deflateEnd(&s);
  return rc == Z_STREAM_END;
}

void zip_add(zip_writer *z, const char *name, const void *data, size_t len, unsigned mode) {
  size_t name_len = strlen(name);
  uint64_t offset = z->base + z->out->len;
  if (len > ZIP_MAX_SIZE || offset > ZIP_MAX_SIZE || name_len > 0xFFFF || z->count == ZIP_MAX_ENTRIES) {
    z->too_big = true;
    return;
  }
  uint32_t crc = zip_crc32(0, data, len);
  zip_method method = ZIP_STORED;
  buf packed = BUF_INIT;
  if (z->method == ZIP_DEFLATED && deflate_bytes(data, len, &packed) && packed.len < len) {
    method = ZIP_DEFLATED; /* flag bits 1-2 left 0: "normal" compression (APPNOTE 4.4.4) */
    data = packed.data;
  }
  size_t stored_size = method == ZIP_DEFLATED ? packed.len : len;
  /* The fields the local and the central header share, in the same order. */
  buf common = BUF_INIT;
  put16(&common, VERSION_NEEDED);
  put16(&common, FLAG_UTF8_NAMES);
  put16(&common, method);
  put16(&common, DOS_TIME_MIDNIGHT);
  put16(&common, DOS_DATE_1980_01_01);
  put32(&common, crc);
  put32(&common, (uint32_t)stored_size);
  put32(&common, (uint32_t)len);
  put16(&common, (unsigned)name_len);
  put16(&common, 0); /* extra field length */

  put32(z->out, LOCAL_HEADER_SIG);
  buf_append(z->out, common.data, common.len);
  buf_append(z->out, name, name_len);
  buf_append(z->out, data, stored_size);
  buf_free(&packed);

  put32(&z->central, CENTRAL_HEADER_SIG);
  put16(&z->central, VERSION_MADE_BY);
  buf_append(&z->central, common.data, common.len);
  put16(&z->central, 0); /* comment length */
  put16(&z->central, 0); /* disk number */
  put16(&z->central, 0); /* internal attributes */
  put32(&z->central, (uint32_t)(UNIX_REGULAR_FILE | (mode & 07777)) << 16);
  put32(&z->central, (uint32_t)offset);
  buf_append(&z->central, name, name_len);
  buf_free(&common);
  z->count++;
}

bool zip_finish(zip_writer *z, size_t comment_len) {
  uint64_t central_offset = z->base + z->out->len;
  if (z->too_big || central_offset + z->central.len > ZIP_MAX_SIZE || comment_len > 0xFFFF) return false;
  buf_append(z->out, z->central.data ? z->central.data : "", z->central.len);
  put32(z->out, END_RECORD_SIG);
  put16(z->out, 0); /* this disk */
  put16(z->out, 0); /* the disk the central directory starts on */
  put16(z->out, (unsigned)z->count);
  put16(z->out, (unsigned)z->count);
  put32(z->out, (uint32_t)z->central.len);
  put32(z->out, (uint32_t)central_offset);
  put16(z->out, (unsigned)comment_len);
  return true;
}

void zip_writer_free(zip_writer *z) { buf_free(&z->central); }

/* ---- Reading ---------------------------------------------------------- */

/* Inflate a deflated entry piece by piece, appending to out when it is not
 * NULL, and check that it gives exactly e->size bytes with e->crc32. The
 * pieces go through a fixed window, so zip_read checks an entry (however
 * far it inflates) without holding it. */
static bool inflate_entry(const zip_entry *e, buf *out, char *err, size_t err_size) {
  z_stream s = {0};
  if (inflateInit2(&s, RAW_DEFLATE_WINDOW) != Z_OK) {
    snprintf(err, err_size, "%.*s: cannot start zlib", (int)e->name_len, e->name);
    return false;
  }
  unsigned char window[65536];
  const unsigned char *in = e->data;
  size_t left = e->stored_size, produced = 0;
  uint32_t crc = 0;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (s.avail_in == 0 && left > 0) {
      size_t piece = left < ZLIB_CHUNK ? left : ZLIB_CHUNK;
      s.next_in = (unsigned char *)in;
      s.avail_in = (uInt)piece;
      in += piece;
      left -= piece;
    }
    s.next_out = window;
    s.avail_out = sizeof window;
    rc = inflate(&s, Z_NO_FLUSH);
    size_t n = sizeof window - s.avail_out;
    /* A stream that goes on past the stated size is refused as soon as it
     * does, not after inflating all of it. */
    if (n > e->size - produced) break;
    crc = zip_crc32(crc, window, n);
    if (out) buf_append(out, window, n);
    produced += n;
  }
  bool ended = rc == Z_STREAM_END && s.avail_in == 0 && left == 0;
  inflateEnd(&s);
  if (!ended || produced != e->size) {
    snprintf(err, err_size, "%.*s: its deflated bytes do not inflate to its %zu bytes", (int)e->name_len, e->name,
             e->size);
    return false;
  }
  if (crc != e->crc32) {
    snprintf(err, err_size, "%.*s: CRC-32 mismatch", (int)e->name_len, e->name);
    return false;
  }
  return true;
}

bool zip_extract(const zip_entry *e, buf *out, char *err, size_t err_size) {
  if (e->method == ZIP_DEFLATED) return inflate_entry(e, out, err, err_size);
  if (zip_crc32(0, e->data, e->size) != e->crc32) {
    snprintf(err, err_size, "%.*s: CRC-32 mismatch", (int)e->name_len, e->name);
    return false;
  }
  buf_append(out, e->data, e->size);
  return true;
}

#define FAIL(...)                              \
  do {                                         \
    snprintf(err, err_size, __VA_ARGS__);      \
    free(entries);                             \
    return NULL;                               \
  } while (0)

zip_entry *zip_read(const unsigned char *data, size_t len, uint64_t base, size_t *count, char *err,
                    size_t err_size) {
  zip_entry *entries = NULL;
  /* The end record is the last one whose comment reaches exactly the end. */
  size_t end = SIZE_MAX;
  for (size_t pos = len >= ZIP_EOCD_SIZE ? len - ZIP_EOCD_SIZE + 1 : 0; pos-- > 0;) {
    if (len - pos > ZIP_EOCD_SIZE + 0xFFFF) break;
    if (get32(data + pos) == END_RECORD_SIG && pos + ZIP_EOCD_SIZE + get16(data + pos + 20) == len) {
      end = pos;
      break;
    }
  }
  if (end == SIZE_MAX) FAIL("no ZIP end record");
  size_t n = get16(data + end + 10);
  uint64_t central_size = get32(data + end + 12), central_at = get32(data + end + 16);
  if (get16(data + end + 4) != 0 || get16(data + end + 6) != 0 || get16(data + end + 8) != n)
    FAIL("a ZIP split over several disks");
  if (central_at < base || central_at - base + central_size != end) FAIL("the ZIP central directory is out of place");
  size_t central = (size_t)(central_at - base);
  entries = calloc(n ? n : 1, sizeof *entries);
  size_t pos = central;
  for (size_t i = 0; i < n; i++) {
    const unsigned char *h = data + pos;
    if (pos + CENTRAL_HEADER_SIZE > end || get32(h) != CENTRAL_HEADER_SIG) FAIL("entry %zu: bad central header", i + 1);
    size_t name_len = get16(h + 28), extra_len = get16(h + 30), comment_len = get16(h + 32);
    if (pos + CENTRAL_HEADER_SIZE + name_len + extra_len + comment_len > end) FAIL("entry %zu: header too long", i + 1);
    zip_entry *e = &entries[i];
    e->name = (const char *)h + CENTRAL_HEADER_SIZE;
    e->name_len = name_len;
    e->crc32 = get32(h + 16);
    e->stored_size = get32(h + 20);
    e->size = get32(h + 24);
    e->mode = (get16(h + 4) >> 8) == 3 ? (get32(h + 38) >> 16) & 07777 : 0;
    unsigned method = get16(h + 10);
    if (get16(h + 8) & FLAG_ENCRYPTED) FAIL("%.*s: encrypted", (int)name_len, e->name);
    if (method != ZIP_STORED && method != ZIP_DEFLATED)
      FAIL("%.*s: compressed with method %u (only stored and deflated entries are read)", (int)name_len, e->name,
           method);
    e->method = (zip_method)method;
    if (method == ZIP_STORED && e->stored_size != e->size)
      FAIL("%.*s: a stored entry whose two sizes differ", (int)name_len, e->name);
    uint64_t local_at = get32(h + 42);
    if (local_at < base || local_at - base + LOCAL_HEADER_SIZE > central) FAIL("%.*s: bad offset", (int)name_len, e->name);
    const unsigned char *l = data + (local_at - base);
    size_t local_name = get16(l + 26), local_extra = get16(l + 28);
    size_t data_at = (size_t)(local_at - base) + LOCAL_HEADER_SIZE + local_name + local_extra;
    if (get32(l) != LOCAL_HEADER_SIG || local_name != name_len || memcmp(l + LOCAL_HEADER_SIZE, e->name, name_len) != 0 ||
        get16(l + 8) != method || data_at > central || e->stored_size > central - data_at)
      FAIL("%.*s: local header does not match the central directory", (int)name_len, e->name);
    e->data = data + data_at;
    if (method == ZIP_STORED && zip_crc32(0, e->data, e->size) != e->crc32)
      FAIL("%.*s: CRC-32 mismatch", (int)name_len, e->name);
    if (method == ZIP_DEFLATED && !inflate_entry(e, NULL, err, err_size)) {
      free(entries);
      return NULL;
    }
    pos += CENTRAL_HEADER_SIZE + name_len + extra_len + comment_len;
  }
  if (pos != end) FAIL("the ZIP central directory has bytes after its last entry");
  *count = n;
  return entries;
}
