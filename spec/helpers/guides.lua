-- The README and the guides in docs/, read the way a spec checks them: their
-- code blocks marked runnable, their headings as link anchors.
--
-- A fenced block preceded by `<!-- runnable -->` is run by
-- spec/guides_spec.lua, one line at a time; one preceded by
-- `<!-- runnable: NAME -->` needs more than that and is run by the spec that
-- calls guides.blocks(FILE, NAME), which guides_spec.lua looks for. One
-- place for the marking, so a block found here is the block a spec runs.

local M = {}

local function read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("a")
  f:close()
  return text
end

-- README.md, then every docs/*.md in name order.
function M.files()
  local files = { "README.md" }
  local ls = assert(io.popen("ls docs/*.md 2>/dev/null"))
  for path in ls:lines() do files[#files + 1] = path end
  ls:close()
  return files
end

-- The fenced blocks of a file: { line =, lang =, text =, mark = nil | "" |
-- NAME }, text without its fences. A mark is the line just above the fence.
function M.code_blocks(path)
  local blocks, open, previous, n = {}, nil, nil, 0
  for line in (read(path) .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if open then
      if line:match("^```%s*$") then
        open.text = table.concat(open.lines, "\n") .. "\n"
        open.lines = nil
        blocks[#blocks + 1] = open
        open = nil
      else
        open.lines[#open.lines + 1] = line
      end
    elseif line:match("^```") then
      local mark = previous and previous:match("^<!%-%- runnable:?%s*([%w%-]*) %-%->$")
      open = { line = n, lang = line:match("^```(%S*)"), lines = {}, mark = mark }
    end
    previous = line
  end
  assert(not open, path .. ":" .. (open and open.line or 0) .. ": a code block is not closed")
  return blocks
end

-- Every `<!-- runnable ... -->` line of a file, with its line number, so a
-- mark that does not sit on a block is found too.
function M.marks(path)
  local marks, n = {}, 0
  for line in (read(path) .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:match("^%s*<!%-%- runnable") then marks[#marks + 1] = { line = n, text = line } end
  end
  return marks
end

-- The texts of the blocks of FILE marked `<!-- runnable: NAME -->`, in
-- order; fails when there is none.
function M.blocks(path, name)
  local texts = {}
  for _, block in ipairs(M.code_blocks(path)) do
    if block.mark == name then texts[#texts + 1] = block.text end
  end
  assert(#texts > 0, path .. " has no block marked <!-- runnable: " .. name .. " -->")
  return texts
end

-- A heading's anchor as GitHub makes it: lower case, punctuation dropped
-- but for hyphens, spaces as hyphens.
function M.anchor(heading)
  return (heading:lower():gsub("[^%w%- _]", ""):gsub(" ", "-"))
end

-- The anchors of a file's headings (outside code blocks).
function M.anchors(path)
  local anchors, fence = {}, false
  for line in (read(path) .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^```") then fence = not fence end
    local heading = not fence and line:match("^#+%s+(.-)%s*$")
    if heading then anchors[M.anchor(heading)] = true end
  end
  return anchors
end

M.read = read
return M
