/*
 * release_registry.c - OUT/server.json, what the MCP Registry publishes
 * about the server (release.h). Written to the Registry's schema
 * (github.com/modelcontextprotocol/registry,
 * docs/reference/server-json/server.schema.json): spec/release_spec.lua
 * validates it with luamcp's own validator against that file.
 *
 * One package per door, each saying how its users start it (stdio) and
 * which environment variables the scripts read (mcp.server{ config }):
 * npm (npx), the OCI image (docker run, its tag in the identifier), and
 * the .mcpb (its download URL and the SHA-256 of the file as published).
 */
#include <stdlib.h>
#include <string.h>

#include "cli/files.h"
#include "cli/release.h"
#include "cli/version.h"
#include "core/json.h"
#include "os/crypto.h"

/* The schema the file names in $schema: the Registry's current one. */
#define SERVER_SCHEMA_URL "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"

static void member(buf *b, const char *indent, const char *key, const char *value, bool more) {
  buf_printf(b, "%s\"%s\": ", indent, key);
  json_write_string(b, value, strlen(value));
  buf_append_str(b, more ? ",\n" : "\n");
}

/* The Registry's input format for a setting's type: a folder or a file
 * is a path on the user's machine. */
static const char *input_format(const char *type) {
  if (!type) return "string";
  if (strcmp(type, "number") == 0 || strcmp(type, "boolean") == 0) return type;
  if (strcmp(type, "directory") == 0 || strcmp(type, "file") == 0) return "filepath";
  return "string";
}

static void write_environment(buf *b, const release_info *r) {
  if (!r->setting_count) return;
  buf_puts(b, ",\n      \"environmentVariables\": [\n");
  for (size_t i = 0; i < r->setting_count; i++) {
    const release_setting *s = &r->settings[i];
    buf text = BUF_INIT;
    /* KeyValueInput has no title: the description carries it. */
    buf_printf(&text, "%s: %s", s->title ? s->title : s->key, s->description ? s->description : "");
    buf_puts(b, "        {\n");
    member(b, "          ", "name", s->env, true);
    member(b, "          ", "description", text.data, true);
    member(b, "          ", "format", input_format(s->type), true);
    if (s->default_text) member(b, "          ", "default", s->default_text, true);
    buf_printf(b, "          \"isRequired\": %s,\n", s->required ? "true" : "false");
    buf_printf(b, "          \"isSecret\": %s\n", s->sensitive ? "true" : "false");
    buf_printf(b, "        }%s\n", i + 1 < r->setting_count ? "," : "");
    buf_free(&text);
  }
  buf_puts(b, "      ]");
}

static void open_package(buf *b, const char *type, bool first) {
  buf_append_str(b, first ? "    {\n" : ",\n    {\n");
  member(b, "      ", "registryType", type, true);
}

static void close_package(buf *b, const release_info *r) {
  buf_puts(b, "      \"transport\": {\n        \"type\": \"stdio\"\n      }");
  write_environment(b, r);
  buf_puts(b, "\n    }");
}

bool release_write_server_json(const release_info *r, buf *err) {
  buf mcpb = BUF_INIT;
  if (!files_read(r->mcpb_path, &mcpb, err)) return false;
  uint8_t digest[OS_SHA256_BYTES];
  os_sha256(mcpb.data, mcpb.len, digest);
  buf_free(&mcpb);
  char sha[2 * OS_SHA256_BYTES + 1];
  for (size_t i = 0; i < OS_SHA256_BYTES; i++) snprintf(sha + 2 * i, 3, "%02x", digest[i]);

  buf b = BUF_INIT;
  buf_puts(&b, "{\n");
  member(&b, "  ", "$schema", SERVER_SCHEMA_URL, true);
  member(&b, "  ", "name", r->registry_name, true);
  member(&b, "  ", "description", r->description, true);
  member(&b, "  ", "version", r->version, true);
  if (r->repository) {
    const char *source = strstr(r->repository, "://github.com/") ? "github"
                         : strstr(r->repository, "://gitlab.com/") ? "gitlab"
                                                                   : "git";
    buf_puts(&b, "  \"repository\": {\n");
    member(&b, "    ", "url", r->repository, true);
    member(&b, "    ", "source", source, false);
    buf_puts(&b, "  },\n");
  }
  buf_puts(&b, "  \"packages\": [\n");
  open_package(&b, "npm", true);
  member(&b, "      ", "registryBaseUrl", "https://registry.npmjs.org", true);
  member(&b, "      ", "identifier", r->npm_name, true);
  member(&b, "      ", "version", r->version, true);
  member(&b, "      ", "runtimeHint", "npx", true);
  close_package(&b, r);
  bool image = false;
  for (size_t i = 0; i < r->program_count; i++) image = image || r->programs[i].target->uname_m;
  if (image) {
    /* The Registry takes an image by one reference, its tag included. */
    buf ref = BUF_INIT;
    buf_printf(&ref, "%s:%s", r->image, r->image_tag);
    open_package(&b, "oci", false);
    member(&b, "      ", "identifier", ref.data, true);
    member(&b, "      ", "runtimeHint", "docker", true);
    close_package(&b, r);
    buf_free(&ref);
  }
  open_package(&b, "mcpb", false);
  member(&b, "      ", "identifier", r->mcpb_url, true);
  member(&b, "      ", "version", r->version, true);
  member(&b, "      ", "fileSha256", sha, true);
  close_package(&b, r);
  buf_puts(&b, "\n  ],\n");
  buf_puts(&b, "  \"_meta\": {\n    \"io.modelcontextprotocol.registry/publisher-provided\": {\n");
  member(&b, "      ", "tool", "luamcp release", true);
  member(&b, "      ", "version", LUAMCP_VERSION, false);
  buf_puts(&b, "    }\n  }\n}\n");

  buf path = BUF_INIT;
  buf_printf(&path, "%s/server.json", r->out_dir);
  bool ok = files_replace(path.data, &b, 0644, err);
  buf_free(&path);
  buf_free(&b);
  return ok;
}
