/*
 * schema.h - JSON Schema validation (draft 2020-12 and draft-07) in C.
 *
 * A tool's inputSchema and outputSchema are compiled once, at registration,
 * into an independent structure; every tools/call then validates its
 * arguments against it without allocating and without Lua. Failures come
 * back as a short list of messages written for a language model to act on:
 * where the problem is (a JSON pointer into the instance), what was
 * expected and what was found.
 *
 * Supported: type, enum, const, the numeric, string, array and object
 * keywords, properties / patternProperties / additionalProperties /
 * propertyNames, required, dependentRequired / dependentSchemas, prefixItems
 * / items / contains / minContains / maxContains, allOf / anyOf / oneOf /
 * not, if / then / else, boolean schemas, $defs, and $ref to anywhere in the
 * same document: JSON pointers, $anchor, and $id-based URIs of embedded
 * resources (recursion included). "$schema": draft-07 selects draft-07
 * rules: definitions, dependencies, array-form items with additionalItems,
 * "#name" anchors in $id, and $ref overriding its siblings. "pattern" uses
 * ECMA-262 regular expressions (regex.h). "format" and the other annotation
 * keywords are accepted and ignored.
 *
 * Refused at compile time, because ignoring them would change what is
 * valid: $dynamicRef, unevaluatedProperties / unevaluatedItems (unless true
 * or {}), $ref to another document, and unknown $schema dialects.
 */
#ifndef LUAMCP_SCHEMA_H
#define LUAMCP_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "core/json.h"

typedef enum schema_dialect {
  SCHEMA_DRAFT_2020_12,
  SCHEMA_DRAFT_07,
} schema_dialect;

/* Compile options. Owner: the caller; only read during schema_compile. */
typedef struct schema_options {
  schema_dialect default_dialect; /* when the root has no "$schema" */
} schema_options;

/* Why a schema did not compile. Owner: the caller (usually on its stack). */
typedef struct schema_error {
  char pointer[256]; /* JSON pointer of the bad part, e.g. "/properties/a/minLength" */
  char message[256]; /* e.g. "minLength must be a non-negative integer" */
} schema_error;

/* A compiled schema. Owner: the caller of schema_compile, who releases it
 * with schema_free. It holds no pointer into the source document, which the
 * caller may free right after compiling. Read-only afterwards, so it may be
 * used by any number of validations, also concurrently. */
typedef struct schema schema;

/* Compile a parsed schema document. opts may be NULL (draft 2020-12 by
 * default). Returns NULL and fills err (when not NULL) if the schema is
 * invalid or uses something unsupported. */
schema *schema_compile(const json_value *root, const schema_options *opts, schema_error *err);
void schema_free(schema *s);

/* ---- Validation ------------------------------------------------------ */

#define SCHEMA_MAX_ERRORS 20
#define SCHEMA_PATH_BYTES 256
#define SCHEMA_MESSAGE_BYTES 320

/* One validation failure; strings are NUL-terminated and truncated to fit. */
typedef struct schema_report_error {
  char path[SCHEMA_PATH_BYTES];       /* instance JSON pointer, "" for the root */
  char keyword[SCHEMA_PATH_BYTES];    /* schema location, e.g. "/properties/a/type" */
  char message[SCHEMA_MESSAGE_BYTES]; /* e.g. "expected integer, got string \"5\"" */
} schema_report_error;

/* The errors of one validation. Owner: the caller (a plain struct with no
 * heap memory; about 18 KB, so prefer static or heap storage to a small
 * stack). schema_validate resets it. */
typedef struct schema_report {
  unsigned count;   /* errors[0 .. count-1] are filled */
  bool truncated;   /* more errors were found than fit */
  schema_report_error errors[SCHEMA_MAX_ERRORS];
} schema_report;

/* Validate instance against s. report may be NULL when only the answer is
 * wanted (that is also the fastest: it stops at the first failure).
 * Allocates nothing except for uniqueItems on arrays longer than 16.
 * A pattern that exhausts its step budget (regex.h) makes the instance
 * invalid, with an error naming the pattern; later patterns in the same
 * validation then fail without searching, so one pathological pattern
 * costs its budget once per validation. */
bool schema_validate(const schema *s, const json_value *instance, schema_report *report);

/* Accessors, for building other representations of a report. */
unsigned schema_report_count(const schema_report *r);
const char *schema_report_path(const schema_report *r, unsigned i);
const char *schema_report_keyword(const schema_report *r, unsigned i);
const char *schema_report_message(const schema_report *r, unsigned i);

/* Append one line per error, "path: message" (the root shown as "/"),
 * joined by "\n", with a last line saying so when errors were left out. */
void schema_report_format(const schema_report *r, buf *out);

/* Append a JSON array of {"path": "...", "message": "..."} objects. */
void schema_report_write_json(const schema_report *r, buf *out);

/* ---- Coercion -------------------------------------------------------- */

/* Append to out the JSON text of instance with common language-model type
 * slips fixed where the schema expects another type: a numeric string for
 * a number or integer, "true"/"false" for a boolean, a string holding JSON
 * for an object or array. The schema is followed through properties,
 * patternProperties, additionalProperties, prefixItems, items, $ref and
 * allOf, and through anyOf/oneOf only where one branch fits. Returns true
 * when something was changed; the caller then parses out and validates it
 * as usual (coercion never makes an invalid value pass by itself). */
bool schema_coerce(const schema *s, const json_value *instance, buf *out);

#endif
