-- Data-driven protocol checks: each spec/transcripts/*.txt file is a
-- conversation with a fresh luamcp process.
--
--   @ run spec/fixtures/x      arguments for luamcp (first line)
--   > {...}                    send this line
--   < {...}                    the next line must be exactly this
--   ~ {...}                    the next line must decode to this JSON (any key order)
--   -                          nothing more arrives within 300 ms
--   # ...                      a comment; a line of its own after "##" names the next check

local client = require "mcp_client"
local cjson = client.json

local function deep_equal(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then return a == b end
  for k, v in pairs(a) do
    if not deep_equal(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

local function parse(path)
  local steps, args = {}, nil
  local n = 0
  for line in io.lines(path) do
    n = n + 1
    local op, rest = line:match("^(%S)%s?(.*)$")
    if op == "@" then
      args = {}
      for word in rest:gmatch("%S+") do args[#args + 1] = word end
    elseif op == ">" or op == "<" or op == "~" or op == "-" then
      steps[#steps + 1] = { op = op, text = rest, line = n }
    end
  end
  return args, steps
end

local files = {}
for name in io.popen("ls spec/transcripts/*.txt"):lines() do files[#files + 1] = name end

describe("transcript", function()
  for _, path in ipairs(files) do
    it(path, function()
      local args, steps = parse(path)
      local server = client.spawn(args)
      for _, step in ipairs(steps) do
        local where = ("%s:%d"):format(path, step.line)
        if step.op == ">" then
          server:send(step.text)
        elseif step.op == "<" then
          local got = server:read_line(30000)
          assert.are.equal(step.text, got, where)
        elseif step.op == "~" then
          local got = server:read_line(30000)
          assert(got, where .. ": no line arrived\n" .. server.stderr)
          local ok = deep_equal(cjson.decode(step.text), cjson.decode(got))
          assert(ok, ("%s: expected %s\n got %s"):format(where, step.text, got))
        elseif step.op == "-" then
          local got = server:read_line(300)
          assert(got == nil, where .. ": expected nothing, got " .. tostring(got))
        end
      end
      assert.are.equal(0, server:close())
    end)
  end
end)
