-- eldr.help of a value (help(eldr.fit) in the REPL) and the grouped listing
-- (the REPL's :help): areas in the order of docs/lua-api.md, each name once.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

T.ok((eldr.help(eldr.fit) or ""):find("eldr.fit(trace, {k =", 1, true) == 1,
     "help of a C function: its line", eldr.help(eldr.fit))
T.ok((eldr.help(eldr.report.print) or ""):find("eldr.report.print(rows", 1, true) == 1,
     "help of a Lua helper function: its line", eldr.help(eldr.report.print))
T.ok((eldr.help(eldr.calibrate.fit) or ""):find("eldr.calibrate.fit", 1, true) == 1,
     "help of another helper function", eldr.help(eldr.calibrate.fit))
local t = eldr.load(T.data, {rows = {1, 20}})
T.ok((eldr.help(t.select) or ""):find("trace:select(", 1, true) == 1, "help of a method",
     eldr.help(t.select))
local methods = eldr.help(t) or ""
T.ok(methods:find("trace:select(", 1, true) and methods:find("trace:split", 1, true),
     "help of an object: its methods", methods)
local mod = eldr.help(eldr.report) or ""
T.ok(mod:find("eldr.report.csv", 1, true) and mod:find("eldr.report.table", 1, true),
     "help of a module table: its functions", mod)
T.eq(eldr.help(print), nil, "help of a function that is not ours: nil")
T.eq(eldr.help(42), nil, "help of a number: nil")

-- grouped listing
local all = eldr.help()
local titles = {}
for line in all:gmatch("[^\n]+") do
  if not line:find("^ ") then titles[#titles + 1] = line end
end
T.eq(table.concat(titles, "|"),
     "Traces|Signatures|Calibration|Models|Simulation|Live router and dashboard|Reports and help",
     "grouped: the areas, in order")
local function area_of(name)
  local area
  for line in all:gmatch("[^\n]+") do
    if not line:find("^ ") then area = line
    elseif line:find("^  " .. name:gsub("%p", "%%%0")) then return area end
  end
end
T.eq(area_of("eldr.load("), "Traces", "eldr.load under Traces")
T.eq(area_of("eldr.select_layers("), "Calibration", "select_layers under Calibration")
T.eq(area_of("eldr.fit("), "Models", "eldr.fit under Models")
T.eq(area_of("eldr.simulate("), "Simulation", "simulate under Simulation")
T.eq(area_of("eldr.attach("), "Live router and dashboard", "attach under Live")
T.eq(area_of("eldr.report.print("), "Reports and help", "report under Reports")
local lines = 0
for _ in all:gmatch("\n  ") do lines = lines + 1 end
T.eq(lines, #eldr.help_names(), "grouped: every documented name once")
T.done()
