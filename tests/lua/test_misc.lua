-- pca, the pretty printer, help and docs, the lua/ helpers' paths.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

-- pca: points on a line have one component; scores are centred and
-- orthogonal; a planted 2-D structure is recovered (power iteration in Lua
-- as the oracle for the top variance)
local rows = {}
for i = 1, 30 do rows[i] = {i, 2 * i + 1, -i} end
local line = eldr.pca(eldr.matrix(rows, {normalize = false}), {dims = 2})
T.ok(line.explained[1] > 0.999999 and #line.x == 30, "pca: a line is one component")
local t = eldr.load(T.data)
local sigs = eldr.signatures(t, {variant = "count_idf"})
local p = eldr.pca(sigs)
local sx, sy, sxy = 0, 0, 0
for i = 1, #sigs do sx, sy, sxy = sx + p.x[i], sy + p.y[i], sxy + p.x[i] * p.y[i] end
T.ok(math.abs(sx) < 1e-6 and math.abs(sy) < 1e-6 and math.abs(sxy) < 1e-6 * #sigs, "pca scores centred, orthogonal")
-- oracle: the variance of x equals the top eigenvalue of the covariance,
-- found by power iteration on the rows in Lua
local n, d = sigs:dims()
local mean = {}
for j = 1, d do mean[j] = 0 end
local X = sigs:to_table()
for i = 1, n do for j = 1, d do mean[j] = mean[j] + X[i][j] / n end end
for i = 1, n do for j = 1, d do X[i][j] = X[i][j] - mean[j] end end
local v = {}
for j = 1, d do v[j] = 1 / math.sqrt(d) end
local lambda = 0
for _ = 1, 200 do
  local xv = {}
  for i = 1, n do local s = 0 for j = 1, d do s = s + X[i][j] * v[j] end xv[i] = s end
  local w = {}
  for j = 1, d do w[j] = 0 end
  for i = 1, n do for j = 1, d do w[j] = w[j] + X[i][j] * xv[i] end end
  local nn = 0
  for j = 1, d do nn = nn + w[j] * w[j] end
  nn = math.sqrt(nn)
  lambda = nn
  for j = 1, d do v[j] = w[j] / nn end
end
local varx = 0
for i = 1, n do varx = varx + p.x[i] ^ 2 end
T.near(varx, lambda, 1e-4, "pca: top variance == power iteration")
T.err(function() eldr.pca(sigs, {dims = 5}) end, "bad argument 'dims'", "pca dims checked")
local big = eldr.pca(sigs, {sample = 100})
T.ok(big.fitted_rows == 100 and #big.x == #sigs, "pca fitted on a sample projects every row")

-- the pretty printer
T.eq(eldr.pp({1, 2, {a = 3}}), "{1, 2, {a = 3}}", "pp one line")
T.eq(eldr.pp("a\nb"), '"a\\nb"', "pp quotes strings")
local deep = {{{{{1}}}}}
T.eq(eldr.pp(deep, {depth = 2}), "{{{...}}}", "pp depth limit")
local wide = {}
for i = 1, 30 do wide[i] = i end
T.ok(eldr.pp(wide, {width = 5}):find("... 25 more", 1, true) ~= nil, "pp width limit")
local cyc = {}
cyc.self = cyc
T.eq(eldr.pp(cyc), "{self = <cycle>}", "pp cycles")
T.eq(eldr.pp({t}), "{Trace<449 req, L=24 E=32 k=4>}", "pp userdata through __tostring")
T.eq(eldr.pp({b = 1, a = 2, [1] = "x", ["not id"] = 3}), '{"x", a = 2, b = 1, ["not id"] = 3}', "pp key order")

-- help: every function and method has a line, and docs/lua-api.md names it
local names = eldr.help_names()
T.ok(#names > 60, "help registry is populated", #names)
local doc = io.open(T.root .. "/docs/lua-api.md"):read("a")
local missing = {}
for _, name in ipairs(names) do
  if not doc:find("### " .. name, 1, true) then missing[#missing + 1] = name end
end
T.ok(#missing == 0, "docs/lua-api.md documents every function", table.concat(missing, ", "))
-- every function of the module and every method has a help line
local help = {}
for _, name in ipairs(names) do help[name] = true end
local undocumented = {}
for k, v in pairs(eldr) do
  if type(v) == "function" and not help["eldr." .. k] then undocumented[#undocumented + 1] = "eldr." .. k end
end
local objs = {Trace = t, Signatures = sigs, Recipe = eldr.recipe(t), Model = eldr.fit(t, {k = 2, layers = "all"})}
for cls, o in pairs(objs) do
  for k in pairs(getmetatable(o).__index) do
    if not help[cls .. ":" .. k] then undocumented[#undocumented + 1] = cls .. ":" .. k end
  end
end
for _, sub in ipairs({"calibrate", "report", "experiments"}) do
  for k, v in pairs(eldr[sub]) do
    if type(v) == "function" and not help["eldr." .. sub .. "." .. k] then
      undocumented[#undocumented + 1] = "eldr." .. sub .. "." .. k
    end
  end
end
T.ok(#undocumented == 0, "every function has a help line", table.concat(undocumented, ", "))
T.ok(eldr.help("kmeans"):find("eldr.kmeans(sigs", 1, true) == 1, "help by short name")
T.ok(eldr.help("select"):find("trace:select", 1, true) ~= nil, "help finds methods")
T.eq(eldr.help("no_such_thing"), nil, "help of an unknown name is nil")

-- report helpers
local tab = eldr.report.table({{name = "a", x = 1.5}, {name = "bb", x = 10}}, {"name", "x"})
T.eq(tab, "name    x\n----  ---\na     1.5\nbb     10", "report.table aligns")
local csv = eldr.report.csv({{name = "a,b", x = 0.5}}, {"name", {key = "x", title = "X"}}, T.tmp .. "/r.csv")
T.eq(csv, 'name,X\n"a,b",0.5\n', "report.csv quotes")
T.eq(io.open(T.tmp .. "/r.csv"):read("a"), csv, "report.csv writes the file")

-- the helpers are found relative to the binary, and `arg` is set
T.ok(package.searchpath("eldr.calibrate", package.path) ~= nil, "lua/ helpers on package.path")
T.ok(arg[0]:find("test_misc.lua", 1, true) ~= nil and arg[1] == T.data and select("#", ...) == 3, "arg and ... as in lua")
T.eq(require("eldr"), eldr, "require 'eldr' is the global")
T.done()
