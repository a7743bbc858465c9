/* tar.c - see tar.h. The header layout is POSIX.1-1988 ustar (pax(1),
 * "ustar Interchange Format"): 512 bytes, numbers in octal ASCII. */
#include "core/tar.h"

#include <stdio.h>
#include <string.h>
#include <zlib.h>

enum { BLOCK = 512 };

/* The ustar header's fields: offset and length of each. */
enum {
  NAME_AT = 0, NAME_LEN = 100,
  MODE_AT = 100, UID_AT = 108, GID_AT = 116, ID_LEN = 8,
  SIZE_AT = 124, MTIME_AT = 136, TIME_LEN = 12,
  CHKSUM_AT = 148, CHKSUM_LEN = 8,
  TYPEFLAG_AT = 156,
  MAGIC_AT = 257, VERSION_AT = 263,
  PREFIX_AT = 345, PREFIX_LEN = 155,
};

/* gzip's OS byte (RFC 1952 2.3.1): 3, Unix, whatever OS writes it (zlib's
 * own default depends on the OS it was built for). */
#define GZIP_OS_UNIX 3
/* As core/zip.c: zlib's default level. */
#define GZIP_LEVEL Z_DEFAULT_COMPRESSION
/* deflateInit2's window bits plus 16: a gzip header and trailer. */
#define GZIP_WINDOW (MAX_WBITS + 16)
#define ZLIB_CHUNK ((size_t)1 << 20)

/* value in octal, zero-padded, NUL-terminated, in a field of len bytes;
 * false when it does not fit. */
static bool put_octal(unsigned char *field, size_t len, unsigned long long value) {
  char text[32];
  int n = snprintf(text, sizeof text, "%0*llo", (int)(len - 1), value);
  if (n < 0 || (size_t)n != len - 1) return false;
  memcpy(field, text, len); /* with its NUL */
  return true;
}

/* Split path into ustar's prefix and name: the whole of it in name when it
 * fits, else the longest prefix ending before a '/' that leaves the rest
 * within name. */
static bool put_path(unsigned char *h, const char *path) {
  size_t len = strlen(path);
  if (len == 0 || len > TAR_MAX_PATH) return false;
  if (len <= NAME_LEN) {
    memcpy(h + NAME_AT, path, len);
    return true;
  }
  /* A folder's trailing '/' is part of its name, never the split. */
  for (size_t cut = len - 2; cut > 0; cut--) {
    if (path[cut] != '/') continue;
    if (cut > PREFIX_LEN) continue;
    if (len - cut - 1 > NAME_LEN) return false;
    memcpy(h + PREFIX_AT, path, cut);
    memcpy(h + NAME_AT, path + cut + 1, len - cut - 1);
    return true;
  }
  return false;
}

static bool add_entry(buf *out, const char *path, char type, const void *data, size_t len, unsigned mode,
                      unsigned uid, unsigned gid) {
  unsigned char h[BLOCK] = {0};
  if (!put_path(h, path) || !put_octal(h + MODE_AT, ID_LEN, mode & 07777) || !put_octal(h + UID_AT, ID_LEN, uid) ||
      !put_octal(h + GID_AT, ID_LEN, gid) || !put_octal(h + SIZE_AT, TIME_LEN, len) ||
      !put_octal(h + MTIME_AT, TIME_LEN, 0))
    return false;
  h[TYPEFLAG_AT] = (unsigned char)type;
  memcpy(h + MAGIC_AT, "ustar", 6); /* with its NUL */
  memcpy(h + VERSION_AT, "00", 2);
  /* The checksum counts its own field as spaces; written as six octal
   * digits, a NUL and a space. */
  memset(h + CHKSUM_AT, ' ', CHKSUM_LEN);
  unsigned long sum = 0;
  for (size_t i = 0; i < BLOCK; i++) sum += h[i];
  put_octal(h + CHKSUM_AT, 7, sum);
  h[CHKSUM_AT + 7] = ' ';
  buf_append(out, h, BLOCK);
  if (len) {
    static const unsigned char zeros[BLOCK];
    buf_append(out, data, len);
    if (len % BLOCK) buf_append(out, zeros, BLOCK - len % BLOCK);
  }
  return true;
}

bool tar_add_file(buf *out, const char *path, const void *data, size_t len, unsigned mode, unsigned uid,
                  unsigned gid) {
  return add_entry(out, path, '0', data, len, mode, uid, gid);
}

bool tar_add_dir(buf *out, const char *path, unsigned mode, unsigned uid, unsigned gid) {
  size_t len = strlen(path);
  if (len == 0 || path[len - 1] != '/') return false;
  return add_entry(out, path, '5', NULL, 0, mode, uid, gid);
}

void tar_finish(buf *out) {
  static const unsigned char zeros[2 * BLOCK];
  buf_append(out, zeros, sizeof zeros);
}

bool tar_gzip(const void *data, size_t len, buf *out) {
  z_stream s = {0};
  if (deflateInit2(&s, GZIP_LEVEL, Z_DEFLATED, GZIP_WINDOW, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  gz_header header = {0}; /* mtime 0, no name, no comment */
  header.os = GZIP_OS_UNIX;
  if (deflateSetHeader(&s, &header) != Z_OK) {
    deflateEnd(&s);
    return false;
  }
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
    buf_reserve(out, ZLIB_CHUNK);
    s.next_out = (unsigned char *)out->data + out->len;
    s.avail_out = (uInt)ZLIB_CHUNK;
    rc = deflate(&s, left == 0 ? Z_FINISH : Z_NO_FLUSH);
    out->len = (size_t)((char *)s.next_out - out->data);
    out->data[out->len] = '\0';
  }
  deflateEnd(&s);
  return rc == Z_STREAM_END;
}
