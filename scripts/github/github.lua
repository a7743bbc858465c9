-- Tools that call a JSON web API with mcp.http: GitHub's REST API. The
-- requests run on the loop, so a slow API never holds up other calls.
--
--   luamcp run scripts/github        (GITHUB_TOKEN raises the rate limit;
--                                     GITHUB_API_URL points it elsewhere)
local mcp = require "mcp"

mcp.server { name = "github", version = "1.0.0",
  instructions = "Look up public GitHub repositories and their open issues." }

local API = os.getenv("GITHUB_API_URL") or "https://api.github.com"

-- GET a path of the API and decode its JSON; failures become tool errors
-- the model can read.
local function get(path)
  local headers = { accept = "application/vnd.github+json", ["x-github-api-version"] = "2022-11-28" }
  local token = os.getenv("GITHUB_TOKEN")
  if token then headers.authorization = "Bearer " .. token end
  local r, err = mcp.http.get(API .. path, { headers = headers, timeout_ms = 10000 })
  if not r then error(err, 0) end
  if r.status == 404 then error("not found: " .. path, 0) end
  if r.status ~= 200 then error(("GitHub answered %d: %s"):format(r.status, r.body:sub(1, 200)), 0) end
  return r:json()
end

local NAME = { type = "string", pattern = "^[A-Za-z0-9_.-]+$", maxLength = 100 }

mcp.tool { name = "repo", title = "Repository", description = "A public repository's description, stars and language",
  inputSchema = { type = "object", properties = { owner = NAME, repo = NAME }, required = { "owner", "repo" } },
  outputSchema = { type = "object", properties = { full_name = { type = "string" }, description = { type = "string" },
    stars = { type = "integer" }, language = { type = "string" }, open_issues = { type = "integer" } } },
  annotations = { readOnlyHint = true, openWorldHint = true },
  handler = function(args)
    local r = get(("/repos/%s/%s"):format(args.owner, args.repo))
    return { full_name = r.full_name, description = r.description ~= mcp.null and r.description or "",
             stars = r.stargazers_count, language = r.language ~= mcp.null and r.language or "",
             open_issues = r.open_issues_count }
  end }

mcp.tool { name = "issues", title = "Open issues", description = "The newest open issues of a repository",
  inputSchema = { type = "object", required = { "owner", "repo" }, properties = { owner = NAME, repo = NAME,
    count = { type = "integer", minimum = 1, maximum = 50, default = 10 } } },
  annotations = { readOnlyHint = true, openWorldHint = true },
  handler = function(args)
    local list = get(("/repos/%s/%s/issues?state=open&per_page=%d"):format(args.owner, args.repo, args.count))
    local lines = {}
    for _, issue in ipairs(list) do lines[#lines + 1] = ("#%d %s"):format(issue.number, issue.title) end
    return #lines > 0 and table.concat(lines, "\n") or "no open issues"
  end }
