-- What a person sees of the command line: --help for every command, the
-- start line of luamcp run, colour on a terminal (NO_COLOR), and the trace
-- indented on a terminal. A terminal is a pseudo-terminal from script(1).

local client = require "mcp_client"

local sh = client.sh

local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local DEMO = io.popen("readlink -f scripts/demo"):read("l")
local WHAT = "(demo 1.0.0: 6 tools, 3 resources, 1 resource template, 1 prompt)"

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Run command on a terminal: what it wrote there, stdout and stderr
-- together, with the terminal's \r\n made \n.
local function on_terminal(command)
  local _, out = sh("script -qec " .. quote(command) .. " /dev/null </dev/null")
  return (out:gsub("\r\n", "\n"))
end

describe("--help", function()
  for _, cmd in ipairs { "run", "dev", "build", "inspect", "install" } do
    it("is answered by " .. cmd .. " and by `luamcp help " .. cmd .. "`", function()
      local code, out, err = sh(LUAMCP .. " " .. cmd .. " --help")
      assert.are.equal(0, code, err)
      assert.truthy(out:find("^Usage: luamcp " .. cmd .. " "), out)
      local code2, out2 = sh(LUAMCP .. " help " .. cmd)
      assert.are.equal(0, code2)
      assert.are.equal(out, out2)
    end)
  end

  it("lists every command in luamcp --help", function()
    local _, out = sh(LUAMCP .. " --help")
    for _, cmd in ipairs { "run", "dev", "build", "inspect", "install", "help" } do
      assert.truthy(out:find("\n  luamcp " .. cmd .. " ", 1, true), cmd)
    end
  end)

  it("is where an unknown option points, with exit status 2", function()
    for cmd, pointer in pairs { run = "luamcp run --help", dev = "luamcp dev --help", build = "luamcp build --help",
                                install = "luamcp install --help", inspect = "luamcp inspect --help" } do
      local code, _, err = sh(LUAMCP .. " " .. cmd .. " --no-such-option </dev/null")
      assert.are.equal(2, code, cmd)
      assert.truthy(err:find("unknown option --no-such-option", 1, true), err)
      assert.truthy(err:find("Run '" .. pointer .. "' for usage.", 1, true), err)
    end
  end)
end)

describe("the start line of luamcp run", function()
  it("says what is served on stdio, at info level", function()
    local code, out, err = sh("cd / && " .. LUAMCP .. " run " .. DEMO .. " </dev/null")
    assert.are.equal(0, code, err)
    assert.are.equal("", out)
    assert.truthy(err:find("luamcp: serving MCP on stdio " .. WHAT .. "\n", 1, true), err)
    _, _, err = sh(LUAMCP .. " run " .. DEMO .. " --log-level warning </dev/null")
    assert.falsy(err:find("serving", 1, true), err)
  end)

  it("says the URL over HTTP, at any level: it tells the port --http 0 picked", function()
    local server = client.spawn { "run", DEMO, "--http", "127.0.0.1:0", "--log-level", "error" }
    local port
    client.wait_until(function()
      port = server.stderr:match("luamcp: serving MCP over HTTP at http://127%.0%.0%.1:(%d+)/mcp ")
      return port ~= nil
    end)
    server:kill()
    server:wait_exit(3000)
    assert.is_truthy(port, server.stderr)
    assert.truthy(server.stderr:find("/mcp (legacy SSE: /sse) " .. WHAT .. "\n", 1, true), server.stderr)
  end)
end)

describe("on a terminal", function()
  it("colours the log, unless NO_COLOR is set and not empty", function()
    local run = LUAMCP .. " run " .. DEMO .. " </dev/null"
    local coloured = on_terminal("NO_COLOR= " .. run)
    assert.truthy(coloured:find("\27[", 1, true), coloured)
    assert.truthy(coloured:find("serving MCP on stdio", 1, true), coloured)
    local plain = on_terminal("NO_COLOR=1 " .. run)
    assert.falsy(plain:find("\27[", 1, true), plain)
    assert.truthy(plain:find("luamcp: serving MCP on stdio " .. WHAT, 1, true), plain)
  end)

  it("indents the trace, which stays one line a message elsewhere", function()
    local dir = client.temp_dir()
    client.write_file(dir .. "/ping.jsonl", '{"jsonrpc":"2.0","id":7,"method":"ping"}\n')
    local run = LUAMCP .. " run " .. DEMO .. " --trace - <" .. dir .. "/ping.jsonl"
    local shown = on_terminal("NO_COLOR=1 " .. run)
    assert.truthy(shown:find('stdio <- {\n  "jsonrpc": "2.0",\n  "id": 7,\n  "method": "ping"\n}\n', 1, true), shown)
    assert.truthy(shown:find('stdio -> {\n  "jsonrpc": "2.0",\n  "id": 7,\n  "result": {}\n}\n', 1, true), shown)
    local _, _, err = sh(run)
    assert.truthy(err:find('stdio <- {"jsonrpc":"2.0","id":7,"method":"ping"}\n', 1, true), err)
    client.remove_tree(dir)
  end)
end)
