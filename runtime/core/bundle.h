/*
 * bundle.h - scripts carried inside an executable: the payload `luamcp
 * build` appends to a copy of the runtime, and how a built program finds and
 * checks it at start-up. Plain bytes only: no Lua, no libuv (the Lua side is
 * in vm.c and lua_bundle.c, the build command in build.c).
 *
 * A built program, byte by byte:
 *
 *   0             the luamcp runtime: an unchanged copy of the executable
 *                 that built it (/proc/self/exe), or of the runtime for
 *                 the platform asked for (--runtime, --target): ELF on
 *                 Linux, PE on Windows
 *   runtime_size  where that executable ends, computed from its own
 *                 headers (exe.h: ELF program and section headers and every
 *                 section; PE headers, sections, symbol and certificate
 *                 tables): a program whose file is longer than that
 *                 carries a payload (for PE, the "overlay" the Windows
 *                 loader leaves alone)
 *   ...           the payload: a ZIP archive of stored (uncompressed)
 *                 entries, then its central directory, then its end record,
 *                 whose comment is the trailer
 *   size - 52     the trailer, the last BUNDLE_TRAILER_SIZE bytes of the file
 *
 * The trailer is fixed-width ASCII, so that `unzip -l` and `tail -c 52`
 * show it legibly (the ZIP records around it are little-endian binary):
 *
 *   luamcp-bundle/1 payload=000000012345 crc32=1a2b3c4d\n
 *
 *   /1        the format version, BUNDLE_FORMAT; other versions are refused
 *   payload   the payload's length in bytes, trailer included: it must end
 *             the file and start exactly at runtime_size
 *   crc32     CRC-32 of the payload without the trailer (every local header,
 *             file, central directory record and the end record)
 *
 * Each entry also has its own CRC-32, as ZIP requires. ZIP offsets count
 * from the start of the file, so `unzip -l OUT` and `unzip -t OUT` read a
 * built program as they would any self-extracting archive.
 *
 * Entries, in this order:
 *
 *   .luamcp/bundle   "key value" lines: format (1), runtime (the luamcp
 *                    version that built it), lua (its Lua release), name
 *                    (the folder it was built from: the default server
 *                    name), scripts (source, bytecode or bytecode-stripped)
 *   NAME ...         every file of the folder, by its path relative to the
 *                    folder with '/' between parts, in strcmp order: *.lua
 *                    files as source or as Lua bytecode (the same names
 *                    either way; Lua tells them apart by their first byte),
 *                    anything else as is, for mcp.bundle.read
 *   .luamcp/lua/...  the pure-Lua modules the scripts loaded through
 *                    package.path when built (penlight's pl/stringx.lua),
 *                    found by require after the folder and the built-in
 *                    library, as package.path is under luamcp run; every
 *                    entry, these too, is in strcmp order
 *
 * A payload that is cut short, extended, or has any byte changed is refused
 * at start-up with a message saying so; the runtime never runs part of a
 * bundle.
 */
#ifndef LUAMCP_BUNDLE_H
#define LUAMCP_BUNDLE_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/buf.h"

#define BUNDLE_FORMAT 1
#define BUNDLE_TRAILER_SIZE 52
/* The trailer: the payload's last BUNDLE_TRAILER_SIZE bytes (format, payload size, CRC-32 of what precedes it). */
#define BUNDLE_TRAILER_FORMAT "luamcp-bundle/%u payload=%012" PRIu64 " crc32=%08" PRIx32 "\n"
#define BUNDLE_METADATA_NAME ".luamcp/bundle"
/* Where the pure-Lua modules the scripts loaded from package.path go:
 * module a.b as BUNDLE_LUA_DEPS_DIR "a/b.lua" (or "a/b/init.lua"). Hidden
 * (a name starting with '.'), so no file of the folder and no
 * mcp.bundle.read name can be one. */
#define BUNDLE_LUA_DEPS_DIR ".luamcp/lua/"

/* One file of the bundle. name is NUL-terminated and owned by the bundle;
 * data points into the bundle's payload. */
typedef struct bundle_file {
  char *name;
  const unsigned char *data;
  size_t size;
  uint32_t crc32;
} bundle_file;

/* A payload read from an executable and checked. Owner: whoever opened it
 * (bundle_open's caller; the process for bundle_open_self, until exit);
 * freed with bundle_free. Nothing in it changes after opening. */
typedef struct bundle {
  char *path;             /* the executable it was read from, for messages */
  uint64_t runtime_size;  /* bytes before the payload */
  unsigned char *payload; /* the whole payload, trailer included */
  size_t payload_size;
  uint32_t payload_crc32;
  bundle_file *files;     /* sorted by name; the metadata entry is not one */
  size_t file_count;
  /* From .luamcp/bundle; "" when missing. */
  char *name;
  char *runtime_version;
  char *lua_version;
  char *scripts;
} bundle;

/* Open the payload appended to the executable at path. Returns 1 with
 * *out set, 0 when the file carries no payload, or -1 with the reason in
 * err when the payload is damaged, truncated or cannot be read. */
int bundle_open(const char *path, bundle **out, buf *err);
/* The same for this process's own executable (os/self.h: argv0 is its
 * fallback); what it found is kept for bundle_self. */
int bundle_open_self(const char *argv0, buf *err);
/* The bundle this process carries, or NULL for a plain luamcp. */
const bundle *bundle_self(void);
void bundle_free(bundle *b);

/* The file called name ("tools.lua", "lib/util.lua"), or NULL. */
const bundle_file *bundle_find(const bundle *b, const char *name);

/* How many leading bytes of the open file f are the executable itself
 * (see above). Returns false with the reason in err when f is neither ELF
 * nor PE. */
bool bundle_runtime_size(FILE *f, uint64_t *size, buf *err);

/* One file to put in a payload; the caller owns the bytes. */
typedef struct bundle_input {
  const char *name;
  const void *data;
  size_t size;
} bundle_input;

/* Append a payload to out, which already holds the runtime's bytes: the
 * metadata entry, then files (sorted by name by the caller), then the
 * trailer. Returns false with the reason in err when it exceeds ZIP's
 * limits. */
bool bundle_write_payload(buf *out, const bundle_input *files, size_t count, const char *metadata, buf *err);

#endif
