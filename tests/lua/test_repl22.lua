-- Issue 22, item 8 (the REPL's Lua side) and eldr.sweep's split: eldr.pp
-- shows the fields asked for first or all of them; eldr.simulate with a
-- model does not split held-out rows again; rho_variants says why a
-- variant's rho is nil; eldr.gen reports progress and stops when told;
-- eldr.sweep redraws the calibration split per seed and says so. On the
-- small sample, a few seconds in all.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"
local sample = T.root .. "/samples/small.h5"

-- eldr.pp: 30 fields, the width limit 24 - the asked-for ones come first
local wide = {}
for i = 1, 30 do wide[string.format("f%02d", i)] = i end
wide.zz_wanted = "here"
local plain = eldr.pp(wide)
T.ok(not plain:find("zz_wanted =", 1, true), "pp: a late field is cut by the width limit", plain)
T.ok(plain:find("... 7 more: f25, f26, f27, f28, f29, f30, zz_wanted", 1, true) ~= nil,
     "pp: the marker names the fields it hides", plain)
local asked = eldr.pp(wide, {keys = {"zz_wanted", "f30"}})
T.ok(asked:find('^{\n  zz_wanted = "here",\n  f30 = 30,\n  f01 = 1,') ~= nil,
     "pp keys: the asked-for fields first, in the order asked", asked)
local nested = eldr.pp({a = 1, inner = {b = 2, z = 3}}, {keys = {"z", "inner"}})
T.eq(nested, "{inner = {z = 3, b = 2}, a = 1}", "pp keys: at every level")
local all = eldr.pp(wide, {all = true})
local n = 0
for _ in all:gmatch("[%w_]+ = ") do n = n + 1 end
T.eq(n, 31, "pp all: every field")
T.ok(not all:find("more", 1, true), "pp all: no '... more'", all)
local deep = {l1 = {l2 = {l3 = {l4 = {l5 = "bottom"}}}}}
T.ok(eldr.pp(deep):find("{...}", 1, true) and eldr.pp(deep, {all = true}):find("bottom", 1, true),
     "pp all: past the depth limit too")
T.err(function() eldr.pp(wide, {keys = "zz"}) end, "bad argument 'keys' (a list of field names",
      "pp keys must be a list")
T.err(function() eldr.pp(wide, {all = 1}) end, "bad argument 'all' (boolean expected",
      "pp all must be a boolean")
T.err(function() eldr.pp(wide, {every = true}) end, "known: depth, width, keys, all",
      "pp: an unknown option names the known ones")

-- eldr.simulate(r.eval, {model = r.model}): every held-out row simulated
local t = eldr.load(sample)
local r = eldr.calibrate.run(t, {k = 4})
local res, info = eldr.simulate(r.eval, {model = r.model, rate = 800, policy = {"eldr", "rr"}})
T.eq(info.eval_rows, #r.eval, "simulate with a model: all held-out rows simulated, none split off")
T.eq(info.calib_rows, 0, "simulate with a model: no calibration rows taken")
T.eq(info.split.mode, "none", "simulate with a model: the split says none")
local _, sinfo = eldr.simulate(r.eval, {model = r.model, rate = 800, policy = "rr", seeds = 2})
T.ok(sinfo.split_redrawn == false and sinfo.ci_covers:find("no split (the model is given", 1, true),
     "simulate with a model: ci_covers says there is no split", sinfo.ci_covers)
local _, cinfo = eldr.simulate(r.eval, {model = r.model, rate = 800, policy = "rr", calib_split = 0.5})
T.eq(cinfo.eval_rows, #r.eval // 2, "simulate with a model and calib_split: split as asked")
T.ok(#res == 2 and res[1].tpot_p50_ms > 0, "simulate with a model: results")

-- rho_variants: a nil rho says why
local vars = eldr.rho_variants(t)
for _, v in ipairs(vars) do
  if v.rho == nil then
    T.ok(type(v.why) == "string" and #v.why > 0, "rho_variants: nil rho of " .. v.variant .. " says why",
         tostring(v.why))
  else
    T.ok(v.why == nil, "rho_variants: " .. v.variant .. " has a rho and no why")
  end
end
local byname = {}
for _, v in ipairs(vars) do byname[v.variant] = v end
T.eq(byname.gate_prob.why, "the trace has no gate_prob", "rho_variants: why a gate variant is nil")
local flat = t:select({1, 2})   -- every pair's decode distances are equal: rho undefined
local fv = eldr.rho_variants(flat)
T.ok(fv[1].rho == nil and fv[1].why and fv[1].why:find("rho is undefined", 1, true) ~= nil,
     "rho_variants: an undefined rho is nil with why, not an error", tostring(fv[1].why))

-- eldr.gen: progress is reported; an error in it (as Ctrl-C does) stops the threads
local calls, last = 0, 0
local g = eldr.gen{requests = 4000, layers = 4, experts = 16, top_k = 2, seed = 3,
                   progress = function(done, total, what)
                     calls = calls + 1
                     last = done
                     assert(total == 4000 and what == "requests")
                   end}
T.ok(#g == 4000 and calls > 1 and last == 4000, "gen progress: called while it runs, ends at the total",
     string.format("%d calls, last %d", calls, last))
local seen = 0
local ok, msg = pcall(eldr.gen, {requests = 200000, layers = 8, experts = 64, top_k = 4,
                                 prompt_tokens = 64, decode_tokens = 0,
                                 progress = function(done) seen = done; error("stop here") end})
T.ok(not ok and tostring(msg):find("stop here", 1, true) and seen < 200000,
     "gen: a raising progress function stops it early", tostring(msg) .. " at " .. seen)
T.err(function() eldr.gen{requests = 10, progress = 3} end, "bad argument 'progress'",
      "gen: progress must be a function")

-- eldr.sweep: seeds > 1 redraw the split per seed; pinned ones say why not
local rows, sw = eldr.sweep(t, {workers = {4}, tau = {0.1}, rate = 800, seeds = 3})
T.ok(sw.split_redrawn == true and sw.ci_covers:find("each drawing its arrivals and its random "
     .. "calibration split", 1, true) ~= nil, "sweep seeds: the split is redrawn per seed",
     sw.ci_covers)
local eldr_row
for _, row in ipairs(rows) do if row.policy == "eldr" then eldr_row = row end end
T.ok(eldr_row and eldr_row.K == 4 and eldr_row.seeds == 3 and eldr_row.vs_best_pct_ci95 ~= nil,
     "sweep seeds: the eldr row with its interval")
-- the same cell as eldr.advise's grid, which redraws the split the same way
local adv = eldr.advise(t, {workers = {4}, tau = {0.1}, rate = 800, seeds = 3})
local adv_row
for _, row in ipairs(adv.grid) do if row.policy == "eldr" then adv_row = row end end
T.eq(eldr_row.vs_best_pct, adv_row.vs_best_pct, "sweep seeds: the numbers of the grid engine")
local _, pinned = eldr.sweep(t, {workers = {4}, tau = {0.1}, rate = 800, seeds = 3, split_seed = 2})
T.ok(pinned.split_redrawn == false and pinned.ci_covers:find("seed 2 (pinned)", 1, true) ~= nil,
     "sweep with split_seed: one split, and says so", pinned.ci_covers)
T.err(function() eldr.sweep(t, {workers = {4}, tau = {0.1}, rate = 800, seeds = 3, calib_split = -1}) end,
      "eldr.sweep:", "sweep: a bad split names eldr.sweep")

T.done()
