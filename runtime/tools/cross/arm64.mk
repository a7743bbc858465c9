# make linux-arm64: build/linux-arm64/luamcp, a static aarch64 Linux binary
# like build/luamcp-static, cross-built with Debian's aarch64 compiler
# (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross) and its :arm64 multiarch
# libraries in /usr/lib/aarch64-linux-gnu (runtime/tools/cross/arm64-deps.sh
# installs what is missing; http_parser, which cannot be installed beside
# the native one, is unpacked into build/linux-arm64/deps). The embedded
# Lua library is the native build's build/embedded_lua.c (build/embed runs
# here, not on arm64). Run it here with qemu-user-static
# (runtime/tools/cross/qemu-binfmt.sh); make test does (spec/run-all.sh,
# run_foreign).

ARM64_DIR    := build/linux-arm64
ARM64_CC     := aarch64-linux-gnu-gcc
ARM64_LIBDIR := /usr/lib/aarch64-linux-gnu
ARM64_DEPS   := $(ARM64_DIR)/deps
# The seams' files for Linux, picked by suffix as the native build does.
ARM64_OS_SUFFIXES := posix linux
ARM64_OS_SRC = $(sort $(foreach s,$(ARM64_OS_SUFFIXES),$(wildcard runtime/os/*_$(s).c)))
ARM64_SRC    = $(ARM64_OS_SRC) $(CORE_SRC) $(TRANSPORT_SRC) $(APP_SRC) $(CLI_SRC)
# libcurl linked in, as build/luamcp-static (see there): app/curl_lib.c
# compiled for it, and libcurl from runtime/tools/cross/static-deps.sh.
ARM64_CURL   := $(ARM64_DIR)/curl/deps
ARM64_OBJ    = $(patsubst runtime/%.c,$(ARM64_DIR)/obj/%.o,$(filter-out runtime/app/curl_lib.c,$(ARM64_SRC))) \
               $(ARM64_DIR)/obj/static/app/curl_lib.o $(ARM64_DIR)/obj/embedded_lua.o \
               $(ARM64_DIR)/obj/embedded_ui.o
ARM64_CFLAGS = $(CFLAGS) -I$(ARM64_DEPS)/usr/include
ARM64_CORE_LIBS   := $(ARM64_LIBDIR)/libcrypto.a $(ARM64_LIBDIR)/libz.a
ARM64_STATIC_LIBS := $(ARM64_CURL)/lib/libcurl.a $(ARM64_LIBDIR)/libcares.a $(ARM64_LIBDIR)/libssl.a \
                     $(ARM64_LIBDIR)/liblua5.4-cjson.a $(ARM64_LIBDIR)/liblua5.4.a $(ARM64_LIBDIR)/libuv_a.a \
                     $(ARM64_DEPS)/usr/lib/aarch64-linux-gnu/libhttp_parser.a $(ARM64_LIBDIR)/libyaml.a \
                     $(ARM64_LIBDIR)/libhiredis.a $(ARM64_LIBDIR)/libsqlite3.a $(ARM64_CORE_LIBS)

.PHONY: linux-arm64 arm64-deps
linux-arm64: $(ARM64_DIR)/luamcp

# After the native deps: build/embed, which writes the embedded Lua
# source, is built with the native compiler.
arm64-deps: deps
	@runtime/tools/cross/arm64-deps.sh $(ARM64_DEPS)

# Fully static, as build/luamcp-static (see there for glibc's link warnings).
$(ARM64_DIR)/luamcp: $(ARM64_OBJ) | arm64-deps
	$(ARM64_CC) $(CFLAGS) -static -o $@ $(ARM64_OBJ) $(ARM64_STATIC_LIBS) $(LDLIBS)
	$(call split_debug,aarch64-linux-gnu-objcopy)

$(ARM64_DIR)/obj/core/%.o: runtime/core/%.c $(CORE_GUARD) | arm64-deps
	@mkdir -p $(@D)
	$(ARM64_CC) $(filter -O% -g,$(CFLAGS)) $(CORE_CFLAGS) -c -o $@ $<

$(ARM64_DIR)/obj/%.o: runtime/%.c | arm64-deps
	@mkdir -p $(@D)
	$(ARM64_CC) $(ARM64_CFLAGS) -c -o $@ $<

$(ARM64_CURL)/stamp-all: runtime/tools/cross/static-deps.sh | arm64-deps
	@runtime/tools/cross/static-deps.sh arm64 $(ARM64_DIR)/curl

$(ARM64_DIR)/obj/static/app/curl_lib.o: runtime/app/curl_lib.c $(ARM64_CURL)/stamp-all | arm64-deps
	@mkdir -p $(@D)
	$(ARM64_CC) $(ARM64_CFLAGS) -I$(ARM64_CURL)/include -DLUAMCP_CURL_STATIC -c -o $@ $<

$(ARM64_DIR)/obj/embedded_lua.o: build/embedded_lua.c | arm64-deps
	@mkdir -p $(@D)
	$(ARM64_CC) $(ARM64_CFLAGS) -c -o $@ $<
$(ARM64_DIR)/obj/embedded_ui.o: build/embedded_ui.c | arm64-deps
	@mkdir -p $(@D)
	$(ARM64_CC) $(ARM64_CFLAGS) -c -o $@ $<


-include $(ARM64_OBJ:.o=.d)
