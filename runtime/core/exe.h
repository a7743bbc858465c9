/*
 * exe.h - what an executable file is, read from its own headers: its
 * format (ELF or PE), the machine it runs on, and where its image ends.
 * Bytes after that end are not the program's: a bundle's payload goes
 * there (bundle.h). `luamcp build --target` uses the same facts to check
 * that a runtime is for the platform asked for.
 *
 * Plain bytes only: the caller supplies a function that reads the file, so
 * this reads a file of any platform on any platform (an aarch64 ELF or a
 * Windows PE on Linux, the .exe itself on Windows). Multi-byte fields are
 * decoded by their stated byte order, never by casting to this machine's
 * structs.
 */
#ifndef LUAMCP_EXE_H
#define LUAMCP_EXE_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "core/buf.h"

typedef enum exe_format { EXE_ELF, EXE_PE } exe_format;

/* The machines luamcp is built for, and "other" for the rest. */
typedef enum exe_machine { EXE_OTHER_MACHINE, EXE_X86_64, EXE_AARCH64 } exe_machine;

typedef struct exe_info {
  exe_format format;
  exe_machine machine;
  unsigned raw_machine; /* ELF e_machine or PE Machine, for messages about EXE_OTHER_MACHINE */
  uint64_t image_size;  /* bytes from the start that the headers account for */
  /* Whether the program can load shared libraries: a PE file, or an ELF
   * file with a dynamic segment (a fully static one has none). */
  bool loads_shared_libraries;
} exe_info;

/* Reads len bytes at offset into into; false when the file is shorter. */
typedef bool (*exe_reader)(void *file, void *into, size_t len, uint64_t offset);

/* Identify the executable that read() reads. Returns false with the
 * reason in err when it is neither ELF nor PE, or its headers are cut
 * short. */
bool exe_inspect(exe_reader read, void *file, exe_info *info, buf *err);

/* "ELF x86-64", "PE aarch64", "ELF machine 40": for messages. */
void exe_describe(const exe_info *info, buf *out);

#endif
