# luamcp - Model Context Protocol servers written in Lua.
#
#   make          build build/luamcp (installing missing Debian packages)
#   make run      serve the example server (scripts/demo) on stdio
#   make test     every test suite; ends with "N passed, N failed"
#   make bench    benchmarks against the official TypeScript SDK
#   make fuzz     every parser under libFuzzer (FUZZ_SECONDS each, default 60)

MULTIARCH := $(shell gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
LIBDIR    := /usr/lib/$(MULTIARCH)

CC      ?= gcc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Iruntime -Ibuild -I/usr/include/lua5.4 -MMD -MP
# Lua, lua-cjson, libuv and http_parser are linked statically; only the C
# library (libc, libm, libdl, libpthread) stays dynamic.
STATIC_LIBS := $(LIBDIR)/liblua5.4-cjson.a $(LIBDIR)/liblua5.4.a $(LIBDIR)/libuv_a.a $(LIBDIR)/libhttp_parser.a
LDLIBS  += -lm -ldl -lpthread

# The protocol core: no Lua, no libuv. Unit tests and fuzzers link only this.
CORE_SRC := runtime/buf.c runtime/json.c runtime/jsonrpc.c runtime/protocol.c runtime/session.c \
            runtime/server.c runtime/log.c runtime/strmap.c runtime/http_util.c runtime/schema.c runtime/regex.c \
            runtime/zip.c runtime/bundle.c
# Everything else of the runtime.
RUNTIME_SRC := $(CORE_SRC) runtime/lua_json.c runtime/lua_core.c runtime/lua_task.c runtime/lua_schema.c runtime/lua_exec.c \
               runtime/lua_fs.c runtime/vm.c runtime/reload.c runtime/watchdog.c runtime/lua_bundle.c runtime/build.c \
               runtime/stdio_transport.c runtime/http_transport.c runtime/main.c
LUA_LIB := $(shell find lua -name '*.lua' | LC_ALL=C sort)

OBJ := $(patsubst runtime/%.c,build/obj/%.o,$(RUNTIME_SRC)) build/obj/embedded_lua.o

.DEFAULT_GOAL := all

# make bench, make bench-smoke (the load client, the peers, the floor).
include bench/bench.mk

.PHONY: all deps run test test-deps fuzz clean
all: build/luamcp

deps:
	@runtime/tools/deps.sh build

build/luamcp: $(OBJ) | deps
	$(CC) $(CFLAGS) -o $@ $(OBJ) $(STATIC_LIBS) $(LDLIBS)

build/obj/%.o: runtime/%.c | deps build/obj
	$(CC) $(CFLAGS) -c -o $@ $<

build/obj/embedded_lua.o: build/embedded_lua.c | build/obj
	$(CC) $(CFLAGS) -c -o $@ $<

build/embedded_lua.c: build/embed $(LUA_LIB)
	build/embed $@ lua $(LUA_LIB)

build/embed: runtime/tools/embed.c | build/obj
	$(CC) -O1 -o $@ $<

build/obj:
	@mkdir -p build/obj build/tests

run: build/luamcp
	build/luamcp run scripts/demo

# ---- Tests ---------------------------------------------------------------

test-deps:
	@runtime/tools/deps.sh test

UNIT_TESTS := build/tests/test_json build/tests/test_session build/tests/test_schema build/tests/test_regex build/tests/test_bundle

build/tests/test_%: runtime/tests/test_%.c $(CORE_SRC) | deps build/obj
	$(CC) $(CFLAGS) -fsanitize=address,undefined -o $@ $^ -lm

test: test-deps build/luamcp build/luamcp-static $(UNIT_TESTS) $(BENCH_DIR)/loadclient
	@spec/run-all.sh

# A fully static runtime for `luamcp build --static`. glibc warns that dlopen
# (Lua's package.loadlib) and getpwuid_r (libuv) need its shared libraries at
# run time; luamcp calls neither, and a built program drops Lua's C-module
# searchers.
build/luamcp-static: $(OBJ) | deps
	$(CC) $(CFLAGS) -static -o $@ $(OBJ) $(STATIC_LIBS) $(LDLIBS)

# The runtime with AddressSanitizer and UBSan, for running the specs under
# them: make build/luamcp-asan && LUAMCP=build/luamcp-asan busted
ASAN_OBJ := $(patsubst runtime/%.c,build/asan/%.o,$(RUNTIME_SRC)) build/asan/embedded_lua.o
build/luamcp-asan: $(ASAN_OBJ)
	$(CC) $(CFLAGS) -fsanitize=address,undefined -o $@ $(ASAN_OBJ) $(STATIC_LIBS) $(LDLIBS)
build/asan/%.o: runtime/%.c | deps
	@mkdir -p build/asan
	$(CC) $(CFLAGS) -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -c -o $@ $<
build/asan/embedded_lua.o: build/embedded_lua.c
	@mkdir -p build/asan
	$(CC) $(CFLAGS) -fsanitize=address,undefined -c -o $@ $<

FUZZ_SECONDS ?= 60
fuzz: test-deps
	runtime/fuzz/run.sh $(FUZZ_SECONDS)

clean:
	rm -rf build

-include $(OBJ:.o=.d) $(ASAN_OBJ:.o=.d)
