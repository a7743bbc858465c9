-- The payload sweep's server (bench/payload.sh): big results and arguments.
-- The TypeScript peers (bench/peer/payload-ts*.mjs) serve the same four
-- things, built by the same rules, and bench/loadclient.c checks every
-- answer byte for byte against its own copy.
--
--   text {bytes}        returns `bytes` bytes of text
--   echo {text}         returns its argument
--   structured {bytes}  returns a table of `bytes`/16 small fields (sent as
--                       structuredContent and, as JSON, as its text)
--   blob://{bytes}      a resource of `bytes` binary bytes (sent as base64)
--
-- Payloads are made once per size and kept, so a call measures the runtime,
-- not the script building them.
local mcp = require "mcp"
mcp.server { name = "bench-payload", version = "1.0.0" }

-- 128 bytes: two lines, two double quotes and one é, so the text needs
-- escaping every 32 bytes on average and is not all ASCII.
local function line(s, fill)
  return s .. fill:rep(63 - #s) .. "\n"
end
local BLOCK = line('The quick brown fox said "hello" to the lazy dog at the café', ".")
  .. line("    return value + 1 -- plain code, nothing to escape here", " ")
assert(#BLOCK == 128)

local texts, blobs, tables = {}, {}, {}

local function text_of(n)
  local t = texts[n]
  if not t then
    t = BLOCK:rep(n // 128) .. BLOCK:sub(1, n % 128)
    texts[n] = t
  end
  return t
end

-- Byte i (0-based) of every blob: the top byte of a 32-bit multiplicative
-- hash, so all 256 values occur and nothing compresses.
local function blob_of(n)
  local b = blobs[n]
  if not b then
    local parts, chunk = {}, {}
    for base = 0, n - 1, 4096 do
      local m = math.min(4096, n - base)
      for i = 1, m do chunk[i] = (((base + i - 1) * 2654435761) >> 24) & 0xFF end
      for i = m + 1, #chunk do chunk[i] = nil end
      parts[#parts + 1] = string.char(table.unpack(chunk, 1, m))
    end
    b = table.concat(parts)
    blobs[n] = b
  end
  return b
end

-- Fields k000001.. cycling through an integer, a short string, a boolean
-- and a float: about 16 bytes of JSON each.
local function table_of(n)
  local t = tables[n]
  if not t then
    t = {}
    for i = 1, math.max(1, n // 16) do
      local key = ("k%06d"):format(i)
      local kind = i % 4
      if kind == 0 then t[key] = i
      elseif kind == 1 then t[key] = "v" .. i
      elseif kind == 2 then t[key] = i % 8 == 2
      else t[key] = i + 0.5 end
    end
    tables[n] = t
  end
  return t
end

local SIZE = { type = "object", required = { "bytes" },
  properties = { bytes = { type = "integer", minimum = 0, maximum = 16777216 } } }

mcp.tool { name = "text", description = "Return `bytes` bytes of text", inputSchema = SIZE,
  handler = function(args) return text_of(args.bytes) end }

mcp.tool { name = "echo", description = "Return the text it was given",
  inputSchema = { type = "object", required = { "text" },
    properties = { text = { type = "string", maxLength = 16777216 } } },
  handler = function(args) return args.text end }

mcp.tool { name = "structured", description = "Return an object of many small fields", inputSchema = SIZE,
  handler = function(args) return table_of(args.bytes) end }

mcp.template { uriTemplate = "blob://{bytes}", name = "blob", mimeType = "application/octet-stream",
  read = function(vars) return { blob = blob_of(tonumber(vars.bytes)) } end }
