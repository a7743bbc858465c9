/*
 * release.h - `luamcp release`, which makes from one script folder every
 * artifact people install MCP servers from: the programs (`luamcp build`
 * for each target), one .mcpb (signed when given a certificate), npm
 * packages the esbuild way, an OCI image for amd64 and arm64, the MCP
 * Registry's server.json, and SHA256SUMS over all of it. The same inputs
 * give the same bytes: nothing takes the time, the user or the machine.
 *
 * release.c parses the command line, runs build, and then hands the same
 * release_info to each writer below; each writer owns its artifact's format.
 */
#ifndef LUAMCP_RELEASE_H
#define LUAMCP_RELEASE_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>

#include "cli/target.h"
#include "core/buf.h"

/* One setting of mcp.server{ config }, as the .mcpb manifest declares it:
 * the program reads it from the environment variable env. */
typedef struct release_setting {
  char *key;         /* "api_key" */
  char *env;         /* "API_KEY" */
  char *type;        /* "string", "number", "boolean", "directory", "file" */
  char *title;
  char *description;
  char *default_text; /* the default as text (a number's digits, "true"), or NULL */
  bool required;
  bool sensitive;
} release_setting;

/* One program built for one target. */
typedef struct release_program {
  const build_target *target;
  char *path;  /* where build wrote it, in the output folder */
  char *file;  /* its file name there ("weather-linux-x64", "weather-windows-x64.exe") */
  buf bytes;   /* the whole program: the target's runtime with the bundle */
} release_program;

/* Everything the writers read. Owner: release.c, which fills it and frees
 * it with release_info_free; writers only read it. */
typedef struct release_info {
  char *name;          /* mcp.server{} name: the program's and the npm bin's name */
  char *version;       /* semantic version: every package carries it */
  char *description;   /* one line, at most 100 characters (the Registry's limit) */
  char *license;       /* SPDX id or NULL */
  char *author;        /* a name, or NULL */
  char *registry_name; /* "io.github.you/weather": server.json name, package.json mcpName, image label */
  char *npm_name;      /* "@you/weather": the main npm package */
  char *image;         /* "ghcr.io/you/weather": the image's repository, without a tag */
  char *image_tag;     /* the version as an image tag takes it ('_' for semver's '+') */
  char *repository;    /* "https://github.com/you/weather", or NULL */
  char *mcpb_url;      /* where the .mcpb will be downloaded from (server.json identifier) */
  char *mcpb_path;     /* the .mcpb in the output folder */
  release_setting *settings;
  size_t setting_count;
  release_program programs[TARGET_COUNT]; /* in TARGETS' order, those given */
  size_t program_count;
  char *out_dir; /* the output folder */
} release_info;

void release_info_free(release_info *r);
/* The program built for the target called name ("linux-arm64"), or NULL. */
const release_program *release_program_for(const release_info *r, const char *target_name);

/* `luamcp release DIR [options]`; argv holds what follows "release". */
int release_command(int argc, char **argv);
void release_usage(FILE *to);

/* Whether npm would publish a package called name, and the platform
 * packages' names after it ("-linux-arm64"); the reason in err if not
 * (release_npm.c). */
bool release_npm_name_ok(const char *name, buf *err);

/* Whether the certificate, key and chain (NULL: none) can sign, as
 * release_sign_mcpb will: read, matched, RSA, on a platform that signs; the
 * reason, naming the file, in err if not. Checked before anything is built
 * (release_sign.c). */
bool release_sign_check(const char *cert_pem, const char *key_pem, const char *chain_pem, buf *err);

/* ---- The writers: each false with the reason in err -------------------- */

/* npm packages in OUT/npm/: one folder per Linux/Windows program
 * (package.json with os and cpu, the program in bin/) and the main
 * package, whose bin starts the right one (release_npm.c). */
bool release_write_npm(const release_info *r, buf *err);

/* The OCI image: OUT/oci/ (an OCI image layout) and OUT/NAME-VERSION.oci.tar
 * (the same layout as one tar), an index of one image per Linux program
 * (amd64, arm64), each the program, ca_bundle as the system's CA
 * certificates, and a non-root user (release_oci.c). */
bool release_write_oci(const release_info *r, const buf *ca_bundle, buf *err);

/* OUT/server.json for the MCP Registry: the server's name, description,
 * version and repository, and one package per door (npm, the image, the
 * .mcpb with its SHA-256), each with the settings as environment variables
 * (release_registry.c). Run after the .mcpb is signed: the hash is the
 * file's as it is published. */
bool release_write_server_json(const release_info *r, buf *err);

/* Sign the .mcpb at r->mcpb_path in place, as the official mcpb tool
 * does: a detached PKCS#7 signature (SHA-256) by the key and certificate
 * in PEM files, chain (NULL or a PEM file of intermediates) carried along,
 * appended between MCPB_SIG_V1 and MCPB_SIG_END (release_sign.c). */
bool release_sign_mcpb(const release_info *r, const char *cert_pem, const char *key_pem, const char *chain_pem,
                       buf *err);

#endif
