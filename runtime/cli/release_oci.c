/*
 * release_oci.c - the OCI image of `luamcp release` (release.h): an image
 * index with one image per Linux program, written as an OCI image layout
 * (OUT/oci/: oci-layout, index.json, blobs/sha256/) and as the same layout
 * in one tar (OUT/NAME-VERSION.oci.tar), which is what `skopeo copy
 * oci-archive:` and `podman load` read. No daemon and no base image: each
 * image is one layer this file writes byte by byte.
 *
 * The layout's index.json names one entry, the multi-arch image index,
 * with org.opencontainers.image.ref.name = the version; skopeo resolves
 * oci:OUT/oci:VERSION to it and picks the image for the platform wanted.
 *
 * The same inputs give the same bytes: the layer tar's entries are in a
 * fixed order with mtime 0 and fixed owners (core/tar.h), the gzip header
 * has no time, and no config carries "created" or history.
 */
#include "cli/release.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/curl_lib.h"
#include "cli/files.h"
#include "core/json.h"
#include "core/tar.h"
#include "os/crypto.h"
#include "os/fs.h"

/* The media types of the OCI image spec (v1.0, media-types.md). */
#define MT_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_LAYER "application/vnd.oci.image.layer.v1.tar+gzip"
#define OCI_LAYOUT "{\"imageLayoutVersion\":\"1.0.0\"}"

/* The user the program runs as: not root, and the uid distroless's
 * "nonroot" has, so volumes prepared for those images fit these too. */
#define IMAGE_UID 65532
#define IMAGE_USER "luamcp"
#define IMAGE_HOME "home/" IMAGE_USER "/"
#define IMAGE_BIN_DIR "usr/local/bin/"
/* Where the CA certificates go: the first place curl_lib.c's find_cas
 * looks (Debian's /etc/ssl/certs/ca-certificates.crt, in the folders the
 * layer makes), so the program finds them with no SSL_CERT_FILE. */
#define IMAGE_CA_FILE (CURL_LIB_CA_BUNDLES[0] + 1)
#define IMAGE_PATH_ENV "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* The port README's --http examples use; EXPOSE documents it only. */
#define IMAGE_HTTP_PORT "8080/tcp"
/* The label the MCP Registry reads to check that an image belongs to a server. */
#define REGISTRY_NAME_LABEL "io.modelcontextprotocol.server.name"

/* "sha256:" and 64 hex digits. */
enum { DIGEST_LEN = 7 + 2 * OS_SHA256_BYTES };

/* One content-addressed file of the layout. */
typedef struct blob {
  char digest[DIGEST_LEN + 1];
  buf bytes;
} blob;

/* One image per Linux program, three blobs each, and the index. */
enum { MAX_BLOBS = 3 * TARGET_COUNT + 1 };

/* What oci_write builds. Owner: release_write_oci, on its stack. */
typedef struct oci_image_set {
  blob blobs[MAX_BLOBS];
  size_t blob_count;
  buf index;   /* the entries of the image index's "manifests" */
  size_t images;
} oci_image_set;

static void digest_of(const void *data, size_t len, char out[DIGEST_LEN + 1]) {
  uint8_t sum[OS_SHA256_BYTES];
  os_sha256(data, len, sum);
  memcpy(out, "sha256:", 7);
  for (size_t i = 0; i < OS_SHA256_BYTES; i++) snprintf(out + 7 + 2 * i, 3, "%02x", sum[i]);
}

/* Take bytes (emptied) as a new blob. */
static const blob *add_blob(oci_image_set *set, buf *bytes) {
  blob *b = &set->blobs[set->blob_count++];
  b->bytes = *bytes;
  *bytes = (buf)BUF_INIT;
  digest_of(b->bytes.data, b->bytes.len, b->digest);
  return b;
}

static void json_str(buf *b, const char *s) { json_write_string(b, s, strlen(s)); }

/* "key":"value", then a comma unless last. */
static void json_pair(buf *b, const char *key, const char *value, bool last) {
  json_str(b, key);
  buf_putc(b, ':');
  json_str(b, value);
  if (!last) buf_putc(b, ',');
}

/* A descriptor's members (descriptor.md) without the braces. */
static void descriptor(buf *b, const char *media_type, const blob *blob) {
  buf_printf(b, "\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%zu", media_type, blob->digest, blob->bytes.len);
}

/* The object of labels every part carries: the OCI spec's pre-defined
 * annotations (annotations.md) and the Registry's. Keys in order, as a
 * Go map marshals them, so a tool that rewrites them changes nothing. */
static void labels(buf *b, const release_info *r) {
  buf_putc(b, '{');
  json_pair(b, REGISTRY_NAME_LABEL, r->registry_name, false);
  if (r->description) json_pair(b, "org.opencontainers.image.description", r->description, false);
  if (r->license) json_pair(b, "org.opencontainers.image.licenses", r->license, false);
  if (r->repository) json_pair(b, "org.opencontainers.image.source", r->repository, false);
  json_pair(b, "org.opencontainers.image.title", r->name, false);
  json_pair(b, "org.opencontainers.image.version", r->version, true);
  buf_putc(b, '}');
}

/* OCI's (GOARCH's) name for the program's machine, or NULL when it is not
 * a Linux program: a Windows program has no place in a Linux image. */
static const char *oci_arch(const release_program *p) {
  if (p->target->format != EXE_ELF) return NULL;
  switch (p->target->machine) {
  case EXE_X86_64: return "amd64";
  case EXE_AARCH64: return "arm64";
  default: return NULL;
  }
}

/* The layer: the program, CA certificates, the user, and a /tmp anyone
 * may write. Root owns everything but the user's home: the user needs to
 * read and run, never to change, what the image ships. */
static bool write_layer(const release_info *r, const release_program *p, const buf *ca_bundle, buf *tar, buf *err) {
  buf passwd = BUF_INIT, group = BUF_INIT, program_path = BUF_INIT;
  buf_printf(&passwd, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/%.*s:/sbin/nologin\n", IMAGE_USER,
             IMAGE_UID, IMAGE_UID, IMAGE_USER, (int)strlen(IMAGE_HOME) - 1, IMAGE_HOME);
  buf_printf(&group, "root:x:0:\n%s:x:%d:\n", IMAGE_USER, IMAGE_UID);
  buf_printf(&program_path, IMAGE_BIN_DIR "%s", r->name);
  /* Parents before children, each folder's entries in name order. */
  bool ok = tar_add_dir(tar, "etc/", 0755, 0, 0) && tar_add_file(tar, "etc/group", group.data, group.len, 0644, 0, 0) &&
            tar_add_file(tar, "etc/passwd", passwd.data, passwd.len, 0644, 0, 0) &&
            tar_add_dir(tar, "etc/ssl/", 0755, 0, 0) && tar_add_dir(tar, "etc/ssl/certs/", 0755, 0, 0) &&
            tar_add_file(tar, IMAGE_CA_FILE, ca_bundle->data, ca_bundle->len, 0644, 0, 0) &&
            tar_add_dir(tar, "home/", 0755, 0, 0) && tar_add_dir(tar, IMAGE_HOME, 0700, IMAGE_UID, IMAGE_UID) &&
            tar_add_dir(tar, "tmp/", 01777, 0, 0) && tar_add_dir(tar, "usr/", 0755, 0, 0) &&
            tar_add_dir(tar, "usr/local/", 0755, 0, 0) && tar_add_dir(tar, IMAGE_BIN_DIR, 0755, 0, 0) &&
            tar_add_file(tar, program_path.data, p->bytes.data, p->bytes.len, 0755, 0, 0);
  if (ok) tar_finish(tar);
  else buf_printf(err, "the image's path %s is too long for a tar entry", program_path.data);
  buf_free(&passwd);
  buf_free(&group);
  buf_free(&program_path);
  return ok;
}

/* The image config (config.md): how the program runs, and the layer's
 * uncompressed digest. No "created" and no history: nothing of the time. */
static void write_config(const release_info *r, const char *arch, const char *diff_id, buf *b) {
  buf_printf(b, "{\"architecture\":\"%s\",\"os\":\"linux\",\"config\":{", arch);
  buf_printf(b, "\"User\":\"%d:%d\",\"ExposedPorts\":{\"" IMAGE_HTTP_PORT "\":{}},", IMAGE_UID, IMAGE_UID);
  buf_puts(b, "\"Env\":[\"" IMAGE_PATH_ENV "\"],\"Entrypoint\":[");
  buf entrypoint = BUF_INIT;
  buf_printf(&entrypoint, "/" IMAGE_BIN_DIR "%s", r->name);
  json_write_string(b, entrypoint.data, entrypoint.len);
  buf_free(&entrypoint);
  buf_puts(b, "],\"Cmd\":[],\"WorkingDir\":\"/\",\"Labels\":");
  labels(b, r);
  buf_printf(b, "},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"%s\"]}}", diff_id);
}

/* One image: its layer, config and manifest as blobs, and its entry in
 * the index. */
static bool add_image(oci_image_set *set, const release_info *r, const release_program *p, const char *arch,
                      const buf *ca_bundle, buf *err) {
  buf tar = BUF_INIT, bytes = BUF_INIT;
  if (!write_layer(r, p, ca_bundle, &tar, err)) {
    buf_free(&tar);
    return false;
  }
  char diff_id[DIGEST_LEN + 1];
  digest_of(tar.data, tar.len, diff_id);
  bool zipped = tar_gzip(tar.data, tar.len, &bytes);
  buf_free(&tar);
  if (!zipped) {
    buf_free(&bytes);
    buf_printf(err, "compressing the %s image's layer failed (out of memory)", arch);
    return false;
  }
  const blob *layer = add_blob(set, &bytes);
  write_config(r, arch, diff_id, &bytes);
  const blob *config = add_blob(set, &bytes);

  buf_puts(&bytes, "{\"schemaVersion\":2,\"mediaType\":\"" MT_MANIFEST "\",\"config\":{");
  descriptor(&bytes, MT_CONFIG, config);
  buf_puts(&bytes, "},\"layers\":[{");
  descriptor(&bytes, MT_LAYER, layer);
  buf_puts(&bytes, "}],\"annotations\":");
  labels(&bytes, r);
  buf_putc(&bytes, '}');
  const blob *manifest = add_blob(set, &bytes);

  if (set->images++) buf_putc(&set->index, ',');
  buf_putc(&set->index, '{');
  descriptor(&set->index, MT_MANIFEST, manifest);
  buf_printf(&set->index, ",\"platform\":{\"architecture\":\"%s\",\"os\":\"linux\"}}", arch);
  return true;
}

/* The layout's index.json: the image index, named by the version. With an
 * image repository, also the name `docker load` and containerd tag it with. */
static void write_layout_index(const release_info *r, const blob *index, buf *b) {
  buf_puts(b, "{\"schemaVersion\":2,\"mediaType\":\"" MT_INDEX "\",\"manifests\":[{");
  descriptor(b, MT_INDEX, index);
  buf_puts(b, ",\"annotations\":{");
  if (r->image) {
    buf tagged = BUF_INIT;
    buf_printf(&tagged, "%s:%s", r->image, r->image_tag);
    json_pair(b, "io.containerd.image.name", tagged.data, false);
    buf_free(&tagged);
  }
  json_pair(b, "org.opencontainers.image.ref.name", r->image_tag, true);
  buf_puts(b, "}}]}");
}

static int by_digest(const void *a, const void *b) {
  return strcmp(((const blob *)a)->digest, ((const blob *)b)->digest);
}

static bool make_dir(const char *path, buf *err) {
  if (os_fs_mkdir(path) || errno == EEXIST) return true;
  buf_printf(err, "cannot create the folder %s: %s", path, strerror(errno));
  return false;
}

static bool write_file(const char *dir, const char *name, const void *data, size_t len, buf *err) {
  buf path = BUF_INIT;
  buf_printf(&path, "%s/%s", dir, name);
  bool ok = os_fs_replace(path.data, data, len, 0644);
  if (!ok) buf_printf(err, "cannot write %s: %s", path.data, strerror(errno));
  buf_free(&path);
  return ok;
}

/* OUT/oci/, a folder of the layout. release.c has emptied OUT of an
 * earlier release's files, blobs included (prepare_out). */
static bool write_layout_dir(const release_info *r, const oci_image_set *set, const buf *layout_index, buf *err) {
  buf dir = BUF_INIT, blobs = BUF_INIT;
  buf_printf(&dir, "%s/oci", r->out_dir);
  buf_printf(&blobs, "%s/blobs", dir.data);
  bool ok = make_dir(dir.data, err) && make_dir(blobs.data, err);
  buf_puts(&blobs, "/sha256");
  ok = ok && make_dir(blobs.data, err);
  for (size_t i = 0; ok && i < set->blob_count; i++) {
    const blob *b = &set->blobs[i];
    ok = write_file(blobs.data, b->digest + 7, b->bytes.data, b->bytes.len, err);
  }
  ok = ok && write_file(dir.data, "oci-layout", OCI_LAYOUT, strlen(OCI_LAYOUT), err) &&
       write_file(dir.data, "index.json", layout_index->data, layout_index->len, err);
  buf_free(&dir);
  buf_free(&blobs);
  return ok;
}

/* OUT/NAME-VERSION.oci.tar: the same layout as one tar, in name order. */
static bool write_layout_tar(const release_info *r, const oci_image_set *set, const buf *layout_index, buf *err) {
  buf tar = BUF_INIT, name = BUF_INIT;
  bool ok = tar_add_dir(&tar, "blobs/", 0755, 0, 0) && tar_add_dir(&tar, "blobs/sha256/", 0755, 0, 0);
  for (size_t i = 0; ok && i < set->blob_count; i++) {
    const blob *b = &set->blobs[i];
    buf_clear(&name);
    buf_printf(&name, "blobs/sha256/%s", b->digest + 7);
    ok = tar_add_file(&tar, name.data, b->bytes.data, b->bytes.len, 0644, 0, 0);
  }
  ok = ok && tar_add_file(&tar, "index.json", layout_index->data, layout_index->len, 0644, 0, 0) &&
       tar_add_file(&tar, "oci-layout", OCI_LAYOUT, strlen(OCI_LAYOUT), 0644, 0, 0);
  tar_finish(&tar);
  buf_clear(&name);
  buf_printf(&name, "%s/%s-%s.oci.tar", r->out_dir, r->name, r->version);
  ok = ok && files_replace(name.data, &tar, 0644, err);
  buf_free(&tar);
  buf_free(&name);
  return ok;
}

bool release_write_oci(const release_info *r, const buf *ca_bundle, buf *err) {
  if (!r->name[0] || strpbrk(r->name, "/\\") || r->name[0] == '.') {
    buf_printf(err, "the server's name \"%s\" cannot be a program's file name in the image", r->name);
    return false;
  }
  if (!r->registry_name || !r->version) {
    buf_puts(err, "the image needs the server's version and its Registry name (--registry-name)");
    return false;
  }
  oci_image_set set = {0};
  bool ok = true;
  for (size_t i = 0; ok && i < r->program_count; i++) {
    const char *arch = oci_arch(&r->programs[i]);
    if (arch) ok = add_image(&set, r, &r->programs[i], arch, ca_bundle, err);
  }
  if (ok && set.images == 0) {
    buf_puts(err, "an OCI image needs a Linux program: --target linux-x64 or linux-arm64");
    ok = false;
  }
  buf layout_index = BUF_INIT;
  if (ok) {
    buf bytes = BUF_INIT;
    buf_puts(&bytes, "{\"schemaVersion\":2,\"mediaType\":\"" MT_INDEX "\",\"manifests\":[");
    buf_append(&bytes, set.index.data, set.index.len);
    buf_puts(&bytes, "],\"annotations\":");
    labels(&bytes, r);
    buf_putc(&bytes, '}');
    const blob *index = add_blob(&set, &bytes);
    write_layout_index(r, index, &layout_index);
    qsort(set.blobs, set.blob_count, sizeof set.blobs[0], by_digest);
    ok = write_layout_dir(r, &set, &layout_index, err) && write_layout_tar(r, &set, &layout_index, err);
  }
  for (size_t i = 0; i < set.blob_count; i++) buf_free(&set.blobs[i].bytes);
  buf_free(&set.index);
  buf_free(&layout_index);
  return ok;
}
