/* exe.c - see exe.h. Field offsets are from the ELF specification (gABI,
 * "ELF Header", "Program Header", "Sections") and Microsoft's "PE Format"
 * (learn.microsoft.com/windows/win32/debug/pe-format). */
#include "core/exe.h"

#include <string.h>

#define ELF_MACHINE_X86_64 62
#define ELF_MACHINE_AARCH64 183
#define ELF_SEGMENT_DYNAMIC 2 /* PT_DYNAMIC: what the dynamic linker reads */
#define ELF_SECTION_NOBITS 8 /* SHT_NOBITS: .bss, no bytes in the file */
#define PE_MACHINE_X86_64 0x8664
#define PE_MACHINE_AARCH64 0xAA64
#define PE_SECURITY_DIRECTORY 4 /* the certificate table: a file offset, not an address */
#define PE_SYMBOL_SIZE 18       /* one COFF symbol table record */

/* The file being read, and in which byte order its fields are. */
typedef struct reader {
  exe_reader read;
  void *file;
  bool big_endian;
} reader;

static bool read_uint(const reader *r, uint64_t offset, size_t width, uint64_t *value) {
  unsigned char bytes[8];
  if (!r->read(r->file, bytes, width, offset)) return false;
  *value = 0;
  for (size_t i = 0; i < width; i++) *value |= (uint64_t)bytes[r->big_endian ? width - 1 - i : i] << (8 * i);
  return true;
}

static void extend(uint64_t *end, uint64_t offset, uint64_t size) {
  if (offset + size > *end) *end = offset + size;
}

static exe_machine machine_of(unsigned raw, unsigned x86_64, unsigned aarch64) {
  return raw == x86_64 ? EXE_X86_64 : raw == aarch64 ? EXE_AARCH64 : EXE_OTHER_MACHINE;
}

/* Where each ELF header field is, for 64-bit and 32-bit files. */
typedef struct elf_layout {
  size_t word; /* the width of an address or offset */
  uint64_t phoff, shoff, ehsize, phentsize, phnum, shentsize, shnum;
  size_t phdr_size, ph_offset, ph_filesz;
  size_t shdr_size, sh_type, sh_offset, sh_size;
} elf_layout;

static const elf_layout ELF64 = {8, 32, 40, 52, 54, 56, 58, 60, 56, 8, 32, 64, 4, 24, 32};
static const elf_layout ELF32 = {4, 28, 32, 40, 42, 44, 46, 48, 32, 4, 16, 40, 4, 16, 20};

/* The image is everything the program headers, the section headers and
 * every section with bytes in the file cover; *dynamic tells whether a
 * program header is the dynamic segment. */
static bool elf_extent(const reader *r, const elf_layout *l, uint64_t *size, bool *dynamic) {
  uint64_t phoff, shoff, ehsize, phentsize, phnum, shentsize, shnum;
  if (!read_uint(r, l->phoff, l->word, &phoff) || !read_uint(r, l->shoff, l->word, &shoff) ||
      !read_uint(r, l->ehsize, 2, &ehsize) || !read_uint(r, l->phentsize, 2, &phentsize) ||
      !read_uint(r, l->phnum, 2, &phnum) || !read_uint(r, l->shentsize, 2, &shentsize) ||
      !read_uint(r, l->shnum, 2, &shnum))
    return false;
  uint64_t end = ehsize;
  *dynamic = false;
  extend(&end, phoff, phnum * phentsize);
  for (uint64_t i = 0; i < phnum && phentsize == l->phdr_size; i++) {
    uint64_t at = phoff + i * l->phdr_size, type, offset, filesz;
    if (!read_uint(r, at, 4, &type) || !read_uint(r, at + l->ph_offset, l->word, &offset) ||
        !read_uint(r, at + l->ph_filesz, l->word, &filesz))
      return false;
    if (type == ELF_SEGMENT_DYNAMIC) *dynamic = true;
    extend(&end, offset, filesz);
  }
  if (shoff && shentsize == l->shdr_size) {
    uint64_t sections = shnum;
    /* More than SHN_LORESERVE sections: the count is in section 0's size. */
    if (!sections && !read_uint(r, shoff + l->sh_size, l->word, &sections)) return false;
    extend(&end, shoff, sections * l->shdr_size);
    for (uint64_t i = 0; i < sections; i++) {
      uint64_t at = shoff + i * l->shdr_size, type, offset, sh_size;
      if (!read_uint(r, at + l->sh_type, 4, &type) || !read_uint(r, at + l->sh_offset, l->word, &offset) ||
          !read_uint(r, at + l->sh_size, l->word, &sh_size))
        return false;
      if (type != ELF_SECTION_NOBITS) extend(&end, offset, sh_size);
    }
  }
  *size = end;
  return true;
}

static bool inspect_elf(reader *r, const unsigned char *ident, exe_info *info, buf *err) {
  const elf_layout *layout = ident[4] == 2 ? &ELF64 : ident[4] == 1 ? &ELF32 : NULL; /* EI_CLASS */
  if (!layout || (ident[5] != 1 && ident[5] != 2)) { /* EI_DATA: 1 little-endian, 2 big-endian */
    buf_puts(err, "an ELF file of an unknown class or byte order");
    return false;
  }
  r->big_endian = ident[5] == 2;
  uint64_t machine;
  if (!read_uint(r, 18, 2, &machine) || !elf_extent(r, layout, &info->image_size, &info->loads_shared_libraries)) {
    buf_puts(err, "an ELF file whose headers are cut short");
    return false;
  }
  info->format = EXE_ELF;
  info->raw_machine = (unsigned)machine;
  info->machine = machine_of(info->raw_machine, ELF_MACHINE_X86_64, ELF_MACHINE_AARCH64);
  return true;
}

/* The image is the headers, every section's raw data, the COFF symbol and
 * string tables (an unstripped MinGW build has them after the sections),
 * and the certificate table of a signed file. */
static bool pe_extent(const reader *r, uint64_t pe, uint64_t *size) {
  uint64_t sections, symbols_at, symbols, optional_size, magic, headers;
  const uint64_t coff = pe + 4, optional = coff + 20;
  if (!read_uint(r, coff + 2, 2, &sections) || !read_uint(r, coff + 8, 4, &symbols_at) ||
      !read_uint(r, coff + 12, 4, &symbols) || !read_uint(r, coff + 16, 2, &optional_size) ||
      !read_uint(r, optional, 2, &magic) || !read_uint(r, optional + 60, 4, &headers))
    return false;
  uint64_t end = headers;
  const uint64_t section_table = optional + optional_size;
  extend(&end, section_table, sections * 40);
  for (uint64_t i = 0; i < sections; i++) {
    uint64_t raw_size, raw_at;
    if (!read_uint(r, section_table + i * 40 + 16, 4, &raw_size) ||
        !read_uint(r, section_table + i * 40 + 20, 4, &raw_at))
      return false;
    if (raw_at) extend(&end, raw_at, raw_size);
  }
  if (symbols_at) {
    uint64_t strings_at = symbols_at + symbols * PE_SYMBOL_SIZE, strings_size;
    extend(&end, symbols_at, symbols * PE_SYMBOL_SIZE);
    if (read_uint(r, strings_at, 4, &strings_size)) extend(&end, strings_at, strings_size);
  }
  /* The data directories follow the optional header's fixed part: 96
   * bytes in PE32, 112 in PE32+ (magic 0x20b), each entry 8 bytes. */
  uint64_t directories = optional + (magic == 0x20b ? 112 : 96), directory_count, cert_at, cert_size;
  if (!read_uint(r, directories - 4, 4, &directory_count)) return false;
  if (directory_count > PE_SECURITY_DIRECTORY &&
      read_uint(r, directories + PE_SECURITY_DIRECTORY * 8, 4, &cert_at) &&
      read_uint(r, directories + PE_SECURITY_DIRECTORY * 8 + 4, 4, &cert_size) && cert_at)
    extend(&end, cert_at, cert_size);
  *size = end;
  return true;
}

static bool inspect_pe(reader *r, exe_info *info, buf *err) {
  uint64_t pe, machine;
  unsigned char signature[4];
  r->big_endian = false;
  if (!read_uint(r, 0x3c, 4, &pe) || !r->read(r->file, signature, 4, pe) || memcmp(signature, "PE\0\0", 4) != 0) {
    buf_puts(err, "an MS-DOS executable, not a Windows PE one");
    return false;
  }
  if (!read_uint(r, pe + 4, 2, &machine) || !pe_extent(r, pe, &info->image_size)) {
    buf_puts(err, "a PE file whose headers are cut short");
    return false;
  }
  info->format = EXE_PE;
  info->loads_shared_libraries = true; /* LoadLibrary is always there */
  info->raw_machine = (unsigned)machine;
  info->machine = machine_of(info->raw_machine, PE_MACHINE_X86_64, PE_MACHINE_AARCH64);
  return true;
}

bool exe_inspect(exe_reader read, void *file, exe_info *info, buf *err) {
  reader r = {read, file, false};
  unsigned char ident[16];
  memset(info, 0, sizeof *info);
  if (read(file, ident, sizeof ident, 0) && memcmp(ident, "\x7f" "ELF", 4) == 0) return inspect_elf(&r, ident, info, err);
  if (read(file, ident, 2, 0) && memcmp(ident, "MZ", 2) == 0) return inspect_pe(&r, info, err);
  buf_puts(err, "not an executable (neither ELF nor PE)");
  return false;
}

void exe_describe(const exe_info *info, buf *out) {
  buf_append_str(out, info->format == EXE_ELF ? "ELF " : "PE ");
  if (info->machine == EXE_X86_64) buf_puts(out, "x86-64");
  else if (info->machine == EXE_AARCH64) buf_puts(out, "aarch64");
  else buf_printf(out, "machine %#x", info->raw_machine);
}
