-- The calibration split in Lua (src/core/split.h through l_split.c):
-- eldr.calib_split, Trace:split, and the split/seeds options of
-- eldr.simulate, eldr.sweep and eldr.calibrate.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local t = eldr.load(T.data)
local N = #t

-- positions of a sub-trace's rows in t (request ids are unique)
local pos = {}
for i = 1, N do pos[t:row(i).id] = i end
local function rows_of(sub)
  local out = {}
  for i = 1, #sub do out[i] = pos[sub:row(i).id] end
  return out
end
local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end
local function head(list, n)
  local out = {}
  for i = 1, n do out[i] = list[i] end
  return table.concat(out, ",")
end

-- Trace:split{fraction, seed} gives the rows it gave before it moved onto
-- the core split (the same seeded partial Fisher-Yates): pinned here
local c, e = t:split{fraction = 0.5, seed = 1}
T.eq(head(rows_of(c), 20), "1,6,7,8,11,14,15,19,21,23,25,27,29,31,33,35,37,38,42,44",
     "Trace:split{fraction = 0.5, seed = 1}: the same rows as before")
T.ok(#c == 224 and #e == 225, "Trace:split fraction sizes")
local c7 = t:split{fraction = 0.3, seed = 7}
T.eq(head(rows_of(c7), 12), "10,13,15,16,21,22,24,33,34,39,42,44",
     "Trace:split{fraction = 0.3, seed = 7}: the same rows as before")

-- eldr.calib_split: random by default, the same rule as Trace:split
local dc, de, dinfo = eldr.calib_split(t)
T.ok(dinfo.mode == "random" and dinfo.seed == 1 and #dc == 224 and #de == 225,
     "calib_split default: a seeded random split of 1000 rows capped at half")
T.ok(same(rows_of(dc), rows_of(c)), "calib_split default rows = Trace:split{fraction = 0.5, seed = 1}")
T.ok(same(dinfo.calib, rows_of(dc)) and #dinfo.eval == #de, "calib_split info lists the rows")
T.ok(dinfo.text:find("random split (seed 1)", 1, true) ~= nil, "calib_split info text")
local hc, _, hinfo = eldr.calib_split(t, {mode = "head"})
T.ok(hinfo.mode == "head" and hinfo.seed == nil and same(rows_of(hc), dinfo.calib) == false
     and rows_of(hc)[224] == 224, "calib_split head: the first rows")
local s2 = select(3, eldr.calib_split(t, {seed = 2}))
T.ok(not same(s2.calib, dinfo.calib) and #s2.calib == 224, "calib_split seed changes the rows")
local fc = eldr.calib_split(t, 0.25)
T.eq(#fc, math.floor(0.25 * N), "calib_split fraction")
local zc, ze = eldr.calib_split(t, 0)
T.ok(#zc == 0 and #ze == N, "calib_split 0: no split")
-- stratified: every label gets its share of the calibration rows
local sc, _, sinfo = eldr.calib_split(t, {size = 200, mode = "stratified", seed = 3})
local total, got = {}, {}
for i = 1, N do local l = t:row(i).label; total[l] = (total[l] or 0) + 1 end
for i = 1, #sc do local l = sc:row(i).label; got[l] = (got[l] or 0) + 1 end
local okq = sinfo.mode == "stratified" and #sc == 200
for l, n in pairs(total) do
  okq = okq and math.abs((got[l] or 0) - 200 * n / N) < 1
end
T.ok(okq, "calib_split stratified: each label's share within one row")
T.err(function() eldr.calib_split(t, {mode = "sorted"}) end, "eldr.calib_split: bad argument 'mode'",
      "calib_split bad mode")
T.err(function() eldr.calib_split(t, -1) end, "bad argument 'spec'", "calib_split negative size")
T.err(function() eldr.calib_split(t, {size = 10, shuffle = true}) end, "unknown", "calib_split unknown key")

-- Trace:split modes
local ch = t:split{count = 100}
T.eq(rows_of(ch)[100], 100, "Trace:split count: the first rows by default")
local cr, er = t:split{count = 300, mode = "random", seed = 4}
T.ok(#cr == 300 and #er == 149 and rows_of(cr)[300] ~= 300, "Trace:split count, mode random: 300 drawn rows (no cap)")
local cs = t:split{fraction = 0.4, stratified = true}
local cs2 = t:split{fraction = 0.4, mode = "stratified"}
T.ok(#cs == math.floor(0.4 * N) and same(rows_of(cs), rows_of(cs2)), "Trace:split stratified")
T.ok(not same(rows_of(cs), rows_of(t:split{fraction = 0.4})), "stratified differs from random")
T.err(function() t:split{fraction = 0.4, mode = "alphabetical"} end, "eldr.Trace:split: bad argument 'mode'",
      "Trace:split bad mode")
T.err(function() t:split{fraction = 0.4, mode = "head", stratified = true} end,
      "bad argument 'stratified'", "Trace:split stratified contradicts mode")
T.err(function() t:split{time = 1, mode = "random"} end, "bad argument 'mode'", "Trace:split time has no mode")

-- eldr.simulate: the split is random by default and said
local base = {workers = 4, rate = 60, policy = {"eldr", "rr", "jsq"}}
local function with(extra)
  local o = {}
  for k, v in pairs(base) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end
local r1, i1 = eldr.simulate(t, base)
T.ok(i1.split.mode == "random" and i1.split.seed == 1 and i1.split.calib_rows == 224
     and i1.split.text:find("random split", 1, true) ~= nil, "simulate says its split")
local r_same = eldr.simulate(de, {model = i1.model, calib = dc, rate = 60, policy = {"eldr", "rr", "jsq"}})
T.eq(r_same[1].tpot_p50_ms, r1[1].tpot_p50_ms, "simulate's default split = eldr.calib_split's")
local _, ih = eldr.simulate(t, with{split = "head"})
T.ok(ih.split.mode == "head" and ih.split.seed == nil, "simulate split = 'head'")
local r3, i3 = eldr.simulate(t, with{split_seed = 3})
T.ok(i3.split.seed == 3 and r3[1].tpot_p50_ms ~= r1[1].tpot_p50_ms, "simulate split_seed")
local _, is = eldr.simulate(t, with{split = "stratified", calib_split = 0.3})
T.ok(is.split.mode == "stratified" and is.split.calib_rows == math.floor(0.3 * N), "simulate stratified + calib_split")
local _, igiven = eldr.simulate(de, {calib = dc, workers = 4, rate = 60, policy = "rr"})
T.eq(igiven.split.mode, "given", "simulate with calib: split 'given'")
T.err(function() eldr.simulate(t, with{split = "first"}) end, "eldr.simulate: bad argument 'split'",
      "simulate bad split")
T.err(function() eldr.simulate(t, with{split_seed = -1}) end, "bad argument 'split_seed'", "simulate bad split_seed")
T.err(function() eldr.simulate(de, {calib = dc, split = "head", policy = "rr", rate = 60}) end,
      "bad argument 'calib'", "simulate: calib and split exclude each other")

-- eldr.calibrate.split: the seeded random split by default
local cc = eldr.calibrate.split(t, 0.5)
T.ok(same(rows_of(cc), rows_of(c)), "calibrate.split: random by default")
local ch2 = eldr.calibrate.split(t, {size = 0.5, mode = "head"})
T.eq(rows_of(ch2)[224], 224, "calibrate.split {size, mode}")
local cf = eldr.calibrate.split(t, {fraction = 0.3, seed = 7})
T.ok(same(rows_of(cf), rows_of(c7)), "calibrate.split with trace:split options")

-- eldr.sweep and eldr.calibrate.run say which split they used
local _, sw = eldr.sweep(t, {workers = {2}, tau = {0.1}, rate = {60}, output_tokens = 16,
                             split = "head", calib_split = 100})
T.ok(sw.split.mode == "head" and sw.split.calib_rows == 100 and sw.calib_rows == 100 and sw.seeds == 1,
     "sweep: info says the split")
local run = eldr.calibrate.run(t, {k = 2})
T.ok(run.split and run.split.mode == "random" and run.split.seed == 1 and same(rows_of(run.calib), rows_of(c)),
     "calibrate.run: a seeded random half by default, and says so")

T.done()
