-- mcp.input: asking the client in a 2026-07-28 request (multi round-trip
-- requests, SEP-2322).
--
-- A modern request cannot send the client a request of its own. When a
-- handler asks (ctx:elicit, ctx:sample, ctx:roots, ctx:ask) and the answer
-- is not in hand, the call ends with an input_required result (once the
-- call has become a task, the task asks instead: see M.ask): the
-- questions (inputRequests, under keys) and a sealed requestState. The
-- client retries the same request with its inputResponses and that state;
-- the runtime runs the handler again from the start, and each question
-- asked before now returns its answer at once. Whatever the handler did
-- before its first question runs again on every round: ctx:once(key, fn)
-- keeps a value across rounds instead.
--
-- requestState carries the answers of earlier rounds and the values
-- ctx:once kept, bound to what the request was (method and tool, prompt or
-- resource, and a digest of its arguments), under an HMAC (core.state_seal,
-- OpenSSL's libcrypto) with an expiry. A state that was altered, expired,
-- or issued for another request or other arguments is refused with
-- -32602. It is integrity-protected, not confidential: the client can read
-- the answers and kept values (base64 JSON). Answers (inputResponses) are
-- the client's own input: any it sends for a question the handler asks is
-- taken, and keys no question asks are ignored.

local core = require "mcp.core"
local registry = require "mcp.registry"

local array, object = core.array, core.object
local rpc_error = core.rpc_error
local INVALID_PARAMS = core.INVALID_PARAMS

local M = {}

-- The state of each call's current round, by ctx, made when the handler
-- first asks or keeps something (most calls never do); until then
-- `requests` holds the call's method and params.
local rounds = setmetatable({}, { __mode = "k" })
local requests = setmetatable({}, { __mode = "k" })

-- The methods that may end with input_required (SEP-2322).
local CAN_ASK = { ["tools/call"] = true, ["prompts/get"] = true, ["resources/read"] = true }

-- Who asked: the principal of the verified caller (auth.h: issuer and
-- subject, or issuer and client id), "" when nobody is authenticated. It is
-- part of what the state's MAC binds, so a state issued to one caller opens
-- for no other: to anyone else it is as forged (in every process sharing
-- the key).
local function caller(ctx)
  return ctx:_principal()
end

local function binding(method, params, ctx)
  local target = params.name or params.uri
  return method .. "\0" .. (type(target) == "string" and target or "") .. "\0" .. caller(ctx)
end

-- Does v hold a float with an integral value (1.0)?
local function has_integral_float(v)
  if math.type(v) == "float" then return math.tointeger(v) ~= nil end
  if type(v) ~= "table" then return false end
  for _, x in pairs(v) do
    if has_integral_float(x) then return true end
  end
  return false
end

-- v with integral floats as integers (the encoder writes 1.0 and 1 apart).
local function integral_as_integers(v)
  if math.type(v) == "float" then return math.tointeger(v) or v end
  if type(v) ~= "table" then return v end
  local copy = setmetatable({}, getmetatable(v))
  for k, x in pairs(v) do copy[k] = integral_as_integers(x) end
  return copy
end

-- The digest of a request's arguments that its state is bound to: of their
-- canonical JSON (the encoder writes keys in byte order; integral numbers
-- as integers), so a client that re-serialises the same arguments, in
-- another key order, spacing or number spelling, still matches, and one
-- that changes them does not. No arguments count as {}.
local function arguments_digest(params)
  local args = params.arguments
  if args == nil or (type(args) == "table" and next(args) == nil) then return core.state_digest("{}") end
  if has_integral_float(args) then args = integral_as_integers(args) end
  return core.state_digest(core.json_encode(args))
end

local function open_state(bind, token)
  if type(token) ~= "string" then rpc_error(INVALID_PARAMS, "Invalid params: requestState must be a string") end
  local payload, why = core.state_open(bind, token)
  if not payload then rpc_error(INVALID_PARAMS, "Invalid params: requestState " .. why) end
  local ok, saved = pcall(core.json_decode, payload)
  if not ok or type(saved) ~= "table" or type(saved.answers) ~= "table" then
    rpc_error(INVALID_PARAMS, "Invalid params: requestState is not one this server can read")
  end
  return saved
end

-- A round's state: the answers it brought (sealed ones from requestState,
-- new ones from inputResponses) and what ctx:once kept.
local function new_state(method, params, digest, ctx)
  local state = { answers = {}, kept = {}, asked = 0, can_ask = CAN_ASK[method] }
  if not state.can_ask then return state end
  state.bind = binding(method, params, ctx)
  state.arguments = digest
  if params.requestState ~= nil then
    local saved = open_state(state.bind, params.requestState)
    if saved.arguments ~= digest then
      rpc_error(INVALID_PARAMS, "Invalid params: requestState was issued for other arguments; a retry must send "
        .. "the same arguments as the request that got it")
    end
    for k, v in pairs(saved.answers) do state.answers[k] = v end
    if type(saved.kept) == "table" then
      for k, v in pairs(saved.kept) do state.kept[k] = v end
    end
  end
  local responses = params.inputResponses
  if responses ~= nil then
    if type(responses) ~= "table" or getmetatable(responses) == getmetatable(array()) then
      rpc_error(INVALID_PARAMS, "Invalid params: inputResponses must be an object of answers")
    end
    for key, answer in pairs(responses) do
      if type(answer) ~= "table" then
        rpc_error(INVALID_PARAMS, ("Invalid params: inputResponses[%q] must be an object"):format(tostring(key)))
      end
      state.answers[key] = answer
    end
  end
  return state
end

--- Run a method of a modern request with the answers its retry brought.
function M.run(run, method, params, ctx, check)
  -- The arguments are bound as they arrived, before the handler may change
  -- the table it is given.
  local digest = CAN_ASK[method] and arguments_digest(params)
  if CAN_ASK[method] and (params.requestState ~= nil or params.inputResponses ~= nil) then
    rounds[ctx] = new_state(method, params, digest, ctx) -- a bad state or answer is refused before the handler runs
  else
    requests[ctx] = { params = params, digest = digest }
  end
  return run(method, params, ctx, check)
end

local function state_of(ctx)
  local state = rounds[ctx]
  if state then return state end
  local request = requests[ctx]
  if not request then error("ctx: this request has no input state (not a 2026-07-28 request)", 3) end
  state = new_state(ctx.method, request.params, request.digest, ctx)
  rounds[ctx] = state
  return state
end

--- The key of the next question asked without one: questions are numbered
--- in the order the handler asks them, the same on every round.
function M.next_key(ctx)
  local state = state_of(ctx)
  state.asked = state.asked + 1
  return "input-" .. state.asked
end

--- Ask several questions at once: requests is a list of {key, method,
--- params}. Returns the answers by key, or ends the call with
--- input_required for the ones not answered yet.
function M.ask(ctx, requests)
  local state = state_of(ctx)
  if not state.can_ask then
    error(("ctx: %s cannot ask the client anything in protocol %s (only tools/call, prompts/get and "
      .. "resources/read can)"):format(ctx.method, ctx.protocol_version), 3)
  end
  local answers, missing = {}, {}
  for _, r in ipairs(requests) do
    local answer = state.answers[r.key]
    if answer ~= nil then answers[r.key] = answer else missing[#missing + 1] = r end
  end
  if #missing == 0 then return answers end
  if ctx.task_id then
    -- The call became a task (the tasks extension): its questions are the
    -- task's inputRequests, answered with tasks/update while it waits.
    for key, answer in pairs(ctx:_task_ask(missing)) do
      state.answers[key] = answer
      answers[key] = answer
    end
    return answers
  end
  local input_requests = object()
  for _, r in ipairs(missing) do input_requests[r.key] = { method = r.method, params = r.params } end
  local payload = core.json_encode { answers = object(state.answers), kept = object(state.kept),
                                     arguments = state.arguments }
  ctx:_finish(M.modern_result {
    resultType = "input_required",
    inputRequests = input_requests,
    -- mcp.server{requestStateTtlMs = ...}, else MRTR_STATE_TTL_MS (15 min).
    requestState = core.state_seal(state.bind, payload, math.tointeger(registry.server.requestStateTtlMs)),
  })
end

--- ctx:once(key, fn): fn's result, computed on the first round only.
function M.once(ctx, key, fn)
  local state = state_of(ctx)
  local kept = state.kept[key]
  if kept ~= nil then return kept.value end
  local value = fn()
  state.kept[key] = { value = value }
  return value
end

return M
