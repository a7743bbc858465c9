-- mcp.dpop: proof of possession for OAuth tokens (RFC 9449). A key pair
-- made for a login (P-256, by libcrypto through os/crypto) and kept with
-- its token; each request to the token endpoint or to the MCP server
-- carries a fresh proof (a JWT signed by the key: the method, the URL
-- without query or fragment, the time, a unique jti, the access token's
-- hash, and the server's nonce once it gave one).
--
--   local dpop = require "mcp.dpop"
--   local key = dpop.new()              -- or dpop.new(kept) for a kept one
--   headers.DPoP = key:proof("POST", url, access_token)
--   key:take_nonce(url, nonce)          -- true: a new nonce, send again
--   kept = key:saved()                  -- {pem, x, y}: secret, 0600 store only

local core = require "luamcp.client"

local M = {}

local Key = {}
Key.__index = Key

--- A key: the kept one ({pem, x, y}) or a new one. nil, why when the OS
--- cannot make one.
function M.new(kept)
  if type(kept) == "table" and type(kept.pem) == "string" and type(kept.x) == "string" and type(kept.y) == "string" then
    return setmetatable({ pem = kept.pem, x = kept.x, y = kept.y, nonces = {} }, Key)
  end
  local made, why = core.dpop_key()
  if not made then return nil, why end
  return setmetatable({ pem = made.pem, x = made.x, y = made.y, nonces = {} }, Key)
end

-- scheme://authority of a URL: a nonce belongs to the server that gave it.
local function origin(url) return (tostring(url):match("^(%a[%w+.-]*://[^/?#]+)") or url):lower() end

--- A fresh proof for one request (RFC 9449 4.2).
function Key:proof(method, url, access_token)
  local header = core.json_encode { typ = "dpop+jwt", alg = "ES256",
    jwk = { kty = "EC", crv = "P-256", x = self.x, y = self.y } }
  local claims = core.json_encode {
    jti = core.random_base64url(16), htm = method, htu = tostring(url):match("^[^?#]*"), iat = os.time(),
    ath = access_token and core.sha256_base64url(access_token) or nil,
    nonce = self.nonces[origin(url)],
  }
  return assert(core.jws_sign("ES256", self.pem, header, claims))
end

--- The server at url gave nonce (its DPoP-Nonce header): kept for its
--- next proofs. True when it is new (the request is worth sending again).
function Key:take_nonce(url, nonce)
  if type(nonce) == "table" then nonce = nonce["dpop-nonce"] end
  if type(nonce) ~= "string" or nonce == "" or self.nonces[origin(url)] == nonce then return false end
  self.nonces[origin(url)] = nonce
  return true
end

function Key:saved() return { pem = self.pem, x = self.x, y = self.y } end

return M
