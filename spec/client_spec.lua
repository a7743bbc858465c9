-- luamcp call, read, prompt, init and test: an MCP client from the shell,
-- run the way a user runs it (from another directory), against a folder
-- served in process, a stdio server started as a child (-- COMMAND), and
-- a Streamable HTTP server (--http URL).

local client = require "mcp_client"
local http = require "http_client"
local cjson = client.json

local sh = client.sh

local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local DEMO = io.popen("readlink -f scripts/demo"):read("l")
local FIXTURE = io.popen("readlink -f spec/fixtures/testing"):read("l")

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Run luamcp with these words from / ; returns status, stdout, stderr.
local function luamcp(words, wrapper)
  return sh("cd / && " .. (wrapper or "") .. LUAMCP .. " " .. words .. " </dev/null")
end

describe("luamcp call PATH", function()
  it("lists the tools without a tool name", function()
    local code, out = luamcp("call " .. DEMO)
    assert.are.equal(0, code)
    assert.truthy(out:find("\n  add +Add two integers\n"), out)
    assert.truthy(out:find("\n  countdown ", 1, false), out)
  end)

  it("types key=value by the tool's schema and prints the content", function()
    local code, out = luamcp("call " .. DEMO .. " add a=2 b=3")
    assert.are.equal(0, code)
    assert.are.equal("5\n", out)
    -- The same text is an integer, a string or a float as the schema says;
    -- arrays come from JSON or from comma-separated values.
    code, out = luamcp("call " .. FIXTURE .. " types n=7 s=7 f=7.5 b=yes any=7 tags=a,b counts='[1,2]'")
    assert.are.equal(0, code, out)
    assert.are.same({ n = "integer", s = "string", f = "float", b = "boolean", any = "integer", tags = "table",
      counts = "table", tags_joined = "a+b", counts_sum = 3 }, cjson.decode(out))
  end)

  it("refuses a value the schema cannot take, before calling", function()
    local code, out, err = luamcp("call " .. DEMO .. " add a=2 b=3.5")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.truthy(err:find("b=3.5: the schema wants integer", 1, true), err)
  end)

  it("takes the arguments as JSON, and prints the raw result with --raw", function()
    local code, out = luamcp("call " .. DEMO .. " add --json '{\"a\":40,\"b\":2}'")
    assert.are.equal(0, code)
    assert.are.equal("42\n", out)
    code, out = luamcp("call " .. DEMO .. " roll_dice count=3 sides=6 --raw")
    assert.are.equal(0, code)
    local result = cjson.decode(out)
    assert.are.equal(3, #result.structuredContent.rolls)
    assert.are.equal("text", result.content[1].type)
  end)

  it("prints structured content once, and arrays from comma-separated values", function()
    local code, out = luamcp("call " .. DEMO .. " roll_dice count=2")
    assert.are.equal(0, code)
    local printed = cjson.decode(out)
    assert.are.equal(2, #printed.rolls)
  end)

  it("prints a tool error on stderr with exit status 1", function()
    local code, out, err = luamcp("call " .. DEMO .. " add a=1")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.truthy(err:find('missing required property "b"', 1, true), err)
    code, _, err = luamcp("call " .. FIXTURE .. " broken")
    assert.are.equal(1, code)
    assert.truthy(err:find("the disk is full", 1, true), err)
  end)

  it("names the tools when the tool does not exist", function()
    local code, _, err = luamcp("call " .. DEMO .. " ad a=1")
    assert.are.equal(1, code)
    assert.truthy(err:find("no tool ad (did you mean add?); the tools are: countdown, add,", 1, true), err)
    code, _, err = luamcp("call " .. DEMO .. " subtract")
    assert.are.equal(1, code)
    assert.truthy(err:find("no tool subtract; the tools are: countdown, add,", 1, true), err)
  end)

  it("suggests the tool, prompt, resource or option a typo meant", function()
    local code, out, err = luamcp("call " .. DEMO .. " wirte_note name=x text=y")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.truthy(err:find("luamcp call: no tool wirte_note (did you mean write_note?)", 1, true), err)
    code, out, err = luamcp("prompt " .. DEMO .. " sumarize_note name=x")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.truthy(err:find("Unknown prompt: sumarize_note (did you mean summarize_note?)", 1, true), err)
    -- notes://indx fits the template notes://{name}: the server's own
    -- "not found" stays, with the listed resource it was likely meant to be.
    code, out, err = luamcp("read " .. DEMO .. " notes://indx")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.truthy(err:find("Resource not found: notes://indx (did you mean notes://index?)", 1, true), err)
    code, _, err = luamcp("call " .. DEMO .. " add a=1 b=2 --acept-defaults")
    assert.are.equal(2, code)
    assert.truthy(err:find("unknown option --acept-defaults (did you mean --accept-defaults?)", 1, true), err)
    -- Far from every name: no guess, the server's answer as it was.
    code, _, err = luamcp("prompt " .. DEMO .. " nothing_like_it")
    assert.are.equal(1, code)
    assert.truthy(err:find("Unknown prompt: nothing_like_it (-32602)", 1, true), err)
    assert.falsy(err:find("did you mean", 1, true), err)
  end)

  it("shows progress and log notifications on stderr, the result on stdout", function()
    local code, out, err = luamcp("call " .. DEMO .. " countdown n=3")
    assert.are.equal(0, code)
    assert.are.equal("Liftoff!\n", out)
    local p1, p3, log = err:find("progress 1/3", 1, true), err:find("progress 3/3", 1, true),
      err:find("[info] countdown of 3 finished", 1, true)
    assert.truthy(p1 and p3 and log, err)
    assert.is_true(p1 < p3 and p3 < log, err)
  end)

  it("fails clearly on a folder that does not load, or a path that does not exist", function()
    local code, _, err = luamcp("call " .. io.popen("readlink -f spec/fixtures/build_broken"):read("l") .. " x")
    assert.are.equal(1, code)
    assert.truthy(err:find("broken.lua:%d+"), err)
    code, _, err = luamcp("call /no/such/folder x")
    assert.are.equal(1, code)
    assert.truthy(err:find("no such file or folder: /no/such/folder", 1, true), err)
  end)

  it("explains itself with --help, and usage errors exit 2", function()
    for _, cmd in ipairs { "call", "read", "prompt", "test", "init" } do
      local code, out = luamcp(cmd .. " --help")
      assert.are.equal(0, code, cmd)
      assert.truthy(out:find("^Usage: luamcp " .. cmd), out)
    end
    local code, _, err = luamcp("call " .. DEMO .. " add --bogus")
    assert.are.equal(2, code)
    assert.truthy(err:find("unknown option --bogus", 1, true), err)
  end)
end)

describe("the in-process server's end", function()
  -- libuv is linked uninstrumented, so ASan cannot see a handle of the
  -- in-process server touched after its memory is freed; valgrind can.
  it("frees nothing libuv still uses (valgrind)", function()
    if not os.execute("command -v valgrind >/dev/null 2>&1") then
      pending("valgrind is not installed")
      return
    end
    if os.execute("ldd " .. LUAMCP .. " 2>/dev/null | grep -q libasan") then
      pending("valgrind cannot run the ASan build (the release run covers this)")
      return
    end
    local code, out, err = luamcp("call " .. DEMO .. " add a=1 b=2", "valgrind -q --error-exitcode=9 ")
    assert.are.equal(0, code, err)
    assert.are.equal("3\n", out)
    assert.is_nil(err:find("Invalid", 1, true), err)
  end)
end)

describe("luamcp read and prompt", function()
  it("read prints a text resource, lists without a URI, and writes a blob to --output", function()
    local code, out = luamcp("read " .. DEMO .. " notes://index")
    assert.are.equal(0, code)
    assert.truthy(out:find("welcome", 1, true), out)
    code, out = luamcp("read " .. DEMO)
    assert.are.equal(0, code)
    assert.truthy(out:find("resources:\n", 1, true) and out:find("templates:\n  notes://{name}", 1, true), out)
    code, out = luamcp("read " .. FIXTURE .. " fixture://bytes")
    assert.are.equal(0, code)
    assert.truthy(out:find("[blob fixture://bytes, application/octet-stream", 1, true), out)
    local file = os.tmpname()
    code = luamcp("read " .. FIXTURE .. " fixture://bytes --output " .. file)
    assert.are.equal(0, code)
    assert.are.equal("\0\1\2binary\255", client.read_file(file))
    os.remove(file)
    code, _, err = luamcp("read " .. DEMO .. " notes://nothing")
    assert.are.equal(1, code)
    assert.truthy(err:find("(-32002)", 1, true), err)
  end)

  it("prompt prints the messages, and lists without a name", function()
    local code, out = luamcp("prompt " .. FIXTURE .. " greet who=Ada")
    assert.are.equal(0, code)
    assert.are.equal("user:\nGreet Ada\n", out)
    code, out = luamcp("prompt " .. DEMO)
    assert.are.equal(0, code)
    assert.truthy(out:find("prompts:\n  summarize_note", 1, true), out)
  end)
end)

describe("luamcp call against other servers", function()
  it("starts a stdio server after -- and calls it", function()
    local code, out = luamcp("call add a=1 b=2 -- " .. LUAMCP .. " run " .. DEMO)
    assert.are.equal(0, code)
    assert.are.equal("3\n", out)
    code, _, err = luamcp("call add -- /no/such/program")
    assert.are.equal(1, code)
    assert.truthy(err:find("cannot start /no/such/program", 1, true), err)
  end)

  it("reports a server that exits at once, and bounds the whole request with --timeout", function()
    local code, _, err = luamcp("call x -- /bin/true")
    assert.are.equal(1, code)
    assert.truthy(err:find("initialize failed: the server", 1, true), err)
    -- countdown sends progress every 100 ms for 500 ms: the notifications
    -- do not extend the 250 ms the request has.
    code, _, err = luamcp("call --timeout 250 " .. DEMO .. " countdown n=5")
    assert.are.equal(1, code)
    assert.truthy(err:find("no answer within 250 ms", 1, true), err)
  end)

  it("calls a program made by luamcp build, given as PATH", function()
    local dir = client.temp_dir()
    local program = dir .. "/demo"
    local code, out, err = sh(LUAMCP .. " build " .. DEMO .. " -o " .. program)
    assert.are.equal(0, code, out .. err)
    code, out = luamcp("call " .. program .. " add a=20 b=22")
    assert.are.equal(0, code)
    assert.are.equal("42\n", out)
    client.remove_tree(dir)
  end)

  it("reaches a Streamable HTTP server with --http, progress streamed over SSE", function()
    local server = http.start { DEMO }
    local code, out, err = luamcp("call --http " .. server.url .. " countdown n=2")
    assert.are.equal(0, code, err)
    assert.are.equal("Liftoff!\n", out)
    assert.truthy(err:find("progress 2/2", 1, true), err)
    code, out = luamcp("read --http " .. server.url .. " notes://index")
    assert.are.equal(0, code)
    assert.truthy(out:find("welcome", 1, true))
    code, out = luamcp("prompt --http " .. server.url .. " --header 'X-Test: 1' summarize_note name=welcome")
    assert.are.equal(0, code)
    assert.truthy(out:find("\nuser:\n", 1, true), out)
    -- A wrong path answers 404: the message says so.
    code, _, err = luamcp("call --http http://127.0.0.1:" .. server.port .. "/elsewhere add a=1 b=2")
    assert.are.equal(1, code)
    assert.truthy(err:find("initialize failed", 1, true), err)
    server:stop_cleanly()
    code, _, err = luamcp("call --http " .. server.url .. " add a=1 b=2")
    assert.are.equal(1, code)
    assert.truthy(err:find("cannot reach " .. server.url, 1, true), err)
  end)
end)

describe("luamcp init and luamcp test", function()
  it("makes a project whose own spec passes under luamcp test, and fails when a test fails", function()
    local dir = client.temp_dir()
    local project = dir .. "/hello"
    local code, out, err = sh("cd " .. quote(dir) .. " && " .. LUAMCP .. " init hello")
    assert.are.equal(0, code, out .. err)
    for _, file in ipairs { "server.lua", "spec/server_spec.lua", ".luarc.json", "README.md" } do
      assert.truthy(client.read_file(project .. "/" .. file), file)
    end
    -- The editor settings point at luamcp's LuaLS definitions.
    local luarc = cjson.decode(client.read_file(project .. "/.luarc.json"))
    local library = luarc["workspace.library"][1]
    assert.truthy(client.read_file(library .. "/mcp.lua"):find("---@meta mcp", 1, true))
    code, out, err = sh("cd " .. quote(project) .. " && " .. LUAMCP .. " test")
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find("3 successes / 0 failures", 1, true), out)
    code, out = sh("cd " .. quote(project) .. " && " .. LUAMCP .. " call . greet name=Ada")
    assert.are.equal(0, code)
    assert.are.equal("Hello, Ada!\n", out)
    -- Break the tool: the project's spec catches it.
    local server = client.read_file(project .. "/server.lua"):gsub('"Hello, "', '"Goodbye, "')
    client.write_file(project .. "/server.lua", server)
    code, out = sh("cd " .. quote(project) .. " && " .. LUAMCP .. " test")
    assert.are.equal(1, code)
    assert.truthy(out:find("1 failure", 1, true), out)
    -- init refuses to overwrite a project.
    code, _, err = sh("cd " .. quote(dir) .. " && " .. LUAMCP .. " init hello")
    assert.are.equal(1, code)
    assert.truthy(err:find("already has server.lua", 1, true), err)
    client.remove_tree(dir)
  end)
end)
