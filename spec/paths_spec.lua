-- What a script reaches on disk does not depend on where luamcp was
-- started, and a link in the script folder cannot hand out files from
-- elsewhere (issue 13, item 14).

local client = require "mcp_client"

local SCRIPT = [[
local mcp = require "mcp"
mcp.tool { name = "require", handler = function(args)
  local ok, err = pcall(require, args.name)
  return ok and "loaded" or ("not found: " .. tostring(err):match("^[^\n]*"))
end }
mcp.tool { name = "read", handler = function(args)
  local data, err = mcp.bundle.read(args.name)
  return data or ("nil: " .. err)
end }
mcp.tool { name = "bad_utf8", handler = function() return "a\255b" end }
mcp.tool { name = "platform", handler = function() return require("mcp.core").platform end }
]]

describe("paths", function()
  local root, server
  before_each(function()
    root = client.temp_dir()
    assert(os.execute("mkdir -p " .. root .. "/scripts " .. root .. "/elsewhere"))
    client.write_file(root .. "/scripts/tools.lua", SCRIPT)
    client.write_file(root .. "/scripts/data.txt", "inside")
    client.write_file(root .. "/elsewhere/secret.txt", "secret")
    client.write_file(root .. "/from_cwd.lua", "return true")
    assert(os.execute("ln -s ../elsewhere/secret.txt " .. root .. "/scripts/link.txt"))
    assert(os.execute("ln -s data.txt " .. root .. "/scripts/alias.txt"))
    -- Started from root, where from_cwd.lua lies.
    local bin = client.LUAMCP:sub(1, 1) == "/" and client.LUAMCP or (assert(os.getenv("PWD")) .. "/" .. client.LUAMCP)
    server = client.spawn({ "run", root .. "/scripts" }, { cwd = root, bin = bin })
    server:initialize()
  end)
  after_each(function()
    server:close()
    client.remove_tree(root)
  end)

  local function text(name, args)
    return server:call_tool(name, args).content[1].text
  end

  it("require does not look in the working directory", function()
    assert.matches("^not found: module 'from_cwd' not found", text("require", { name = "from_cwd" }))
  end)

  it("mcp.bundle.read refuses a symbolic link that leads out of the script folder", function()
    assert.are.equal("inside", text("read", { name = "data.txt" }))
    assert.are.equal("inside", text("read", { name = "alias.txt" })) -- a link inside the folder is fine
    assert.are.equal("nil: link.txt: a symbolic link that leads out of the script folder", text("read", { name = "link.txt" }))
  end)

  it("the binary names the path rules it runs by (mcp.core.platform, from runtime/os/path_*.c)", function()
    -- spec/paths_windows_spec.lua tests the Windows rules with this forced.
    assert.are.equal("posix", text("platform", {}))
  end)

  it("sends invalid UTF-8 in a result as U+FFFD (documented)", function()
    assert.are.equal("a\239\191\189b", text("bad_utf8", {}))
  end)
end)
