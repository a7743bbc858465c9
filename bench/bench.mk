# bench/bench.mk -- benchmark targets; included from the top-level Makefile,
# and usable alone: make -f bench/bench.mk bench-build
#
#   make bench          the full side-by-side run (bench/run.sh; ~30 min):
#                       luamcp vs the official TypeScript SDK (v1 and v2) vs
#                       the floor; writes bench/results/YYYY-MM-DD.md.
#                       Settings are environment variables, see bench/run.sh
#                       (QUICK=1 make bench: a few minutes).
#   make bench-smoke    a few hundred calls against $(LUAMCP) over stdio and
#                       Streamable HTTP, checking every answer (seconds);
#                       HTTP is skipped while `$(LUAMCP) --help` has no --http.
#   make bench-build    the load client and the floor servers, in build/bench/.
#   make bench-extra    only the extra measurements (bench/extra.lua): argument
#                       validation, stopping runaway code, reload latency,
#                       mcp.http against Node's fetch.
#   make bench-redis    only what --redis costs (bench/redis.lua): the bus per
#                       notify_resource_updated (sender and receiver CPU) and
#                       mcp.store.incr in the process against Redis.
#   make bench-payload  only the payload sweep (bench/payload.lua): text
#                       returned and echoed, a base64 blob, structuredContent,
#                       1 KiB to 4 MiB, server CPU per MiB and peak RSS
#                       (QUICK=1: about two minutes).
#                       It ends with start-up (spawn -> initialize answer)
#                       beside the previous release's build (bench/startup.sh,
#                       bench/baseline.sh; BASELINE_REF=commit to choose).
#   make bench-startup  only that (ROUNDS=30 spawns of each, alternating).
#   make bench-cross    the small-call figures (start-up, stdio, HTTP) of the
#                       native builds and build/linux-arm64/luamcp under qemu
#                       side by side (bench/cross.sh; about a minute).
#   make bench-metrics  only what counting metrics costs a small call
#                       (bench/metrics.sh): on (the default) vs --metrics off,
#                       alternating in the same run, stdio and HTTP, the
#                       ratio (QUICK=1: under a minute).
#   make bench-ui       only what the web inspector's page costs a server
#                       (bench/ui.sh, #45): luamcp dev --ui over stdio at
#                       --rate 5000 with no page and with a headless
#                       Chromium attached, alternating, the ratio of calls/s
#                       (>= 0.95 wanted), server CPU per call, latency; and
#                       the same unpaced (pipe, window 64); instructions per
#                       call under callgrind, page and no page. Skipped, and
#                       said so, without chromium. QUICK=1: about two minutes.
#   make bench-sqlite   only mcp.sqlite against node:sqlite on the TypeScript
#                       SDK v2 (bench/sqlite.lua): a tool inserting a row and
#                       reading it back by id, calls/s and server CPU per
#                       call (QUICK=1: under a minute).
#   make bench-a2a      only the A2A agent (bench/a2a.sh): luamcp's mcp.agent
#                       beside the @a2a-js/sdk Express server on the same small
#                       SendMessage, requests/s and server CPU per request,
#                       then instructions per request under callgrind (about
#                       four minutes, IR=0: about one; QUICK=1: about one).
#   make bench-scale    only the scale-out figures (bench/scale.sh): a 1 ms
#                       CPU-bound tool, 1 vs 2 workers, nginx in front of
#                       luamcp and of the TypeScript SDK v2; and 6 calls of
#                       300 ms of CPU at once on 6 new connections, 1 vs 2
#                       workers (QUICK=1: about a minute). The Redis bus's
#                       price is make bench-redis.
#
# Only BENCH_* names are defined here (plus LUAMCP ?=), so nothing leaks into
# the project's own build; the bench never uses the project's CFLAGS.

LUAMCP ?= build/luamcp
BENCH_DIR ?= build/bench
BENCH_CC ?= cc
BENCH_CFLAGS ?= -std=c11 -O2 -Wall -Wextra
BENCH_MULTIARCH := $(shell $(BENCH_CC) -print-multiarch 2>/dev/null)
BENCH_LIBDIR ?= /usr/lib/$(BENCH_MULTIARCH)
BENCH_LUA_CFLAGS ?= -I/usr/include/lua5.4
# the floor links Lua 5.4 and lua-cjson statically, as luamcp does
BENCH_LUA_LIBS ?= $(BENCH_LIBDIR)/liblua5.4-cjson.a $(BENCH_LIBDIR)/liblua5.4.a -lm
# bench-smoke: what to run; override to smoke-test another server, e.g.
#   make bench-smoke BENCH_SMOKE_STDIO="node bench/peer/ts-stdio.mjs" \
#     BENCH_SMOKE_HTTP="node bench/peer/ts-http.mjs --port {port}"
BENCH_SMOKE_STDIO ?= $(LUAMCP) run bench/servers/add
BENCH_SMOKE_HTTP ?= $(LUAMCP) run --http 127.0.0.1:{port} bench/servers/add
BENCH_SMOKE_HTTP_PATH ?= /mcp
# auto: stdio, and HTTP once `$(LUAMCP) --help` lists --http; or "stdio http"
BENCH_SMOKE_TRANSPORTS ?= auto

.PHONY: bench bench-smoke bench-build bench-cross bench-metrics bench-startup

# The build packages (runtime/tools/deps.sh), also when this file is used
# alone (make -f bench/bench.mk bench-build, as bench/run.sh does), where
# the top-level Makefile's deps target is not there.
.PHONY: bench-deps
bench-deps:
	@runtime/tools/deps.sh build

bench-build: $(BENCH_DIR)/loadclient $(BENCH_DIR)/luafloor $(BENCH_DIR)/echo $(BENCH_DIR)/httpecho

$(BENCH_DIR)/loadclient: bench/loadclient.c bench/payload.h | bench-deps
	@mkdir -p $(@D)
	$(BENCH_CC) $(BENCH_CFLAGS) -o $@ $<

$(BENCH_DIR)/echo: bench/floor/echo.c bench/payload.h | bench-deps
	@mkdir -p $(@D)
	$(BENCH_CC) $(BENCH_CFLAGS) -o $@ $<

$(BENCH_DIR)/httpecho: bench/floor/httpecho.c | bench-deps
	@mkdir -p $(@D)
	$(BENCH_CC) $(BENCH_CFLAGS) -o $@ $<

$(BENCH_DIR)/luafloor: bench/floor/luafloor.c | bench-deps
	@mkdir -p $(@D)
	$(BENCH_CC) $(BENCH_CFLAGS) $(BENCH_LUA_CFLAGS) -o $@ $< $(BENCH_LUA_LIBS)

BENCH_OUT ?= bench/results/$(shell date +%Y-%m-%d).md

bench: test-deps $(BENCH_DIR)/luamcp-nohook
	LUAMCP='$(LUAMCP)' BENCH_OUT='$(BENCH_OUT)' bash bench/run.sh
	lua5.4 bench/extra.lua '$(LUAMCP)' '$(BENCH_DIR)' '$(BENCH_OUT)'
	lua5.4 bench/payload.lua '$(LUAMCP)' '$(BENCH_DIR)' '$(BENCH_OUT)'
	lua5.4 bench/redis.lua '$(LUAMCP)' '$(BENCH_OUT)'
	lua5.4 bench/sqlite.lua '$(LUAMCP)' '$(BENCH_DIR)' '$(BENCH_OUT)'
	bash bench/scale.sh '$(LUAMCP)' '$(BENCH_DIR)' '$(BENCH_OUT)'
	bash bench/metrics.sh '$(LUAMCP)' '$(BENCH_DIR)' '$(BENCH_OUT)'
	bash bench/ui.sh '$(LUAMCP)' '$(BENCH_DIR)' '$(BENCH_OUT)'
	bash bench/a2a.sh '$(LUAMCP)' '$(BENCH_DIR)' '$(BENCH_OUT)'
	{ echo; echo '## Start-up beside the previous release'; echo; \
	  LUAMCP='$(LUAMCP)' LUAMCP_BASELINE="$$(bash bench/baseline.sh)" bash bench/startup.sh; } | tee -a '$(BENCH_OUT)'

bench-metrics: $(BENCH_DIR)/loadclient
	bash bench/metrics.sh '$(LUAMCP)' '$(BENCH_DIR)' '$(BENCH_OUT)'

bench-startup: $(BENCH_DIR)/loadclient $(LUAMCP)
	LUAMCP='$(LUAMCP)' LUAMCP_BASELINE="$$(bash bench/baseline.sh)" bash bench/startup.sh

bench-cross: $(BENCH_DIR)/loadclient
	bash bench/cross.sh

bench-smoke: $(BENCH_DIR)/loadclient
	BENCH_DIR='$(BENCH_DIR)' BENCH_SMOKE_STDIO='$(BENCH_SMOKE_STDIO)' BENCH_SMOKE_HTTP='$(BENCH_SMOKE_HTTP)' \
	  BENCH_SMOKE_HTTP_PATH='$(BENCH_SMOKE_HTTP_PATH)' BENCH_SMOKE_TRANSPORTS='$(BENCH_SMOKE_TRANSPORTS)' \
	  bash bench/smoke.sh

# The runtime without the watchdog, only to measure what stopping runaway
# code costs (bench/extra.lua); never for use: nothing stops such code in it.
BENCH_NOHOOK_OBJ := $(patsubst runtime/%.c,$(BENCH_DIR)/nohook/%.o,$(RUNTIME_SRC)) $(BENCH_DIR)/nohook/embedded_lua.o $(BENCH_DIR)/nohook/embedded_ui.o
$(BENCH_DIR)/luamcp-nohook: $(BENCH_NOHOOK_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(STATIC_LIBS) $(LDLIBS)
$(BENCH_DIR)/nohook/%.o: runtime/%.c | bench-deps
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DLUAMCP_NO_WATCHDOG -c -o $@ $<
$(BENCH_DIR)/nohook/embedded_lua.o: build/embedded_lua.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<
$(BENCH_DIR)/nohook/embedded_ui.o: build/embedded_ui.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<
-include $(BENCH_NOHOOK_OBJ:.o=.d)

.PHONY: bench-ui
bench-ui: $(BENCH_DIR)/loadclient $(LUAMCP)
	bash bench/ui.sh '$(LUAMCP)' '$(BENCH_DIR)' $(BENCH_UI_OUT)

.PHONY: bench-extra bench-payload bench-redis bench-scale bench-sqlite bench-a2a
bench-a2a: test-deps $(BENCH_DIR)/loadclient $(LUAMCP)
	bash bench/a2a.sh '$(LUAMCP)' '$(BENCH_DIR)' $(BENCH_A2A_OUT)

bench-sqlite: test-deps $(BENCH_DIR)/loadclient $(LUAMCP)
	lua5.4 bench/sqlite.lua '$(LUAMCP)' '$(BENCH_DIR)' $(BENCH_SQLITE_OUT)

bench-redis: $(LUAMCP)
	lua5.4 bench/redis.lua '$(LUAMCP)' $(BENCH_REDIS_OUT)

bench-scale: test-deps $(BENCH_DIR)/loadclient $(LUAMCP)
	bash bench/scale.sh '$(LUAMCP)' '$(BENCH_DIR)' $(BENCH_SCALE_OUT)

bench-payload: $(BENCH_DIR)/loadclient $(BENCH_DIR)/echo $(LUAMCP)
	lua5.4 bench/payload.lua '$(LUAMCP)' '$(BENCH_DIR)' $(BENCH_PAYLOAD_OUT)

bench-extra: $(BENCH_DIR)/loadclient $(BENCH_DIR)/luamcp-nohook $(LUAMCP)
	lua5.4 bench/extra.lua '$(LUAMCP)' '$(BENCH_DIR)' $(BENCH_EXTRA_OUT)
