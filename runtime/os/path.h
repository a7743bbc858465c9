/*
 * path.h - what the running OS makes of a path, for the path decisions the
 * C side takes itself (the script folder, mcp.bundle's files) and for the
 * file system the Lua rules ask (realpath, readlink). Every rule the Lua
 * library applies (permissions, mcp.fs) is in lua/mcp/path.lua, which this
 * seam tells which platform it runs on. path_posix.c (POSIX),
 * path_windows.c (Win32; paths are UTF-8 on both sides). No Lua, no libuv.
 */
#ifndef LUAMCP_OS_PATH_H
#define LUAMCP_OS_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* "posix" or "windows": the rules lua/mcp/path.lua applies (the library
 * reads it as mcp.core.platform). Decided here, by the file the build
 * compiled, and nowhere else. */
const char *os_path_platform(void);

/* The absolute path with every link and "." or ".." resolved, malloc'd
 * (the caller frees it), in the plain form: "/a/b" on POSIX, "C:\a\b" or
 * "\\server\share\a" on Windows (no \\?\ prefix). NULL when the file does
 * not exist or cannot be reached, with errno set (ENOENT, EACCES,
 * ENOTDIR, ...). */
char *os_path_real(const char *path);

/* What the symbolic link (on Windows: or junction) at path points to,
 * malloc'd, as stored (it may be relative to the link's folder); NULL when
 * path is no link. */
char *os_path_readlink(const char *path);

/* The program name runs, resolved (os_path_real), malloc'd; NULL when
 * there is none. POSIX: as execvp finds it: a name with a '/' is a path,
 * otherwise the first executable regular file of that name along $PATH.
 * Windows: a name with a separator is a path, otherwise the folders of
 * %PATH% (not the current folder: Win32's old habit of looking there
 * first runs whatever a folder holds); a name without an extension gets
 * ".exe" then ".com", as CreateProcess would; a batch file (.bat, .cmd)
 * is never found (cmd.exe would read its arguments as commands). */
char *os_path_which(const char *name);

/* Does c separate names? '/' on POSIX; '/' and '\' on Windows. */
bool os_path_is_separator(char c);

/* Does path name the same place whatever the current folder is? ("/x";
 * "C:\x", "C:/x", "\\server\share\x") */
bool os_path_is_absolute(const char *path);

/* The folder part of path, malloc'd: what comes before its last
 * separator; the root itself when that is all ("/", "C:\"); "." when it
 * has none. */
char *os_path_dir(const char *path);

/* Is real_path strictly under real_dir? Both come from os_path_real.
 * Case-insensitive on Windows (ASCII letters), as lua/mcp/path.lua's
 * within is: the two must agree. */
bool os_path_inside(const char *real_dir, const char *real_path);

/* May the len bytes at name be one name of a relative path, meaning
 * exactly that file in that folder (mcp.bundle's names)? Always on POSIX;
 * on Windows not a device name (NUL, CON, COM1, "nul.txt"...), none of
 * \ : * ? " < > | or a control byte, and no trailing dot or space (which
 * Windows strips, so "data." would be "data"). */
bool os_path_name_ok(const char *name, size_t len);

#endif
