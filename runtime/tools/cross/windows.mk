# make windows: build/windows/luamcp.exe, cross-built on Debian 12 with its
# mingw-w64 toolchain (issue #28). One static PE32+ x86-64 program that
# needs only Windows' own DLLs. Its libraries are built from Debian's source
# packages by runtime/tools/cross/windows-deps.sh into build/windows/deps
# (once: a stamp per library); build/windows/luamcp-wine runs it under wine.
#
# Every option works as on Linux (docs/platforms.md). --workers N: the
# supervisor hands its listening socket to each worker over the worker's
# libuv IPC pipe instead of fd 4 (runtime/cli/supervisor.c). --redis:
# hiredis, compiled for Winsock by windows-deps.sh (posix-sockets/).

WIN_DIR  := build/windows
WIN_HOST := x86_64-w64-mingw32
# The -win32 variant: nothing needs pthreads (libuv has its own threads on
# Windows), so no winpthread to link.
WIN_CC   := $(WIN_HOST)-gcc-win32
WIN_DEPS := $(WIN_DIR)/deps
WIN_DEPS_STAMP := $(WIN_DEPS)/stamp-all

WIN_SRC := $(sort $(wildcard runtime/os/*_windows.c)) $(CORE_SRC) $(TRANSPORT_SRC) $(APP_SRC) $(CLI_SRC)
WIN_OBJ := $(patsubst runtime/%.c,$(WIN_DIR)/obj/%.o,$(WIN_SRC)) $(WIN_DIR)/obj/embedded_lua.o $(WIN_DIR)/obj/embedded_ui.o \
           $(WIN_DIR)/obj/resources.o

# gnu11, not c11: mingw's headers hide their POSIX names (fileno, strdup)
# under strict ISO C; _GNU_SOURCE as on Linux (vasprintf). Windows 8 is
# the oldest target (libuv 1.44's). __USE_MINGW_ANSI_STDIO: C99 printf
# formats (%zu, %lld) everywhere; -Wno-format because gcc checks
# format(printf) against msvcrt's printf all the same (the Linux build
# checks the formats). _POSIX_THREAD_SAFE_FUNCTIONS: gmtime_r,
# localtime_r. os/libc_windows.h: the POSIX functions mingw lacks.
# CURL_STATICLIB, YAML_DECLARE_STATIC: the static libraries' headers would
# otherwise declare their functions as DLL imports.
WIN_CFLAGS := -O2 -g -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-format -MMD -MP \
              -include runtime/os/libc_windows.h -Iruntime -Ibuild \
              -I$(WIN_DEPS)/include -I$(WIN_DEPS)/include/lua5.4 -I$(WIN_DIR)/wslay-include \
              -D_WIN32_WINNT=0x0602 -DWIN32_LEAN_AND_MEAN -D__USE_MINGW_ANSI_STDIO=1 -D_POSIX_THREAD_SAFE_FUNCTIONS=200112L \
              -DCURL_STATICLIB -DYAML_DECLARE_STATIC -DLUAMCP_CURL_STATIC
WIN_LIBS := $(addprefix $(WIN_DEPS)/lib/,libcurl.a liblua5.4-cjson.a liblua5.4.a libuv_a.a libhttp_parser.a libyaml.a libsqlite3.a libhiredis.a) \
            -lz -lbcrypt -lcrypt32 -lsecur32 -lws2_32 -liphlpapi -luserenv -lpsapi -ldbghelp -lole32 \
            -lshlwapi -ladvapi32 -luser32 -lshell32 -lkernel32

.PHONY: windows windows-deps
windows: $(WIN_DIR)/luamcp.exe $(WIN_DIR)/luamcp-wine

# make test builds it and runs the Windows suites under wine
# (spec/run-all.sh foreign_windows).

windows-deps: $(WIN_DEPS_STAMP)
$(WIN_DEPS_STAMP): runtime/tools/cross/windows-deps.sh
	runtime/tools/cross/windows-deps.sh $(WIN_DIR)

$(WIN_DIR)/luamcp.exe: $(WIN_OBJ)
	$(WIN_CC) -static -o $@ $(WIN_OBJ) $(WIN_LIBS)
	$(call split_debug,$(WIN_HOST)-objcopy)

# libwslay's header only (os/wslay.h's types), from Debian's libwslay-dev:
# the Windows build has no libwslay (os/wslay_windows.c says so), and the
# mingw compiler must not search /usr/include for it.
$(WIN_DIR)/wslay-include/wslay/wslay.h: /usr/include/wslay/wslay.h
	@mkdir -p $(@D)
	cp /usr/include/wslay/wslay.h /usr/include/wslay/wslayver.h $(@D)/

$(WIN_DIR)/obj/%.o: runtime/%.c | $(WIN_DEPS_STAMP) $(WIN_DIR)/wslay-include/wslay/wslay.h
	@mkdir -p $(@D)
	$(WIN_CC) $(WIN_CFLAGS) -c -o $@ $<

$(WIN_DIR)/obj/embedded_lua.o: build/embedded_lua.c | $(WIN_DEPS_STAMP)
	@mkdir -p $(@D)
	$(WIN_CC) $(WIN_CFLAGS) -c -o $@ $<
$(WIN_DIR)/obj/embedded_ui.o: build/embedded_ui.c | $(WIN_DEPS_STAMP)
	@mkdir -p $(@D)
	$(WIN_CC) $(WIN_CFLAGS) -c -o $@ $<

# The application manifest (UTF-8 as the program's code page: see
# luamcp.manifest).
$(WIN_DIR)/obj/resources.o: runtime/tools/cross/windows.rc runtime/tools/cross/luamcp.manifest | $(WIN_DEPS_STAMP)
	@mkdir -p $(@D)
	$(WIN_HOST)-windres -O coff -i $< -o $@

# The tests' LUAMCP: the .exe under Debian's wine, quietly, in a prefix of
# its own (made once: wineboot takes a while).
$(WIN_DIR)/luamcp-wine: runtime/tools/cross/luamcp-wine | $(WIN_DIR)/wineprefix.stamp
	cp $< $@

# wineboot -i makes the prefix (about 25 s, and wineserver lingers a few
# seconds after); the stamp, not the prefix's files (wine rewrites them on
# every run), says it is done. mscoree, mshtml: no Mono or Gecko installer.
$(WIN_DIR)/wineprefix.stamp: | $(WIN_DEPS_STAMP)
	WINEPREFIX=$(abspath $(WIN_DIR))/wineprefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" wineboot -i
	WINEPREFIX=$(abspath $(WIN_DIR))/wineprefix wineserver -w
	touch $@

-include $(WIN_OBJ:.o=.d)
