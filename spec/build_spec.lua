-- `luamcp build`: one self-contained executable from a script folder, and an
-- MCP Bundle (.mcpb). The built programs are run as a client would run them:
-- copied alone into an empty folder, with an empty environment.

local client = require "mcp_client"
local cjson = client.json

local LUAMCP = client.LUAMCP
local DEMO = "scripts/demo"
local FIXTURE = "spec/fixtures/build"
local BROKEN = "spec/fixtures/build_broken"
local MCPB_FIXTURE = "spec/fixtures/build_mcpb"

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

--- Run a shell command; returns its exit code, stdout and stderr.
local sh = client.sh

--- luamcp build ARGS...; returns exit code, stdout, stderr.
local function build(...)
  local words = { quote(LUAMCP), "build" }
  for _, a in ipairs { ... } do words[#words + 1] = quote(a) end
  return sh(table.concat(words, " ") .. " </dev/null")
end

local function build_ok(...)
  local code, out, err = build(...)
  assert(code == 0, "luamcp build failed (" .. tostring(code) .. "):\n" .. out .. err)
  return err
end

local function copy(from, to)
  client.write_file(to, client.read_file(from))
  assert(os.execute("chmod 755 " .. quote(to)))
end

--- Start a built program as the only file of an empty folder, with an
--- empty environment (env -i): nothing from this machine's Lua can help it.
local function spawn_alone(program, args)
  local dir = client.temp_dir()
  local name = program:match("[^/]+$")
  copy(program, dir .. "/" .. name)
  local argv = { "-i", "./" .. name }
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  local server = client.spawn(argv, { bin = "/usr/bin/env", cwd = dir })
  server.dir = dir
  return server
end

local function stop(server)
  server:close()
  if server.dir then client.remove_tree(server.dir) end
end

local function text_of(result)
  assert(result.content and result.content[1], cjson.encode(result))
  return result.content[1].text
end

local function file_contains(path, needle)
  return client.read_file(path):find(needle, 1, true) ~= nil
end

local luamcp_version = select(2, sh(quote(LUAMCP) .. " --version")):match("^luamcp (%S+)")

describe("luamcp build of the example server", function()
  local dir, program
  setup(function()
    dir = client.temp_dir()
    program = dir .. "/demo"
    build_ok(DEMO, "-o", program)
  end)
  teardown(function() client.remove_tree(dir) end)

  it("needs nothing but the C library", function()
    local code, out = sh("ldd " .. quote(program))
    assert.are.equal(0, code)
    for line in out:gmatch("[^\n]+") do
      local lib = line:match("^%s*(%S+)")
      assert.is_truthy(lib:match("^linux%-vdso") or lib:match("^/?.*ld%-linux") or lib:match("^libc%.so")
        or lib:match("^libm%.so") or lib:match("^libdl%.so") or lib:match("^libpthread%.so")
        or lib:match("^librt%.so"), "not a C library part: " .. line)
      assert.is_falsy(line:lower():find("lua") or line:find("libuv"), line)
    end
  end)

  it("serves over stdio from an empty folder with an empty environment", function()
    local server = spawn_alone(program)
    local info = server:initialize()
    assert.are.equal("demo", info.serverInfo.name)
    assert.are.equal("5", text_of(server:call_tool("add", { a = 2, b = 3 })))
    local code = server:close()
    client.remove_tree(server.dir)
    assert.are.equal(0, code)
  end)

  it("serves over --http 127.0.0.1:0", function()
    local server = spawn_alone(program, { "--http", "127.0.0.1:0" })
    local port
    assert.is_true(client.wait_until(function()
      port = server.stderr:match("luamcp: serving MCP over HTTP at http://127%.0%.0%.1:(%d+)/mcp")
      return port ~= nil
    end), server.stderr)
    local url = "http://127.0.0.1:" .. port .. "/mcp"
    local function post(message, session)
      local headers_path = os.tmpname()
      local command = table.concat({
        "curl -s -S --max-time 5 -D", quote(headers_path), "-X POST", quote(url),
        "-H 'Content-Type: application/json'", "-H 'Accept: application/json, text/event-stream'",
        "-H 'MCP-Protocol-Version: 2025-06-18'",
        session and ("-H " .. quote("Mcp-Session-Id: " .. session)) or "",
        "--data-binary", quote(cjson.encode(message)),
      }, " ")
      local code, body, err = sh(command)
      local headers = client.read_file(headers_path)
      os.remove(headers_path)
      assert(code == 0, "curl: " .. err)
      -- A JSON body, or server-sent events whose data lines hold it.
      local json = body:match("^%s*{") and body or body:match("data: ([^\n]+)")
      return json and cjson.decode(json), headers
    end
    local init, headers = post({ jsonrpc = "2.0", id = 1, method = "initialize", params = {
      protocolVersion = "2025-06-18", capabilities = {}, clientInfo = { name = "busted", version = "1" } } })
    local session = headers:match("[Mm]cp%-[Ss]ession%-[Ii]d: *([^\r\n]+)")
    assert.are.equal("demo", init.result.serverInfo.name)
    post({ jsonrpc = "2.0", method = "notifications/initialized" }, session)
    local call = post({ jsonrpc = "2.0", id = 2, method = "tools/call",
                        params = { name = "add", arguments = { a = 40, b = 2 } } }, session)
    assert.are.equal("42", text_of(call.result))
    server:kill("sigterm")
    stop(server)
  end)

  it("lists what it carries and the runtime that built it with --bundle-info", function()
    local code, out = sh(quote(program) .. " --bundle-info")
    assert.are.equal(0, code)
    assert.is_truthy(out:find("luamcp " .. luamcp_version, 1, true), out)
    assert.is_truthy(out:find("scripts as source", 1, true), out)
    -- Each file with its size and the CRC-32 unzip computes for it.
    local _, listing = sh("unzip -v " .. quote(program))
    for _, name in ipairs { "countdown.lua", "math.lua", "notes.lua" } do
      local size = #client.read_file(DEMO .. "/" .. name)
      local crc = listing:match("(%x%x%x%x%x%x%x%x)%s+" .. name:gsub("%.", "%%.") .. "\n")
      assert.is_truthy(crc, listing)
      assert.is_truthy(out:find(("%10d  %s  %s\n"):format(size, crc, name), 1, true), out)
    end
  end)

  it("prints a client configuration in --help that starts it as it is (no run, no folder)", function()
    local code, out = sh(quote(program) .. " --help")
    assert.are.equal(0, code)
    local snippet = out:match('"mcpServers": (%b{})')
    assert.is_truthy(snippet, out)
    local servers = cjson.decode(snippet)
    assert.are.same({ demo = { command = servers.demo.command } }, servers)
    assert.are.equal(program, servers.demo.command:sub(-#program))
    assert.is_falsy(out:find("luamcp run PATH", 1, true), out)
    -- and what the snippet says works: the program alone serves the demo
    local server = client.spawn({}, { bin = servers.demo.command })
    server:initialize()
    assert.are.equal("5", text_of(server:call_tool("add", { a = 2, b = 3 })))
    stop(server)
  end)

  it("is also a ZIP archive that unzip lists and tests", function()
    local code, out = sh("unzip -t " .. quote(program))
    assert.are.equal(0, code, out)
    assert.is_truthy(out:find("No errors detected", 1, true), out)
  end)

  it("refuses to start with a flipped byte in its bundle", function()
    local bytes = client.read_file(program)
    local at = bytes:find("Add two integers", 1, true)
    assert.is_truthy(at)
    local damaged = dir .. "/flipped"
    client.write_file(damaged, bytes:sub(1, at - 1) .. "B" .. bytes:sub(at + 1))
    assert(os.execute("chmod 755 " .. quote(damaged)))
    local code, out, err = sh(quote(damaged) .. " </dev/null")
    assert.are_not.equal(0, code)
    assert.are.equal("", out)
    assert.is_truthy(err:find("damaged", 1, true), err)
    assert.is_truthy(err:find("CRC-32", 1, true), err)
  end)

  it("refuses to start when its file was cut short", function()
    local bytes = client.read_file(program)
    for _, cut in ipairs { 1, 100, 3000 } do -- the trailer, part of the central directory, into the files
      local truncated = dir .. "/truncated"
      client.write_file(truncated, bytes:sub(1, #bytes - cut))
      assert(os.execute("chmod 755 " .. quote(truncated)))
      local code, out, err = sh(quote(truncated) .. " </dev/null")
      assert.are_not.equal(0, code)
      assert.are.equal("", out)
      assert.is_truthy(err:find("truncated", 1, true), "cut " .. cut .. ": " .. err)
    end
  end)

  it("takes the options of luamcp run, and refuses what run refuses", function()
    local code, _, err = sh(quote(program) .. " --no-such-option </dev/null")
    assert.are.equal(2, code)
    assert.is_truthy(err:find("unknown option --no-such-option", 1, true), err)
    code, _, err = sh(quote(program) .. " extra-path </dev/null")
    assert.are.equal(2, code)
    assert.is_truthy(err:find("unexpected argument extra-path", 1, true), err)

    local trace = dir .. "/trace.txt"
    local server = client.spawn({ "--trace", trace }, { bin = program })
    server:initialize()
    stop(server)
    assert.is_truthy(file_contains(trace, '"method":"initialize"'))
  end)
end)

describe("luamcp build of a folder with modules and data", function()
  local dir
  setup(function() dir = client.temp_dir() end)
  teardown(function() client.remove_tree(dir) end)

  local function check_fixture_server(program, chunk_name)
    local server = spawn_alone(program, {})
    local info = server:initialize()
    assert.are.equal("build-fixture", info.serverInfo.name)
    assert.are.equal("7", text_of(server:call_tool("add", { a = 3, b = 4 })))
    assert.are.equal("alpha,beta,gamma", text_of(server:call_tool("words", {})))
    assert.are.equal("nil / true", text_of(server:call_tool("missing_file", {})))
    -- Only preload, the bundle, the built-in library and the modules packed with it; nothing from LUA_PATH.
    local where = server:call_tool("where", {}).structuredContent
    assert.are.same({ path = "", cpath = "", searchers = 4 }, where)
    local failed = server:call_tool("fail", {})
    assert.is_true(failed.isError)
    if chunk_name then assert.is_truthy(text_of(failed):find(chunk_name, 1, true), text_of(failed)) end
    stop(server)
  end

  it("bundles subfolders and data files, leaves hidden files out, and names chunks bundle/...", function()
    local program = dir .. "/fixture"
    build_ok(FIXTURE, "-o", program)
    local _, listing = sh("unzip -l " .. quote(program))
    assert.is_truthy(listing:find("lib/util.lua", 1, true), listing)
    assert.is_truthy(listing:find("data/words.txt", 1, true), listing)
    assert.is_falsy(listing:find("hidden", 1, true), listing)
    assert.is_true(file_contains(program, "SOURCE-ONLY-MARKER"))
    check_fixture_server(program, "bundle/lib/util.lua:10: failing on purpose")
  end)

  it("ignores LUA_PATH and modules on the disk", function()
    local program = dir .. "/fixture"
    build_ok(FIXTURE, "-o", program)
    local decoy = client.temp_dir()
    assert(os.execute("mkdir -p " .. quote(decoy .. "/lib")))
    client.write_file(decoy .. "/lib/util.lua", "error('the disk was read')")
    local server = client.spawn({}, { bin = program, cwd = decoy,
                                      env = { "LUA_PATH=" .. decoy .. "/?.lua", "LUA_PATH_5_4=" .. decoy .. "/?.lua" } })
    server:initialize()
    assert.are.equal("7", text_of(server:call_tool("add", { a = 3, b = 4 })))
    stop(server)
    client.remove_tree(decoy)
  end)

  it("reads the same data files with mcp.bundle.read under luamcp run", function()
    local server = client.spawn { "run", FIXTURE }
    server:initialize()
    assert.are.equal("alpha,beta,gamma", text_of(server:call_tool("words", {})))
    assert.are.equal("nil / true", text_of(server:call_tool("missing_file", {})))
    stop(server)
  end)

  it("stores scripts as bytecode with --bytecode, without their source text", function()
    local program = dir .. "/fixture-bytecode"
    build_ok(FIXTURE, "-o", program, "--bytecode")
    assert.is_false(file_contains(program, "SOURCE-ONLY-MARKER"))
    assert.is_false(file_contains(program, "local total_of_the_two_numbers = a + b"))
    local _, info = sh(quote(program) .. " --bundle-info")
    assert.is_truthy(info:find("scripts as bytecode", 1, true), info)
    check_fixture_server(program, "bundle/lib/util.lua:10: failing on purpose")
  end)

  it("drops debug information with --bytecode --strip", function()
    local program = dir .. "/fixture-stripped"
    build_ok(FIXTURE, "-o", program, "--bytecode", "--strip")
    assert.is_false(file_contains(program, "SOURCE-ONLY-MARKER"))
    assert.is_false(file_contains(program, "total_of_the_two_numbers"))
    check_fixture_server(program, nil)
  end)

  it("refuses --strip without --bytecode", function()
    local code, _, err = build(FIXTURE, "-o", dir .. "/x", "--strip")
    assert.are.equal(2, code)
    assert.is_truthy(err:find("--strip applies to --bytecode", 1, true), err)
  end)
end)

describe("luamcp build --mcpb", function()
  local dir
  setup(function() dir = client.temp_dir() end)
  teardown(function() client.remove_tree(dir) end)

  it("writes an MCP Bundle that unzip tests, with every required manifest field", function()
    local program, mcpb = dir .. "/demo-server", dir .. "/demo.mcpb"
    build_ok(DEMO, "-o", program, "--mcpb", mcpb, "--author", "luamcp tests")
    local code, out = sh("unzip -t " .. quote(mcpb))
    assert.are.equal(0, code, out)
    assert.is_truthy(out:find("No errors detected", 1, true), out)

    local _, text = sh("unzip -p " .. quote(mcpb) .. " manifest.json")
    local manifest = cjson.decode(text)
    assert.are.equal("0.3", manifest.manifest_version)
    assert.are.equal("demo", manifest.name)
    assert.are.equal("1.0.0", manifest.version)
    assert.are.equal("luamcp demo", manifest.display_name)
    assert.is_string(manifest.description)
    assert.is_true(#manifest.description > 0)
    assert.are.same({ name = "luamcp tests" }, manifest.author)
    assert.are.equal("binary", manifest.server.type)
    assert.are.equal("server/demo-server", manifest.server.entry_point)
    assert.are.equal("${__dirname}/server/demo-server", manifest.server.mcp_config.command)
    assert.are.same({}, manifest.server.mcp_config.args)
    local tools = {}
    for _, t in ipairs(manifest.tools) do tools[t.name] = t.description end
    assert.are.equal("Add two integers", tools.add)
    assert.is_string(tools.roll_dice)

    -- The entry point is the very program, executable.
    local _, zipinfo = sh("unzip -Z " .. quote(mcpb))
    assert.is_truthy(zipinfo:find("%-rwxr%-xr%-x[^\n]* server/demo%-server\n"), zipinfo)
    local _, unpacked = sh("unzip -p " .. quote(mcpb) .. " server/demo-server")
    assert.is_true(unpacked == client.read_file(program))
  end)

  it("takes name, version, description and author from mcp.server{}, flags first", function()
    local mcpb = dir .. "/fixture.mcpb"
    build_ok(FIXTURE, "-o", dir .. "/fixture", "--mcpb", mcpb)
    local manifest = cjson.decode((select(2, sh("unzip -p " .. quote(mcpb) .. " manifest.json"))))
    assert.are.equal("build-fixture", manifest.name)
    assert.are.equal("2.1.0", manifest.version)
    assert.are.equal("Build fixture", manifest.description)
    assert.are.same({ name = "luamcp tests" }, manifest.author)

    build_ok(FIXTURE, "-o", dir .. "/fixture", "--mcpb", mcpb, "--name", "renamed", "--version", "3.0.0",
             "--description", "Described", "--author", "Someone")
    manifest = cjson.decode((select(2, sh("unzip -p " .. quote(mcpb) .. " manifest.json"))))
    assert.are.equal("renamed", manifest.name)
    assert.are.equal("3.0.0", manifest.version)
    assert.are.equal("Described", manifest.description)
    assert.are.same({ name = "Someone" }, manifest.author)
  end)

  it("needs an author, as the manifest spec requires", function()
    local code, _, err = build(DEMO, "-o", dir .. "/x", "--mcpb", dir .. "/x.mcpb")
    assert.are.equal(1, code)
    assert.is_truthy(err:find("needs an author", 1, true), err)
    assert.is_falsy(io.open(dir .. "/x", "rb"))
  end)
end)

describe("luamcp build --mcpb of a server with settings, a prompt and an icon", function()
  local dir, program, mcpb, manifest
  setup(function()
    dir = client.temp_dir()
    program, mcpb = dir .. "/fixture-server", dir .. "/fixture.mcpb"
    build_ok(MCPB_FIXTURE, "-o", program, "--mcpb", mcpb)
    manifest = cjson.decode((select(2, sh("unzip -p " .. quote(mcpb) .. " manifest.json"))))
  end)
  teardown(function() client.remove_tree(dir) end)

  --- The fields of an object, sorted: what a strict manifest schema allows.
  local function keys(t)
    local list = {}
    for k in pairs(t) do list[#list + 1] = k end
    table.sort(list)
    return list
  end

  it("writes config as user_config, each setting mapped to an environment variable", function()
    assert.are.same({
      api_key = { type = "string", title = "API key", description = "The key for the service", sensitive = true,
                  required = true },
      limit = { type = "number", title = "Limit", description = "At most this many results", default = 10, min = 1,
                max = 100 },
      notes_dir = { type = "directory", title = "Notes folder", description = "Where notes are kept" },
    }, manifest.user_config)
    -- The key upper-cased, and the placeholder the host replaces.
    assert.are.same({ API_KEY = "${user_config.api_key}", LIMIT = "${user_config.limit}",
                      NOTES_DIR = "${user_config.notes_dir}" }, manifest.server.mcp_config.env)
    assert.are.same({}, manifest.server.mcp_config.args)
  end)

  it("lists the prompts with their argument names, and the license and icon", function()
    -- text is required by the manifest schema; a luamcp prompt's messages
    -- come from get at run time, so it carries the description.
    assert.are.same({ { name = "review", description = "Ask for a review of one change", arguments = { "change", "focus" },
                        text = "Ask for a review of one change" } }, manifest.prompts)
    assert.are.same({ "arguments", "description", "name", "text" }, keys(manifest.prompts[1]))
    assert.are.equal("MIT", manifest.license)
    -- What the tools may touch, shown before installing (this one declares nothing).
    assert.are.equal("Permissions: none declared; the tools run with the user's rights.", manifest.long_description)
    assert.are.equal("icon.png", manifest.icon)
    local _, icon = sh("unzip -p " .. quote(mcpb) .. " icon.png")
    assert.is_true(icon == client.read_file(MCPB_FIXTURE .. "/icon.png"))
  end)

  it("deflates the archive, and unzip and Python's zipfile read back every byte", function()
    local _, listing = sh("unzip -v " .. quote(mcpb))
    local size, stored = listing:match("\n%s*(%d+)%s+Defl:N%s+(%d+)[^\n]* server/fixture%-server\n")
    assert.is_truthy(size, listing)
    assert.is_truthy(tonumber(stored) < tonumber(size) / 2, listing)
    assert.is_truthy(listing:find("Defl:N[^\n]* manifest%.json\n"), listing)
    local code, out = sh("unzip -t " .. quote(mcpb))
    assert.are.equal(0, code, out)
    code, out = sh("python3 -m zipfile -t " .. quote(mcpb))
    assert.are.equal(0, code, out)

    local unpacked = dir .. "/python"
    code, out = sh("python3 -m zipfile -e " .. quote(mcpb) .. " " .. quote(unpacked))
    assert.are.equal(0, code, out)
    assert.is_true(client.read_file(unpacked .. "/server/fixture-server") == client.read_file(program))
    assert.is_true(client.read_file(unpacked .. "/icon.png") == client.read_file(MCPB_FIXTURE .. "/icon.png"))
    assert.are.same(manifest, cjson.decode(client.read_file(unpacked .. "/manifest.json")))
  end)

  it("unpacks into a server that reads its settings from the environment, as Claude Desktop passes them", function()
    local unpacked = dir .. "/unzip"
    local code, out = sh("unzip -q " .. quote(mcpb) .. " -d " .. quote(unpacked))
    assert.are.equal(0, code, out)
    -- What the host makes of mcp_config.env: the user's value, or for a
    -- setting left empty the placeholder as it was, which reads as unset.
    local env = {}
    for name, placeholder in pairs(manifest.server.mcp_config.env) do
      local given = { API_KEY = "secret-123", LIMIT = "25" }
      env[#env + 1] = name .. "=" .. (given[name] or placeholder)
    end
    local server = client.spawn({}, { bin = unpacked .. "/" .. manifest.server.entry_point, cwd = unpacked, env = env })
    server:initialize()
    local settings = server:call_tool("settings", {}).structuredContent
    assert.are.same({ api_key = "secret-123", limit = "25" }, settings)
    stop(server)
    assert.is_falsy(server.stderr:find("is not set", 1, true), server.stderr)
  end)

  it("warns when serving without a required setting's variable, and serves anyway", function()
    local server = client.spawn({ "run", MCPB_FIXTURE }, { env = { "LIMIT=3" } })
    server:initialize()
    assert.are.same({ limit = "3" }, server:call_tool("settings", {}).structuredContent)
    stop(server)
    assert.is_truthy(server.stderr:find('API_KEY is not set: mcp.server{} config api_key ("API key") is required', 1,
      true), server.stderr)
    assert.is_falsy(server.stderr:find("LIMIT", 1, true), server.stderr)
    -- Building loads the scripts too, but serves nothing: no warning.
    local err = build_ok(MCPB_FIXTURE, "-o", dir .. "/again")
    assert.is_falsy(err:find("is not set", 1, true), err)
  end)

  it("takes --icon and --license over mcp.server{}, and refuses an icon that is not a PNG", function()
    local png = dir .. "/other.png"
    client.write_file(png, "\137PNG\r\n\26\n" .. "another icon")
    local other = dir .. "/other.mcpb"
    build_ok(MCPB_FIXTURE, "-o", dir .. "/other", "--mcpb", other, "--icon", png, "--license", "Apache-2.0")
    local m = cjson.decode((select(2, sh("unzip -p " .. quote(other) .. " manifest.json"))))
    assert.are.equal("Apache-2.0", m.license)
    assert.are.equal("icon.png", m.icon)
    assert.are.equal(client.read_file(png), (select(2, sh("unzip -p " .. quote(other) .. " icon.png"))))

    local code, _, err = build(MCPB_FIXTURE, "-o", dir .. "/x", "--mcpb", dir .. "/x.mcpb", "--icon", "README.md")
    assert.are.equal(1, code)
    assert.is_truthy(err:find("--icon: README.md: not a PNG file", 1, true), err)
    assert.is_falsy(io.open(dir .. "/x", "rb"))
  end)

  it("refuses an mcp.server{} icon that is not in the script folder", function()
    local folder = client.temp_dir()
    client.write_file(folder .. "/main.lua",
      'local mcp = require "mcp"\nmcp.server { author = "a", icon = "missing.png" }\n')
    local code, _, err = build(folder, "-o", folder .. "/out", "--mcpb", folder .. "/out.mcpb")
    assert.are.equal(1, code)
    assert.is_truthy(err:find("mcp.server{} icon: " .. folder .. "/missing.png: No such file", 1, true), err)
    client.remove_tree(folder)
  end)

  it("refuses bad config fields when the script loads, with file and line", function()
    local cases = {
      { 'api_key = { type = "string", title = "T", description = "D", sensitiv = true }',
        "config.api_key: unknown field sensitiv (did you mean sensitive?)" },
      { 'api_key = { type = "strng", title = "T", description = "D" }',
        'config.api_key: type must be one of string, number, boolean, directory, file, got "strng" (did you mean string?)' },
      { 'api_key = { type = "string", description = "D" }', "config.api_key needs a title" },
      { '["api-key"] = { type = "string", title = "T", description = "D" }', 'config key "api-key": use letters' },
      { 'limit = { type = "number", title = "T", description = "D", default = "5" }',
        'config.limit: default must be a number for type "number", got string' },
      { 'limit = { type = "number", title = "T", description = "D", min = 5, max = 1 }', "config.limit: min 5 is more than max 1" },
      { 'flag = { type = "boolean", title = "T", description = "D", sensitive = true }',
        'config.flag: sensitive applies to type "string"' },
      { 'dirs = { type = "directory", title = "T", description = "D", multiple = true }',
        "config.dirs: multiple = true cannot reach the program" },
      { 'key = { type = "string", title = "T", description = "D" }, KEY = { type = "string", title = "T", description = "D" }',
        "config keys KEY and key would both be the environment variable KEY" },
    }
    local folder = client.temp_dir()
    for _, case in ipairs(cases) do
      client.write_file(folder .. "/main.lua", 'local mcp = require "mcp"\n\nmcp.server {\n  author = "a",\n  config = { '
        .. case[1] .. " },\n}\n")
      local code, _, err = build(folder, "-o", folder .. "/out")
      assert.are.equal(1, code, case[1])
      assert.is_truthy(err:find(folder .. "/main.lua:3: " .. case[2], 1, true), err)
    end
    client.remove_tree(folder)
  end)
end)

describe("luamcp build of a broken folder", function()
  it("fails with the message luamcp run prints", function()
    local dir = client.temp_dir()
    local code, _, err = build(BROKEN, "-o", dir .. "/broken")
    local run_code, _, run_err = sh(quote(LUAMCP) .. " run " .. quote(BROKEN) .. " </dev/null")
    assert.are.equal(1, code)
    assert.are.equal(1, run_code)
    assert.is_truthy(run_err:find("broken.lua:4:", 1, true), run_err)
    assert.are.equal(run_err, err)
    assert.is_falsy(io.open(dir .. "/broken", "rb"))
    client.remove_tree(dir)
  end)

  it("fails on a broken module in a subfolder, which run would only meet at require", function()
    local folder = client.temp_dir()
    assert(os.execute("mkdir -p " .. quote(folder .. "/lib")))
    client.write_file(folder .. "/main.lua", "local mcp = require 'mcp'\n")
    client.write_file(folder .. "/lib/bad.lua", "return {\n")
    local code, _, err = build(folder, "-o", folder .. "/out")
    assert.are.equal(1, code)
    assert.is_truthy(err:find(folder .. "/lib/bad.lua:2:", 1, true), err)
    client.remove_tree(folder)
  end)

  it("fails on a folder that loads a Lua C module, naming it", function()
    local dir = client.temp_dir()
    local code, _, err = build("scripts/sqlite", "-o", dir .. "/out")
    assert.are.equal(1, code)
    assert.is_truthy(err:find("the scripts load Lua C modules, which a built program cannot carry: luasql.sqlite3 (", 1,
      true), err)
    assert.is_falsy(io.open(dir .. "/out", "rb"))
    client.remove_tree(dir)
  end)
end)

describe("a plain luamcp", function()
  it("says it carries no bundle", function()
    local code, _, err = sh(quote(LUAMCP) .. " --bundle-info")
    assert.are.equal(1, code)
    assert.is_truthy(err:find("carries no bundle", 1, true), err)
  end)
end)

describe("luamcp build --static", function()
  local static_runtime = LUAMCP:gsub("[^/]+$", "luamcp-static")
  local have_static = io.open(static_runtime, "rb")
  if have_static then have_static:close() end

  it("writes a fully static program (needs " .. static_runtime .. ", from make build/luamcp-static)", function()
    if not have_static then
      pending("no " .. static_runtime .. " to build with")
      return
    end
    local dir = client.temp_dir()
    local program = dir .. "/demo-static"
    build_ok(DEMO, "-o", program, "--static")
    local _, out, err = sh("ldd " .. quote(program))
    assert.is_truthy((out .. err):find("not a dynamic executable", 1, true), out .. err)
    local server = spawn_alone(program)
    server:initialize()
    assert.are.equal("5", text_of(server:call_tool("add", { a = 2, b = 3 })))
    stop(server)
    client.remove_tree(dir)
  end)

  it("says that C modules cannot work in it; mcp.http does (libcurl linked in)", function()
    if not have_static then
      pending("no " .. static_runtime .. " to run")
      return
    end
    local server = client.spawn({ "run", "spec/fixtures/http_client" }, { bin = static_runtime })
    server:initialize()
    local result = server:call_tool("request", { url = "http://127.0.0.1:1/" })
    server:close()
    -- libcurl tried to connect: the port is closed, nothing is missing.
    assert.is_falsy(result.isError, text_of(result))
    assert.are.equal("connect", result.structuredContent.code, text_of(result))
    local code, _, err = sh(quote(static_runtime) .. " run scripts/sqlite </dev/null")
    assert.are.equal(1, code)
    assert.is_truthy(err:find("cannot load the C module luasql.sqlite3 (", 1, true), err)
  end)
end)

-- Issue #43 item 5: build says, before anyone ships it, when the scripts use
-- something the target's runtime lacks. The truth is the built program's own
-- behaviour: a tool calling mcp.http is run where it was built for, and the
-- warning must be there exactly when the call says mcp.http is missing.
describe("luamcp build names what the target's runtime lacks", function()
  local static_runtime = LUAMCP:gsub("[^/]+$", "luamcp-static")
  local have_static = io.open(static_runtime, "rb")
  if have_static then have_static:close() end
  local HTTP_FOLDER = "spec/fixtures/http_client"
  local dir
  setup(function() dir = client.temp_dir() end)
  teardown(function() client.remove_tree(dir) end)

  --- Whether the program built for linux-x64 lacks mcp.http: its own answer.
  local function program_lacks_http(program)
    local server = spawn_alone(program)
    server:initialize()
    local result = server:call_tool("request", { url = "http://127.0.0.1:1/" })
    stop(server)
    return cjson.encode(result):find("mcp.http is not available", 1, true) ~= nil
  end

  -- A runtime that lacks mcp.http: fully static, without libcurl (the
  -- Makefile's build/tests/luamcp-static-nocurl, made here once).
  local nocurl
  local function nocurl_runtime()
    if nocurl then return nocurl end
    local target = "build/tests/luamcp-static-nocurl"
    local code, out, err = sh("make --no-print-directory " .. target)
    assert(code == 0, "make " .. target .. " failed:\n" .. out .. err)
    nocurl = target
    return nocurl
  end

  it("warns, naming mcp.http and linux-x64, when the target's runtime lacks it, as the program then says", function()
    local program = dir .. "/http-nocurl"
    local err = build_ok(HTTP_FOLDER, "--target", "linux-x64", "--runtime", "linux-x64=" .. nocurl_runtime(),
      "-o", program)
    local warning = err:match("luamcp: warning: [^\n]*mcp%.http[^\n]*")
    assert.is_truthy(warning, err)
    assert.is_truthy(warning:find("linux-x64", 1, true), warning)
    assert.is_true(program_lacks_http(program))
  end)

  it("with --strict refuses to write a program that lacks what the scripts use", function()
    local program = dir .. "/http-strict"
    local code, out, err = build(HTTP_FOLDER, "--target", "linux-x64", "--runtime", "linux-x64=" .. nocurl_runtime(),
      "--strict", "-o", program)
    assert.are.equal(1, code, out .. err)
    assert.is_truthy(err:find("mcp.http", 1, true) and err:find("linux-x64", 1, true), err)
    assert.is_nil(io.open(program, "rb"), "a program was written")
  end)

  it("says nothing of mcp.http for build/luamcp-static, whose program has it", function()
    if not have_static then
      pending("no " .. static_runtime .. " (make build/luamcp-static)")
      return
    end
    local program = dir .. "/http-x64"
    local err = build_ok(HTTP_FOLDER, "--target", "linux-x64", "--strict", "-o", program)
    assert.is_nil(err:find("warning", 1, true), err)
    assert.is_false(program_lacks_http(program))
  end)

  it("says nothing for a folder that uses only what every runtime has", function()
    local targets = {}
    for _, t in ipairs { { "linux-x64", static_runtime }, { "linux-arm64", LUAMCP:gsub("[^/]+$", "linux-arm64/luamcp") },
                         { "windows-x64", LUAMCP:gsub("[^/]+$", "windows/luamcp.exe") } } do
      local f = io.open(t[2], "rb")
      if f then f:close(); targets[#targets + 1] = t[1] end
    end
    if #targets == 0 then
      pending("no runtime for --target built")
      return
    end
    local err = build_ok(DEMO, "--target", table.concat(targets, ","), "-o", dir .. "/demo-all", "--strict")
    assert.is_nil(err:find("warning", 1, true), err)
  end)
end)
