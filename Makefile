# luamcp - Model Context Protocol servers written in Lua.
#
#   make          build build/luamcp (installing missing Debian packages)
#   make run      serve the example server (scripts/demo) on stdio
#   make test     every test suite, several at a time; ends with a table of their
#                 times and "N passed, N failed" (spec/run-all.sh)
#   make check    the inner loop: the C units, the core protocol specs and the
#                 conformance suite's two requirement sets (about a minute)
#   make bench    benchmarks against the official TypeScript SDK
#   make fuzz     every fuzz target under libFuzzer (FUZZ_SECONDS each, default 60)
#   make install  bin/luamcp, its man page, the LuaLS definitions and the runtimes
#                 for `luamcp build --target` that are built, under PREFIX
#                 (default /usr/local; DESTDIR for staging); make uninstall

MULTIARCH := $(shell gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
LIBDIR    := /usr/lib/$(MULTIARCH)

CC      ?= gcc
CFLAGS  ?= -O2 -g
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Iruntime -MMD -MP
CFLAGS  += $(BASE_CFLAGS) -Ibuild -I/usr/include/lua5.4
# Lua, lua-cjson, libuv, http_parser, OpenSSL's libcrypto (the HMAC that
# seals requestState), libyaml (SKILL.md front matter), zlib (the .mcpb's
# deflate), hiredis (--redis: mcp.store and the bus) and SQLite (mcp.sqlite) are linked statically; only the C library (libc, libm, libdl,
# libpthread) stays dynamic. CORE_LIBS are what runtime/core itself needs:
# the unit tests and runtime/tools/fuzz.sh link the core with them alone.
CORE_LIBS   := $(LIBDIR)/libcrypto.a $(LIBDIR)/libz.a
STATIC_LIBS := $(LIBDIR)/liblua5.4-cjson.a $(LIBDIR)/liblua5.4.a $(LIBDIR)/libuv_a.a $(LIBDIR)/libhttp_parser.a \
               $(LIBDIR)/libyaml.a $(LIBDIR)/libhiredis.a $(LIBDIR)/libsqlite3.a $(CORE_LIBS)
LDLIBS  += -lm -ldl -lpthread
# Lua C modules (require "luasql.sqlite3") are shared libraries that take
# the Lua C API from the program that loads them: export it, and nothing
# else, from luamcp. libcurl is not linked: mcp.http loads it on first use.
EXPORT_LUA_API := -Wl,--export-dynamic-symbol=lua_* -Wl,--export-dynamic-symbol=luaL_* \
                  -Wl,--export-dynamic-symbol=luaopen_*

# The layers, one folder each (README "Architecture"); a file includes and
# calls only its own folder and the folders below it, and the calls within a
# folder make no new loop (runtime/tools/check-layers.sh, call-loops.txt):
#   os/         the platform seams (runtime/os/README): one file per OS      -> os
#   core/       JSON, JSON-RPC, versions, sessions, schema, regex, limits, bundles, ZIP: no Lua, no libuv
#   transport/  stdio and HTTP over libuv                                          -> core
#   app/        generations, tasks, the watchdog, one file per Lua binding          -> core
#   cli/        the commands: run, dev, build, inspect, install                      -> everything
# os/ holds the platform seams (runtime/os/README): one interface, one file
# per OS; a native build compiles the files whose suffix is in OS_SUFFIXES.
OS_SUFFIXES   := posix linux
OS_SRC        := $(sort $(foreach s,$(OS_SUFFIXES),$(wildcard runtime/os/*_$(s).c)))
# The seams the core itself calls (randomness, hashes, the executable's
# path, the log's stderr and whether it is a terminal): the unit tests and the fuzzers link the core with these alone.
OS_CORE_SRC   := $(filter runtime/os/crypto_% runtime/os/self_% runtime/os/stderr_% runtime/os/terminal_%,$(OS_SRC))
CORE_SRC      := $(sort $(wildcard runtime/core/*.c))
TRANSPORT_SRC := $(sort $(wildcard runtime/transport/*.c))
APP_SRC       := $(sort $(wildcard runtime/app/*.c))
CLI_SRC       := $(sort $(wildcard runtime/cli/*.c))
RUNTIME_SRC   := $(OS_SRC) $(CORE_SRC) $(TRANSPORT_SRC) $(APP_SRC) $(CLI_SRC)
# The library embedded into the binary: every lua/**/*.lua except lua/meta/,
# the LuaLS definitions (---@meta) for editors. Those declare the API with
# empty bodies; embedded, `require "meta.mcp"` would load a fake library.
LUA_LIB := $(shell find lua -path lua/meta -prune -o -name '*.lua' -print | LC_ALL=C sort)

# The core compiles with no Lua include path, and with stand-ins for the Lua
# and libuv headers that stop the build if a core file includes one.
CORE_CFLAGS := $(BASE_CFLAGS) -Ibuild/core-guard
CORE_GUARD  := $(addprefix build/core-guard/,uv.h lua.h lauxlib.h lualib.h)

# The web inspector's page (luamcp dev --ui): every file in runtime/ui/,
# kept as it is (transport/ui_http.h).
UI_FILES := $(sort $(wildcard runtime/ui/*.html runtime/ui/*.js runtime/ui/*.css runtime/ui/*.svg))
OBJ := $(patsubst runtime/%.c,build/obj/%.o,$(RUNTIME_SRC)) build/obj/embedded_lua.o build/obj/embedded_ui.o

.DEFAULT_GOAL := all
# Every build runs on all the cores: what compiles waits for the packages
# (an order-only `| deps`), and the recipes say what else waits for what.
MAKEFLAGS += --jobs=$(shell nproc 2>/dev/null || echo 2)

# make bench, make bench-smoke (the load client, the peers, the floor).
include bench/bench.mk
# make windows (build/windows/luamcp.exe), make linux-arm64: cross builds.
include runtime/tools/cross/windows.mk
include runtime/tools/cross/arm64.mk
# make fresh-machine-test: make, make run and make test on a new Debian 12
# machine (a debootstrap chroot).
include runtime/tools/fresh-machine.mk

.PHONY: all deps run test check test-build check-build test-deps test-tools foreign-node fuzz clean install uninstall
all: build/luamcp

deps:
	@runtime/tools/deps.sh build

build/luamcp: $(OBJ) | deps
	$(CC) $(CFLAGS) $(EXPORT_LUA_API) -o $@ $(OBJ) $(STATIC_LIBS) $(LDLIBS)

build/obj/core/%.o: runtime/core/%.c $(CORE_GUARD) | deps build/obj
	@mkdir -p $(@D)
	$(CC) $(filter -O% -g,$(CFLAGS)) $(CORE_CFLAGS) -c -o $@ $<

build/obj/%.o: runtime/%.c | deps build/obj
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

$(CORE_GUARD):
	@mkdir -p build/core-guard
	@printf '#error "runtime/core/ may not include <%s>: the protocol core builds and is tested without Lua and libuv"\n' $(@F) >$@

build/obj/embedded_lua.o: build/embedded_lua.c | build/obj
	$(CC) $(CFLAGS) -c -o $@ $<

build/embedded_lua.c: build/embed $(LUA_LIB)
	build/embed $@ lua $(LUA_LIB)

build/obj/embedded_ui.o: build/embedded_ui.c | build/obj
	$(CC) $(CFLAGS) -c -o $@ $<

build/embedded_ui.c: build/embed $(UI_FILES) | build/obj
	build/embed --files $@ runtime/ui $(UI_FILES)

# embed compiles the library to bytecode with the host's Lua 5.4 (the same
# release the cross builds link: runtime/tools/embed.c).
build/embed: runtime/tools/embed.c | deps build/obj
	$(CC) -O1 -I/usr/include/lua5.4 -o $@ $< $(LIBDIR)/liblua5.4.a -lm

build/obj:
	@mkdir -p $(addprefix build/obj/,os core transport app cli) build/tests

run: build/luamcp
	build/luamcp run scripts/demo

# ---- Installing ----------------------------------------------------------

PREFIX  ?= /usr/local
BINDIR  := $(PREFIX)/bin
MAN1DIR := $(PREFIX)/share/man/man1
# The library's definitions for the Lua language server (LuaLS): mcp and
# mcp.testing.
METADIR    := $(PREFIX)/share/luamcp/meta
META_FILES := $(wildcard lua/meta/*.lua)

# The runtimes `luamcp build --target TARGET` appends a bundle to, as
# TARGET:FILE (runtime/cli/target.c looks for RUNTIMESDIR/TARGET/luamcp, or
# luamcp.exe for Windows, from bin/luamcp). linux-x64 is the fully static
# build, which runs on any Linux x86-64. install copies those that are built
# (make build/luamcp-static, make linux-arm64, make windows) and builds none.
RUNTIMESDIR := $(PREFIX)/share/luamcp/runtimes
RUNTIMES    := linux-x64:build/luamcp-static linux-arm64:build/linux-arm64/luamcp windows-x64:build/windows/luamcp.exe
runtime_target = $(word 1,$(subst :, ,$(1)))
runtime_file   = $(word 2,$(subst :, ,$(1)))
runtime_dest   = $(DESTDIR)$(RUNTIMESDIR)/$(call runtime_target,$(1))/luamcp$(suffix $(call runtime_file,$(1)))

# A runtime for another machine (build --target, release) goes into every
# program built from it, and so into every download of one: it carries no
# debug information. That goes to RUNTIME.debug beside it, which gdb finds
# by the link the runtime keeps (gnu-debuglink). $(1) is the target's objcopy.
split_debug = $(1) --only-keep-debug $@ $@.debug && $(1) --strip-all --add-gnu-debuglink=$@.debug $@

# Every runtime `luamcp build --target` and `luamcp release` append scripts
# to, built here (the cross compilers and libraries are installed or built
# from Debian's sources the first time: minutes).
.PHONY: runtimes
runtimes: build/luamcp build/luamcp-static linux-arm64 windows

install: build/luamcp
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MAN1DIR)
	install -m 755 build/luamcp $(DESTDIR)$(BINDIR)/luamcp
	install -m 644 runtime/cli/man/luamcp.1 $(DESTDIR)$(MAN1DIR)/luamcp.1
	install -d $(DESTDIR)$(METADIR)
	install -m 644 $(META_FILES) $(DESTDIR)$(METADIR)/
	@$(foreach r,$(RUNTIMES),if [ -f $(call runtime_file,$(r)) ]; then \
	  echo "install $(call runtime_file,$(r)) as the $(call runtime_target,$(r)) runtime"; \
	  install -d $(dir $(call runtime_dest,$(r))) && \
	  install -m 755 $(call runtime_file,$(r)) $(call runtime_dest,$(r)) || exit 1; fi;)

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/luamcp $(DESTDIR)$(MAN1DIR)/luamcp.1 $(addprefix $(DESTDIR)$(METADIR)/,$(notdir $(META_FILES)))
	rm -f $(foreach r,$(RUNTIMES),$(call runtime_dest,$(r)))
	rmdir $(foreach r,$(RUNTIMES),$(dir $(call runtime_dest,$(r)))) $(DESTDIR)$(RUNTIMESDIR) 2>/dev/null || true
	rmdir $(DESTDIR)$(METADIR) $(DESTDIR)$(PREFIX)/share/luamcp 2>/dev/null || true

# ---- Tests ---------------------------------------------------------------

test-deps:
	@runtime/tools/deps.sh test

# The test tools from npm (spec/package.json: Node 22, the official SDKs,
# oidc-provider, the conformance suite) in spec/node_modules, installed
# again when spec/package-lock.json changes (spec/run-all.sh makes this too).
test-tools: test-deps spec/node_modules/.package-lock.json
spec/node_modules/.package-lock.json: spec/package-lock.json
	cd spec && npm ci --prefer-offline --no-audit --no-fund --loglevel=error

# Node for linux-arm64 and windows-x64 (spec/foreign-node), which
# spec/release_npm_spec.lua runs under qemu and wine: the npm launcher picks
# the right platform package there. About 270 MB, so only for that spec;
# --force, as their os/cpu are not this machine's.
foreign-node: spec/foreign-node/node_modules/.package-lock.json
spec/foreign-node/node_modules/.package-lock.json: spec/foreign-node/package-lock.json
	cd spec/foreign-node && npm ci --force --prefer-offline --no-audit --no-fund --loglevel=error

UNIT_TESTS := build/tests/test_json build/tests/test_session build/tests/test_schema build/tests/test_regex build/tests/test_bundle \
              build/tests/test_jwt build/tests/test_trace \
              build/tests/test_path build/tests/test_sign

# The unit tests link the core under ASan/UBSan, compiled once for all of
# them (build/unit/), with the core's own flags (no Lua, no libuv).
UNIT_CORE_OBJ := $(patsubst runtime/%.c,build/unit/%.o,$(CORE_SRC) $(OS_CORE_SRC))
build/unit/%.o: runtime/%.c $(CORE_GUARD) | deps
	@mkdir -p $(@D)
	$(CC) $(filter -O% -g,$(CFLAGS)) $(CORE_CFLAGS) -fsanitize=address,undefined -c -o $@ $<
build/tests/test_%: runtime/core/tests/test_%.c $(UNIT_CORE_OBJ) $(CORE_GUARD) | deps build/obj
	$(CC) $(filter -O% -g,$(CFLAGS)) $(CORE_CFLAGS) -fsanitize=address,undefined -o $@ $< $(UNIT_CORE_OBJ) $(CORE_LIBS) -lm -ldl -lpthread
UNIT_TESTS += build/tests/test_sse_reader build/tests/test_wire_log

# The path seam, with the platform's own file (the Windows build runs the
# same test under wine: runtime/os/tests/test_path.c says how).
build/tests/test_path: runtime/os/tests/test_path.c $(filter runtime/os/path_%,$(OS_SRC)) | deps build/obj
	$(CC) $(filter -O% -g,$(CFLAGS)) $(BASE_CFLAGS) -fsanitize=address,undefined -o $@ $(filter %.c,$^)

# os_sign_pem (luamcp call's private_key_jwt) with the platform's own
# crypto file (the Windows build runs the same test under wine:
# runtime/os/tests/seams_windows.sh).
build/tests/test_sign: runtime/os/tests/test_sign.c $(filter runtime/os/crypto_%,$(OS_SRC)) | deps build/obj
	$(CC) $(filter -O% -g,$(CFLAGS)) $(BASE_CFLAGS) -fsanitize=address,undefined -o $@ $(filter %.c,$^) $(CORE_LIBS) -lm -ldl -lpthread

# app/auth_verifier.c alone on a loop, driven line by line by
# spec/auth_verifier_spec.lua (its fetches counted by a fake authorization
# server): the core, the OS seams, libuv, and the two app files it needs.
AUTH_DRIVER_OBJ := build/obj/app/auth_verifier.o build/obj/app/auth_cache.o build/obj/app/curl_loop.o build/obj/app/curl_lib.o \
                   $(patsubst runtime/%.c,build/obj/%.o,$(CORE_SRC) $(OS_SRC))
build/tests/auth_verifier_driver: runtime/app/tests/auth_verifier_driver.c $(AUTH_DRIVER_OBJ) | deps build/obj
	$(CC) $(CFLAGS) -o $@ $< $(AUTH_DRIVER_OBJ) $(LIBDIR)/libuv_a.a $(CORE_LIBS) $(LDLIBS)
# The same under ASan/UBSan, for the run of the specs under the sanitizers:
# the sharing and freeing of checks, fetches and the verifier itself.
AUTH_DRIVER_ASAN_OBJ := $(patsubst build/obj/%,build/asan/%,$(AUTH_DRIVER_OBJ))
build/tests/auth_verifier_driver-asan: runtime/app/tests/auth_verifier_driver.c $(AUTH_DRIVER_ASAN_OBJ) | deps build/obj
	$(CC) $(CFLAGS) -fsanitize=address,undefined -o $@ $< $(AUTH_DRIVER_ASAN_OBJ) $(LIBDIR)/libuv_a.a $(CORE_LIBS) $(LDLIBS)

# make test: spec/run-all.sh builds test-build, then runs every suite,
# several at a time, the cross builds (make windows, make linux-arm64) and
# their suites among them; it ends with the suites' wall times.
test: test-deps
	@spec/run-all.sh

# make check: the inner loop of editing (docs/tests.md).
check: test-deps
	@spec/run-all.sh --check

# What the native suites run (the cross builds are built by their suites).
test-build: build/luamcp build/luamcp-static build/luamcp-asan $(UNIT_TESTS) $(BENCH_DIR)/loadclient \
            build/tests/auth_verifier_driver build/tests/auth_verifier_driver-asan
check-build: build/luamcp $(UNIT_TESTS)

# A fully static runtime for `luamcp build --static`. glibc warns that dlopen
# (Lua's package.loadlib) and getpwuid_r (libuv) need its shared libraries at
# run time; luamcp calls neither, and a built program drops Lua's C-module
# searchers. getaddrinfo and gethostbyname (hiredis, --redis) need them only
# to resolve a host name through NSS: --redis with an address or unix://
# needs nothing. A static program cannot load libcurl, so it links one in:
# built from Debian's source package of curl with OpenSSL, zlib and c-ares
# (its resolver needs no NSS) by runtime/tools/cross/static-deps.sh, and
# app/curl_lib.c compiled for it (LUAMCP_CURL_STATIC). libcurl and OpenSSL
# still initialise at the first request, never at start. c-ares warns of
# getservbyname: curl asks it for numeric ports only (ARES_AI_NUMERICSERV).
STATIC_CURL     := build/static/deps
STATIC_OBJ      := $(filter-out build/obj/app/curl_lib.o,$(OBJ)) build/static/obj/app/curl_lib.o
STATIC_TLS_LIBS := $(STATIC_CURL)/lib/libcurl.a $(LIBDIR)/libcares.a $(LIBDIR)/libssl.a
build/luamcp-static: $(STATIC_OBJ) | deps
	$(CC) $(CFLAGS) -static -o $@ $(STATIC_OBJ) $(STATIC_TLS_LIBS) $(STATIC_LIBS) $(LDLIBS)
	$(call split_debug,objcopy)

# A fully static runtime without libcurl (the objects of build/luamcp, whose
# curl_lib.c loads it at run time, which a static program cannot): what
# spec/build_spec.lua builds with to see `luamcp build` name what a target's
# runtime lacks. Nothing ships it.
build/tests/luamcp-static-nocurl: $(OBJ) | deps build/obj
	$(CC) $(CFLAGS) -static -o $@ $(OBJ) $(STATIC_LIBS) $(LDLIBS)

$(STATIC_CURL)/stamp-all: runtime/tools/cross/static-deps.sh | deps
	@runtime/tools/cross/static-deps.sh x86-64 build/static

build/static/obj/app/curl_lib.o: runtime/app/curl_lib.c $(STATIC_CURL)/stamp-all | deps
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -I$(STATIC_CURL)/include -DLUAMCP_CURL_STATIC -c -o $@ $<

# luamcp with more HTTP endpoint families, linked from the objects already
# built (spec/routes_spec.lua): make build/luamcp-routes
# EXTRA_ROUTES="dir/x_route.c ...", each X_route.c defining X_family, which
# joins the end of the table in runtime/transport/http_routes.c.
EXTRA_ROUTES   ?=
EXTRA_FAMILIES := $(patsubst %_route,%_family,$(basename $(notdir $(EXTRA_ROUTES))))
ROUTES_OBJ     := $(patsubst %.c,build/routes/%.o,$(EXTRA_ROUTES))
# Rebuilt when the list changes (not only when a file does).
build/routes/families: FORCE
	@mkdir -p $(@D)
	@echo '$(EXTRA_FAMILIES)' | cmp -s - $@ || echo '$(EXTRA_FAMILIES)' >$@
build/routes/http_routes.o: runtime/transport/http_routes.c build/routes/families | deps
	$(CC) $(CFLAGS) '-DHTTP_EXTRA_ROUTE_FAMILIES(X)=$(foreach f,$(EXTRA_FAMILIES),X($(f)))' -c -o $@ $<
build/routes/%.o: %.c | deps
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<
build/luamcp-routes: $(filter-out build/obj/transport/http_routes.o,$(OBJ)) build/routes/http_routes.o $(ROUTES_OBJ)
	$(CC) $(CFLAGS) $(EXPORT_LUA_API) -o $@ $^ $(STATIC_LIBS) $(LDLIBS)
.PHONY: FORCE
FORCE:

# The runtime with AddressSanitizer and UBSan, for running the specs under
# them: make build/luamcp-asan && LUAMCP=build/luamcp-asan busted
ASAN_OBJ := $(patsubst runtime/%.c,build/asan/%.o,$(RUNTIME_SRC)) build/asan/embedded_lua.o build/asan/embedded_ui.o
build/luamcp-asan: $(ASAN_OBJ)
	$(CC) $(CFLAGS) -fsanitize=address,undefined $(EXPORT_LUA_API) -o $@ $(ASAN_OBJ) $(STATIC_LIBS) $(LDLIBS)
build/asan/%.o: runtime/%.c | deps
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -c -o $@ $<
build/asan/embedded_lua.o: build/embedded_lua.c
	@mkdir -p build/asan
	$(CC) $(CFLAGS) -fsanitize=address,undefined -c -o $@ $<
build/asan/embedded_ui.o: build/embedded_ui.c
	@mkdir -p build/asan
	$(CC) $(CFLAGS) -fsanitize=address,undefined -c -o $@ $<

FUZZ_SECONDS ?= 60
fuzz: test-deps
	runtime/tools/fuzz.sh $(FUZZ_SECONDS)

clean:
	rm -rf build

-include $(OBJ:.o=.d) build/static/obj/app/curl_lib.d $(ASAN_OBJ:.o=.d) $(wildcard build/routes/*.d) $(ROUTES_OBJ:.o=.d)
