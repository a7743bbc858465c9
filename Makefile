# luamcp - Model Context Protocol servers written in Lua.
#
#   make          build build/luamcp (installing missing Debian packages)
#   make run      serve the example server (scripts/demo) on stdio
#   make test     every test suite; ends with "N passed, N failed"
#   make bench    benchmarks against the official TypeScript SDK

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
            runtime/server.c runtime/log.c runtime/strmap.c runtime/http_util.c runtime/schema.c runtime/regex.c
# Everything else of the runtime.
RUNTIME_SRC := $(CORE_SRC) runtime/lua_json.c runtime/lua_core.c runtime/lua_task.c runtime/lua_schema.c runtime/vm.c \
               runtime/stdio_transport.c runtime/http_transport.c runtime/main.c
LUA_LIB := $(shell find lua -name '*.lua' | LC_ALL=C sort)

OBJ := $(patsubst runtime/%.c,build/obj/%.o,$(RUNTIME_SRC)) build/obj/embedded_lua.o

.PHONY: all deps run test test-deps clean
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

UNIT_TESTS := build/tests/test_json build/tests/test_session build/tests/test_schema build/tests/test_regex

build/tests/test_%: runtime/tests/test_%.c $(CORE_SRC) | deps build/obj
	$(CC) $(CFLAGS) -fsanitize=address,undefined -o $@ $^ -lm

test: test-deps build/luamcp $(UNIT_TESTS)
	@spec/run-all.sh

clean:
	rm -rf build

-include $(OBJ:.o=.d)
