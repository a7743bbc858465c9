-- luamcp call --http against a luamcp server, in both protocol eras: what
-- the conformance suite's client scenarios do not cover (the era chosen
-- by itself, --protocol-version, Ctrl-C, an invalid x-mcp-header, a
-- stream resumed, input_required answered with --answer).

local client = require "mcp_client"
local uv = require "luv"

local sh = client.sh
local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local FIXTURE = io.popen("readlink -f spec/fixtures/client_eras"):read("l")

describe("luamcp call --http, both eras", function()
  local server, url, trace, dir

  setup(function()
    dir = client.temp_dir()
    trace = dir .. "/trace.log"
    server = client.spawn { "run", FIXTURE, "--http", "127.0.0.1:0", "--trace", trace }
    local port
    client.wait_until(function()
      port = server.stderr:match("serving MCP over HTTP at http://127%.0%.0%.1:(%d+)/mcp")
      return port ~= nil
    end, 10000)
    assert(port, server.stderr)
    url = "http://127.0.0.1:" .. port .. "/mcp"
  end)

  teardown(function()
    if server then server:terminate(2000) end
    if dir then client.remove_tree(dir) end
  end)

  local function call(args)
    return sh(LUAMCP .. " call --http " .. url .. " " .. args .. " </dev/null")
  end

  it("asks server/discover first and speaks 2026-07-28 to a server that knows it", function()
    local code, out, err = call("era")
    assert.equal(0, code, err)
    assert.equal("2026-07-28\n", out)
  end)

  it("pins either era with --protocol-version", function()
    local code, out, err = call("era --protocol-version 2025-11-25")
    assert.equal(0, code, err)
    assert.equal("2025-11-25\n", out)
    code, out, err = call("era --protocol-version 2026-07-28")
    assert.equal(0, code, err)
    assert.equal("2026-07-28\n", out)
    code, _, err = call("era --protocol-version 1999-01-01")
    assert.equal(1, code)
    assert.truthy(err:find("not one this client speaks", 1, true), err)
  end)

  it("falls back to initialize for a server that answers server/discover with an error", function()
    -- The suite's 2025 servers answer it with 400 or a result naming no
    -- version; the conformance run covers those. Here: a version this
    -- server does not know makes the client's discover fail over to
    -- initialize only when not pinned, so pinning a 2025 version is
    -- the session era end to end.
    local code, out, err = call("era --protocol-version 2025-06-18")
    assert.equal(0, code, err)
    assert.equal("2025-06-18\n", out)
  end)

  it("sends the Mcp-Param header of a valid x-mcp-header and refuses an invalid one", function()
    local code, out, err = call("regional region=eu")
    assert.equal(0, code, err)
    assert.equal("region eu header eu\n", out)
    code, out, err = call("regional region=eu --protocol-version 2025-11-25")
    assert.equal(0, code, err)
    assert.equal("region eu header nil\n", out)
    code, out, err = call("bad_header score=1")
    assert.equal(1, code)
    assert.equal("", out)
    assert.truthy(err:find("invalid x-mcp-header", 1, true), err)
    for line in client.read_file(trace):gmatch("[^\n]+") do
      assert.falsy(line:find("tools/call", 1, true) and line:find("bad_header", 1, true), line)
    end
  end)

  it("resumes a stream the server closed, in both eras", function()
    for _, version in ipairs { "2026-07-28", "2025-11-25" } do
      local code, out, err = call("resumed --protocol-version " .. version)
      assert.equal(0, code, version .. ": " .. err)
      assert.equal("answered after the stream closed\n", out)
    end
  end)

  it("answers input_required (2026) and elicitation (2025) with --answer", function()
    for _, version in ipairs { "2026-07-28", "2025-11-25" } do
      local code, out, err = call("confirm --answer go=true --protocol-version " .. version)
      assert.equal(0, code, version .. ": " .. err)
      assert.equal("answer accept true\n", out)
    end
  end)

  it("tells the server the call is cancelled on Ctrl-C, and exits 130", function()
    for _, version in ipairs { "2026-07-28", "2025-11-25" } do
      local before = #(client.read_file(trace) or "")
      local p = client.spawn({ "call", "--http", url, "wait", "--protocol-version", version })
      client.wait_until(function()
        local t = client.read_file(trace) or ""
        return t:sub(before + 1):find('"name":"wait"', 1, true) ~= nil
      end, 10000)
      client.sleep(300)
      uv.kill(p.pid, "sigint")
      p:wait_exit(10000)
      assert.equal(130, p.exit_code, p.stderr)
      assert.truthy(p.stderr:find("interrupted", 1, true), p.stderr)
      client.wait_until(function()
        return (client.read_file(trace) or ""):sub(before + 1):find("notifications/cancelled", 1, true) ~= nil
      end, 10000)
      assert.truthy((client.read_file(trace) or ""):sub(before + 1):find("notifications/cancelled", 1, true), version)
    end
  end)
end)
