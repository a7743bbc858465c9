/*
 * zip.h - the subset of ZIP (APPNOTE.TXT 6.3) luamcp writes and reads:
 * entries stored (method 0) or deflated (method 8, by zlib), no ZIP64, no
 * encryption, no data descriptors. That is enough for the payload of a
 * built executable (core/bundle.h, stored: start-up reads its files in
 * place) and for an MCP Bundle (.mcpb, deflated: it is downloaded). Plain
 * bytes and zlib only: no Lua, no libuv.
 *
 * Archives are written with a fixed timestamp (1980-01-01 00:00) and a
 * fixed compression level, so the same input gives the same bytes (with
 * the same zlib).
 */
#ifndef LUAMCP_ZIP_H
#define LUAMCP_ZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* ZIP without ZIP64 stores sizes and offsets in 32 bits and counts in 16. */
#define ZIP_MAX_SIZE 0xFFFFFFFFu
#define ZIP_MAX_ENTRIES 0xFFFFu
/* The end of central directory record without its comment. */
#define ZIP_EOCD_SIZE 22

/* How an entry's bytes are kept (APPNOTE 4.4.5); the values are ZIP's. */
typedef enum zip_method { ZIP_STORED = 0, ZIP_DEFLATED = 8 } zip_method;

/* CRC-32 (ISO 3309, the one ZIP and gzip use; zlib computes it). Start
 * with crc = 0 and pass the previous result to continue over more bytes. */
uint32_t zip_crc32(uint32_t crc, const void *data, size_t len);

/* An archive being written into a caller's buf. Owner: the caller, on its
 * stack; zip_writer_free releases the central directory it collects.
 *
 * base is the file offset at which out's first byte will sit in the final
 * file. Offsets in the archive count from the start of the file, so an
 * archive appended to an executable is read by unzip without complaint. */
typedef struct zip_writer {
  buf *out;
  uint64_t base;
  zip_method method; /* what zip_add tries for every entry */
  buf central; /* central directory records, written out by zip_finish */
  size_t count;
  bool too_big; /* an entry or offset did not fit ZIP's 32-bit fields */
} zip_writer;

void zip_writer_init(zip_writer *z, buf *out, uint64_t base, zip_method method);
/* Add one entry. mode is the Unix permission bits (0644, 0755); names use
 * '/' between folders. A writer made with ZIP_DEFLATED stores an entry
 * that deflate does not make smaller (a PNG, a few bytes), as zip does. */
void zip_add(zip_writer *z, const char *name, const void *data, size_t len, unsigned mode);
/* Write the central directory and the end record, whose comment length
 * says comment_len: the caller appends exactly that many comment bytes next.
 * Returns false when the archive is beyond ZIP's limits (no ZIP64). */
bool zip_finish(zip_writer *z, size_t comment_len);
void zip_writer_free(zip_writer *z);

/* One entry of an archive read with zip_read. name and data point into the
 * archive's bytes; name is not NUL-terminated. A stored entry's bytes are
 * data[0..size); a deflated one's are what zip_extract makes of
 * data[0..stored_size). */
typedef struct zip_entry {
  const char *name;
  size_t name_len;
  zip_method method;
  const unsigned char *data;
  size_t stored_size; /* bytes at data: the compressed size */
  size_t size;        /* the entry's own size */
  uint32_t crc32;
  unsigned mode; /* Unix permission bits, 0 when not recorded */
} zip_entry;

/* Read the archive in data[0..len), which sits at file offset base, with
 * its end record (comment included) at the very end. Checks every header,
 * bound and CRC (inflating deflated entries to check theirs, without
 * keeping the bytes). Returns a malloc'ed array of *count entries (free it;
 * the entries point into data), or NULL with the reason in err. */
zip_entry *zip_read(const unsigned char *data, size_t len, uint64_t base, size_t *count, char *err, size_t err_size);
/* Append an entry of zip_read's array, inflated if need be, to out.
 * Returns false with the reason in err when its bytes do not give back its
 * size and CRC-32 (zip_read has checked that already). */
bool zip_extract(const zip_entry *e, buf *out, char *err, size_t err_size);

#endif
