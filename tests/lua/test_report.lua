-- eldr.report: the default columns are the union of the rows' keys (a
-- sweep's tau column must not vanish because its first row, a baseline,
-- has no tau), and numbers print readably.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"
local R = eldr.report

-- union of columns
local rows = {{policy = "rr", tpot = 4.63}, {policy = "eldr", tau = 0.1, tpot = 4.71}}
local tab = R.table(rows)
T.eq(tab, "policy  tau  tpot\n------  ---  ----\nrr        -  4.63\neldr    0.1  4.71",
     "table: union of the rows' columns, '-' where a row has none")
local csv = R.csv(rows)
T.eq(csv:match("^[^\n]*"), "policy,tau,tpot", "csv: union of the rows' columns")
T.ok(csv:find("\nrr,,4.63", 1, true) ~= nil, "csv: an empty field where a row has none", csv)
T.eq(R.table({{a = 1}, {b = 2}, {c = "x"}}):match("^[^\n]*"), "a  b  c",
     "table: a key of the last row only still gets a column")

-- numbers
local cases = {
  {0.1 + 0.2, "0.3"}, {11430.4, "11430"}, {1 / 3, "0.3333"}, {4.7123, "4.712"},
  {2.0, "2"}, {0.0, "0"}, {-0.05, "-0.05"}, {9.99996, "10"}, {0.000123, "0.000123"},
  {2.5e-6, "2.5e-06"}, {1e20, "1e+20"}, {123456.7, "123457"}, {0 / 0, "nan"},
  {math.huge, "inf"}, {-math.huge, "-inf"}, {42, "42"}, {-7, "-7"},
}
for _, c in ipairs(cases) do
  T.eq(R.number(c[1]), c[2], "number(" .. string.format("%.17g", c[1]) .. ")")
end
T.eq(R.table({{x = 0.1 + 0.2, y = 11430.4}}), "  x      y\n---  -----\n0.3  11430",
     "table: readable numbers, no 0.30000000000000004, no 1.143e+04")
T.ok(R.csv({{x = 0.1 + 0.2}}):find("0.30000000000000004", 1, true) ~= nil,
     "csv keeps every digit")
T.eq(R.table({{x = 1 / 3}}, {{key = "x", fmt = "%.2f"}}):match("[^\n]*$"), "0.33",
     "an explicit fmt still wins")

-- a real sweep: the first row is a baseline without tau, and the tau column stays
local full = eldr.load(T.data)
local sel = {}
for i = 1, 160 do sel[i] = i end
local grid = eldr.sweep(full:select(sel), {workers = {2}, tau = {0, 0.1}, rate = {4},
                                           output_tokens = 16})
T.ok(grid[1].tau == nil, "sweep: the first row is a baseline without tau (the case at hand)",
     tostring(grid[1].policy))
local header = R.table(grid):match("^[^\n]*")
T.ok(header:find("tau", 1, true) ~= nil, "sweep rows printed: the tau column is there", header)
T.ok(not R.table(grid):find("e%+0"), "sweep rows printed: no exponents", R.table(grid))
T.done()
