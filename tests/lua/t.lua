-- tests/lua/t.lua - a tiny TAP-style assertion helper for the Lua tests:
-- each check prints "ok - NAME" or "not ok - NAME" (counted by
-- tests/run.sh) plus "#" lines saying why.
local T = {failed = 0}

local function report(pass, name, why)
  if pass then
    print("ok - " .. name)
  else
    T.failed = T.failed + 1
    print("not ok - " .. name)
    if why then print("#   " .. tostring(why):gsub("\n", "\n#   ")) end
  end
  return pass
end

function T.ok(cond, name, why) return report(cond and true or false, name, why) end

function T.eq(got, want, name)
  return report(got == want, name, string.format("got %s, want %s", tostring(got), tostring(want)))
end

function T.near(got, want, tol, name)
  local pass = type(got) == "number" and math.abs(got - want) <= tol * math.max(1, math.abs(want))
  return report(pass, name, string.format("got %s, want %s (tol %g)", tostring(got), tostring(want), tol))
end

-- The call must raise an error whose message contains `plain` (literal).
function T.err(fn, plain, name)
  local ok, msg = pcall(fn)
  local pass = not ok and tostring(msg):find(plain, 1, true) ~= nil
  return report(pass, name, ok and "no error raised" or ("message: " .. tostring(msg)))
end

-- Call at the end: a non-zero exit when anything failed.
function T.done()
  if T.failed > 0 then os.exit(1) end
end

-- Test inputs: the real trace and a scratch directory (from run.sh).
T.data = arg[1] or "../shared/data/gptoss20b-routing.h5"
T.tmp = arg[2] or os.getenv("TMPDIR") or "/tmp"
T.root = arg[3] or "."

-- a tiny JSON reader for the CLI's output (objects, arrays, numbers,
-- strings, true/false/null)
local function json_decode(s)
  local i = 1
  local function ws() i = s:find("[^ \t\r\n]", i) or #s + 1 end
  local value
  local function str()
    local j, out = i + 1, {}
    while true do
      local ch = s:sub(j, j)
      if ch == '"' then break end
      if ch == "\\" then
        local n = s:sub(j + 1, j + 1)
        out[#out + 1] = ({n = "\n", t = "\t", ['"'] = '"', ["\\"] = "\\", ["/"] = "/"})[n] or n
        j = j + 2
      else
        out[#out + 1] = ch
        j = j + 1
      end
    end
    i = j + 1
    return table.concat(out)
  end
  function value()
    ws()
    local ch = s:sub(i, i)
    if ch == "{" then
      local o = {}
      i = i + 1
      ws()
      if s:sub(i, i) == "}" then i = i + 1 return o end
      while true do
        ws()
        local k = str()
        ws(); i = i + 1   -- ':'
        o[k] = value()
        ws()
        local d = s:sub(i, i); i = i + 1
        if d == "}" then return o end
      end
    elseif ch == "[" then
      local a = {}
      i = i + 1
      ws()
      if s:sub(i, i) == "]" then i = i + 1 return a end
      while true do
        a[#a + 1] = value()
        ws()
        local d = s:sub(i, i); i = i + 1
        if d == "]" then return a end
      end
    elseif ch == '"' then
      return str()
    elseif s:sub(i, i + 3) == "true" then i = i + 4 return true
    elseif s:sub(i, i + 4) == "false" then i = i + 5 return false
    elseif s:sub(i, i + 3) == "null" then i = i + 4 return nil
    else
      local num = s:match("^-?[%d.eE+-]+", i)
      i = i + #num
      return tonumber(num)
    end
  end
  return value()
end

-- `eldr ARGS` (the build under test: $BIN, default bin) parsed as JSON,
-- to hold a Lua result against the CLI's.
function T.cli_json(args)
  local bin = T.root .. "/" .. (os.getenv("BIN") or "bin") .. "/eldr"
  local p = io.popen(bin .. " " .. args .. " 2>/dev/null")
  local out = p:read("a")
  p:close()
  return json_decode(out)
end

return T
