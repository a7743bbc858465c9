-- `luamcp release`: every door from one folder (docs/shipping.md). This
-- file holds what is common to them: the output folder, SHA256SUMS, the
-- MCP Registry's server.json (validated with luamcp's own validator against
-- the Registry's schema), the errors, and that two runs give the same
-- bytes. Each door is run the way its users run it in its own spec:
-- release_npm_spec.lua, release_oci_spec.lua, release_sign_spec.lua.

local client = require "mcp_client"
local cjson = client.json

local LUAMCP = client.LUAMCP
local FIXTURE = "spec/fixtures/release/weather"
local VALIDATOR = "spec/fixtures/release/validate"
local SCHEMA = "spec/fixtures/registry/server.schema.json"
local ARM64_RUNTIME = "build/linux-arm64/luamcp"
local WINDOWS_RUNTIME = "build/windows/luamcp.exe"

local sh = client.sh

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

--- luamcp release ARGS...; returns exit code, stdout, stderr.
local function release(...)
  local words = { quote(LUAMCP), "release" }
  for _, a in ipairs { ... } do words[#words + 1] = quote(a) end
  return sh(table.concat(words, " ") .. " </dev/null")
end

local function release_ok(...)
  local code, out, err = release(...)
  assert(code == 0, "luamcp release failed (" .. tostring(code) .. "):\n" .. out .. err)
  return err
end

--- The files under dir, relative, sorted.
local function files_under(dir)
  local code, out = sh("cd " .. quote(dir) .. " && find . -type f | sed 's#^\\./##' | LC_ALL=C sort")
  assert(code == 0)
  local list = {}
  for line in out:gmatch("[^\n]+") do list[#list + 1] = line end
  return list
end

local function sha256(path)
  local code, out = sh("sha256sum " .. quote(path))
  assert(code == 0, out)
  return out:match("^(%x+)")
end

local function contains(list, item)
  for _, x in ipairs(list) do if x == item then return true end end
  return false
end

describe("luamcp release (linux-x64)", function()
  local dir, out
  setup(function()
    dir = client.temp_dir()
    out = dir .. "/dist"
    release_ok(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather", "-o", out)
  end)
  teardown(function() client.remove_tree(dir) end)

  it("writes the program, the .mcpb, the npm packages, the image and server.json, all in SHA256SUMS", function()
    local files = files_under(out)
    for _, want in ipairs { "weather-linux-x64", "weather.mcpb", "server.json", "weather-1.2.0.oci.tar",
                            "oci/index.json", "oci/oci-layout", "SHA256SUMS" } do
      assert.is_true(contains(files, want), want .. " missing from " .. table.concat(files, " "))
    end
    local npm = 0
    for _, f in ipairs(files) do if f:match("^npm/.*package%.json$") then npm = npm + 1 end end
    assert.are.equal(2, npm, "a main package and one platform package: " .. table.concat(files, " "))
    -- Every file but SHA256SUMS itself is listed, and sha256sum agrees.
    local sums = client.read_file(out .. "/SHA256SUMS")
    local listed = 0
    for _ in sums:gmatch("\n") do listed = listed + 1 end
    assert.are.equal(#files - 1, listed, sums)
    local code, report = sh("cd " .. quote(out) .. " && sha256sum -c --strict SHA256SUMS")
    assert.are.equal(0, code, report)
  end)

  it("server.json is valid against the MCP Registry's schema, by luamcp's own validator", function()
    local code, said, err = sh(quote(LUAMCP) .. " call " .. quote(VALIDATOR) .. " validate schema=" .. quote(SCHEMA)
      .. " document=" .. quote(out .. "/server.json") .. " </dev/null")
    assert.are.equal(0, code, said .. err)
    assert.are.equal("valid", said:gsub("%s+$", ""))
  end)

  it("server.json lists each door, the .mcpb's SHA-256 and the settings as environment variables", function()
    local s = cjson.decode(client.read_file(out .. "/server.json"))
    assert.are.equal("io.github.Ada/weather", s.name)
    assert.are.equal("1.2.0", s.version)
    assert.are.equal("Weather for the team", s.description)
    local by = {}
    for _, p in ipairs(s.packages) do by[p.registryType] = p end
    assert.are.equal("@ada/weather", by.npm.identifier)
    assert.are.equal("1.2.0", by.npm.version)
    assert.are.equal("ghcr.io/ada/weather:1.2.0", by.oci.identifier)
    assert.are.equal("https://github.com/Ada/weather/releases/download/v1.2.0/weather.mcpb", by.mcpb.identifier)
    assert.are.equal(sha256(out .. "/weather.mcpb"), by.mcpb.fileSha256)
    for _, p in ipairs(s.packages) do
      assert.are.equal("stdio", p.transport.type)
      local env = {}
      for _, v in ipairs(p.environmentVariables) do env[v.name] = v end
      assert.is_true(env.API_KEY.isSecret and env.API_KEY.isRequired, cjson.encode(env.API_KEY))
      assert.are.equal("metric", env.UNITS.default)
      assert.is_false(env.UNITS.isRequired)
    end
    -- package.json's mcpName is what the Registry checks npm ownership by.
    local main
    for _, f in ipairs(files_under(out)) do
      if f:match("^npm/.*package%.json$") then
        local p = cjson.decode(client.read_file(out .. "/" .. f))
        if p.name == "@ada/weather" then main = p end
      end
    end
    assert(main, "no npm package @ada/weather")
    assert.are.equal("io.github.Ada/weather", main.mcpName)
  end)

  it("a second release into a new folder gives the same bytes", function()
    local again = dir .. "/again"
    release_ok(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather", "-o", again)
    assert.are.same(files_under(out), files_under(again))
    assert.are.equal(client.read_file(out .. "/SHA256SUMS"), client.read_file(again .. "/SHA256SUMS"))
    client.remove_tree(again)
  end)

  it("tags the image with a version's build metadata as registries take it", function()
    local other = dir .. "/build-meta"
    release_ok(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather", "--version",
      "1.2.0+build.7", "-o", other)
    local s = cjson.decode(client.read_file(other .. "/server.json"))
    assert.are.equal("1.2.0+build.7", s.version)
    for _, p in ipairs(s.packages) do
      if p.registryType == "oci" then assert.are.equal("ghcr.io/ada/weather:1.2.0_build.7", p.identifier) end
    end
    local index = cjson.decode(client.read_file(other .. "/oci/index.json"))
    assert.are.equal("1.2.0_build.7", index.manifests[1].annotations["org.opencontainers.image.ref.name"])
    client.remove_tree(other)
  end)

  it("leaves an earlier release as it was when a new one is refused, or when one of its files changed", function()
    local before = client.read_file(out .. "/SHA256SUMS")
    local code, _, err = release(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather",
      "--version", "1.3", "-o", out)
    assert.are_not.equal(0, code)
    assert.matches("version 1.3 is not a semantic version", err, 1, true)
    assert.are.equal(before, client.read_file(out .. "/SHA256SUMS"))
    local verify = select(1, sh("cd " .. quote(out) .. " && sha256sum -c --quiet SHA256SUMS"))
    assert.are.equal(0, verify, "the earlier release is whole")
    -- One file edited since: named, and nothing is deleted.
    local server_json = client.read_file(out .. "/server.json")
    client.write_file(out .. "/server.json", server_json .. " ")
    code, _, err = release(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather", "-o", out)
    assert.are_not.equal(0, code)
    assert.matches("server.json has changed since the earlier release wrote it", err, 1, true)
    assert.is_true(exists(out .. "/weather.mcpb"))
    client.write_file(out .. "/server.json", server_json)
  end)

  it("replaces an earlier release in its folder, and never a file it did not write", function()
    local before = client.read_file(out .. "/SHA256SUMS")
    release_ok(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather", "-o", out)
    assert.are.equal(before, client.read_file(out .. "/SHA256SUMS"))
    client.write_file(out .. "/notes.txt", "mine")
    local code, _, err = release(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather",
      "-o", out)
    assert.are_not.equal(0, code)
    assert.matches("notes.txt is not a file of the earlier release", err, 1, true)
    assert.are.equal("mine", client.read_file(out .. "/notes.txt"))
    assert.is_true(exists(out .. "/weather.mcpb"), "refused before touching anything")
    os.remove(out .. "/notes.txt")
  end)
end)

describe("luamcp release refuses", function()
  local dir
  before_each(function() dir = client.temp_dir() end)
  after_each(function() client.remove_tree(dir) end)

  it("without the Registry's name for the server", function()
    local code, _, err = release(FIXTURE, "--target", "linux-x64", "-o", dir .. "/dist")
    assert.are.equal(2, code)
    assert.matches("--registry-name io.github.YOU/NAME", err, 1, true)
  end)

  it("a name the Registry would not take", function()
    local code, _, err = release(FIXTURE, "--target", "linux-x64", "--registry-name", "weather", "-o", dir .. "/d")
    assert.are_not.equal(0, code)
    assert.matches("--registry-name weather: the MCP Registry wants NAMESPACE/NAME", err, 1, true)
  end)

  it("a version npm and the Registry would not take", function()
    local code, _, err = release(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather",
      "--version", "1.2", "-o", dir .. "/d")
    assert.are_not.equal(0, code)
    assert.matches("version 1.2 is not a semantic version", err, 1, true)
  end)

  it("a description longer than the Registry's 100 characters", function()
    local code, _, err = release(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather",
      "--description", string.rep("x", 101), "-o", dir .. "/d")
    assert.are_not.equal(0, code)
    assert.matches("the description is 101 characters", err, 1, true)
  end)

  it("a folder that holds other files, touching none of them", function()
    client.write_file(dir .. "/keep.txt", "mine")
    local code, _, err = release(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather",
      "-o", dir)
    assert.are_not.equal(0, code)
    assert.matches("the folder holds files, and is not an earlier luamcp release", err, 1, true)
    assert.are.same({ "keep.txt" }, files_under(dir))
  end)

  it("a folder whose SHA256SUMS another tool wrote, deleting nothing", function()
    client.write_file(dir .. "/notes.txt", "mine")
    assert.are.equal(0, (sh("cd " .. quote(dir) .. " && sha256sum notes.txt > SHA256SUMS")))
    local code, _, err = release(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather",
      "-o", dir)
    assert.are_not.equal(0, code)
    assert.matches("is not an earlier luamcp release", err, 1, true)
    assert.are.same({ "SHA256SUMS", "notes.txt" }, files_under(dir))
  end)

  it("a server name that cannot name files, writing nothing anywhere", function()
    local out = dir .. "/inner/dist"
    assert(os.execute("mkdir -p " .. quote(dir .. "/inner")))
    for _, name in ipairs { "../escape", "we\"ather", "My Server" } do
      local code, _, err = release(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather",
        "--name", name, "-o", out)
      assert.are_not.equal(0, code, name)
      assert.matches("the server's name \"" .. name:gsub("%p", "%%%0") .. "\" names the files", err)
    end
    assert.are.same({}, files_under(dir))
  end)

  it("a description the Registry would not take, counted in characters", function()
    local code, _, err = release(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather",
      "--description", "", "-o", dir .. "/d")
    assert.are_not.equal(0, code)
    assert.matches("the description is 0 characters", err, 1, true)
    -- 60 accented letters: 120 bytes, 60 characters, within the 100.
    release_ok(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather",
      "--description", string.rep("é", 60), "-o", dir .. "/d")
    assert.are.equal(string.rep("é", 60), cjson.decode(client.read_file(dir .. "/d/server.json")).description)
  end)

  it("an image name a registry would not take, before building anything", function()
    local code, _, err = release(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather",
      "--image", "ghcr.io/Ada/Weather", "-o", dir .. "/d")
    assert.are_not.equal(0, code)
    assert.matches("--image ghcr.io/Ada/Weather: an image repository is", err, 1, true)
    assert.are.same({}, files_under(dir))
  end)

  it("an image without CA certificates, writing nothing", function()
    client.write_file(dir .. "/empty.pem", "")
    local code, _, err = release(FIXTURE, "--target", "linux-x64", "--registry-name", "io.github.Ada/weather",
      "--ca-certs", dir .. "/empty.pem", "-o", dir .. "/d")
    assert.are_not.equal(0, code)
    assert.matches("empty.pem is empty (--ca-certs: the image's CA certificates)", err, 1, true)
    assert.are.same({ "empty.pem" }, files_under(dir))
  end)

  it("a key without its certificate", function()
    local code, _, err = release(FIXTURE, "--registry-name", "io.github.Ada/weather", "--sign-key", "k.pem")
    assert.are.equal(2, code)
    assert.matches("--sign-cert and --sign-key go together", err, 1, true)
  end)
end)

describe("luamcp release for every target", function()
  local missing = not exists(ARM64_RUNTIME) and ("no " .. ARM64_RUNTIME .. " (make linux-arm64)")
    or not exists(WINDOWS_RUNTIME) and ("no " .. WINDOWS_RUNTIME .. " (make windows)")
  if missing then
    it("is skipped", function() pending(missing) end)
    return
  end

  it("makes the three programs, one .mcpb and npm package each, and the same bytes twice", function()
    local dir = client.temp_dir()
    release_ok(FIXTURE, "--registry-name", "io.github.Ada/weather", "-o", dir .. "/one")
    release_ok(FIXTURE, "--registry-name", "io.github.Ada/weather", "-o", dir .. "/two")
    local files = files_under(dir .. "/one")
    for _, want in ipairs { "weather-linux-x64", "weather-linux-arm64", "weather-windows-x64.exe", "weather.mcpb" } do
      assert.is_true(contains(files, want), want .. " missing from " .. table.concat(files, " "))
    end
    local npm = 0
    for _, f in ipairs(files) do if f:match("^npm/.*package%.json$") then npm = npm + 1 end end
    assert.are.equal(4, npm, table.concat(files, " "))
    assert.are.same(files, files_under(dir .. "/two"))
    local code, report = sh("cd " .. quote(dir) .. " && for f in $(cd one && find . -type f); do cmp one/$f two/$f || exit 1; done")
    assert.are.equal(0, code, report)
    client.remove_tree(dir)
  end)
end)
