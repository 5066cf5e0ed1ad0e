-- The one coercion rule (issue 30 item 6; docs/lua-api.md "Arguments"):
-- integers take 4 or 4.0 but not 4.5 or "4"; numbers are finite numbers,
-- never strings; booleans are true/false only; strings are strings. The
-- same rule and the same message in every binding, C or Lua (eldr.check).
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local t = eldr.load(T.data)
local sim = {workers = 2, rate = 8, output_tokens = 8, policy = {"jsq", "rr"}}
local function with(base, k, v)
  local o = {}
  for key, val in pairs(base) do o[key] = val end
  o[k] = v
  return o
end
local function msg(f, ...)
  local ok, e = pcall(f, ...)
  return ok and "(no error)" or tostring(e)
end

-- integers: 4.0 is 4, "4" and 4.5 are not
T.eq(t:row(5.0).row, 5, "Trace:row(5.0) is row 5")
T.eq(#t:select({1, 2.0, 3}), 3, "a list of rows takes 2.0")
local _, info = eldr.simulate(t, with(sim, "workers", 2.0))
T.eq(info.K, 2, "simulate workers = 2.0 is 2")
T.ok(msg(t.row, t, "5"):find("got '5', a string: write the number without quotes", 1, true),
     "Trace:row('5') refused, saying it is a string", msg(t.row, t, "5"))
T.ok(msg(eldr.simulate, t, with(sim, "workers", "2")):find("bad argument 'workers' (integer 1..", 1, true),
     "simulate workers = '2' refused", msg(eldr.simulate, t, with(sim, "workers", "2")))
T.ok(msg(eldr.simulate, t, with(sim, "workers", 2.5)):find("got 2.5)", 1, true),
     "simulate workers = 2.5 refused")
T.ok(msg(t.select, t, {1, "2"}):find("bad argument 'rows[2]'", 1, true),
     "a list element that is a string is refused, named", msg(t.select, t, {1, "2"}))

-- numbers: finite numbers only, never strings
T.ok(msg(eldr.simulate, t, with(sim, "rate", "8")):find("bad argument 'rate' (number", 1, true),
     "simulate rate = '8' refused (it was refused before too: same rule now everywhere)")
T.ok(msg(eldr.simulate, t, with(sim, "tau", {0, "0.1"})):find("bad argument 'tau'", 1, true),
     "a tau list with a string refused")
T.ok(msg(eldr.simulate, t, with(sim, "rate", 0 / 0)):find("bad argument 'rate'", 1, true),
     "NaN refused")
T.ok(msg(eldr.calib_split, t, "100"):find("bad argument", 1, true), "calib_split('100') refused")

-- booleans: true/false only
T.ok(msg(eldr.simulate, t, with(sim, "min2", 1)):find("bad argument 'min2' (boolean expected, got 1)", 1, true),
     "min2 = 1 refused")
T.ok(msg(eldr.simulate, t, with(sim, "requests", "true")):find("bad argument 'requests' (boolean", 1, true),
     "requests = 'true' refused")

-- strings: numbers are not converted
T.ok(msg(eldr.load, 5):find("bad argument 'path' (string expected, got 5)", 1, true), "eldr.load(5) refused")
T.ok(msg(t.counts, t, 1, 0, 1):find("bad argument 'which' (string expected", 1, true),
     "Trace:counts which = 1 refused (it was turned into '1' before)", msg(t.counts, t, 1, 0, 1))

-- the Lua-written bindings follow the same rule with the same words
local c_msg = msg(eldr.simulate, t, with(sim, "seeds", "2"))
local lua_msg = msg(eldr.sweep, t, {workers = {2}, tau = {0}, rate = {8}, seeds = "2"})
T.ok(lua_msg:find("eldr.sweep: bad argument 'seeds' (integer 1..", 1, true) and
     lua_msg:find("a string: write the number without quotes", 1, true),
     "eldr.sweep seeds = '2': the C bindings' message", lua_msg)
T.ok(c_msg:find("a string: write the number without quotes", 1, true), "eldr.simulate seeds = '2': the same", c_msg)
T.ok(msg(eldr.sweep, t, {workers = {2}, tau = {0}, rate = {8}, cost_rule = 1}):find(
     "bad argument 'cost_rule' (boolean expected, got 1)", 1, true), "eldr.sweep cost_rule = 1 refused")

-- eldr.check itself
T.eq(math.type(eldr.check(4.0, "integer", "x", "k")), "integer", "check: 4.0 comes back an integer")
T.eq(eldr.check(0.5, "number", "x", "p", 0, 1), 0.5, "check: a number in range")
T.ok(msg(eldr.check, 2, "number", "x", "p", 0, 1):find("eldr.x: bad argument 'p' (number 0..1 expected, got 2)", 1, true),
     "check: out of range named")
T.ok(msg(eldr.check, "a", "boolean", "x", "b"):find("boolean expected, got 'a'", 1, true), "check: boolean")
T.ok(msg(eldr.check, 1, "string", "x", "s"):find("string expected, got 1", 1, true), "check: string")
T.ok(msg(eldr.check, 1, "float", "x", "s"):find("invalid option", 1, true), "check: unknown kind refused")
T.done()
