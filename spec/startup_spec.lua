-- Start-up does only what answering initialize needs (issue #43): the
-- built-in library is compiled at build time, not at every start; the
-- parts few servers use load on first use; OpenSSL is not set up. A stdio
-- server is started for every session, so each of these is paid
-- constantly. (Its time is measured by bench/startup.sh, never here.)

local client = require "mcp_client"

local function folder_with(script)
  local dir = client.temp_dir()
  client.write_file(dir .. "/server.lua", script)
  return dir
end

local function text_of(result)
  return result.content[1].text
end

describe("start-up", function()
  local dirs = {}
  local function folder(script)
    local dir = folder_with(script)
    dirs[#dirs + 1] = dir
    return dir
  end
  teardown(function()
    for _, dir in ipairs(dirs) do client.remove_tree(dir) end
  end)

  it("embeds the library compiled: the binary holds no line of its source", function()
    local binary = client.read_file(client.LUAMCP)
    -- Comments exist only in the source; bytecode drops them.
    local first = client.read_file("lua/mcp.lua"):match("^([^\n]+)")
    assert.matches("^%-%- ", first)
    assert.is_nil(binary:find(first, 1, true))
  end)

  it("keeps the library's file names and lines in tracebacks and debug information", function()
    local dir = folder [[
local mcp = require "mcp"
mcp.tool { name = "where", description = "d", handler = function()
  local info = debug.getinfo(mcp.all, "S")
  return info.source .. ":" .. info.linedefined .. "\n" .. debug.traceback()
end }
]]
    local server = client.spawn { "run", dir }
    finally(function() server:close() end)
    server:initialize()
    local text = text_of(server:call_tool("where", {}))
    local lines = {}
    for line in client.read_file("lua/mcp.lua"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
    local defined = text:match("^@%[luamcp%]/mcp%.lua:(%d+)\n")
    assert.is_not_nil(defined, text)
    assert.matches("^function M%.all", lines[tonumber(defined)])
    -- The handler was called from the library: its frames name their file and line.
    local file, line = text:match("%[luamcp%]/(mcp/[%w_]+%.lua):(%d+): in ")
    assert.is_not_nil(file, text)
    local n = 0
    for source_line in io.lines("lua/" .. file) do
      n = n + 1
      if n == tonumber(line) then
        assert.is_nil(source_line:match("^%s*%-%-"), source_line)
        assert.is_not_nil(source_line:match("%S"), "blank line " .. line)
        break
      end
    end
    assert.are.equal(tonumber(line), n)
  end)

  it("loads mcp.http, mcp.client, mcp.mount and mcp.metrics when a script first uses them", function()
    local dir = folder [[
local mcp = require "mcp"
local LAZY = { "mcp.http", "mcp.remote", "mcp.client_protocol", "mcp.mount", "mcp.metrics" }
local function loaded()
  local names = {}
  for _, name in ipairs(LAZY) do
    if package.loaded[name] ~= nil then names[#names + 1] = name end
  end
  return table.concat(names, " ")
end
mcp.tool { name = "loaded", description = "which of them are loaded", handler = function() return loaded() end }
mcp.tool { name = "use", description = "use them", handler = function()
  return table.concat({ type(mcp.http.get), type(mcp.client.connect), type(mcp.mount),
                        type(mcp.metrics.counter), tostring(mcp.http == mcp.http) }, " ")
end }
]]
    local server = client.spawn { "run", dir }
    finally(function() server:close() end)
    server:initialize()
    assert.are.equal("", text_of(server:call_tool("loaded", {})))
    assert.are.equal("function function function function true", text_of(server:call_tool("use", {})))
    assert.are.equal("mcp.http mcp.remote mcp.client_protocol mcp.mount mcp.metrics",
      text_of(server:call_tool("loaded", {})))
  end)

  it("answers initialize without reading OpenSSL's configuration", function()
    local dir = folder [[
local mcp = require "mcp"
mcp.tool { name = "add", description = "a + b", handler = function(args) return args.a + args.b end }
]]
    -- A FIFO nobody writes: opening it to read waits for ever, so a
    -- start that set OpenSSL up would never answer.
    local fifo = dir .. "/openssl.cnf"
    assert.are.equal(0, (client.sh("mkfifo " .. fifo)))
    local server = client.spawn({ "run", dir }, { env = { "OPENSSL_CONF=" .. fifo, "PATH=" .. os.getenv("PATH") } })
    finally(function() server:terminate(1000) end)
    local response = server:request("initialize", {
      protocolVersion = "2025-11-25", capabilities = {}, clientInfo = { name = "busted", version = "1.0" },
    })
    assert.is_not_nil(response, "no answer to initialize\n" .. server.stderr)
    assert.is_not_nil(response.result)
  end)
end)
