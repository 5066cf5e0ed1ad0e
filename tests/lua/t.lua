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

return T
