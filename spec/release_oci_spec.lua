-- `luamcp release`'s OCI image (runtime/cli/release_oci.c): OUT/oci/ (an
-- OCI image layout) and OUT/NAME-VERSION.oci.tar, a multi-arch index of an
-- amd64 and an arm64 image. Read by Debian's skopeo, then run: with podman
-- where containers can run here, and always (as root) the way a container
-- runtime would: unpacked by umoci, then the entrypoint the image's config
-- names, as the image's user, in a chroot of its rootfs with /dev and /proc
-- mounted (a private mount namespace: the mounts end with the process).
-- The arm64 image runs the same way under qemu when binfmt_misc has
-- aarch64 with the F flag (a chroot has no qemu of its own).
--
-- Needs: build/luamcp-static and build/linux-arm64/luamcp (make
-- linux-arm64), skopeo and umoci (Debian packages), root, unshare and
-- chroot for the runs; each test says what it misses.

local client = require "mcp_client"
local http = require "http_client"
local cjson = client.json

local sh = client.sh
local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local BUILD_DIR = LUAMCP:match("^(.*)/[^/]+$")
local FIXTURE = io.popen("readlink -f spec/fixtures/release/oci_server"):read("l")
local NAME, VERSION, REGISTRY_NAME = "oci-fixture", "1.2.3", "io.github.luamcp-tests/oci-fixture"
local IMAGE = "ghcr.io/luamcp-tests/oci-fixture"
local ARCHIVE = NAME .. "-" .. VERSION .. ".oci.tar"
-- What the image carries as its CA certificates (--ca-certs): anything the
-- spec can recognise inside.
local CA_TEXT = "-----BEGIN CERTIFICATE-----\nluamcp release_oci_spec stand-in\n-----END CERTIFICATE-----\n"

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function which(name)
  local code, out = sh("command -v " .. name)
  return code == 0 and out:match("^(%S+)") or nil
end

local function run_ok(command)
  local code, out, err = sh("(" .. command .. ") </dev/null")
  assert(code == 0, command .. " failed (" .. tostring(code) .. "):\n" .. out .. err)
  return out
end

local SKOPEO, UMOCI, PODMAN = which("skopeo"), which("umoci"), which("podman")
local UNSHARE, CHROOT = which("unshare"), which("chroot")
local IS_ROOT = io.popen("id -u"):read("l") == "0"
local RUNTIMES = { BUILD_DIR .. "/luamcp-static", BUILD_DIR .. "/linux-arm64/luamcp" }

-- Why nothing here can run, or nil.
local function missing_build()
  for _, r in ipairs(RUNTIMES) do
    if not exists(r) then return "no " .. r .. " (make " .. (r:find("arm64") and "linux-arm64" or "build/luamcp-static") .. ")" end
  end
  if not SKOPEO then return "no skopeo (Debian package skopeo)" end
end

-- Why the images cannot be run in a chroot here, or nil.
local function missing_chroot()
  if not IS_ROOT then return "running the image in a chroot needs root" end
  if not UMOCI then return "no umoci (Debian package umoci)" end
  if not (UNSHARE and CHROOT) then return "no unshare or chroot (util-linux, coreutils)" end
end

-- Do aarch64 programs run here without a qemu inside the chroot? That is
-- binfmt_misc's qemu-aarch64 enabled with the F flag (the interpreter opened
-- when registered, runtime/tools/cross/qemu-binfmt.sh).
local function binfmt_aarch64_fixed()
  local f = io.open("/proc/sys/fs/binfmt_misc/qemu-aarch64", "r")
  if not f then return false end
  local text = f:read("a")
  f:close()
  return text:find("^enabled") ~= nil and text:find("\nflags: [A-Z]*F") ~= nil
end

-- ---- The release, made twice ---------------------------------------------

local made -- { dirs = {OUT1, OUT2}, work = scratch folder } once made; false when it could not be
local made_error -- why not: the pending reason
local made_failure -- luamcp release failed: every test fails with this
local work -- the scratch folder, removed in teardown

local function release_into(out, ca_file)
  local code, stdout, stderr = sh(quote(LUAMCP) .. " release " .. quote(FIXTURE) .. " -o " .. quote(out)
    .. " --registry-name " .. REGISTRY_NAME .. " --image " .. IMAGE .. " --target linux-x64,linux-arm64"
    .. " --repository https://github.com/luamcp-tests/oci-fixture --ca-certs " .. quote(ca_file) .. " </dev/null")
  return code == 0, stdout .. stderr
end

-- Make the release (twice, into two folders) on first use: nil, or why the
-- test cannot go on (pending).
local function release()
  if made then return nil end
  if made_failure then error(made_failure, 0) end
  if made == false then return made_error end
  local why = missing_build()
  if why then
    made, made_error = false, why
    return why
  end
  work = client.temp_dir()
  local ca_file = work .. "/ca.pem"
  client.write_file(ca_file, CA_TEXT)
  local dirs = { work .. "/out1", work .. "/out2" }
  for _, dir in ipairs(dirs) do
    local ok, output = release_into(dir, ca_file)
    if not ok then
      made_failure = "luamcp release failed:\n" .. output
      error(made_failure, 0)
    end
  end
  made = { dirs = dirs, work = work, ca_file = ca_file }
  return nil
end

local function layout() return made.dirs[1] .. "/oci" end
local function archive() return made.dirs[1] .. "/" .. ARCHIVE end

local function skopeo_json(args)
  return cjson.decode(run_ok(quote(SKOPEO) .. " " .. args))
end

-- ---- Unpacking an image as a container runtime would ---------------------

-- The image for arch unpacked by umoci: { rootfs =, config = the runtime
-- config umoci wrote from the image's }. umoci takes one image, so skopeo
-- first copies the one for arch out of the index into a layout of its own.
local unpacked = {}
local function unpack(arch)
  if unpacked[arch] then return unpacked[arch] end
  local single = made.work .. "/single-" .. arch
  local bundle = made.work .. "/bundle-" .. arch
  run_ok(quote(SKOPEO) .. " copy -q --override-os linux --override-arch " .. arch .. " " .. quote("oci:" .. layout()
    .. ":" .. VERSION) .. " " .. quote("oci:" .. single .. ":" .. arch))
  run_ok(quote(UMOCI) .. " unpack --image " .. quote(single .. ":" .. arch) .. " " .. quote(bundle))
  local config = cjson.decode(client.read_file(bundle .. "/config.json"))
  -- What a runtime mounts whatever the image holds.
  run_ok("mkdir -p " .. quote(bundle .. "/rootfs/dev") .. " " .. quote(bundle .. "/rootfs/proc"))
  unpacked[arch] = { rootfs = bundle .. "/rootfs", config = config }
  return unpacked[arch]
end

-- The mounts and the chroot, in a mount namespace of their own.
local CHROOT_SCRIPT = [[
set -e
root=$1 user=$2
shift 2
mount --rbind /dev "$root/dev"
mount -t proc proc "$root/proc"
cd "$root"
exec chroot --userspec="$user" "$root" "$@"
]]

--- Start the image's entrypoint (with extra arguments) as its config says:
--- its user, its environment, its arguments.
local function start_image(image, extra)
  local process = image.config.process
  local args = { "-m", "/bin/sh", "-c", CHROOT_SCRIPT, "sh", image.rootfs,
    ("%d:%d"):format(process.user.uid, process.user.gid) }
  for _, a in ipairs(process.args) do args[#args + 1] = a end
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  return client.spawn(args, { bin = UNSHARE, env = process.env })
end

--- A tools/call of the fixture's tool, and what it says it found.
local function inside(call, word)
  local result = call("inside", { word = word })
  assert(not result.isError, cjson.encode(result))
  return result.structuredContent
end

local function assert_inside(found, word)
  assert.are.equal(word, found.word)
  assert.are.equal(#CA_TEXT, found.ca_bytes) -- the CA file where curl_lib.c looks first
  assert.is_true(found.tmp_writable)
  assert.is_true(found.home_writable)
  assert.is_false(found.bin_writable) -- not root: what the image ships stays as shipped
end

local function stdio_round(image, word)
  local server = start_image(image)
  server:initialize()
  local found = inside(function(name, args) return server:call_tool(name, args) end, word)
  server:close()
  return found
end

describe("luamcp release: the OCI image", function()
  teardown(function()
    if work then client.remove_tree(work) end
  end)

  it("is read by skopeo as a layout and as an archive, for amd64 and for arm64", function()
    local why = release()
    if why then return pending(why) end
    local raw = skopeo_json("inspect --raw " .. quote("oci:" .. layout() .. ":" .. VERSION))
    assert.are.equal("application/vnd.oci.image.index.v1+json", raw.mediaType)
    local platforms = {}
    for _, m in ipairs(raw.manifests) do platforms[#platforms + 1] = m.platform.os .. "/" .. m.platform.architecture end
    table.sort(platforms)
    assert.are.same({ "linux/amd64", "linux/arm64" }, platforms)
    for _, ref in ipairs { "oci:" .. layout() .. ":" .. VERSION, "oci-archive:" .. archive() .. ":" .. VERSION } do
      for _, arch in ipairs { "amd64", "arm64" } do
        local seen = skopeo_json("inspect --override-os linux --override-arch " .. arch .. " " .. quote(ref))
        assert.are.equal(arch, seen.Architecture, ref)
        assert.are.equal("linux", seen.Os)
        assert.are.equal(1, #seen.Layers)
        -- The MCP Registry's ownership check reads this label.
        assert.are.equal(REGISTRY_NAME, seen.Labels["io.modelcontextprotocol.server.name"])
        assert.are.equal(NAME, seen.Labels["org.opencontainers.image.title"])
        assert.are.equal(VERSION, seen.Labels["org.opencontainers.image.version"])
        assert.are.equal("MIT", seen.Labels["org.opencontainers.image.licenses"])
        assert.are.equal("https://github.com/luamcp-tests/oci-fixture", seen.Labels["org.opencontainers.image.source"])
        local config = skopeo_json("inspect --config --override-os linux --override-arch " .. arch .. " " .. quote(ref))
        assert.is_nil(config.created) -- nothing of the time
        assert.are.equal("65532:65532", config.config.User)
        assert.are.same({ "/usr/local/bin/" .. NAME }, config.config.Entrypoint)
        assert.are.equal("/", config.config.WorkingDir)
      end
    end
    -- What pushing does (skopeo copy --all oci-archive:... docker://...),
    -- into a layout here: every image, and the index unchanged.
    local copy = made.work .. "/copied"
    run_ok(quote(SKOPEO) .. " copy -q --all " .. quote("oci-archive:" .. archive() .. ":" .. VERSION) .. " "
      .. quote("oci:" .. copy .. ":" .. VERSION))
    assert.are.equal(run_ok(quote(SKOPEO) .. " inspect --raw " .. quote("oci:" .. layout() .. ":" .. VERSION)),
      run_ok(quote(SKOPEO) .. " inspect --raw " .. quote("oci:" .. copy .. ":" .. VERSION)))
  end)

  it("is the same bytes when made twice", function()
    local why = release()
    if why then return pending(why) end
    local function listing(dir)
      return run_ok("cd " .. quote(dir) .. " && find oci " .. ARCHIVE .. " -type f | LC_ALL=C sort | xargs sha256sum")
    end
    local first = listing(made.dirs[1])
    assert.truthy(first:find(ARCHIVE, 1, true))
    assert.are.equal(first, listing(made.dirs[2]))
    -- The archive holds the layout, file for file.
    local tar_names = run_ok("tar -tf " .. quote(archive()) .. " | grep -v '/$' | LC_ALL=C sort")
    local dir_names = run_ok("cd " .. quote(layout()) .. " && find . -type f | sed 's|^\\./||' | LC_ALL=C sort")
    assert.are.equal(dir_names, tar_names)
  end)

  it("holds the program, the CA certificates and a user who owns only HOME and /tmp", function()
    local why = release() or missing_chroot()
    if why then return pending(why) end
    local image = unpack("amd64")
    local root = image.rootfs
    assert.are.same({ uid = 65532, gid = 65532 }, { uid = image.config.process.user.uid,
      gid = image.config.process.user.gid })
    assert.are.equal(CA_TEXT, client.read_file(root .. "/etc/ssl/certs/ca-certificates.crt"))
    assert.are.equal(client.read_file(made.dirs[1] .. "/" .. NAME .. "-linux-x64"),
      client.read_file(root .. "/usr/local/bin/" .. NAME))
    assert.truthy(client.read_file(root .. "/etc/passwd"):find("\nluamcp:x:65532:65532:", 1, true))
    assert.truthy(client.read_file(root .. "/etc/group"):find("\nluamcp:x:65532:", 1, true))
    local function stat(path) return run_ok("stat -c '%a %u:%g' " .. quote(root .. path)):match("^(.-)\n") end
    assert.are.equal("755 0:0", stat("/usr/local/bin/" .. NAME))
    assert.are.equal("1777 0:0", stat("/tmp"))
    assert.are.equal("700 65532:65532", stat("/home/luamcp"))
    -- Nothing else anyone but root may change.
    assert.are.equal("/tmp\n", run_ok("cd " .. quote(root) .. " && find . -path ./dev -prune -o -path ./proc -prune -o "
      .. "-perm -o+w -printf '/%P\\n'"))
    assert.are.equal("/home/luamcp\n", run_ok("cd " .. quote(root) .. " && find . -path ./dev -prune -o -path ./proc "
      .. "-prune -o -uid 65532 -printf '/%P\\n'"))
  end)

  it("runs (amd64) as its user, answering tools/call over stdio", function()
    local why = release() or missing_chroot()
    if why then return pending(why) end
    assert_inside(stdio_round(unpack("amd64"), "stdio"), "stdio")
  end)

  it("runs (amd64) with --http by arguments, answering tools/call over HTTP", function()
    local why = release() or missing_chroot()
    if why then return pending(why) end
    -- The chroot shares this network: 127.0.0.1 and a port the kernel picks.
    local proc = start_image(unpack("amd64"), { "--http", "127.0.0.1:0" })
    local server = setmetatable({ proc = proc, conns = {} }, http.Server)
    assert(client.wait_until(function()
      server.port = tonumber(proc.stderr:match("serving MCP over HTTP at http://[^:]+:(%d+)/"))
      return server.port or proc.exited
    end) and server.port, "the image's program did not serve HTTP:\n" .. proc.stderr)
    local session = server:initialize()
    local r = server:post({ jsonrpc = "2.0", id = 1, method = "tools/call",
      params = { name = "inside", arguments = { word = "http" } } },
      { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" })
    local rpc = http.rpc(r)
    server:stop_cleanly()
    assert(rpc and rpc.result, cjson.encode(r or {}))
    assert_inside(rpc.result.structuredContent, "http")
  end)

  it("runs (arm64, under qemu) as its user, answering tools/call over stdio", function()
    local why = release() or missing_chroot()
      or (not binfmt_aarch64_fixed() and "qemu-aarch64 is not in binfmt_misc with the F flag "
        .. "(runtime/tools/cross/qemu-binfmt.sh)")
    if why then return pending(why) end
    local image = unpack("arm64")
    assert.are.equal(client.read_file(made.dirs[1] .. "/" .. NAME .. "-linux-arm64"),
      client.read_file(image.rootfs .. "/usr/local/bin/" .. NAME))
    assert_inside(stdio_round(image, "arm64"), "arm64")
  end)

  it("runs in podman from the archive (podman load), answering tools/call over stdio", function()
    local why = release() or (not PODMAN and "no podman (Debian package podman)")
    if why then return pending(why) end
    local out = run_ok(quote(PODMAN) .. " load -q -i " .. quote(archive()))
    local loaded = out:match("Loaded image[s]?: *(%S+)")
    assert.are.equal(IMAGE .. ":" .. VERSION, loaded, out)
    local server = client.spawn({ "run", "-i", "--rm", "--network", "none", loaded }, { bin = PODMAN })
    -- An answer, or the end of a container that could not start.
    local id = server.next_id
    server.next_id = id + 1
    server:send({ jsonrpc = "2.0", id = id, method = "initialize", params = { protocolVersion = "2025-11-25",
      capabilities = {}, clientInfo = { name = "busted", version = "1.0" } } })
    client.wait_until(function() return #server.lines > 0 or server.exited end)
    local response = #server.lines > 0 and server:await_response(id) or nil
    local found
    if response and response.result then
      server:notify("notifications/initialized")
      found = inside(function(name, args) return server:call_tool(name, args) end, "podman")
    end
    server:close()
    sh(quote(PODMAN) .. " rmi -f " .. quote(loaded) .. " </dev/null")
    if not response then
      -- crun refused (a sandbox without CAP_SYS_RESOURCE cannot set podman's
      -- rlimits): containers do not run here, which the chroot tests cover.
      local reason = server.stderr:match("Error: ([^\n]*)")
      if reason then return pending("podman cannot run containers here: " .. reason) end
    end
    assert(found, "no answer from the container:\n" .. server.stderr)
    assert_inside(found, "podman")
  end)
end)
